// router::files: static files served by the HTTP server, end to end over a socket (the
// resolver's own cases are tests/http/static_files_*_test.cpp): the bytes of the file, HEAD,
// ranges, 304, the redirect of the bare prefix, 405 for other methods, and no descriptor left
// open once the responses are sent.
#include <cctype>
#include <map>
#include <string>
#include <string_view>

#include "http/server_support.hpp"
#include "http/static_tree.hpp"

namespace {

using namespace http_test;
using weft_static_test::open_descriptors;
using weft_static_test::tree;

struct served_files {
  tree files;
  std::string content;
  weft::http::router routes() {
    content.assign(100000, 'x');
    for (std::size_t i = 0; i < content.size(); i += 97) {
      content[i] = static_cast<char>('a' + i % 26);
    }
    files.file("big.txt", content);
    files.file("sub/page.html", "<p>page</p>\n");
    files.file("index.html", "<p>index</p>\n");
    weft::http::router r;
    r.files("/static", weft::http::static_options{.root = files.root().string()});
    r.get("/other", [](exchange& ex) { ex.respond(status::ok, "other"); });
    return r;
  }
};

TEST(HttpServerFiles, AFileIsSentWholeWithItsValidatorsThenAnsweredNotModified) {
  served_files f;
  running_http server(local_http(), f.routes());
  client c(server.port());
  c.send("GET /static/big.txt HTTP/1.1\r\nHost: x\r\n\r\n");
  auto r = c.response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, status::ok);
  EXPECT_EQ(r->body, f.content);
  EXPECT_EQ(r->headers.get("Content-Type"), "text/plain; charset=utf-8");
  EXPECT_EQ(r->headers.get("Accept-Ranges"), "bytes");
  auto etag = r->headers.get("ETag");
  ASSERT_TRUE(etag);
  c.send("GET /static/big.txt HTTP/1.1\r\nHost: x\r\nIf-None-Match: " + std::string(*etag) +
         "\r\n\r\n");
  auto again = c.response();
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, status::not_modified);
  EXPECT_EQ(again->body, "");
  // The same connection goes on: the other routes still answer.
  c.send("GET /other HTTP/1.1\r\nHost: x\r\n\r\n");
  auto other = c.response();
  ASSERT_TRUE(other);
  EXPECT_EQ(other->body, "other");
}

TEST(HttpServerFiles, HeadAndRangesFollowTheFile) {
  served_files f;
  running_http server(local_http(), f.routes());
  client c(server.port());
  c.send("HEAD /static/big.txt HTTP/1.1\r\nHost: x\r\n\r\n");
  auto head = c.response(weft::http::method::head);
  ASSERT_TRUE(head);
  EXPECT_EQ(head->headers.get("Content-Length"), "100000");
  EXPECT_EQ(head->body, "");
  c.send("GET /static/big.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=99990-\r\n\r\n");
  auto tail = c.response();
  ASSERT_TRUE(tail);
  EXPECT_EQ(tail->status, status::partial_content);
  EXPECT_EQ(tail->headers.get("Content-Range"), "bytes 99990-99999/100000");
  EXPECT_EQ(tail->body, f.content.substr(99990));
  c.send("GET /static/big.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=200000-\r\n\r\n");
  auto past = c.response();
  ASSERT_TRUE(past);
  EXPECT_EQ(past->status, status::range_not_satisfiable);
}

std::string hex(std::string_view bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

// Several ranges through the server, fetched by curl and read by Python's MIME parser
// (tests/http/clients/byteranges.py): from the cache (page.html) and from the descriptor.
TEST(HttpServerFiles, SeveralRangesAreMultipartThatCurlAndAMimeParserRead) {
  served_files f;
  running_http server(local_http(), f.routes());
  const std::string parser =
      std::string("python3 ") + WEFT_TEST_SOURCE_DIR + "/http/clients/byteranges.py";
  const std::string big = run_command("curl -s -i -r 0-9,99990-,50-51 " +
                                      url(server.port(), "/static/big.txt") + " | " + parser);
  EXPECT_EQ(big,
            "206\n"
            "text/plain bytes 0-9/100000 " +
                hex(f.content.substr(0, 10)) +
                "\n"
                "text/plain bytes 99990-99999/100000 " +
                hex(f.content.substr(99990)) +
                "\n"
                "text/plain bytes 50-51/100000 " +
                hex(f.content.substr(50, 2)) + "\n");
  for (int round = 0; round < 2; ++round) {
    const std::string page = run_command(
        "curl -s -i -r 0-2,-5 " + url(server.port(), "/static/sub/page.html") + " | " + parser);
    EXPECT_EQ(page, "206\ntext/html bytes 0-2/12 " + hex("<p>") + "\ntext/html bytes 7-11/12 " +
                        hex("</p>\n") + "\n")
        << "round " << round;
  }
  // The connection goes on after a multipart answer.
  client c(server.port());
  c.send("GET /static/big.txt HTTP/1.1\r\nHost: x\r\nRange: bytes=1-1,3-3\r\n\r\n");
  auto parts = c.response();
  ASSERT_TRUE(parts);
  EXPECT_EQ(parts->status, status::partial_content);
  c.send("GET /other HTTP/1.1\r\nHost: x\r\n\r\n");
  auto other = c.response();
  ASSERT_TRUE(other);
  EXPECT_EQ(other->body, "other");
}

TEST(HttpServerFiles, TheBarePrefixRedirectsAndOtherMethodsAre405) {
  served_files f;
  running_http server(local_http(), f.routes());
  client c(server.port());
  c.send("GET /static?x=1 HTTP/1.1\r\nHost: x\r\n\r\n");
  auto moved = c.response();
  ASSERT_TRUE(moved);
  EXPECT_EQ(moved->status, status::moved_permanently);
  EXPECT_EQ(moved->headers.get("Location"), "/static/?x=1");
  c.send("POST /static/big.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
  auto post = c.response(weft::http::method::post);
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, status::method_not_allowed);
  EXPECT_NE(post->headers.get("Allow").value_or("").find("GET"), std::string_view::npos);
  c.send("GET /static/../big.txt HTTP/1.1\r\nHost: x\r\n\r\n");
  auto escape = c.response();
  ASSERT_TRUE(escape);
  EXPECT_EQ(escape->status, status::bad_request);  // the router's refusal of a dot segment
}

TEST(HttpServerFiles, NoDescriptorIsLeftOpenAfterManyFileResponses) {
  served_files f;
  auto routes = f.routes();
  running_http server(local_http(), std::move(routes));
  client c(server.port());
  // One answered request first: the server's side of the connection is open when counting.
  c.send("GET /static/sub/page.html HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(c.response());
  const std::size_t before = open_descriptors();
  for (int i = 0; i < 50; ++i) {
    c.send(
        "GET /static/sub/page.html HTTP/1.1\r\nHost: x\r\n\r\nHEAD /static/big.txt "
        "HTTP/1.1\r\nHost: x\r\n\r\n");
    auto page = c.response();
    ASSERT_TRUE(page);
    EXPECT_EQ(page->body, "<p>page</p>\n");
    ASSERT_TRUE(c.response(weft::http::method::head));
  }
  // A file is closed right after its last byte is written, which the client may see first
  // (so `before` may count the first request's file, and the end may lag a moment).
  EXPECT_TRUE(eventually([&] { return open_descriptors() <= before; }))
      << open_descriptors() << " descriptors open, " << before << " before";
}

TEST(HttpServerFiles, ACachedFileIsAnsweredFromMemoryWithTheHeadOfItsFirstAnswer) {
  // The first GET reads the file into the thread's cache; later unconditional GETs and HEADs
  // are written from the cache (exchange::respond with the entry's fields). Both must carry
  // the same fields; a conditional request, a range, a second spelling of the path and the
  // bare prefix still take the resolver's way.
  served_files f;
  running_http server(local_http(), f.routes());
  client c(server.port());
  auto fields_of = [](const weft::http::response& r) {
    std::map<std::string, std::string> out;
    for (auto field : r.headers) {
      std::string name(field.name);
      for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      if (name != "date") out[name] += std::string(field.value) + ";";
    }
    return out;
  };
  c.send("GET /static/sub/page.html HTTP/1.1\r\nHost: x\r\n\r\n");
  auto first = c.response();
  ASSERT_TRUE(first);
  c.send("GET /static/sub/page.html HTTP/1.1\r\nHost: x\r\n\r\n");
  auto cached = c.response();
  ASSERT_TRUE(cached);
  EXPECT_EQ(cached->status, status::ok);
  EXPECT_EQ(cached->body, "<p>page</p>\n");
  EXPECT_EQ(fields_of(*cached), fields_of(*first));
  EXPECT_EQ(cached->headers.get("Content-Type"), "text/html; charset=utf-8");
  EXPECT_EQ(cached->headers.get("Content-Length"), "12");
  EXPECT_EQ(cached->headers.count("Server"), 1u);
  EXPECT_EQ(cached->headers.count("Date"), 1u);
  c.send("HEAD /static/sub/page.html HTTP/1.1\r\nHost: x\r\n\r\n");
  auto head = c.response(weft::http::method::head);
  ASSERT_TRUE(head);
  EXPECT_EQ(head->body, "");
  EXPECT_EQ(fields_of(*head), fields_of(*first));
  const std::string etag(first->headers.get("ETag").value_or(""));
  ASSERT_FALSE(etag.empty());
  c.send("GET /static/sub/page.html HTTP/1.1\r\nHost: x\r\nif-none-match: " + etag + "\r\n\r\n");
  auto unchanged = c.response();
  ASSERT_TRUE(unchanged);
  EXPECT_EQ(unchanged->status, status::not_modified);
  c.send("GET /static/sub/page.html HTTP/1.1\r\nHost: x\r\nRANGE: bytes=3-6\r\n\r\n");
  auto part = c.response();
  ASSERT_TRUE(part);
  EXPECT_EQ(part->status, status::partial_content);
  EXPECT_EQ(part->body, "page");
  c.send("GET /static/sub/pag%65.html HTTP/1.1\r\nHost: x\r\n\r\n");
  auto spelled = c.response();
  ASSERT_TRUE(spelled);
  EXPECT_EQ(spelled->body, "<p>page</p>\n");
  // The root's index is cached under "/", never under the bare prefix's empty path, which is
  // still the redirect to it, however often the index was served.
  for (int i = 0; i < 2; ++i) {
    c.send("GET /static/ HTTP/1.1\r\nHost: x\r\n\r\n");
    EXPECT_EQ(body_of(c.response()), "<p>index</p>\n");
    c.send("GET /static HTTP/1.1\r\nHost: x\r\n\r\n");
    auto moved = c.response();
    ASSERT_TRUE(moved);
    EXPECT_EQ(moved->status, status::moved_permanently);
    EXPECT_EQ(moved->headers.get("Location"), "/static/");
  }
}

TEST(HttpServerFiles, ABadPrefixIsRefusedNamingIt) {
  tree files;
  weft::http::router r;
  try {
    r.files("static/", weft::http::static_options{.root = files.root().string()});
    ADD_FAILURE() << "a prefix without a leading '/' should be refused";
  } catch (const std::invalid_argument& failure) {
    EXPECT_NE(std::string(failure.what()).find("\"static/\""), std::string::npos) << failure.what();
  }
}

}  // namespace

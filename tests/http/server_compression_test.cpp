// server_options::compression: gzip for the responses that qualify, end to end over a socket.
// Which requests take gzip (Accept-Encoding with q-values and "*"), which responses qualify
// (type, size, status, an existing Content-Encoding), what a compressed response carries (Vary,
// Content-Encoding, Content-Length of the gzip, a weak ETag) for every respond() form and for
// static_files' cached files, HEAD, and curl --compressed as a client no one here wrote.
#include <zlib.h>

#include <string>

#include "http/server_support.hpp"
#include "http/static_tree.hpp"

namespace {

using namespace http_test;
using weft_static_test::tree;

// The bytes a gzip member inflates to (a test failure when it does not).
std::string gunzip(const std::string& data) {
  z_stream z{};
  EXPECT_EQ(inflateInit2(&z, 15 + 16), Z_OK);
  std::string out(1 << 22, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(inflate(&z, Z_FINISH), Z_STREAM_END) << "not one whole gzip member";
  out.resize(out.size() - z.avail_out);
  inflateEnd(&z);
  return out;
}

std::string prose() {
  std::string text;
  for (int i = 0; text.size() < 20000; ++i) {
    text += "line " + std::to_string(i % 50) + " of a page that says the same things again\n";
  }
  return text;
}

weft::http::server_options compressing() {
  weft::http::server_options options = local_http();
  options.compression.enabled = true;
  return options;
}

struct site {
  tree files;
  std::string text = prose();
  weft::http::router routes() {
    files.file("page.html", text);
    files.file("tiny.txt", "tiny\n");
    weft::http::router r;
    r.files("/static", weft::http::static_options{.root = files.root().string()});
    r.get("/text", [this](exchange& ex) { ex.respond(status::ok, text, "text/plain"); });
    r.get("/json", [this](exchange& ex) {
      weft::http::headers fields;
      fields.add("Content-Type", "application/json; charset=utf-8");
      fields.add("ETag", "\"v1\"");
      ex.respond(status::ok, fields, "[\"" + text + "\"]");
    });
    r.get("/png", [this](exchange& ex) { ex.respond(status::ok, text, "image/png"); });
    r.get("/short", [](exchange& ex) { ex.respond(status::ok, "short text", "text/plain"); });
    r.get("/encoded", [this](exchange& ex) {
      weft::http::response response;
      response.headers.add("Content-Type", "text/plain");
      response.headers.add("Content-Encoding", "br");
      response.headers.add("Vary", "Origin");
      response.body = text;
      ex.respond(std::move(response));
    });
    r.get("/vary", [this](exchange& ex) {
      weft::http::response response;
      response.headers.add("Content-Type", "text/html");
      response.headers.add("Vary", "Origin");
      response.body = text;
      ex.respond(std::move(response));
    });
    r.get("/missing", [this](exchange& ex) { ex.respond(status::not_found, text, "text/plain"); });
    return r;
  }
};

std::optional<weft::http::response> get(client& c, const std::string& path,
                                        const std::string& accept, const char* method = "GET") {
  std::string request = std::string(method) + " " + path + " HTTP/1.1\r\nHost: x\r\n";
  if (!accept.empty()) {
    request += "Accept-Encoding: " + accept + "\r\n";
  }
  c.send(request + "\r\n");
  return c.response(std::string_view(method) == "HEAD" ? weft::http::method::head
                                                       : weft::http::method::get);
}

TEST(HttpServerCompression, AResponseThatQualifiesIsGzippedForAClientThatTakesIt) {
  site s;
  running_http server(compressing(), s.routes());
  client c(server.port());
  for (const std::string path : {"/text", "/json", "/missing", "/static/page.html"}) {
    SCOPED_TRACE(path);
    auto r = get(c, path, "gzip, deflate, br");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->headers.get("Content-Encoding"), "gzip");
    EXPECT_EQ(r->headers.get("Vary"), "Accept-Encoding");
    EXPECT_EQ(r->headers.get("Content-Length"), std::to_string(r->body.size()));
    EXPECT_LT(r->body.size() * 5, s.text.size()) << "the page repeats itself: it should shrink";
    const std::string plain = gunzip(r->body);
    EXPECT_EQ(plain, path == "/json" ? "[\"" + s.text + "\"]" : s.text);
  }
  // A strong ETag becomes weak: the gzipped bytes are another representation.
  auto json = get(c, "/json", "gzip");
  ASSERT_TRUE(json);
  EXPECT_EQ(json->headers.get("ETag"), "W/\"v1\"");
}

TEST(HttpServerCompression, AcceptEncodingIsReadWithItsQValues) {
  site s;
  running_http server(compressing(), s.routes());
  client c(server.port());
  const std::pair<std::string, bool> cases[] = {
      {"gzip", true},        {"GZIP;q=0.5", true}, {"x-gzip", true},        {"*", true},
      {"br, *;q=0.1", true}, {"gzip;q=0", false},  {"gzip;q=0.000", false}, {"*;q=0", false},
      {"identity", false},   {"br", false},        {"gzip;q=0, *", false},  {"", false},
  };
  for (const auto& [accept, gzipped] : cases) {
    SCOPED_TRACE("Accept-Encoding: " + accept);
    auto r = get(c, "/text", accept);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->headers.contains("Content-Encoding"), gzipped);
    // Vary either way: a cache must not give the gzip to a client that did not ask.
    EXPECT_EQ(r->headers.get("Vary"), "Accept-Encoding");
    EXPECT_EQ(gzipped ? gunzip(r->body) : r->body, s.text);
  }
  // Two Accept-Encoding fields are one list.
  c.send("GET /text HTTP/1.1\r\nHost: x\r\nAccept-Encoding: br\r\nAccept-Encoding: gzip\r\n\r\n");
  auto joined = c.response();
  ASSERT_TRUE(joined);
  EXPECT_EQ(joined->headers.get("Content-Encoding"), "gzip");
}

TEST(HttpServerCompression, ResponsesThatDoNotQualifyGoAsTheyAre) {
  site s;
  running_http server(compressing(), s.routes());
  client c(server.port());
  // Not a listed type, too short, already encoded: no gzip, and no Vary added for the first two.
  auto png = get(c, "/png", "gzip");
  ASSERT_TRUE(png);
  EXPECT_FALSE(png->headers.contains("Content-Encoding"));
  EXPECT_FALSE(png->headers.contains("Vary"));
  EXPECT_EQ(png->body, s.text);
  auto short_text = get(c, "/short", "gzip");
  ASSERT_TRUE(short_text);
  EXPECT_FALSE(short_text->headers.contains("Content-Encoding"));
  EXPECT_EQ(short_text->body, "short text");
  auto encoded = get(c, "/encoded", "gzip");
  ASSERT_TRUE(encoded);
  EXPECT_EQ(encoded->headers.get("Content-Encoding"), "br");
  EXPECT_EQ(encoded->headers.get("Vary"), "Origin");
  EXPECT_EQ(encoded->body, s.text);
  // A Vary of its own is kept and extended.
  auto vary = get(c, "/vary", "gzip");
  ASSERT_TRUE(vary);
  EXPECT_EQ(vary->headers.get("Vary"), "Origin, Accept-Encoding");
  EXPECT_EQ(gunzip(vary->body), s.text);
  // A range is of the file's own bytes.
  c.send(
      "GET /static/page.html HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n"
      "Range: bytes=0-9\r\n\r\n");
  auto range = c.response();
  ASSERT_TRUE(range);
  EXPECT_EQ(range->status, status::partial_content);
  EXPECT_FALSE(range->headers.contains("Content-Encoding"));
  EXPECT_EQ(range->body, s.text.substr(0, 10));
}

TEST(HttpServerCompression, ACachedFileIsGzippedOnceAndHeadGetsTheHeadOfGet) {
  site s;
  running_http server(compressing(), s.routes());
  client c(server.port());
  // The first answer reads the file; the next ones come from the cache, with and without gzip.
  auto first = get(c, "/static/page.html", "gzip");
  auto cached = get(c, "/static/page.html", "gzip");
  auto plain = get(c, "/static/page.html", "");
  auto head = get(c, "/static/page.html", "gzip", "HEAD");
  ASSERT_TRUE(first && cached && plain && head);
  EXPECT_EQ(cached->body, first->body);
  EXPECT_EQ(cached->headers.get("Content-Encoding"), "gzip");
  EXPECT_EQ(cached->headers.get("Vary"), "Accept-Encoding");
  EXPECT_EQ(cached->headers.get("ETag"), first->headers.get("ETag"));
  ASSERT_TRUE(cached->headers.get("ETag"));
  EXPECT_EQ(cached->headers.get("ETag")->substr(0, 3), "W/\"");
  EXPECT_EQ(plain->body, s.text);
  EXPECT_FALSE(plain->headers.contains("Content-Encoding"));
  EXPECT_EQ(plain->headers.get("Vary"), "Accept-Encoding");
  EXPECT_EQ(plain->headers.get("ETag")->substr(0, 1), "\"") << "the identity ETag stays strong";
  EXPECT_EQ(head->headers.get("Content-Length"), std::to_string(first->body.size()));
  EXPECT_EQ(head->headers.get("Content-Encoding"), "gzip");
  EXPECT_EQ(head->body, "");
  // The weak ETag revalidates the gzipped answer (If-None-Match compares weakly).
  c.send("GET /static/page.html HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\nIf-None-Match: " +
         std::string(*cached->headers.get("ETag")) + "\r\n\r\n");
  auto not_modified = c.response();
  ASSERT_TRUE(not_modified);
  EXPECT_EQ(not_modified->status, status::not_modified);
}

TEST(HttpServerCompression, AHeadOfAGzippedFileHasItsGetsFieldsColdOrConditional) {
  // RFC 9110 9.3.2. A HEAD that reads the file first (nothing cached yet), and one whose
  // precondition fails, once answered the identity's length and strong ETag without
  // Content-Encoding: respond() had no body to compress.
  site s;
  running_http server(compressing(), s.routes());
  client c(server.port());
  auto cold = get(c, "/static/page.html", "gzip", "HEAD");
  c.send(
      "HEAD /static/page.html HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n"
      "If-None-Match: \"other\"\r\n\r\n");
  auto conditional = c.response(weft::http::method::head);
  auto body = get(c, "/static/page.html", "gzip");
  ASSERT_TRUE(cold && conditional && body);
  ASSERT_EQ(gunzip(body->body), s.text);
  for (const auto* head : {&*cold, &*conditional}) {
    EXPECT_EQ(head->status, status::ok);
    EXPECT_EQ(head->headers.get("Content-Length"), std::to_string(body->body.size()));
    EXPECT_EQ(head->headers.get("Content-Encoding"), "gzip");
    EXPECT_EQ(head->headers.get("ETag"), body->headers.get("ETag"));
    EXPECT_EQ(head->headers.get("Vary"), "Accept-Encoding");
    EXPECT_EQ(head->body, "");
  }
}

TEST(HttpServerCompression, ARevalidationOrRangeOfAGzippedFileVariesAsIts200Does) {
  site s;
  running_http server(compressing(), s.routes());
  client c(server.port());
  auto gzipped = get(c, "/static/page.html", "gzip");
  auto plain = get(c, "/static/page.html", "");
  ASSERT_TRUE(gzipped && plain);
  const std::string weak(*gzipped->headers.get("ETag"));
  const std::string strong(*plain->headers.get("ETag"));
  ASSERT_EQ(weak, "W/" + strong);
  // RFC 9110 15.4.5: the 304 carries the ETag and the Vary its 200 would, for this client.
  const std::pair<std::string, std::string> revalidations[] = {
      {"gzip", weak}, {"", strong}, {"gzip;q=0", strong}};
  for (const auto& [accept, tag] : revalidations) {
    SCOPED_TRACE("Accept-Encoding: " + accept);
    std::string request =
        "GET /static/page.html HTTP/1.1\r\nHost: x\r\nIf-None-Match: " + tag + "\r\n";
    if (!accept.empty()) request += "Accept-Encoding: " + accept + "\r\n";
    c.send(request + "\r\n");
    auto not_modified = c.response();
    ASSERT_TRUE(not_modified);
    EXPECT_EQ(not_modified->status, status::not_modified);
    EXPECT_EQ(not_modified->headers.get("ETag"), tag);
    EXPECT_EQ(not_modified->headers.get("Vary"), "Accept-Encoding");
  }
  // A 200 after a failed precondition goes gzipped like any other.
  c.send(
      "GET /static/page.html HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n"
      "If-None-Match: \"other\"\r\n\r\n");
  auto changed = c.response();
  ASSERT_TRUE(changed);
  EXPECT_EQ(changed->headers.get("ETag"), weak);
  EXPECT_EQ(gunzip(changed->body), s.text);
  // A range is of the identity, but which bytes a range names still depends on the coding.
  c.send("GET /static/page.html HTTP/1.1\r\nHost: x\r\nRange: bytes=5-9\r\n\r\n");
  auto range = c.response();
  ASSERT_TRUE(range);
  EXPECT_EQ(range->status, status::partial_content);
  EXPECT_EQ(range->headers.get("Vary"), "Accept-Encoding");
  EXPECT_EQ(range->body, s.text.substr(5, 5));
  // A file too short to compress varies on nothing.
  c.send("GET /static/tiny.txt HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n");
  auto tiny = c.response();
  ASSERT_TRUE(tiny);
  c.send("GET /static/tiny.txt HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\nIf-None-Match: " +
         std::string(*tiny->headers.get("ETag")) + "\r\n\r\n");
  auto tiny_304 = c.response();
  ASSERT_TRUE(tiny_304);
  EXPECT_EQ(tiny_304->status, status::not_modified);
  EXPECT_FALSE(tiny_304->headers.contains("Vary"));
}

// static_options::precompressed end to end: siblings made by gzip(1), a small one sent from the
// cache and a big one with sendfile, decoded by curl --compressed.
TEST(HttpServerCompression, PrecompressedSiblingsMadeByGzipAreDecodedByCurl) {
  tree files;
  std::string big;
  for (int i = 0; big.size() < 300000; ++i) {
    big += "var line" + std::to_string(i) + " = 'a bundle repeats itself';\n";
  }
  const std::string small = prose();
  files.file("app.js", big);
  files.file("page.html", small);
  // -k keeps the originals, -n leaves the name out; gzip gives the .gz the original's mtime.
  run_command("gzip -k -n -9 " + (files.root() / "app.js").string() + " " +
              (files.root() / "page.html").string());
  const std::string app_gz = run_command("cat " + (files.root() / "app.js.gz").string());
  ASSERT_GT(app_gz.size(), 100u) << "gzip(1) made no sibling";
  ASSERT_LT(app_gz.size() * 10, big.size());
  weft::http::router routes;
  routes.files("/static",
               weft::http::static_options{.root = files.root().string(), .precompressed = true});
  // Compression on as well: the sibling takes precedence over gzip on the fly.
  running_http server(compressing(), std::move(routes));
  client c(server.port());
  for (int round = 0; round < 2; ++round) {
    auto app = get(c, "/static/app.js", "gzip");
    ASSERT_TRUE(app);
    EXPECT_EQ(app->headers.get("Content-Encoding"), "gzip");
    EXPECT_EQ(app->headers.get("Content-Type"), "text/javascript; charset=utf-8");
    EXPECT_EQ(app->headers.get("Vary"), "Accept-Encoding");
    EXPECT_TRUE(app->body == app_gz) << "the sibling's bytes as they are: " << app->body.size();
    auto head = get(c, "/static/page.html", "gzip", "HEAD");
    ASSERT_TRUE(head);
    EXPECT_EQ(head->headers.get("Content-Encoding"), "gzip");
    auto plain = get(c, "/static/app.js", "");
    ASSERT_TRUE(plain);
    EXPECT_FALSE(plain->headers.contains("Content-Encoding"));
    EXPECT_EQ(plain->headers.get("Vary"), "Accept-Encoding");
    EXPECT_TRUE(plain->body == big);
  }
  for (const std::string name : {"app.js", "page.html"}) {
    SCOPED_TRACE(name);
    const std::string target = url(server.port(), "/static/" + name);
    const std::string head = run_command("curl -s --compressed -D - -o /dev/null " + target);
    EXPECT_NE(head.find("Content-Encoding: gzip\r\n"), std::string::npos) << head;
    const std::string body = run_command("curl -s --compressed " + target);
    EXPECT_TRUE(body == (name == "app.js" ? big : small)) << body.size();
  }
}

TEST(HttpServerCompression, CurlCompressedDecodesWhatTheServerSent) {
  site s;
  running_http server(compressing(), s.routes());
  const std::string headers =
      run_command("curl -s --compressed -D - -o /dev/null " + url(server.port(), "/text"));
  EXPECT_NE(headers.find("Content-Encoding: gzip\r\n"), std::string::npos) << headers;
  const std::string body = run_command("curl -s --compressed " + url(server.port(), "/text"));
  EXPECT_EQ(body, s.text);
  const std::string page =
      run_command("curl -s --compressed " + url(server.port(), "/static/page.html"));
  EXPECT_EQ(page, s.text);
}

TEST(HttpServerCompression, OffByDefaultAndBadSettingsAreRefused) {
  site s;
  {
    running_http server(local_http(), s.routes());
    client c(server.port());
    auto r = get(c, "/text", "gzip");
    ASSERT_TRUE(r);
    EXPECT_FALSE(r->headers.contains("Content-Encoding"));
    EXPECT_FALSE(r->headers.contains("Vary"));
  }
  weft::http::server_options bad = compressing();
  bad.compression.level = 0;
  EXPECT_THROW(weft::http::server(bad, [](exchange&) {}), std::invalid_argument);
  bad = compressing();
  bad.compression.types = {"text"};
  EXPECT_THROW(weft::http::server(bad, [](exchange&) {}), std::invalid_argument);
}

}  // namespace

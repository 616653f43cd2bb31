// Chunked request bodies (raw and from curl), streamed responses: chunked for HTTP/1.1, with
// trailers, with Content-Length, delimited by close for HTTP/1.0; and send_file.
#include <unistd.h>

#include <fstream>

#include "http/server_support.hpp"

namespace {

using namespace http_test;

void echo_body(exchange& ex) {
  const std::string& body = ex.read_body();
  ex.respond(status::ok, "got " + std::to_string(body.size()) + ": " + body);
}

TEST(HttpServerChunked, ChunkedRequestBodyIsDecoded) {
  running_http server(local_http(), echo_body);
  client c(server.port());
  c.send(
      "POST /u HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-Sum: 11\r\n\r\n"
      "GET /after HTTP/1.1\r\nHost: x\r\n\r\n");
  auto r = c.response();
  EXPECT_EQ(body_of(r), "got 11: hello world");
  auto after = c.response();
  EXPECT_EQ(body_of(after), "got 0: ");
}

TEST(HttpServerChunked, BodyStreamedInPiecesArrivesWhole) {
  running_http server(local_http(), [](exchange& ex) {
    std::size_t total = 0;
    int pieces = 0;
    while (auto piece = ex.read_body_chunk()) {
      total += piece->size();
      ++pieces;
    }
    ex.respond(status::ok, std::to_string(total) + " in " + std::to_string(pieces > 0));
  });
  client c(server.port());
  c.send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n01234");
  c.send("56789");
  EXPECT_EQ(body_of(c.response()), "10 in 1");
}

TEST(HttpServerChunked, CurlChunkedUploadIsReceived) {
  running_http server(local_http(), echo_body);
  char name[] = "/tmp/weft-upload-XXXXXX";
  int fd = ::mkstemp(name);
  const std::string content(20000, 'q');
  ASSERT_EQ(::write(fd, content.data(), content.size()), static_cast<ssize_t>(content.size()));
  ::close(fd);
  std::string out = run_command("curl -s -H 'Transfer-Encoding: chunked' --data-binary @" +
                                std::string(name) + " " + url(server.port(), "/up"));
  ::unlink(name);
  EXPECT_EQ(out, "got 20000: " + content);
}

TEST(HttpServerChunked, StreamedResponseIsChunkedWithTrailers) {
  running_http server(local_http(), [](exchange& ex) {
    weft::http::response head;
    head.headers.add("Trailer", "X-Done");
    auto writer = ex.start_response(std::move(head));
    writer.write("first ");
    writer.write("second");
    writer.finish(weft::http::headers{{"X-Done", "yes"}});
  });
  client c(server.port());
  c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  auto r = c.response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->headers.get("Transfer-Encoding"), "chunked");
  EXPECT_EQ(r->body, "first second");
  EXPECT_EQ(r->trailers.get("X-Done"), "yes");
  c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");  // still open
  EXPECT_EQ(body_of(c.response()), "first second");
  std::string out = run_command("curl -s " + url(server.port(), "/"));
  EXPECT_EQ(out, "first second");
}

TEST(HttpServerChunked, Http10StreamIsDelimitedByClose) {
  running_http server(local_http(), [](exchange& ex) {
    auto writer = ex.start_response(weft::http::response{});
    writer.write("old ");
    writer.write("client");
  });  // finished by the server when the handler returns
  client c(server.port());
  c.send("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  std::string raw = c.rest();
  EXPECT_EQ(raw.find("Transfer-Encoding"), std::string::npos) << raw;
  EXPECT_EQ(raw.find("Content-Length"), std::string::npos) << raw;
  EXPECT_NE(raw.find("Connection: close"), std::string::npos) << raw;
  EXPECT_TRUE(raw.ends_with("\r\n\r\nold client")) << raw;
}

TEST(HttpServerChunked, ContentLengthStreamAndShortStreamAborts) {
  log_lines log;
  auto options = local_http();
  options.log = log.sink();
  running_http server(options, [](exchange& ex) {
    weft::http::response head;
    head.headers.add("Content-Length", "8");
    auto writer = ex.start_response(std::move(head));
    writer.write("1234");
    if (ex.request().target == "/full") {
      writer.write("5678");
      writer.finish();
    }
  });
  client c(server.port());
  c.send("GET /full HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(body_of(c.response()), "12345678");
  c.send("GET /short HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_FALSE(c.response(weft::http::method::get, true));
  EXPECT_TRUE(log.contains("4 of the 8 body bytes")) << log.all();
  EXPECT_EQ(log.count("\"GET /full HTTP/1.1\" 200 8"), 1u) << log.all();
  EXPECT_EQ(log.count("\"GET /short HTTP/1.1\" 200 4 aborted"), 1u) << log.all();
}

// A streamed response's access line comes once, when the body ends, with the bytes written
// (it said 0, written when the head went out, until 2026-12-06); a body cut short says so.
TEST(HttpServerChunked, AStreamedResponsesAccessLineHasTheBytesItCarried) {
  log_lines log;
  {
    auto options = local_http();
    options.log = log.sink();
    running_http server(options, [](exchange& ex) {
      auto writer = ex.start_response(weft::http::response{});
      writer.write("abc");
      if (ex.request().target == "/throw") {
        throw std::runtime_error("cut short");
      }
      if (ex.request().target == "/endless") {
        const std::string piece(64 * 1024, 'x');
        for (;;) {
          writer.write(piece);  // throws once the client has gone
        }
      }
      writer.write("defg");
      writer.finish();
    });
    client c(server.port());
    c.send("GET /chunks HTTP/1.1\r\nHost: x\r\n\r\n");
    EXPECT_EQ(body_of(c.response()), "abcdefg");
    c.send("HEAD /chunks HTTP/1.1\r\nHost: x\r\n\r\n");
    EXPECT_TRUE(c.response(weft::http::method::head));
    c.send("GET /throw HTTP/1.1\r\nHost: x\r\n\r\n");
    EXPECT_FALSE(c.response(weft::http::method::get, true));
    client gone(server.port());
    gone.send("GET /endless HTTP/1.1\r\nHost: x\r\n\r\n");
    char first[1];
    ASSERT_EQ(::recv(gone.fd(), first, 1, MSG_WAITALL), 1);
  }  // `gone` closes first; the server's stop waits for the handler that writes to it
  EXPECT_EQ(log.count("\"GET /chunks HTTP/1.1\" 200 7"), 1u) << log.all();
  EXPECT_EQ(log.count("\"GET /chunks HTTP/1.1\""), 1u) << log.all();
  EXPECT_EQ(log.count("\"HEAD /chunks HTTP/1.1\" 200 0"), 1u) << log.all();
  EXPECT_EQ(log.count("\"GET /throw HTTP/1.1\" 200 3 aborted"), 1u) << log.all();
  // The client left after its first byte: the line has what was written before the write that
  // failed, pieces beyond the first 3 bytes.
  EXPECT_EQ(log.count("\"GET /endless HTTP/1.1\" 200 "), 1u) << log.all();
  const std::string all = log.all();
  const std::size_t at = all.find("\"GET /endless HTTP/1.1\" 200 ");
  ASSERT_NE(at, std::string::npos) << all;
  const std::string line = all.substr(at, all.find('\n', at) - at);
  EXPECT_TRUE(line.ends_with(" aborted")) << line;
  EXPECT_NE(line, "\"GET /endless HTTP/1.1\" 200 3 aborted");
}

TEST(HttpServerChunked, SendFileServesARangeAndHeadOnlyTheHead) {
  char name[] = "/tmp/weft-http-file-XXXXXX";
  int file = ::mkstemp(name);
  const std::string content = "0123456789abcdefghij";
  ASSERT_EQ(::write(file, content.data(), content.size()), 20);
  running_http server(local_http(), [&](exchange& ex) {
    weft::http::response head;
    head.headers.add("Content-Type", "text/plain");
    ex.send_file(std::move(head), file, 5, 10);
  });
  client c(server.port());
  c.send(
      "GET /f HTTP/1.1\r\nHost: x\r\n\r\nHEAD /f HTTP/1.1\r\nHost: x\r\n\r\n"
      "GET /f HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(body_of(c.response()), "56789abcde");
  auto head = c.response(weft::http::method::head);
  ASSERT_TRUE(head);
  EXPECT_EQ(head->headers.get("Content-Length"), "10");
  EXPECT_EQ(body_of(c.response()), "56789abcde");
  ::close(file);
  ::unlink(name);
}

}  // namespace

// The errors the server answers itself, each with its status and the connection closed after
// it: 400, 408 (head and body timeouts, slowloris), 413, 414, 431, 501, 505.
#include "http/server_support.hpp"

namespace {

using namespace http_test;

void ok(exchange& ex) {
  ex.read_body();
  ex.respond(status::ok, "fine");
}

// Sends bytes and expects one response with that status, then the close.
void expect_refusal(std::uint16_t port, const std::string& bytes, status expected) {
  client c(port);
  c.send(bytes);
  auto r = c.response();
  ASSERT_TRUE(r) << bytes;
  EXPECT_EQ(r->status, expected) << bytes << "\n" << r->body;
  EXPECT_EQ(r->headers.get("Connection"), "close");
  EXPECT_TRUE(c.closes());
}

TEST(HttpServerLimits, FramingErrorsAndLimitsGetTheirStatus) {
  auto options = local_http();
  options.limits.max_target_size = 64;
  options.limits.max_header_size = 512;
  options.limits.max_body_size = 100;
  running_http server(options, ok);
  const auto port = server.port();
  expect_refusal(port, "GET / HTTP/1.1\nHost: x\r\n\r\n", status::bad_request);
  expect_refusal(port, "GET / HTTP/1.1\r\n\r\n", status::bad_request);  // no Host
  expect_refusal(port, "GET /" + std::string(100, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n",
                 status::uri_too_long);
  expect_refusal(port, "GET / HTTP/1.1\r\nHost: x\r\nX: " + std::string(600, 'v') + "\r\n\r\n",
                 status::request_header_fields_too_large);
  expect_refusal(port, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 101\r\n\r\n",
                 status::content_too_large);
  expect_refusal(port, "BREW / HTTP/1.1\r\nHost: x\r\n\r\n", status::not_implemented);
  expect_refusal(port, "GET / HTTP/2.0\r\nHost: x\r\n\r\n", status::http_version_not_supported);
  // A chunked body that grows past the limit while the handler reads it.
  expect_refusal(port,
                 "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                 "40\r\n" +
                     std::string(64, 'a') + "\r\n40\r\n" + std::string(64, 'b') + "\r\n",
                 status::content_too_large);
  auto stats = server.server().stats();
  EXPECT_EQ(stats.total.responses_of_class(4), 6u);  // 400 400 414 431 413 413
  EXPECT_EQ(stats.total.responses_of_class(5), 2u);
}

TEST(HttpServerLimits, SlowHeadGets408WhileOthersAreServed) {
  auto options = local_http();
  options.header_timeout = std::chrono::milliseconds(300);
  running_http server(options, ok);
  client slow(server.port());
  const auto started = std::chrono::steady_clock::now();
  // A slowloris client: a byte now and then, never the end of the head.
  slow.send("G");
  for (int i = 0; i < 3; ++i) {
    client quick(server.port());
    quick.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    EXPECT_EQ(body_of(quick.response()), "fine");
    slow.send("E");
  }
  auto r = slow.response(weft::http::method::get, false, std::chrono::milliseconds(5000));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, status::request_timeout);
  EXPECT_TRUE(slow.closes());
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_GE(took, std::chrono::milliseconds(290));
  EXPECT_LT(took, std::chrono::milliseconds(3000));
}

TEST(HttpServerLimits, StalledBodyGets408) {
  auto options = local_http();
  options.body_timeout = std::chrono::milliseconds(200);
  running_http server(options, ok);
  client c(server.port());
  c.send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n12345");
  auto r = c.response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, status::request_timeout);
  EXPECT_TRUE(c.closes());
}

TEST(HttpServerLimits, SilentConnectionIsClosedWithoutAnswer) {
  auto options = local_http();
  options.header_timeout = std::chrono::milliseconds(150);
  running_http server(options, ok);
  client c(server.port());
  EXPECT_TRUE(c.closes());
  EXPECT_EQ(server.server().stats().total.requests, 0u);
}

// A client that stops reading a response is cut off once the socket has taken nothing for
// send_timeout (nginx's send_timeout), and the access line says the response was aborted.
TEST(HttpServerLimits, AClientThatStopsReadingIsCutAtTheSendTimeout) {
  log_lines log;
  auto options = local_http();
  options.send_timeout = std::chrono::milliseconds(300);
  options.log = log.sink();
  constexpr std::size_t size = std::size_t{32} << 20;  // past any socket buffers and the limit
  running_http server(options,
                      [](exchange& ex) { ex.respond(status::ok, std::string(size, 'x')); });
  client c(server.port());
  const auto started = std::chrono::steady_clock::now();
  c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(eventually([&] { return log.contains("send limit"); }, 10000ms)) << log.all();
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_GE(took, 290ms);
  EXPECT_TRUE(eventually([&] { return log.contains("\"GET / HTTP/1.1\" 200 "); })) << log.all();
  EXPECT_EQ(log.count(" aborted"), 1u) << log.all();
  // What the client gets is cut short: less than the body, then the end.
  const std::string got = c.rest();
  EXPECT_LT(got.size(), size);
  EXPECT_EQ(server.server().stats().total.requests, 1u);
}

TEST(HttpServerLimits, NegativeDurationsAreRefusedByName) {
  using options_type = weft::http::server_options;
  const std::pair<const char*, std::chrono::milliseconds options_type::*> fields[] = {
      {"header_timeout", &options_type::header_timeout},
      {"keep_alive_timeout", &options_type::keep_alive_timeout},
      {"body_timeout", &options_type::body_timeout},
      {"send_timeout", &options_type::send_timeout},
      {"linger_time", &options_type::linger_time},
      {"stop_grace", &options_type::stop_grace}};
  for (const auto& [name, field] : fields) {
    auto options = local_http();
    options.*field = std::chrono::milliseconds(-1);
    try {
      weft::http::server refused(options, ok);
      ADD_FAILURE() << name << " -1 ms was accepted";
    } catch (const std::invalid_argument& failure) {
      EXPECT_EQ(std::string(failure.what()), "weft::http::server_options: " + std::string(name) +
                                                 " must not be negative, got -1 ms");
    }
  }
}

}  // namespace

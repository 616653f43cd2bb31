// Graceful stop: idle keep-alive connections are closed, a request in progress finishes and its
// response (saying Connection: close) is delivered whole.
#include "http/server_support.hpp"

namespace {

using namespace http_test;

TEST(HttpServerStop, GracefulStopLosesNoInFlightResponse) {
  std::atomic<bool> inside{false};
  running_http server(local_http(), [&](exchange& ex) {
    if (ex.request().target == "/slow") {
      inside = true;
      weft::sleep_for(std::chrono::milliseconds(300));
      ex.respond(status::ok, std::string(100000, 's'));
      return;
    }
    ex.respond(status::ok, "quick");
  });
  client idle(server.port());
  idle.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(body_of(idle.response()), "quick");
  client busy(server.port());
  busy.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(eventually([&] { return inside.load(); }));
  server.stop(std::chrono::milliseconds(5000));
  EXPECT_TRUE(idle.closes());
  auto r = busy.response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body.size(), 100000u);
  EXPECT_EQ(r->headers.get("Connection"), "close");
  EXPECT_TRUE(busy.closes());
  server.wait();
  auto stats = server.server().stats();
  EXPECT_EQ(stats.total.net.connections, 0u);
  EXPECT_EQ(stats.total.responses_of_class(2), 2u);
}

TEST(HttpServerStop, StopAtTheDeadlineCancelsAStuckHandler) {
  std::atomic<bool> inside{false};
  std::atomic<bool> cancelled{false};
  running_http server(local_http(), [&](exchange&) {
    inside = true;
    try {
      weft::sleep_for(std::chrono::seconds(30));
    } catch (const weft::cancelled_error&) {
      cancelled = true;
      throw;
    }
  });
  client c(server.port());
  c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(eventually([&] { return inside.load(); }));
  const auto started = std::chrono::steady_clock::now();
  server.stop(std::chrono::milliseconds(100));
  server.wait();
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
  EXPECT_TRUE(cancelled.load());
}

}  // namespace

// http::protocol(): the request framer cuts pipelined requests (Content-Length and chunked
// bodies, bytes arriving one at a time) at exactly their wire length, and answers a malformed
// or oversized request itself before throwing protocol_error. Driven directly with a recording
// link, and over a real socket with the framer harness.
#include "net/framer_harness.hpp"
#include "weft/weft.hpp"

#include <gtest/gtest.h>

namespace {

class recording_link final : public weft::net::framer_link {
 public:
  explicit recording_link(std::size_t limit = 1 << 20) : limit_(limit) {}
  void send_raw(std::string_view bytes) override { sent.append(bytes); }
  void finish() override { finished = true; }
  std::size_t max_message_size() const noexcept override { return limit_; }
  std::string sent;
  bool finished = false;

 private:
  std::size_t limit_;
};

// Feeds `wire` to a framer `step` bytes at a time, as a connection would; returns the units.
std::vector<std::string> cut(std::string_view wire, std::size_t step,
                             weft::net::framer_link& link) {
  auto framer = weft::http::protocol()->make_framer();
  std::vector<std::string> units;
  std::string buffer;
  std::size_t fed = 0;
  weft::net::message m;
  while (fed < wire.size()) {
    const std::size_t n = std::min(step, wire.size() - fed);
    buffer.append(wire.substr(fed, n));
    fed += n;
    for (;;) {
      const std::size_t unit = framer->measure(buffer, link);
      if (unit == 0) {
        break;
      }
      EXPECT_TRUE(framer->decode(std::string_view(buffer).substr(0, unit), m, link));
      units.push_back(m.data);
      buffer.erase(0, unit);
    }
  }
  EXPECT_TRUE(buffer.empty());
  return units;
}

const std::string get_a = "GET /a HTTP/1.1\r\nHost: x\r\n\r\n";
const std::string post_b = "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello";
const std::string chunked_c =
    "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nT: "
    "1\r\n\r\n";

TEST(HttpProtocolFramer, PipelinedRequestsAreCutAtTheirWireLength) {
  const std::string wire = get_a + post_b + chunked_c;
  for (std::size_t step : {wire.size(), std::size_t{1}, std::size_t{7}}) {
    recording_link link;
    auto units = cut(wire, step, link);
    ASSERT_EQ(units.size(), 3u) << "step " << step;
    EXPECT_EQ(units[0], get_a);
    EXPECT_EQ(units[1], post_b);
    EXPECT_EQ(units[2], chunked_c);
    EXPECT_TRUE(link.sent.empty());
  }
}

TEST(HttpProtocolFramer, MalformedRequestIsAnsweredThenRefused) {
  recording_link link;
  auto framer = weft::http::protocol()->make_framer();
  EXPECT_THROW(framer->measure("GET / HTTP/1.1\r\nHost: x\r\nBad Name: v\r\n\r\n", link),
               weft::net::protocol_error);
  EXPECT_TRUE(link.sent.starts_with("HTTP/1.1 400 Bad Request\r\n")) << link.sent;
  EXPECT_NE(link.sent.find("Connection: close"), std::string::npos);
}

TEST(HttpProtocolFramer, OversizedRequestIsMessageTooBig) {
  recording_link link(64);
  auto framer = weft::http::protocol()->make_framer();
  const std::string big =
      "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n" + std::string(100, 'x');
  EXPECT_THROW(framer->measure(big, link), weft::net::message_too_big_error);
  EXPECT_TRUE(link.sent.starts_with("HTTP/1.1 413 ")) << link.sent;

  weft::http::parser_limits limits;
  limits.max_body_size = 10;
  recording_link roomy;
  auto limited = weft::http::protocol(limits)->make_framer();
  EXPECT_THROW(limited->measure(big, roomy), weft::net::message_too_big_error);
  EXPECT_TRUE(roomy.sent.starts_with("HTTP/1.1 413 ")) << roomy.sent;
}

TEST(HttpProtocolFramer, HarnessEchoesEachRequestAndAnswersAnError) {
  weft::scheduler s;
  s.run([] {
    auto listener = weft::tcp::listener::listen("127.0.0.1", 0);
    auto protocol = weft::http::protocol();
    auto server =
        weft::spawn([&] { return weft_net_test::serve_with_framer(listener.accept(), *protocol); });
    auto client =
        weft::tcp::connect("127.0.0.1", listener.port(), weft::timeout(std::chrono::seconds(5)));
    // encode() sends payloads as they are: the harness echoes each request's bytes.
    client.write_all(get_a + post_b + chunked_c + "GET / HTTP/9.0\r\nHost: x\r\n\r\n");
    std::string got;
    char chunk[4096];
    for (;;) {
      std::size_t n = client.read_some(std::span<char>(chunk, sizeof chunk),
                                       weft::timeout(std::chrono::seconds(5)));
      if (n == 0) {
        break;
      }
      got.append(chunk, n);
    }
    weft_net_test::served report = server.await();
    EXPECT_EQ(report.messages, 3);
    EXPECT_TRUE(got.starts_with(get_a + post_b + chunked_c)) << got;
    EXPECT_NE(got.find("HTTP/1.1 505 HTTP Version Not Supported"), std::string::npos) << got;
    EXPECT_FALSE(report.error.empty());
    listener.close();
  });
}

}  // namespace

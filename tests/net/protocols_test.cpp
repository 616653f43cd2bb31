// The text and frame protocols: their framers driven directly (exact splits) and through a
// server (split reads, many messages in one read, empty lines, too big, protocol errors).
#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "net/net_support.hpp"

namespace {

using namespace net_test;
using weft::net::close_reason;
using weft::net::connection;

class fake_link final : public weft::net::framer_link {
 public:
  explicit fake_link(std::size_t limit) : limit_(limit) {}
  void send_raw(std::string_view bytes) override { raw.append(bytes); }
  void finish() override { finished = true; }
  std::size_t max_message_size() const noexcept override { return limit_; }
  std::string raw;
  bool finished = false;

 private:
  std::size_t limit_;
};

// Feeds input in pieces the way a connection does and returns the messages, in order.
std::vector<std::string> feed(weft::net::framer& framer, fake_link& link,
                              const std::vector<std::string>& pieces) {
  std::vector<std::string> out;
  std::string buffered;
  for (const std::string& piece : pieces) {
    buffered += piece;
    for (;;) {
      std::size_t unit = framer.measure(buffered, link);
      if (unit == 0) {
        break;
      }
      weft::net::message message;
      if (framer.decode(std::string_view(buffered).substr(0, unit), message, link)) {
        out.push_back(message.data);
      }
      buffered.erase(0, unit);
    }
  }
  return out;
}

TEST(NetProtocols, TextSplitsLinesAcrossAnyReadBoundary) {
  auto framer = weft::net::text()->make_framer();
  fake_link link(100);
  std::string stream = "alpha\r\nbeta\n\ngamma\n";
  std::vector<std::string> one_byte;
  for (char c : stream) {
    one_byte.emplace_back(1, c);
  }
  EXPECT_EQ(feed(*framer, link, one_byte),
            (std::vector<std::string>{"alpha", "beta", "", "gamma"}));
  EXPECT_EQ(feed(*framer, link, {stream}),
            (std::vector<std::string>{"alpha", "beta", "", "gamma"}));
  EXPECT_EQ(std::string(weft::net::text()->name()), "text");
}

TEST(NetProtocols, TextRefusesALineOverTheLimitBeforeItEnds) {
  auto framer = weft::net::text()->make_framer();
  fake_link link(8);
  EXPECT_EQ(framer->measure("12345678", link), 0u);       // at the limit: may still end
  EXPECT_EQ(framer->measure("12345678\r", link), 0u);     // the '\r' may be the delimiter's
  EXPECT_EQ(framer->measure("12345678\r\n", link), 10u);  // exactly the limit
  try {
    framer->measure("123456789", link);
    FAIL() << "a 9-byte line passed an 8-byte limit";
  } catch (const weft::net::message_too_big_error& error) {
    EXPECT_EQ(error.limit(), 8u);
    EXPECT_NE(std::string(error.what()).find("over the limit of 8 bytes"), std::string::npos);
  }
}

TEST(NetProtocols, TextEncodesALineAndRefusesAPayloadWithANewline) {
  auto framer = weft::net::text()->make_framer();
  std::string out;
  framer->encode("hi", weft::net::message_kind::binary, out);
  framer->encode("", weft::net::message_kind::binary, out);
  EXPECT_EQ(out, "hi\n\n");
  try {
    framer->encode("a\nb", weft::net::message_kind::binary, out);
    FAIL() << "a payload with a newline was encoded";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("newline (at byte 1)"), std::string::npos);
  }
  EXPECT_EQ(out, "hi\n\n") << "a refused payload adds nothing";
}

// Found by tests/net/fuzz: "ab\r" was sent as "ab\r\n", which the receiver reads as "ab".
TEST(NetProtocols, TextPayloadEndingInCrArrivesWhole) {
  auto sender = weft::net::text()->make_framer();
  std::string wire;
  for (const char* payload : {"ab\r", "\r", "a\rb", "cd\r\r", "plain"}) {
    sender->encode(payload, weft::net::message_kind::binary, wire);
  }
  EXPECT_EQ(wire, "ab\r\r\n\r\r\na\rb\ncd\r\r\r\nplain\n");
  auto receiver = weft::net::text()->make_framer();
  fake_link link(100);
  EXPECT_EQ(feed(*receiver, link, {wire}),
            (std::vector<std::string>{"ab\r", "\r", "a\rb", "cd\r\r", "plain"}));
}

TEST(NetProtocols, FrameDecodesPrefixedPayloadsSplitAnywhere) {
  auto framer = weft::net::frame()->make_framer();
  fake_link link(1000);
  std::string stream = frame_of("one") + frame_of("") + frame_of(std::string(300, 'z'));
  std::vector<std::string> pieces;
  for (std::size_t at = 0; at < stream.size(); at += 7) {
    pieces.push_back(stream.substr(at, 7));
  }
  EXPECT_EQ(feed(*framer, link, pieces),
            (std::vector<std::string>{"one", "", std::string(300, 'z')}));
  std::string out;
  framer->encode("abc", weft::net::message_kind::binary, out);
  EXPECT_EQ(out, frame_of("abc"));
}

TEST(NetProtocols, FrameRefusesAnOversizedLengthAsSoonAsThePrefixArrives) {
  auto framer = weft::net::frame()->make_framer();
  fake_link link(1000);
  std::string prefix = frame_of(std::string(1001, 'x')).substr(0, 4);
  EXPECT_EQ(framer->measure(prefix.substr(0, 3), link), 0u);
  try {
    framer->measure(prefix, link);
    FAIL() << "a 1001-byte frame passed a 1000-byte limit";
  } catch (const weft::net::message_too_big_error& error) {
    EXPECT_EQ(error.size(), 1001u);
    EXPECT_EQ(error.limit(), 1000u);
  }
}

// The server side of the through-the-socket tests: records every message, echoes it.
struct recorder {
  std::mutex mutex;
  std::vector<std::string> messages;
  void add(const std::string& message) {
    std::lock_guard<std::mutex> lock(mutex);
    messages.push_back(message);
  }
  std::vector<std::string> get() {
    std::lock_guard<std::mutex> lock(mutex);
    return messages;
  }
};

TEST(NetProtocols, ServerJoinsSplitReadsAndSplitsManyMessagesInOneRead) {
  auto options = local_options();
  options.protocol = weft::net::text();
  recorder seen;
  running_server running(options, [&](weft::net::tcp_server& server) {
    server.serve([&](connection& c) {
      while (auto m = c.receive()) {
        seen.add(m->data);
        c.send(m->data);
      }
    });
  });
  int fd = connect_to(running.port());
  send_all(fd, "hel");
  ASSERT_TRUE(eventually([&] { return running.server().stats().total.bytes_in == 3; }));
  send_all(fd, "lo\n");
  EXPECT_EQ(read_bytes(fd, 6), "hello\n");
  send_all(fd, "a\n\nb\r\nc\n");  // one write: usually one read on the server
  EXPECT_EQ(read_bytes(fd, 7), "a\n\nb\nc\n");
  ::close(fd);
  running.stop();
  running.wait();
  EXPECT_EQ(seen.get(), (std::vector<std::string>{"hello", "a", "", "b", "c"}));
}

TEST(NetProtocols, TooBigLineClosesAndNothingAfterItReachesTheHandler) {
  auto options = local_options();
  options.protocol = weft::net::text();
  options.max_message_size = 100;
  log_lines log;
  options.log = log.sink();
  recorder seen;
  std::atomic<int> errors{0};
  running_server running(options, [&](weft::net::tcp_server& server) {
    server.serve(
        [&](connection& c) {
          while (auto m = c.receive()) {
            seen.add(m->data);
          }
          EXPECT_EQ(c.closed_by(), close_reason::too_big);
        },
        weft::net::connection_events{.on_error = [&](connection&, const std::exception& e) {
          errors += dynamic_cast<const weft::net::message_too_big_error*>(&e) != nullptr;
        }});
  });
  int fd = connect_to(running.port());
  send_all(fd, "ok\n" + std::string(200, 'x') + "\nafter\n");
  EXPECT_EQ(read_to_end(fd), "");  // closed by the server
  ::close(fd);
  running.stop();
  running.wait();
  EXPECT_EQ(seen.get(), (std::vector<std::string>{"ok"}));
  EXPECT_EQ(errors.load(), 1);
  EXPECT_EQ(running.server().stats().total.closed_by(close_reason::too_big), 1u);
  EXPECT_TRUE(log.contains("closed: too big: text message of")) << log.all();
}

TEST(NetProtocols, OversizedFrameIsCutAtItsPrefix) {
  auto options = local_options();
  options.protocol = weft::net::frame();
  options.max_message_size = 1024;
  recorder seen;
  running_server running(options, [&](weft::net::tcp_server& server) {
    server.serve([&](connection& c) {
      while (auto m = c.receive()) {
        seen.add(m->data);
      }
    });
  });
  int fd = connect_to(running.port());
  // A prefix announcing 2 GiB: refused at once, nothing buffered for it.
  send_all(fd, frame_of("fine") + std::string("\x80\x00\x00\x00", 4) + "tail");
  EXPECT_EQ(read_to_end(fd), "");
  ::close(fd);
  running.stop();
  running.wait();
  EXPECT_EQ(seen.get(), (std::vector<std::string>{"fine"}));
  auto stats = running.server().stats();
  EXPECT_EQ(stats.total.closed_by(close_reason::too_big), 1u);
  EXPECT_EQ(stats.total.messages_in, 1u);
}

// A protocol that refuses a byte: what follows a protocol error never reaches the user, and the
// protocol's close message goes out first.
class strict_protocol final : public weft::net::protocol {
 public:
  const char* name() const noexcept override { return "strict"; }
  std::unique_ptr<weft::net::framer> make_framer() const override {
    class strict final : public weft::net::framer {
     public:
      std::size_t measure(std::string_view input, weft::net::framer_link&) override {
        if (input.front() == '!') {
          throw weft::net::protocol_error("strict: '!' is not allowed", 4000);
        }
        return 1;
      }
      bool decode(std::string_view unit, weft::net::message& out,
                  weft::net::framer_link&) override {
        out.data.assign(unit);
        return true;
      }
      void encode(std::string_view payload, weft::net::message_kind, std::string& out) override {
        out.append(payload);
      }
      void encode_close(std::uint16_t code, std::string_view, std::string& out) override {
        out += "bye " + std::to_string(code);
      }
    };
    return std::make_unique<strict>();
  }
};

TEST(NetProtocols, BytesAfterAProtocolErrorNeverReachTheUser) {
  auto options = local_options();
  options.protocol = std::make_shared<strict_protocol>();
  recorder seen;
  running_server running(options, [&](weft::net::tcp_server& server) {
    server.serve([&](connection& c) {
      while (auto m = c.receive()) {
        seen.add(m->data);
      }
    });
  });
  int fd = connect_to(running.port());
  send_all(fd, "ab!cd");
  EXPECT_EQ(read_to_end(fd), "bye 4000");
  ::close(fd);
  running.stop();
  running.wait();
  EXPECT_EQ(seen.get(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(running.server().stats().total.closed_by(close_reason::protocol_error), 1u);
}

}  // namespace

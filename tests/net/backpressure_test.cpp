// Send buffers, limits and backpressure: pipe() from a fast producer to a slow consumer, a peer
// that never reads, and the waiting send of the coroutine style.
#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include "net/net_support.hpp"

namespace {

using namespace net_test;
using weft::net::close_reason;
using weft::net::connection;

char pattern_at(std::uint64_t index) { return static_cast<char>('a' + index % 23); }

TEST(NetBackpressure, PipeFromFastProducerToSlowConsumerLosesNothingAndStaysBounded) {
  constexpr std::uint64_t total = 16 << 20;
  constexpr std::size_t limit = 64 << 10;
  constexpr std::size_t largest_read = 256 << 10;  // a raw message is at most one read

  // The slow consumer: checks every byte, pausing a little after each read.
  std::atomic<std::uint64_t> consumed{0};
  std::atomic<bool> intact{true};
  running_server sink(local_options(), [&](weft::net::tcp_server& server) {
    server.serve([&](connection& c) {
      std::uint64_t at = 0;
      while (auto m = c.receive()) {
        for (char byte : m->data) {
          if (byte != pattern_at(at++)) {
            intact = false;
          }
        }
        consumed = at;
        weft::sleep_for(std::chrono::milliseconds(2));
      }
    });
  });

  // The proxy: every client is piped to a new connection to the sink.
  std::mutex mutex;
  std::vector<std::string> order;
  weft::net::connection_counters upstream_counters;
  std::uint64_t forwarded = 0;
  const std::uint16_t sink_port = sink.port();
  running_server proxy(local_options(), [&](weft::net::tcp_server& server) {
    server.serve([&](connection& c) {
      auto upstream = weft::net::connect("127.0.0.1", sink_port,
                                         weft::net::connection_options{.send_buffer_limit = limit});
      small_send_buffer(upstream->native_handle());
      upstream->events().on_buffer_full = [&](connection&) {
        std::lock_guard<std::mutex> lock(mutex);
        order.push_back("full");
      };
      upstream->events().on_buffer_drain = [&](connection&) {
        std::lock_guard<std::mutex> lock(mutex);
        order.push_back("drain");
      };
      forwarded = weft::net::pipe(c, *upstream);
      // pipe closed upstream gracefully: wait until it has flushed everything.
      upstream->wait_closed(weft::timeout(std::chrono::seconds(20)));
      upstream_counters = upstream->counters();
    });
  });

  int fd = connect_to(proxy.port());
  std::string chunk(256 << 10, '\0');
  for (std::uint64_t sent = 0; sent < total; sent += chunk.size()) {
    for (std::size_t index = 0; index < chunk.size(); ++index) {
      chunk[index] = pattern_at(sent + index);
    }
    send_all(fd, chunk);
  }
  ::shutdown(fd, SHUT_WR);
  EXPECT_EQ(read_to_end(fd, std::chrono::milliseconds(20000)), "");
  ::close(fd);
  EXPECT_TRUE(eventually([&] { return consumed.load() == total; }, std::chrono::seconds(20)))
      << "the sink got " << consumed.load() << " of " << total << " bytes";
  proxy.stop();
  proxy.wait();
  sink.stop();
  sink.wait();
  EXPECT_TRUE(intact.load()) << "a byte arrived changed or out of order";
  EXPECT_EQ(forwarded, total);
  EXPECT_EQ(upstream_counters.bytes_out, total);
  EXPECT_LE(upstream_counters.send_buffer_high, limit + largest_read)
      << "the buffer may pass its limit by one message at most";
  ASSERT_GE(order.size(), 2u) << "the slow consumer never filled the buffer";
  for (std::size_t index = 0; index < order.size(); ++index) {
    EXPECT_EQ(order[index], index % 2 == 0 ? "full" : "drain") << "at event " << index;
  }
  EXPECT_EQ(order.back(), "drain");
}

TEST(NetBackpressure, PeerThatNeverReadsHitsTheLimitAndIsReported) {
  auto options = local_options();
  constexpr std::size_t limit = 256 << 10;
  constexpr std::size_t chunk = 16 << 10;
  options.send_buffer_limit = limit;
  std::atomic<int> full{0};
  std::atomic<int> refused{0};
  std::atomic<std::size_t> high{0};
  std::atomic<bool> done{false};
  running_server running(options, [&](weft::net::tcp_server& server) {
    server.serve(weft::net::connection_events{
        .on_connect =
            [&](connection& c) {
              small_send_buffer(c.native_handle());
              std::string payload(chunk, 'x');
              int accepted = 0;
              while (c.try_send(payload)) {
                ASSERT_LT(++accepted, 10000) << "the buffer grew without bound";
              }
              high = c.counters().send_buffer_high;
              done = true;
            },
        .on_message = [](connection&, weft::net::message&) {},
        .on_error =
            [&](connection&, const std::exception& e) {
              refused += dynamic_cast<const weft::net::send_refused_error*>(&e) != nullptr;
            },
        .on_buffer_full = [&](connection&) { ++full; },
    });
  });
  int fd = connect_to(running.port(), 4096);
  EXPECT_TRUE(eventually([&] { return done.load(); }));
  ::close(fd);
  running.stop();
  running.wait();
  EXPECT_EQ(full.load(), 1);
  EXPECT_EQ(refused.load(), 1);
  EXPECT_GE(high.load(), limit);
  EXPECT_LE(high.load(), limit + chunk);
  EXPECT_EQ(running.server().stats().total.sends_refused, 1u);
}

TEST(NetBackpressure, WaitingSendGivesUpAtTheSendTimeoutAndClosesWithSendLimit) {
  auto options = local_options();
  options.send_buffer_limit = 64 << 10;
  options.send_timeout = std::chrono::milliseconds(200);
  log_lines log;
  options.log = log.sink();
  std::atomic<bool> timed_out{false};
  running_server running(options, [&](weft::net::tcp_server& server) {
    server.serve([&](connection& c) {
      small_send_buffer(c.native_handle());
      std::string payload(16 << 10, 'x');
      try {
        for (int round = 0; round < 100000; ++round) {
          c.send(payload);
        }
      } catch (const weft::timeout_error& error) {
        timed_out = std::string(error.what()).find("the peer does not read") != std::string::npos;
      }
      EXPECT_EQ(c.closed_by(), close_reason::send_limit);
      EXPECT_THROW(c.send("after"), weft::net::connection_closed_error);
    });
  });
  int fd = connect_to(running.port(), 4096);
  EXPECT_TRUE(eventually([&] { return timed_out.load(); }));
  ::close(fd);
  running.stop();
  running.wait();
  EXPECT_TRUE(timed_out.load());
  EXPECT_EQ(running.server().stats().total.closed_by(close_reason::send_limit), 1u);
  EXPECT_TRUE(log.contains("closed: send limit")) << log.all();
}

TEST(NetBackpressure, WaitingSendResumesAsTheSlowPeerReads) {
  auto options = local_options();
  constexpr std::size_t total = 4 << 20;
  constexpr std::size_t chunk = 32 << 10;
  options.send_buffer_limit = 64 << 10;
  std::atomic<std::size_t> high{0};
  running_server running(options, [&](weft::net::tcp_server& server) {
    server.serve([&](connection& c) {
      small_send_buffer(c.native_handle());
      std::string payload(chunk, 'y');
      for (std::size_t sent = 0; sent < total; sent += chunk) {
        c.send(payload);
      }
      high = c.counters().send_buffer_high;
    });
  });
  int fd = connect_to(running.port(), 8192);
  std::string got = read_to_end(fd, std::chrono::milliseconds(20000));
  ::close(fd);
  running.stop();
  running.wait();
  EXPECT_EQ(got.size(), total);
  EXPECT_LE(high.load(), (64u << 10) + chunk);
}

}  // namespace

// Lingering closes (connection::close, close_lingering, connection_options::linger_time): a
// connection closed while its peer is still sending reads and drops the peer's bytes after its
// FIN instead of closing the socket at once, whose reset would destroy the reply the kernel still
// holds for the peer. The linger ends with the peer's own end, a quiet close_timeout, linger_time,
// or a server's stop once the peer has everything.
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <string>
#include <thread>

#include "net/net_support.hpp"

namespace {

using namespace std::chrono_literals;
using namespace net_test;
using steady = std::chrono::steady_clock;
using weft::net::close_reason;
using weft::net::connection;

std::uint64_t live(running_server& server) { return server.server().stats().total.connections; }

// A handler that reads one message, sends `reply` and closes (close_lingering when `asked`).
auto answer_then_close(std::string reply, bool asked = false) {
  return [reply = std::move(reply), asked](weft::net::tcp_server& s) {
    s.serve([&reply, asked](connection& c) {
      if (!c.receive()) {
        return;
      }
      c.send(reply);
      if (asked) {
        c.close_lingering();
      } else {
        c.close();
      }
    });
  };
}

TEST(NetLinger, APeerStillSendingGetsTheWholeReplyAndNoReset) {
  // The peer sends 16 MiB and the handler answers once 64 KiB came: 2 MiB, read by the peer
  // through a small window, a KiB a call. When the handler closes, the kernel still holds the
  // last of the reply, which a reset would throw away (with linger_time 0 this test loses the
  // reply's tail). The handler knows the peer is still sending (a protocol would: a body that
  // was announced), so it says so: close() alone lingers only for bytes that have arrived when
  // it looks, and on a loaded machine the peer's thread may not have sent more yet.
  constexpr std::uint64_t reply_size = 2u << 20;
  running_server server(local_options(), [](weft::net::tcp_server& s) {
    s.serve([](connection& c) {
      std::uint64_t got = 0;
      while (got < 64 * 1024) {
        auto m = c.receive();
        if (!m) {
          return;
        }
        got += m->data.size();
      }
      c.send(std::string(reply_size, 'r'));
      c.close_lingering();
    });
  });
  const int fd = connect_to(server.port(), 16 * 1024);
  std::atomic<int> send_error{-1};
  std::thread sender([&] { send_error = send_junk(fd, 16u << 20); });
  const ending end = read_until_end(fd, 20000ms, 1024);
  sender.join();  // the lingering server reads the junk to its end
  ::shutdown(fd, SHUT_WR);
  EXPECT_FALSE(end.timed_out);
  EXPECT_EQ(end.error, 0) << std::strerror(end.error);
  EXPECT_EQ(end.bytes, reply_size);
  EXPECT_EQ(send_error.load(), 0) << "the junk met a reset";
  ::close(fd);
  ASSERT_TRUE(eventually([&] { return live(server) == 0; }, 10000ms));
  EXPECT_EQ(server.server().stats().total.closed_by(close_reason::local), 1u);
}

TEST(NetLinger, APeerThatFallsQuietIsLetGoAfterTheCloseTimeout) {
  auto options = local_options();
  options.close_timeout = 300ms;  // and linger_time stays 30 s
  running_server server(options, answer_then_close("bye"));
  const int fd = connect_to(server.port());
  send_all(fd, "x" + std::string(256 * 1024, 'j'));  // more than the close reads at once
  EXPECT_EQ(read_bytes(fd, 3), "bye");
  const ending end = read_until_end(fd);
  EXPECT_EQ(end.error, 0);  // the FIN came before the linger
  // The peer keeps its socket open and sends nothing more: the linger ends on its own.
  EXPECT_TRUE(eventually([&] { return live(server) == 0; }, 10000ms));
  ::close(fd);
}

TEST(NetLinger, APeerThatNeverStopsSendingIsCutAtTheLingerTime) {
  auto options = local_options();
  options.linger_time = 500ms;
  running_server server(options, answer_then_close("bye"));
  const int fd = connect_to(server.port());
  send_all(fd, "x" + std::string(256 * 1024, 'j'));  // arriving when the close looks
  std::atomic<int> send_error{-1};
  std::thread sender([&] { send_error = send_junk(fd, ~std::uint64_t{0} >> 1); });
  EXPECT_EQ(read_bytes(fd, 3), "bye");
  sender.join();  // ends only when a send fails: the server's socket closed
  EXPECT_TRUE(send_error == ECONNRESET || send_error == EPIPE) << std::strerror(send_error);
  EXPECT_TRUE(eventually([&] { return live(server) == 0; }, 10000ms));
  ::close(fd);
}

TEST(NetLinger, BytesArrivingAtTheCloseMakeItLingerUnlessTheLingerTimeIsZero) {
  for (const auto linger_time : {30000ms, 0ms}) {
    SCOPED_TRACE(linger_time.count());
    auto options = local_options();
    options.linger_time = linger_time;
    options.close_timeout = 30000ms;
    running_server server(options, answer_then_close("bye"));
    const int fd = connect_to(server.port());
    send_all(fd, "x" + std::string(256 * 1024, 'j'));  // more than the handler's one read
    EXPECT_EQ(read_bytes(fd, 3), "bye");
    EXPECT_EQ(read_until_end(fd).error, 0);  // the server's FIN
    if (linger_time.count() > 0) {
      EXPECT_EQ(live(server), 1u) << "lingering";
      ::shutdown(fd, SHUT_WR);  // the only thing that ends this linger (30 s otherwise)
      EXPECT_TRUE(eventually([&] { return live(server) == 0; }, 10000ms));
      EXPECT_EQ(pending_error(fd), 0);
      // Every byte the client sent was read, the dropped ones included.
      EXPECT_EQ(server.server().stats().total.bytes_in, 1u + 256 * 1024);
    } else {
      EXPECT_TRUE(eventually([&] { return live(server) == 0; }, 5000ms));
      int error = 0;
      EXPECT_TRUE(eventually([&] { return is_reset(error = pending_error(fd)); }, 5000ms))
          << "the unread junk is answered with a reset: " << std::strerror(error);
    }
    ::close(fd);
  }
}

// A lingering connection holds its flusher's coroutine and no other: the serving coroutine ends
// as the linger starts (it used to wait for the release, holding its stack for up to
// linger_time). Counted on the worker's own scheduler, from another connection's handler.
TEST(NetLinger, ALingeringConnectionHoldsOneCoroutine) {
  auto options = local_options();
  options.close_timeout = 30000ms;  // the client's FIN alone ends the linger
  running_server server(options, [](weft::net::tcp_server& s) {
    s.serve([](connection& c) {
      auto m = c.receive();
      if (!m) {
        return;
      }
      if (m->data.starts_with("count")) {
        c.send(std::to_string(weft::current_scheduler().stats().live_coroutines) + "\n");
        while (c.receive()) {
        }
        return;  // open until the client's end
      }
      c.send("bye");
      c.close_lingering();
    });
  });
  // Connects, asks for the count, and returns it with the connection still open.
  const auto count = [&](int& fd) {
    fd = connect_to(server.port());
    send_all(fd, "count");
    std::string line;
    for (std::string piece; (piece = read_bytes(fd, 1)).size() == 1 && piece != "\n";) {
      line += piece;
    }
    return std::stoul(line);
  };
  int first = -1;
  const unsigned long alone = count(first);  // the worker's own coroutines and the counting one
  ::close(first);
  EXPECT_TRUE(eventually([&] { return live(server) == 0; }, 10000ms));
  const int lingering = connect_to(server.port());
  send_all(lingering, "x");
  EXPECT_EQ(read_bytes(lingering, 3), "bye");
  EXPECT_EQ(read_until_end(lingering).error, 0);  // the server's FIN: the linger has begun
  int counter = -1;
  EXPECT_EQ(count(counter), alone + 1) << "the lingering connection's flusher alone";
  EXPECT_EQ(live(server), 2u);  // both connections are still the worker's
  ::close(counter);
  ::shutdown(lingering, SHUT_WR);  // ends the linger
  EXPECT_TRUE(eventually([&] { return live(server) == 0; }, 10000ms));
  EXPECT_EQ(pending_error(lingering), 0);
  ::close(lingering);
}

TEST(NetLinger, CloseLingeringWaitsForBytesNotYetSent) {
  // Without close_lingering the socket closes as soon as nothing is unread, and the peer's next
  // bytes get a reset; with it, they are read and dropped until the peer's own end.
  for (const bool asked : {false, true}) {
    SCOPED_TRACE(asked);
    auto options = local_options();
    options.close_timeout = 30000ms;
    running_server server(options, answer_then_close("bye", asked));
    const int fd = connect_to(server.port());
    send_all(fd, "x");
    EXPECT_EQ(read_bytes(fd, 3), "bye");
    EXPECT_EQ(read_until_end(fd).error, 0);  // the server's FIN
    if (!asked) {
      ASSERT_TRUE(eventually([&] { return live(server) == 0; }, 5000ms));
    } else {
      EXPECT_EQ(live(server), 1u) << "lingering";
    }
    int error = send_junk(fd, 128 * 1024);
    ::shutdown(fd, SHUT_WR);
    if (asked) {
      // The linger reads the junk and the FIN, and only that ends it (close_timeout 30 s).
      EXPECT_TRUE(eventually([&] { return live(server) == 0; }, 10000ms));
      EXPECT_EQ(error, 0) << std::strerror(error);
      EXPECT_EQ(pending_error(fd), 0);
    } else {
      EXPECT_TRUE(eventually(
          [&] { return is_reset(error != 0 ? error : (error = pending_error(fd))); }, 5000ms))
          << std::strerror(error);
    }
    ::close(fd);
  }
}

TEST(NetLinger, AStopEndsALingerOnceThePeerHasEverything) {
  auto options = local_options();
  options.close_timeout = 30000ms;
  options.linger_time = 30000ms;
  running_server server(options, answer_then_close("bye", true));
  const int fd = connect_to(server.port());
  send_all(fd, "x");
  EXPECT_EQ(read_bytes(fd, 3), "bye");
  EXPECT_EQ(read_until_end(fd).error, 0);
  EXPECT_EQ(live(server), 1u) << "lingering";
  const auto stop_at = steady::now();
  server.stop(20000ms);
  server.wait();
  EXPECT_LT(steady::now() - stop_at, 10000ms) << "the stop waited for the linger";
  EXPECT_EQ(server.server().stats().total.closed_by(close_reason::local), 1u);
  ::close(fd);
}

TEST(NetLinger, AConnectClientThatLeavesAStreamLetsGoAtOnce) {
  // A client of net::connect that closes while its server streams (a feed it leaves) does not
  // linger by default: its socket closes at once, and the server's sends meet the reset. With
  // linger_time set it would read the stream for up to that long.
  std::atomic<bool> cut{false};
  running_server server(local_options(), [&](weft::net::tcp_server& s) {
    s.serve([&](connection& c) {
      const std::string piece(64 * 1024, 'f');
      try {
        for (;;) {
          c.send(piece);
        }
      } catch (const std::exception&) {
        cut = true;  // the client's reset (or the stop's end, which the test waits before)
      }
    });
  });
  const auto released_after = weft::run([&] {
    auto c = weft::net::connect("127.0.0.1", server.port());
    EXPECT_TRUE(c->receive(weft::timeout(5s)).has_value());
    const auto closing = steady::now();
    c->close();
    c->wait_closed(weft::timeout(20s));
    return steady::now() - closing;
  });
  EXPECT_LT(released_after, 5000ms);
  EXPECT_TRUE(eventually([&] { return cut.load(); }, 10000ms));
}

}  // namespace

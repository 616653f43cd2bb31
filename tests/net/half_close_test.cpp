// Half-closed connections (connection_options::half_close, connection::shutdown_write): a peer
// that sends its request and then shuts down its writing (nc -N, an HTTP/1.0 client, a
// protocol that signals "end of request" with the FIN) still gets its whole answer, through a
// handler and through a pipe() proxy; a connection can end its own direction and keep reading.
#include <sys/socket.h>

#include <any>
#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include "net/net_support.hpp"
#include "weft/sched/this_coroutine.hpp"

namespace {

using namespace std::chrono_literals;
using namespace net_test;
using weft::net::close_reason;
using weft::net::connection;

// Sends `bytes`, shuts down the client's writing, and reads the answer until the server closes.
std::string ask_then_half_close(std::uint16_t port, const std::string& bytes) {
  const int fd = connect_to(port);
  send_all(fd, bytes);
  ::shutdown(fd, SHUT_WR);
  std::string answer = read_to_end(fd, 10000ms);
  ::close(fd);
  return answer;
}

// Reads until the input ends; the bytes received.
std::uint64_t count_input(connection& c) {
  std::uint64_t got = 0;
  while (auto m = c.receive()) {
    got += m->data.size();
  }
  return got;
}

TEST(NetHalfClose, AHandlerAnswersAfterThePeersEndWithHalfCloseOn) {
  for (const bool half_close : {true, false}) {
    auto options = local_options();
    options.half_close = half_close;
    std::atomic<bool> refused{false};
    std::atomic<bool> done{false};
    running_server server(options, [&](weft::net::tcp_server& s) {
      s.serve([&](connection& c) {
        const std::uint64_t got = count_input(c);
        EXPECT_TRUE(c.input_ended());
        EXPECT_EQ(c.is_open(), half_close);
        try {
          c.send("got " + std::to_string(got) + "\n");
        } catch (const weft::net::connection_closed_error&) {
          refused = true;  // without half_close the FIN closed the connection
        }
        done = true;
      });
    });
    const std::string answer = ask_then_half_close(server.port(), std::string(100000, 'q'));
    ASSERT_TRUE(eventually([&] { return done.load(); }, 10000ms));
    if (half_close) {
      EXPECT_EQ(answer, "got 100000\n");
      EXPECT_FALSE(refused.load());
    } else {
      EXPECT_EQ(answer, "");
      EXPECT_TRUE(refused.load());
    }
  }
}

// Looks every 5 ms (bounded: 10 s) until close_if_peer_gone() closes c; whether it did.
bool until_peer_gone(connection& c) {
  for (int look = 0; look < 2000; ++look) {
    if (c.close_if_peer_gone()) {
      return true;
    }
    weft::sleep_for(5ms);
  }
  return false;
}

TEST(NetHalfClose, APeerIsGoneOnItsResetOrWithoutHalfCloseOnItsEnd) {
  for (const bool half_close : {true, false}) {
    SCOPED_TRACE(half_close);
    auto options = local_options();
    options.half_close = half_close;
    std::atomic<bool> gone{false};
    std::atomic<bool> done{false};
    running_server server(options, [&](weft::net::tcp_server& s) {
      s.serve([&](connection& c) {
        if (!half_close) {
          // Nothing read: the FIN is behind the unread "x", as behind a pipelined request.
          gone = until_peer_gone(c);
          EXPECT_EQ(c.closed_by(), close_reason::peer);
          done = true;
          return;
        }
        EXPECT_EQ(count_input(c), 1u);  // the "x", then the end
        EXPECT_FALSE(c.close_if_peer_gone()) << "a FIN alone is no leaving with half_close";
        c.send("still here\n");
        gone = until_peer_gone(c);  // the peer's reset
        EXPECT_EQ(c.closed_by(), close_reason::peer);
        done = true;
      });
    });
    const int fd = connect_to(server.port());
    send_all(fd, "x");
    ::shutdown(fd, SHUT_WR);
    if (half_close) {
      EXPECT_EQ(read_bytes(fd, 11), "still here\n");
      const linger now{.l_onoff = 1, .l_linger = 0};
      ASSERT_EQ(::setsockopt(fd, SOL_SOCKET, SO_LINGER, &now, sizeof now), 0);
    }
    ::close(fd);
    ASSERT_TRUE(eventually([&] { return done.load(); }, 15000ms));
    EXPECT_TRUE(gone.load());
    EXPECT_EQ(server.server().stats().total.closed_by(close_reason::error), 0u);
  }
}

TEST(NetHalfClose, TheCallbackStyleHearsTheEndAndAnswersAfterIt) {
  auto options = local_options();
  options.half_close = true;
  running_server server(options, [](weft::net::tcp_server& s) {
    s.serve(weft::net::connection_events{
        .on_connect = [](connection& c) { c.context() = std::uint64_t{0}; },
        .on_message =
            [](connection& c, weft::net::message& m) {
              std::any_cast<std::uint64_t&>(c.context()) += m.data.size();
            },
        .on_end =
            [](connection& c) {
              EXPECT_TRUE(c.is_open());
              c.send("got " + std::to_string(std::any_cast<std::uint64_t>(c.context())));
              c.shutdown_write();  // the input has ended too: this closes it
            },
    });
  });
  EXPECT_EQ(ask_then_half_close(server.port(), std::string(70000, 'c')), "got 70000");
}

TEST(NetHalfClose, ShutdownWriteSendsTheFinAndReceivingGoesOn) {
  auto options = local_options();
  options.half_close = true;
  std::atomic<std::uint64_t> after{0};
  std::atomic<bool> refused_named{false};
  std::atomic<int> reason{-1};
  running_server server(options, [&](weft::net::tcp_server& s) {
    s.serve([&](connection& c) {
      c.send(std::string(300000, 'h'));  // more than the socket takes at once: queued
      c.shutdown_write();                // the FIN follows the queue
      EXPECT_TRUE(c.write_shut());
      EXPECT_TRUE(c.is_open());
      try {
        c.send("late");
        ADD_FAILURE() << "a send after shutdown_write was accepted";
      } catch (const weft::net::connection_closed_error& e) {
        refused_named = std::string(e.what()).find("shutdown_write") != std::string::npos;
      }
      EXPECT_FALSE(c.try_send("late"));
      after = count_input(c);  // the peer's bytes, sent after it saw our FIN
      c.wait_closed(weft::timeout(10s));
      reason = static_cast<int>(*c.closed_by());
    });
  });
  const int fd = connect_to(server.port());
  EXPECT_EQ(read_to_end(fd, 10000ms), std::string(300000, 'h'));  // all of it, then the FIN
  send_all(fd, std::string(50000, 'p'));
  ::shutdown(fd, SHUT_WR);
  EXPECT_EQ(read_to_end(fd, 10000ms), "");
  ::close(fd);
  ASSERT_TRUE(eventually([&] { return reason.load() != -1; }, 10000ms));
  EXPECT_EQ(after.load(), 50000u);
  EXPECT_TRUE(refused_named.load());
  EXPECT_EQ(reason.load(), static_cast<int>(close_reason::peer));
}

TEST(NetHalfClose, ALastLineWithoutItsNewlineIsALineAtTheStreamsEnd) {
  // printf 'one\ntwo' | nc -N: the text protocol hands over "two" too, as Go's bufio.Scanner
  // does, and with half_close the echo of it still goes back.
  auto options = local_options();
  options.protocol = weft::net::text();
  options.half_close = true;
  running_server echo(options, [](weft::net::tcp_server& s) {
    s.serve([](connection& c) {
      while (auto m = c.receive()) {
        c.send(m->data);
      }
    });
  });
  EXPECT_EQ(ask_then_half_close(echo.port(), "one\ntwo\r"), "one\ntwo\n");
  // A frame cut short by the end is still no message: nothing of it reaches the handler.
  auto frames = local_options();
  frames.protocol = weft::net::frame();
  frames.half_close = true;
  std::atomic<int> messages{0};
  running_server counted(frames, [&](weft::net::tcp_server& s) {
    s.serve([&](connection& c) {
      while (c.receive()) {
        ++messages;
      }
      c.send("end");
    });
  });
  const std::string whole = std::string("\0\0\0\x02", 4) + "ab";
  const std::string cut = std::string("\0\0\0\x09", 4) + "abc";
  const std::string answer = ask_then_half_close(counted.port(), whole + cut);
  EXPECT_EQ(answer, std::string("\0\0\0\x03", 4) + "end");
  EXPECT_EQ(messages.load(), 1);
}

// An upstream that answers once its client ended the request: it reads to the FIN, then writes
// "counted N" and closes (a blocking socket on its own thread).
class counting_upstream {
 public:
  counting_upstream() {
    auto [fd, port] = loopback_listener(4, "counting_upstream");
    listen_fd_ = fd;
    port_ = port;
    thread_ = std::thread([this] {
      const int client = ::accept(listen_fd_, nullptr, nullptr);
      if (client < 0) {
        return;
      }
      std::uint64_t got = 0;
      char buffer[65536];
      for (;;) {
        const ssize_t n = ::recv(client, buffer, sizeof buffer, 0);
        if (n <= 0) {
          break;
        }
        got += static_cast<std::uint64_t>(n);
      }
      send_all(client, "counted " + std::to_string(got) + "\n");
      ::close(client);
    });
  }
  ~counting_upstream() {
    ::shutdown(listen_fd_, SHUT_RDWR);
    thread_.join();
    ::close(listen_fd_);
  }
  std::uint16_t port() const { return port_; }

 private:
  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  std::thread thread_;
};

TEST(NetHalfClose, APipeProxyPassesTheFinOnAndTheAnswerBack) {
  counting_upstream upstream;
  auto options = local_options();
  options.half_close = true;
  std::atomic<std::uint64_t> up_bytes{0};
  std::atomic<std::uint64_t> down_bytes{0};
  const std::uint16_t upstream_port = upstream.port();
  running_server proxy(options, [&](weft::net::tcp_server& s) {
    s.serve([&](connection& c) {
      auto up = weft::net::connect("127.0.0.1", upstream_port,
                                   weft::net::connection_options{.half_close = true});
      auto forward = weft::spawn([&] { up_bytes = weft::net::pipe(c, *up); });
      down_bytes = weft::net::pipe(*up, c);
      forward.await();
      c.wait_closed(weft::timeout(10s));
      up->wait_closed(weft::timeout(10s));
    });
  });
  constexpr std::size_t total = 1 << 20;
  EXPECT_EQ(ask_then_half_close(proxy.port(), std::string(total, 'r')),
            "counted " + std::to_string(total) + "\n");
  ASSERT_TRUE(eventually([&] { return down_bytes.load() != 0; }, 10000ms));
  EXPECT_EQ(up_bytes.load(), total);
  EXPECT_EQ(down_bytes.load(), std::string("counted 1048576\n").size());
}

}  // namespace

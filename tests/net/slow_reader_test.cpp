// A peer that reads slowly but steadily is not a peer that does not read. Behind a large kernel
// send buffer the socket turns writable again only once a third of it has drained, which for a
// slow reader (a phone on a poor link) can take longer than the send timeout while every byte
// is being taken. The send timeout's stretches (a waiting send(), wait_sent(), a closing flush)
// count the peer's acknowledgements out of the socket's buffer as progress; a peer that takes
// nothing at all is still cut off (backpressure_test.cpp, send_file_test.cpp).
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "net/net_support.hpp"

namespace {

using namespace std::chrono_literals;
using namespace net_test;
using weft::net::close_reason;
using weft::net::connection;

constexpr std::size_t total = 1 << 20;
// 400,000 bytes of kernel buffer (the kernel doubles what is asked), whatever the machine's
// autotuning: a third of it drains in about 330 ms at the reader's pace, longer than the send
// timeout below, so the socket stays unwritable through whole stretches.
constexpr int kernel_buffer = 200000;
constexpr auto send_timeout = 200ms;

enum class way { wait_sent, send_at_limit, closing_flush };

// Reads 2 KiB every 5 ms (about 400 KB/s) until the server closes; the bytes read.
std::size_t read_slowly(int fd) {
  std::size_t got = 0;
  char buffer[2048];
  for (;;) {
    pollfd ready{.fd = fd, .events = POLLIN, .revents = 0};
    if (::poll(&ready, 1, 10000) <= 0) {
      ADD_FAILURE() << "read_slowly: nothing for 10 s after " << got << " bytes";
      return got;
    }
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) {
      return got;
    }
    got += static_cast<std::size_t>(n);
    std::this_thread::sleep_for(5ms);  // the reader's pace, not a synchronisation
  }
}

void slow_reader_gets_everything(way how) {
  auto options = local_options();
  options.send_timeout = send_timeout;
  options.close_timeout = send_timeout;
  options.send_buffer_limit = 64 << 10;
  std::atomic<bool> failed{false};
  running_server server(options, [&](weft::net::tcp_server& s) {
    s.serve([&](connection& c) {
      small_send_buffer(c.native_handle(), kernel_buffer);
      const std::string piece(64 << 10, 's');
      try {
        if (how == way::wait_sent) {
          c.set_send_buffer_limit(total);
          for (std::size_t sent = 0; sent < total; sent += piece.size()) {
            c.send(piece);
          }
          failed = !c.wait_sent();
        } else if (how == way::send_at_limit) {
          for (std::size_t sent = 0; sent < total; sent += piece.size()) {
            c.send(piece);  // waits for room at the 64 KiB limit
          }
        } else {
          c.set_send_buffer_limit(total);
          for (std::size_t sent = 0; sent < total; sent += piece.size()) {
            c.send(piece);
          }
        }
      } catch (const weft::error& e) {
        ADD_FAILURE() << e.what();
        failed = true;
      }
      c.close();  // the closing flush writes what is still queued
    });
  });
  const int fd = connect_to(server.port(), 16384);
  const std::size_t got = read_slowly(fd);
  ::close(fd);
  EXPECT_EQ(got, total);
  EXPECT_FALSE(failed.load());
  const auto closed = [&](close_reason r) { return server.server().stats().total.closed_by(r); };
  ASSERT_TRUE(eventually(
      [&] {
        return closed(close_reason::local) + closed(close_reason::send_limit) +
                   closed(close_reason::close_timeout) ==
               1;
      },
      10000ms));
  EXPECT_EQ(closed(close_reason::local), 1u);
}

TEST(NetSlowReader, WaitSentKeepsASlowReaderThatTakesEveryByte) {
  slow_reader_gets_everything(way::wait_sent);
}

TEST(NetSlowReader, ASendWaitingForRoomKeepsASlowReader) {
  slow_reader_gets_everything(way::send_at_limit);
}

TEST(NetSlowReader, AClosingFlushKeepsASlowReader) {
  slow_reader_gets_everything(way::closing_flush);
}

}  // namespace

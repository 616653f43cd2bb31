// Helpers shared by the event-loop tests (tests/loop/).
//
// with_loop(body) gives body a fresh event_loop and checks, once the loop is gone, that the test
// left no descriptor open (the loop's own epoll fd included). A loop run() outside weft ends its
// scheduler when it returns, so "closed clean" is: run() returned, nothing is left registered
// (timer_count() is zero; a referenced watcher left behind would have kept run() from
// returning), and no fd leaked.
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <string>

#include "test_support.hpp"
#include "weft/loop/event_loop.hpp"

namespace weft_loop_test {

inline std::size_t open_fd_count() {
  std::size_t count = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    ++count;
  }
  return count;
}

template <class Body>
void with_loop(Body&& body) {
  // libuv opens a process-wide pipe for its signal handling on the first loop of the process
  // and keeps it: make that happen before counting.
  static const bool driver_warm = (weft::run([] {}), true);
  (void)driver_warm;
  const std::size_t fds_before = open_fd_count();
  {
    weft::loop::event_loop loop;
    body(loop);
    EXPECT_EQ(loop.timer_count(), 0u) << "the test left timers registered";
  }
  EXPECT_EQ(open_fd_count(), fds_before) << "the test or the loop left a descriptor open";
}

// A connected pair of non-blocking unix stream sockets, closed at the end of the test (an end
// already closed by the test is skipped).
struct socket_pair {
  int ends[2] = {-1, -1};
  socket_pair() {
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, ends), 0);
  }
  socket_pair(const socket_pair&) = delete;
  socket_pair& operator=(const socket_pair&) = delete;
  ~socket_pair() {
    for (int fd : ends) {
      if (fd >= 0) {
        ::close(fd);
      }
    }
  }
  void close(int index) {
    ::close(ends[index]);
    ends[index] = -1;
  }
};

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace weft_loop_test

// A connected pair of non-blocking unix sockets for the reactor's tests, closed at the end of
// the test.
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

namespace weft_test {

struct socket_pair {
  int ends[2] = {-1, -1};
  socket_pair() {
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, ends), 0);
  }
  socket_pair(const socket_pair&) = delete;
  socket_pair& operator=(const socket_pair&) = delete;
  ~socket_pair() {
    ::close(ends[0]);
    ::close(ends[1]);
  }
};

}  // namespace weft_test

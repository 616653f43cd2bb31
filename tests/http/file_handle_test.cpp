// weft-test: driver-independent
// http::file_handle owns one descriptor: it closes it once (destructor, reset, assignment),
// hands it on when moved, and gives it up without closing on release().
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <utility>

#include "weft/http/file_handle.hpp"

namespace http = weft::http;

namespace {

bool is_open(int fd) { return ::fcntl(fd, F_GETFD) != -1 || errno != EBADF; }

int open_null() {
  int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  EXPECT_GE(fd, 0);
  return fd;
}

TEST(HttpFileHandle, DestructorClosesTheDescriptor) {
  int fd = open_null();
  {
    http::file_handle handle(fd);
    EXPECT_TRUE(handle);
    EXPECT_EQ(handle.get(), fd);
  }
  EXPECT_FALSE(is_open(fd));
  http::file_handle empty;
  EXPECT_FALSE(empty);
  EXPECT_EQ(empty.get(), -1);
}

TEST(HttpFileHandle, MovingHandsTheDescriptorOnAndEmptiesTheSource) {
  int fd = open_null();
  http::file_handle a(fd);
  http::file_handle b(std::move(a));
  EXPECT_FALSE(a);  // NOLINT(bugprone-use-after-move): moved-from is specified empty
  EXPECT_EQ(b.get(), fd);
  int other = open_null();
  http::file_handle c(other);
  c = std::move(b);  // closes `other`, takes fd
  EXPECT_FALSE(is_open(other));
  EXPECT_EQ(c.get(), fd);
  EXPECT_TRUE(is_open(fd));
  http::file_handle& same = c;
  c = std::move(same);  // self-move keeps it
  EXPECT_EQ(c.get(), fd);
  c.reset();
  EXPECT_FALSE(is_open(fd));
  EXPECT_FALSE(c);
}

TEST(HttpFileHandle, ReleaseGivesUpOwnershipWithoutClosing) {
  int fd = open_null();
  int released = -1;
  {
    http::file_handle handle(fd);
    released = handle.release();
    EXPECT_FALSE(handle);
  }
  EXPECT_EQ(released, fd);
  EXPECT_TRUE(is_open(fd));
  ::close(fd);
}

TEST(HttpFileHandle, ResetClosesTheOldAndKeepsTheNew) {
  int first = open_null();
  int second = open_null();
  http::file_handle handle(first);
  handle.reset(second);
  EXPECT_FALSE(is_open(first));
  EXPECT_TRUE(is_open(second));
  handle.reset(second);  // the same descriptor again: kept, not closed
  EXPECT_TRUE(is_open(second));
}

}  // namespace

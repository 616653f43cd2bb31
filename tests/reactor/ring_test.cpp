// Completion-based receives through the uring driver's ring (src/reactor/ring.hpp): what the
// net layer's connections wait with on that driver. Skipped on drivers without a ring.
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <exception>
#include <string>

#include "reactor/ring.hpp"
#include "test_support.hpp"
#include "weft/error.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::run_clean;

struct socket_pair {
  int ends[2] = {-1, -1};
  socket_pair() {
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, ends), 0);
  }
  ~socket_pair() {
    ::close(ends[0]);
    ::close(ends[1]);
  }
};

bool driver_has_ring() {
  bool has = false;
  run_clean([&] { has = weft::detail::current_ring() != nullptr; });
  return has;
}

TEST(Ring, AReceiveReturnsWhatThePeerSentOnceItCame) {
  if (!driver_has_ring()) {
    GTEST_SKIP() << "this driver has no ring (WEFT_DRIVER=uring has)";
  }
  socket_pair pair;
  run_clean([&] {
    auto reader = weft::spawn([&] {
      char buffer[16];
      std::exception_ptr early;
      const int got = weft::detail::ring_receive(*weft::detail::current_ring(), pair.ends[0],
                                                 buffer, sizeof buffer, weft::timeout(5s), early);
      EXPECT_EQ(early, nullptr);
      return std::string(buffer, got > 0 ? static_cast<std::size_t>(got) : 0);
    });
    weft::spawn([&] {
      weft::yield();
      EXPECT_FALSE(reader.done()) << "nothing was sent yet";
      EXPECT_EQ(::write(pair.ends[1], "ping", 4), 4);
    });
    EXPECT_EQ(reader.await(), "ping");
  });
}

TEST(Ring, TheEndAndAnErrorAreItsResult) {
  if (!driver_has_ring()) {
    GTEST_SKIP() << "this driver has no ring (WEFT_DRIVER=uring has)";
  }
  socket_pair pair;
  run_clean([&] {
    char buffer[16];
    std::exception_ptr early;
    ::shutdown(pair.ends[1], SHUT_WR);
    EXPECT_EQ(weft::detail::ring_receive(*weft::detail::current_ring(), pair.ends[0], buffer,
                                         sizeof buffer, weft::timeout(5s), early),
              0);
    int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);  // not connected
    EXPECT_EQ(weft::detail::ring_receive(*weft::detail::current_ring(), listener, buffer,
                                         sizeof buffer, weft::timeout(5s), early),
              -ENOTCONN);
    ::close(listener);
    EXPECT_EQ(early, nullptr);
  });
}

// The deadline passes with nothing sent: the recv is cancelled and has completed when the call
// returns (-ECANCELED, the timeout_error in `early`), so that what the peer sends later is still
// in the socket for the next read.
TEST(Ring, ADeadlineCancelsTheReceiveAndLosesNothingSentLater) {
  if (!driver_has_ring()) {
    GTEST_SKIP() << "this driver has no ring (WEFT_DRIVER=uring has)";
  }
  socket_pair pair;
  run_clean([&] {
    char buffer[16];
    std::exception_ptr early;
    const auto started = std::chrono::steady_clock::now();
    const int got = weft::detail::ring_receive(*weft::detail::current_ring(), pair.ends[0], buffer,
                                               sizeof buffer, weft::timeout(30ms), early);
    EXPECT_GE(std::chrono::steady_clock::now() - started, 30ms);
    EXPECT_EQ(got, -ECANCELED);
    EXPECT_THROW(std::rethrow_exception(early), weft::timeout_error);
    EXPECT_EQ(::write(pair.ends[1], "late", 4), 4);
    EXPECT_EQ(::read(pair.ends[0], buffer, sizeof buffer), 4);
    EXPECT_EQ(std::string(buffer, 4), "late");
  });
}

// A cancellation of the waiting coroutine comes back in `early`, to be rethrown once the
// receive has ended; the coroutine still ends cleanly, and nothing is left in the ring.
TEST(Ring, ACancellationIsHandedBackOnceTheReceiveEnded) {
  if (!driver_has_ring()) {
    GTEST_SKIP() << "this driver has no ring (WEFT_DRIVER=uring has)";
  }
  socket_pair pair;
  run_clean([&] {
    int result = 1;
    bool cancelled = false;
    auto reader = weft::spawn([&] {
      char buffer[16];
      std::exception_ptr early;
      result = weft::detail::ring_receive(*weft::detail::current_ring(), pair.ends[0], buffer,
                                          sizeof buffer, weft::timeout::never(), early);
      try {
        std::rethrow_exception(early);
      } catch (const weft::cancelled_error&) {
        cancelled = true;
      }
    });
    weft::yield();
    reader.cancel("test");
    reader.await();
    EXPECT_EQ(result, -ECANCELED);
    EXPECT_TRUE(cancelled);
  });
}

}  // namespace

// Completion-based receives through the uring driver's ring (src/reactor/ring.hpp): what the
// net layer's connections wait with on that driver. Skipped on drivers without a ring.
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <exception>
#include <string>

#include "reactor/ring.hpp"
#include "reactor/socket_pair.hpp"
#include "test_support.hpp"
#include "weft/error.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::run_clean;

using weft_test::socket_pair;

// ring_receive on the running scheduler's ring into buffer.
int receive(int fd, char (&buffer)[16], const weft::timeout& limit, std::exception_ptr& early) {
  return weft::detail::ring_receive(*weft::detail::current_ring(), fd, buffer, sizeof buffer, limit,
                                    early);
}

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
      const int got = receive(pair.ends[0], buffer, weft::timeout(5s), early);
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
    EXPECT_EQ(receive(pair.ends[0], buffer, weft::timeout(5s), early), 0);
    int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);  // not connected
    EXPECT_EQ(receive(listener, buffer, weft::timeout(5s), early), -ENOTCONN);
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
    const int got = receive(pair.ends[0], buffer, weft::timeout(30ms), early);
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
      result = receive(pair.ends[0], buffer, weft::timeout::never(), early);
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

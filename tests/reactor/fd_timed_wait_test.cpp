// Timed waits on an fd: each wait keeps its own deadline even though the fd's deadline entry
// stays in the timer heap from one wait to the next (src/reactor/fd.cpp, fd_deadline).
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "reactor/socket_pair.hpp"
#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::run_clean;
using steady = std::chrono::steady_clock;

using weft_test::socket_pair;

TEST(FdTimedWait, AShorterTimeoutAfterALongerOneFiresAtItsOwnDeadline) {
  socket_pair pair;
  run_clean([&] {
    // The first wait leaves the fd's deadline queued 60 s out.
    EXPECT_EQ(::write(pair.ends[1], "x", 1), 1);
    weft::wait_readable(pair.ends[0], weft::timeout(60s));
    char byte = 0;
    EXPECT_EQ(::read(pair.ends[0], &byte, 1), 1);
    const auto start = steady::now();
    EXPECT_THROW(weft::wait_readable(pair.ends[0], weft::timeout(50ms)), weft::timeout_error);
    const auto waited = steady::now() - start;
    EXPECT_GE(waited, 50ms);
    EXPECT_LT(waited, 10s) << "the 60 s deadline of the earlier wait was used";
  });
}

TEST(FdTimedWait, ALongerTimeoutAfterAShorterOneDoesNotFireEarly) {
  socket_pair pair;
  run_clean([&] {
    // Woken at once: the fd's deadline stays queued for 50 ms from now and fires during the
    // next wait, which must go on to its own deadline.
    EXPECT_EQ(::write(pair.ends[1], "x", 1), 1);
    weft::wait_readable(pair.ends[0], weft::timeout(50ms));
    char byte = 0;
    EXPECT_EQ(::read(pair.ends[0], &byte, 1), 1);
    const auto start = steady::now();
    EXPECT_THROW(weft::wait_readable(pair.ends[0], weft::timeout(300ms)), weft::timeout_error);
    EXPECT_GE(steady::now() - start, 300ms);
  });
}

// Round trips with alternating limits: every wait's deadline moves the fd's queued one back
// or forth, and none may end a wait whose event came first.
TEST(FdTimedWait, WaitAfterWaitEachEndsByItsEvent) {
  socket_pair pair;
  run_clean([&] {
    auto echo = weft::spawn([&] {
      char byte = 0;
      for (int i = 0; i < 200; ++i) {
        weft::wait_readable(pair.ends[1], weft::timeout(i % 2 == 0 ? 5s : 2s));
        EXPECT_EQ(::read(pair.ends[1], &byte, 1), 1);
        EXPECT_EQ(::write(pair.ends[1], &byte, 1), 1);
      }
    });
    for (int i = 0; i < 200; ++i) {
      EXPECT_EQ(::write(pair.ends[0], "x", 1), 1);
      weft::wait_readable(pair.ends[0], weft::timeout(i % 3 == 0 ? 5s : 3s));
      char byte = 0;
      EXPECT_EQ(::read(pair.ends[0], &byte, 1), 1);
    }
    echo.await();
  });
}

TEST(FdTimedWait, TheTimeoutErrorNamesTheFdAndTheLimit) {
  socket_pair pair;
  run_clean([&] {
    try {
      weft::wait_readable(pair.ends[0], weft::timeout(20ms));
      ADD_FAILURE() << "no timeout";
    } catch (const weft::timeout_error& failure) {
      EXPECT_EQ(std::string(failure.what()), "weft: weft::wait_readable fd " +
                                                 std::to_string(pair.ends[0]) +
                                                 " timed out after 20 ms");
    }
  });
}

TEST(FdTimedWait, TwoTimedWaitersOfOneFdEachKeepTheirDeadline) {
  socket_pair pair;
  run_clean([&] {
    auto patient = weft::spawn([&] { weft::wait_readable(pair.ends[0], weft::timeout(60s)); });
    auto hasty = weft::spawn([&] {
      const auto start = steady::now();
      EXPECT_THROW(weft::wait_readable(pair.ends[0], weft::timeout(30ms)), weft::timeout_error);
      return steady::now() - start;
    });
    const auto waited = hasty.await();
    EXPECT_GE(waited, 30ms);
    EXPECT_LT(waited, 10s);
    EXPECT_FALSE(patient.done()) << "the patient waiter gave up with the hasty one";
    EXPECT_EQ(::write(pair.ends[1], "x", 1), 1);
    patient.await();
  });
}

TEST(FdTimedWait, ADeadlineLeftQueuedDoesNotKeepTheSchedulerRunning) {
  socket_pair pair;
  const auto start = steady::now();
  run_clean([&] {
    EXPECT_EQ(::write(pair.ends[1], "x", 1), 1);
    weft::wait_readable(pair.ends[0], weft::timeout(60s));
  });
  EXPECT_LT(steady::now() - start, 10s) << "run() waited for the fd's 60 s deadline";
}

}  // namespace

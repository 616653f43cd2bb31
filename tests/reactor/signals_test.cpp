// weft::signals::wait: POSIX signals as a suspending call.
#include <chrono>
#include <csignal>
#include <vector>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::run_clean;

TEST(Signals, ASignalSentToSelfWakesTheWaiter) {
  run_clean([] {
    auto waiter = weft::spawn([] { return weft::signals::wait({SIGUSR1}, weft::timeout(5s)); });
    weft::spawn([] {
      weft::yield();
      std::raise(SIGUSR1);
    });
    EXPECT_EQ(waiter.await(), SIGUSR1);
  });
}

TEST(Signals, OneDeliveryWakesEveryWaiterOfThatSignal) {
  run_clean([] {
    int started = 0;
    std::vector<weft::task<int>> waiters;
    for (int index = 0; index < 3; ++index) {
      waiters.push_back(weft::spawn([&] {
        ++started;
        return weft::signals::wait({SIGUSR2}, weft::timeout(5s));
      }));
    }
    ASSERT_TRUE(weft_test::yield_until([&] { return started == 3; }));
    std::raise(SIGUSR2);
    for (auto& waiter : waiters) {
      EXPECT_EQ(waiter.await(), SIGUSR2);
    }
  });
}

TEST(Signals, WaitingOnSeveralReturnsTheOneDelivered) {
  run_clean([] {
    auto waiter = weft::spawn([] {
      return weft::signals::wait({SIGUSR1, SIGUSR2}, weft::timeout(5s));
    });
    weft::spawn([] {
      weft::yield();
      std::raise(SIGUSR2);
    });
    EXPECT_EQ(waiter.await(), SIGUSR2);
  });
}

TEST(Signals, ADeliveryWhileNobodyWaitsIsKeptForTheNextWait) {
  run_clean([] {
    // The first wait makes the scheduler catch SIGUSR1 for the rest of the run.
    EXPECT_THROW(weft::signals::wait({SIGUSR1}, weft::timeout(1ms)), weft::timeout_error);
    std::raise(SIGUSR1);  // nobody waits now: it must not kill the process, nor be lost
    EXPECT_EQ(weft::signals::wait({SIGUSR1}, weft::timeout(5s)), SIGUSR1);
  });
}

TEST(Signals, BadSignalNumbersAreInvalidArguments) {
  run_clean([] {
    EXPECT_THROW(weft::signals::wait({SIGKILL}), std::invalid_argument);
    EXPECT_THROW(weft::signals::wait({0}), std::invalid_argument);
    EXPECT_THROW(weft::signals::wait({}), std::invalid_argument);
  });
}

}  // namespace

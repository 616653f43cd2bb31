// weft::signals::wait: POSIX signals as a suspending call.
#include <atomic>
#include <chrono>
#include <csignal>
#include <thread>
#include <vector>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::run_clean;

volatile std::sig_atomic_t handled = 0;
void count_delivery(int) { handled = handled + 1; }

struct sigaction disposition_of(int number) {
  struct sigaction now {};
  sigaction(number, nullptr, &now);
  return now;
}

// A run in which a coroutine waits for number and another raises it.
void catch_one_in_a_run(int number) {
  run_clean([number] {
    auto waiter =
        weft::spawn([number] { return weft::signals::wait({number}, weft::timeout(5s)); });
    weft::spawn([number] {
      weft::yield();
      std::raise(number);
    });
    EXPECT_EQ(waiter.await(), number);
  });
}

// Gives number the program's own disposition (handler, with SA_RESTART and SIGALRM in its mask:
// details that must come back too) for the test, and the one before at its end.
class own_disposition {
 public:
  own_disposition(int number, void (*handler)(int)) : number_(number) {
    struct sigaction wanted {};
    wanted.sa_handler = handler;
    wanted.sa_flags = SA_RESTART;
    sigemptyset(&wanted.sa_mask);
    sigaddset(&wanted.sa_mask, SIGALRM);
    sigaction(number, &wanted, &before_);
    handled = 0;
  }
  own_disposition(const own_disposition&) = delete;
  own_disposition& operator=(const own_disposition&) = delete;
  ~own_disposition() { sigaction(number_, &before_, nullptr); }

 private:
  int number_;
  struct sigaction before_ {};
};

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

TEST(Signals, TheProgramsOwnHandlerIsBackWhenRunEnds) {
  own_disposition own(SIGUSR1, count_delivery);
  catch_one_in_a_run(SIGUSR1);
  EXPECT_EQ(handled, 0);  // weft caught that one, not the program
  const struct sigaction now = disposition_of(SIGUSR1);
  EXPECT_EQ(now.sa_handler, &count_delivery);
  EXPECT_NE(now.sa_flags & SA_RESTART, 0);
  EXPECT_TRUE(sigismember(&now.sa_mask, SIGALRM));
  std::raise(SIGUSR1);
  EXPECT_EQ(handled, 1);
}

TEST(Signals, AnIgnoredSignalIsIgnoredAgainWhenRunEnds) {
  // As under nohup: SIGHUP ignored. A run that waited for it must not leave it at the default
  // action (termination) for the rest of the program.
  own_disposition ignored(SIGHUP, SIG_IGN);
  catch_one_in_a_run(SIGHUP);
  ASSERT_EQ(disposition_of(SIGHUP).sa_handler, SIG_IGN);
  std::raise(SIGHUP);  // ignored, as the program asked
}

TEST(Signals, TheDispositionIsBackWhenTheLastSchedulerCatchingItEnds) {
  own_disposition own(SIGUSR2, count_delivery);
  std::atomic<bool> other_catches{false};
  std::thread other([&] {
    run_clean([&] {
      // A wait that times out at once still makes this scheduler catch SIGUSR2 until it ends.
      EXPECT_THROW(weft::signals::wait({SIGUSR2}, weft::timeout(0ms)), weft::timeout_error);
      other_catches = true;
      other_catches.notify_one();
      EXPECT_EQ(weft::signals::wait({SIGUSR2}, weft::timeout(10s)), SIGUSR2);
    });
  });
  other_catches.wait(false);
  run_clean([] {
    EXPECT_THROW(weft::signals::wait({SIGUSR2}, weft::timeout(1ms)), weft::timeout_error);
  });
  // This thread's scheduler has ended; the other thread's still catches SIGUSR2, and this
  // delivery is its waiter's.
  EXPECT_NE(disposition_of(SIGUSR2).sa_handler, &count_delivery);
  std::raise(SIGUSR2);
  other.join();
  EXPECT_EQ(handled, 0);
  EXPECT_EQ(disposition_of(SIGUSR2).sa_handler, &count_delivery);
  std::raise(SIGUSR2);
  EXPECT_EQ(handled, 1);
}

TEST(Signals, BadSignalNumbersAreInvalidArguments) {
  run_clean([] {
    EXPECT_THROW(weft::signals::wait({SIGKILL}), std::invalid_argument);
    EXPECT_THROW(weft::signals::wait({0}), std::invalid_argument);
    EXPECT_THROW(weft::signals::wait({}), std::invalid_argument);
  });
}

}  // namespace

// Cancellation: a coroutine cancelled before it started never runs; a suspended one wakes with
// weft::cancelled_error at its suspension point, so its catch blocks and destructors run (and its
// cleanup may still suspend); weft::protect defers a cancel until its function returns;
// cancelling a finished task changes nothing.
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_support.hpp"
#include "weft/weft.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::destructor_flag;
using weft_test::run_clean;
using weft_test::yield_until;

TEST(Cancel, BeforeStartTheCoroutineNeverRunsAndAwaitThrowsWithTheReason) {
  bool ran = false;
  weft::scheduler scheduler;
  weft_test::clean_end_check check(scheduler);
  scheduler.run([&] {
    auto task = weft::spawn([&] { ran = true; });
    task.cancel("not needed any more");
    try {
      task.await();
      ADD_FAILURE() << "await of a cancelled task returned";
    } catch (const weft::cancelled_error& error) {
      EXPECT_EQ(error.reason(), "not needed any more");
    }
    EXPECT_TRUE(task.done());
    // Still never runs, however long we wait.
    weft::spawn([] {}).await();
  });
  EXPECT_FALSE(ran);
  EXPECT_EQ(scheduler.stats().never_started, 1u);
  EXPECT_EQ(scheduler.stats().cancelled, 1u);
}

TEST(Cancel, DefaultReason) {
  run_clean([] {
    auto task = weft::spawn([] { return 1; });
    task.cancel();
    try {
      task.await();
      ADD_FAILURE() << "await of a cancelled task returned";
    } catch (const weft::cancelled_error& error) {
      EXPECT_EQ(error.reason(), "cancelled");
    }
  });
}

TEST(Cancel, SleepingCoroutineWakesWithCancelledErrorAndCleansUp) {
  bool sleeping = false;
  bool destroyed = false;
  bool caught = false;
  bool cleanup_finished = false;
  bool after_sleep = false;
  std::string reason;
  const auto start = std::chrono::steady_clock::now();
  run_clean([&] {
    auto sleeper = weft::spawn([&] {
      destructor_flag guard(destroyed);
      try {
        sleeping = true;
        weft::sleep_for(1h);
        after_sleep = true;
      } catch (const weft::cancelled_error& error) {
        caught = true;
        reason = error.reason();
        EXPECT_FALSE(destroyed);
        // Cleanup may still suspend: the cancel was delivered once.
        weft::yield();
        weft::sleep_for(1ms);
        weft::spawn([] {}).await();
        cleanup_finished = true;
        throw;
      }
    });
    EXPECT_TRUE(yield_until([&] { return sleeping; }));
    EXPECT_FALSE(sleeper.done());
    sleeper.cancel("shutting the sleeper down");
    EXPECT_THROW(sleeper.await(), weft::cancelled_error);
  });
  EXPECT_TRUE(caught);
  EXPECT_EQ(reason, "shutting the sleeper down");
  EXPECT_TRUE(destroyed);
  EXPECT_TRUE(cleanup_finished);
  EXPECT_FALSE(after_sleep);
  // The hour-long sleep did not keep the run alive.
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST(Cancel, CoroutineMayCatchTheCancellationAndReturnNormally) {
  run_clean([] {
    bool sleeping = false;
    auto task = weft::spawn([&] {
      try {
        sleeping = true;
        weft::sleep_for(1h);
        return std::string("slept");
      } catch (const weft::cancelled_error&) {
        return std::string("gave up");
      }
    });
    yield_until([&] { return sleeping; });
    task.cancel();
    EXPECT_EQ(task.await(), "gave up");
  });
}

TEST(Cancel, ReadyOrRunningCoroutineSeesTheCancelAtItsNextSuspensionPoint) {
  std::vector<std::string> log;
  run_clean([&] {
    weft::task<void> self;
    self = weft::spawn([&] {
      log.push_back("started");
      self.cancel("cancelled myself");
      // Not interrupted while it keeps running...
      EXPECT_TRUE(weft::this_coroutine::cancel_requested());
      log.push_back("still running");
      try {
        weft::yield();  // ...but the next suspension point raises it.
        log.push_back("yield returned");
      } catch (const weft::cancelled_error& error) {
        log.push_back("cancelled: " + error.reason());
        throw;
      }
    });
    EXPECT_THROW(self.await(), weft::cancelled_error);
  });
  EXPECT_EQ(log,
            (std::vector<std::string>{"started", "still running", "cancelled: cancelled myself"}));
}

TEST(Cancel, CancellingAnAwaiterDoesNotCancelWhatItAwaits) {
  run_clean([] {
    bool waiting = false;
    auto slow = weft::spawn([] {
      weft::sleep_for(10ms);
      return 7;
    });
    auto awaiter = weft::spawn([&] {
      waiting = true;
      return slow.await();
    });
    yield_until([&] { return waiting; });
    awaiter.cancel();
    EXPECT_THROW(awaiter.await(), weft::cancelled_error);
    EXPECT_EQ(slow.await(), 7);
  });
}

TEST(Cancel, ProtectDefersTheCancelUntilItsFunctionReturns) {
  std::vector<std::string> log;
  bool protected_sleep_started = false;
  run_clean([&] {
    auto worker = weft::spawn([&] {
      const int value = weft::protect([&] {
        protected_sleep_started = true;
        weft::sleep_for(20ms);  // not interrupted by the cancel
        log.push_back(weft::this_coroutine::cancel_requested() ? "slept, cancel pending"
                                                               : "slept, no cancel");
        weft::yield();  // still protected
        log.push_back("protected body done");
        return 5;
      });
      log.push_back("protect returned " + std::to_string(value));
      try {
        weft::yield();
        log.push_back("not cancelled");
      } catch (const weft::cancelled_error& error) {
        log.push_back("cancelled after protect: " + error.reason());
        throw;
      }
    });
    yield_until([&] { return protected_sleep_started; });
    worker.cancel("stop");
    EXPECT_THROW(worker.await(), weft::cancelled_error);
  });
  EXPECT_EQ(log, (std::vector<std::string>{"slept, cancel pending", "protected body done",
                                           "protect returned 5", "cancelled after protect: stop"}));
}

TEST(Cancel, ProtectedSectionsNest) {
  std::vector<std::string> log;
  run_clean([&] {
    bool inside = false;
    auto worker = weft::spawn([&] {
      weft::protect([&] {
        weft::protect([&] {
          inside = true;
          weft::sleep_for(5ms);
        });
        weft::yield();  // the outer protect still defers it
        log.push_back("outer protect done");
      });
      try {
        weft::yield();
      } catch (const weft::cancelled_error&) {
        log.push_back("cancelled");
        throw;
      }
    });
    yield_until([&] { return inside; });
    worker.cancel();
    EXPECT_THROW(worker.await(), weft::cancelled_error);
  });
  EXPECT_EQ(log, (std::vector<std::string>{"outer protect done", "cancelled"}));
}

TEST(Cancel, CancellingAFinishedTaskIsANoOp) {
  weft::scheduler scheduler;
  weft_test::clean_end_check check(scheduler);
  scheduler.run([] {
    auto task = weft::spawn([] { return 5; });
    EXPECT_EQ(task.await(), 5);
    task.cancel("too late");
    EXPECT_TRUE(task.done());
    EXPECT_EQ(task.await(), 5);
    EXPECT_EQ(task.exception(), nullptr);

    auto failed = weft::spawn([] { throw std::runtime_error("original failure"); });
    EXPECT_THROW(failed.await(), std::runtime_error);
    failed.cancel("too late");
    try {
      failed.await();
    } catch (const std::runtime_error& error) {
      EXPECT_STREQ(error.what(), "original failure");
    }
  });
  EXPECT_EQ(scheduler.stats().cancelled, 0u);
}

TEST(Cancel, ManySuspendedCoroutinesCancelledAtOnce) {
  constexpr int count = 200;
  int cleaned = 0;
  weft::scheduler scheduler;
  weft_test::clean_end_check check(scheduler);
  scheduler.run([&] {
    int sleeping = 0;
    std::vector<weft::task<void>> tasks;
    for (int i = 0; i < count; ++i) {
      tasks.push_back(weft::spawn([&] {
        try {
          ++sleeping;
          weft::sleep_for(1h);
        } catch (const weft::cancelled_error&) {
          ++cleaned;
          throw;
        }
      }));
    }
    yield_until([&] { return sleeping == count; });
    for (auto& task : tasks) {
      task.cancel();
    }
    for (auto& task : tasks) {
      EXPECT_THROW(task.await(), weft::cancelled_error);
    }
  });
  EXPECT_EQ(cleaned, count);
  EXPECT_EQ(scheduler.stats().cancelled, static_cast<std::uint64_t>(count));
}

}  // namespace

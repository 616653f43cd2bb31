// Microtasks: small callbacks queued on the scheduler, run FIFO before the next context switch.
// Each may be cancelled through its handle (its handler then never runs, its cleanup still
// does); an exception from one stops the batch, is treated as uncaught, and run() rethrows it.
#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_support.hpp"
#include "weft/weft.hpp"

namespace {

using weft_test::run_clean;
using log_type = std::vector<std::string>;

TEST(Microtask, RunInTheOrderTheyWereAdded) {
  log_type log;
  run_clean([&] {
    weft::scheduler& scheduler = weft::current_scheduler();
    for (int i = 1; i <= 5; ++i) {
      scheduler.add_microtask([&log, i] { log.push_back("m" + std::to_string(i)); });
    }
    auto other = weft::spawn([&] { log.push_back("coroutine"); });
    other.await();
  });
  EXPECT_EQ(log, (log_type{"m1", "m2", "m3", "m4", "m5", "coroutine"}));
}

TEST(Microtask, RunBeforeTheNextSwitch) {
  log_type log;
  run_clean([&] {
    auto other = weft::spawn([&] {
      log.push_back("other starts");
      weft::current_scheduler().add_microtask([&] { log.push_back("queued by other"); });
      weft::spawn([&] { log.push_back("third"); }).await();  // a switch away from other
      log.push_back("other resumes");
    });
    weft::current_scheduler().add_microtask([&] { log.push_back("queued by main"); });
    log.push_back("main still running");
    other.await();
    log.push_back("main resumes");
  });
  EXPECT_EQ(log, (log_type{"main still running", "queued by main", "other starts",
                           "queued by other", "third", "other resumes", "main resumes"}));
}

TEST(Microtask, QueuedAsTheLastThingInTheRunStillRuns) {
  int runs = 0;
  int cleanups = 0;
  run_clean([&] { weft::current_scheduler().add_microtask([&] { ++runs; }, [&] { ++cleanups; }); });
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(cleanups, 1);
}

TEST(Microtask, CleanupRunsOnceAfterTheHandler) {
  log_type log;
  run_clean([&] {
    weft::current_scheduler().add_microtask([&] { log.push_back("handler"); },
                                            [&] { log.push_back("cleanup"); });
    weft::spawn([] {}).await();
    log.push_back("after switch");
  });
  EXPECT_EQ(log, (log_type{"handler", "cleanup", "after switch"}));
}

TEST(Microtask, CancelledMicrotaskNeverRunsButItsCleanupDoes) {
  int handler_runs = 0;
  int cleanup_runs = 0;
  int later_runs = 0;
  weft::scheduler scheduler;
  weft_test::clean_end_check check(scheduler);
  scheduler.run([&] {
    weft::scheduler& current = weft::current_scheduler();
    weft::microtask_handle handle =
        current.add_microtask([&] { ++handler_runs; }, [&] { ++cleanup_runs; });
    current.add_microtask([&] { ++later_runs; });
    EXPECT_TRUE(handle.valid());
    handle.cancel();
    handle.cancel();  // idempotent
    weft::spawn([] {}).await();
    EXPECT_EQ(later_runs, 1);
  });
  EXPECT_EQ(handler_runs, 0);
  EXPECT_EQ(cleanup_runs, 1);
  EXPECT_EQ(later_runs, 1);
  EXPECT_EQ(scheduler.stats().microtasks_run, 1u);
}

TEST(Microtask, DroppingTheHandleDoesNotCancel) {
  int runs = 0;
  run_clean([&] {
    {
      weft::microtask_handle handle = weft::current_scheduler().add_microtask([&] { ++runs; });
    }
    weft::spawn([] {}).await();
    EXPECT_EQ(runs, 1);
  });
  EXPECT_EQ(runs, 1);
}

TEST(Microtask, CancellingAfterItRanIsANoOp) {
  int runs = 0;
  int cleanups = 0;
  run_clean([&] {
    auto handle = weft::current_scheduler().add_microtask([&] { ++runs; }, [&] { ++cleanups; });
    weft::spawn([] {}).await();
    handle.cancel();
  });
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(cleanups, 1);
}

TEST(Microtask, MicrotaskAddedByAMicrotaskRuns) {
  log_type log;
  run_clean([&] {
    weft::current_scheduler().add_microtask([&] {
      log.push_back("outer");
      weft::current_scheduler().add_microtask([&] { log.push_back("inner"); });
    });
    weft::spawn([] {}).await();
    weft::spawn([] {}).await();
    log.push_back("main");
  });
  EXPECT_EQ(log, (log_type{"outer", "inner", "main"}));
}

TEST(Microtask, ExceptionStopsTheBatchTheRestStillRunAndRunRethrowsIt) {
  log_type log;
  int cleanups = 0;
  weft::scheduler scheduler;
  weft_test::clean_end_check check(scheduler);
  try {
    scheduler.run([&] {
      weft::scheduler& current = weft::current_scheduler();
      current.add_microtask([&] { log.push_back("m1"); }, [&] { ++cleanups; });
      current.add_microtask([&] { throw std::runtime_error("microtask m2 failed"); },
                            [&] { ++cleanups; });
      current.add_microtask([&] { log.push_back("m3"); }, [&] { ++cleanups; });
      try {
        weft::spawn([] {}).await();  // the batch runs before this switch
      } catch (const weft::cancelled_error&) {
        log.push_back("main cancelled");
        throw;
      }
    });
    ADD_FAILURE() << "run did not rethrow the microtask's exception";
  } catch (const std::runtime_error& error) {
    EXPECT_STREQ(error.what(), "microtask m2 failed");
  }
  // m3 was not lost: it still ran after the failed batch stopped. The failure shut the run
  // down, cancelling main at its suspension point.
  ASSERT_FALSE(log.empty());
  EXPECT_EQ(log.front(), "m1");
  EXPECT_EQ(std::count(log.begin(), log.end(), "m3"), 1);
  EXPECT_EQ(std::count(log.begin(), log.end(), "main cancelled"), 1);
  EXPECT_EQ(log.size(), 3u);
  EXPECT_EQ(cleanups, 3);
}

TEST(Microtask, RestOfAFailedBatchRunsBeforeTheNextSwitch) {
  log_type log;
  weft::scheduler scheduler(weft_test::fifo_options());
  weft_test::clean_end_check check(scheduler);
  EXPECT_THROW(scheduler.run([&] {
    // A coroutine that has started and is ready again, so the tick has a coroutine to switch
    // to right after the failing microtask.
    weft::spawn([&] {
      try {
        for (;;) {
          weft::yield();
        }
      } catch (const weft::cancelled_error&) {
        log.push_back("spinner cancelled");
        throw;
      }
    });
    weft::yield();  // the spinner starts and is ready again
    weft::scheduler& current = weft::current_scheduler();
    current.add_microtask([&] { log.push_back("m1"); });
    current.add_microtask([] { throw std::runtime_error("m2 failed"); });
    current.add_microtask([&] { log.push_back("m3"); });
    try {
      weft::yield();
    } catch (const weft::cancelled_error&) {
      log.push_back("main cancelled");
      throw;
    }
  }),
               std::runtime_error);
  ASSERT_GE(log.size(), 3u);
  EXPECT_EQ(log[0], "m1");
  EXPECT_EQ(log[1], "m3") << "the rest of the batch ran only after a switch";
}

TEST(Microtask, FailingMicrotaskCancelsSuspendedCoroutines) {
  bool sleeping = false;
  bool sleeper_cancelled = false;
  EXPECT_THROW(run_clean([&] {
                 auto sleeper = weft::spawn([&] {
                   try {
                     sleeping = true;
                     weft::sleep_for(std::chrono::hours(1));
                   } catch (const weft::cancelled_error&) {
                     sleeper_cancelled = true;
                     throw;
                   }
                 });
                 weft_test::yield_until([&] { return sleeping; });
                 weft::current_scheduler().add_microtask(
                     [] { throw std::invalid_argument("bad microtask"); });
                 sleeper.await();
               }),
               std::invalid_argument);
  EXPECT_TRUE(sleeper_cancelled);
}

}  // namespace

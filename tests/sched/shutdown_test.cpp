// Graceful shutdown: weft::graceful_shutdown() and an uncaught exception both cancel every
// coroutine (those that never started never will), let their cleanup run (it may still
// suspend), and end the run; run() rethrows the first uncaught exception.
#include <chrono>
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

struct sleeper_state {
  bool sleeping = false;
  bool caught = false;
  bool destroyed = false;
  bool cleanup_finished = false;
};

// Sleeps for an hour; on cancellation, runs a cleanup that itself suspends, then rethrows.
void sleep_with_suspending_cleanup(sleeper_state& state) {
  destructor_flag guard(state.destroyed);
  try {
    state.sleeping = true;
    weft::sleep_for(1h);
  } catch (const weft::cancelled_error&) {
    state.caught = true;
    weft::sleep_for(1ms);
    weft::yield();
    state.cleanup_finished = true;
    throw;
  }
}

TEST(Shutdown, GracefulShutdownCancelsEveryCoroutineAndLetsCleanupRun) {
  sleeper_state sleeper;
  bool late_ran = false;
  bool main_cancelled = false;
  bool shutting_down_seen = false;
  const auto start = std::chrono::steady_clock::now();
  weft::scheduler scheduler;
  weft_test::clean_end_check check(scheduler);
  scheduler.run([&] {
    weft::spawn([&] { sleep_with_suspending_cleanup(sleeper); });
    yield_until([&] { return sleeper.sleeping; });
    weft::spawn([&] { late_ran = true; });  // not started yet: never will be
    weft::current_scheduler().graceful_shutdown();
    weft::current_scheduler().graceful_shutdown();  // idempotent
    shutting_down_seen = weft::current_scheduler().shutting_down();
    try {
      weft::yield();
    } catch (const weft::cancelled_error&) {
      main_cancelled = true;
      throw;
    }
  });
  EXPECT_TRUE(shutting_down_seen);
  EXPECT_TRUE(sleeper.caught);
  EXPECT_TRUE(sleeper.cleanup_finished);
  EXPECT_TRUE(sleeper.destroyed);
  EXPECT_FALSE(late_ran);
  EXPECT_TRUE(main_cancelled);
  EXPECT_GE(scheduler.stats().never_started, 1u);
  EXPECT_EQ(scheduler.stats().cancelled, 3u);  // main, the sleeper, the late one
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST(Shutdown, FreeFunctionShutsDownFromASpawnedCoroutine) {
  sleeper_state first;
  sleeper_state second;
  bool main_cancelled = false;
  weft::scheduler scheduler;
  weft_test::clean_end_check check(scheduler);
  scheduler.run([&] {
    auto a = weft::spawn([&] { sleep_with_suspending_cleanup(first); });
    auto b = weft::spawn([&] { sleep_with_suspending_cleanup(second); });
    auto stopper = weft::spawn([&] {
      yield_until([&] { return first.sleeping && second.sleeping; });
      weft::graceful_shutdown();
    });
    try {
      a.await();
    } catch (const weft::cancelled_error&) {
      main_cancelled = true;
      throw;
    }
  });
  EXPECT_TRUE(main_cancelled);
  EXPECT_TRUE(first.cleanup_finished);
  EXPECT_TRUE(second.cleanup_finished);
}

TEST(Shutdown, ProtectedSectionFinishesBeforeTheShutdownCancelIsRaised) {
  std::vector<std::string> log;
  run_clean([&] {
    bool inside = false;
    auto worker = weft::spawn([&] {
      weft::protect([&] {
        inside = true;
        weft::sleep_for(10ms);
        log.push_back("protected work done");
      });
      try {
        weft::yield();
        log.push_back("not cancelled");
      } catch (const weft::cancelled_error&) {
        log.push_back("cancelled after protect");
        throw;
      }
    });
    yield_until([&] { return inside; });
    weft::graceful_shutdown();
    try {
      worker.await();
    } catch (const weft::cancelled_error&) {
    }
  });
  EXPECT_EQ(log, (std::vector<std::string>{"protected work done", "cancelled after protect"}));
}

TEST(Shutdown, MainMayFinishItsCleanupAfterShutdown) {
  std::vector<std::string> log;
  run_clean([&] {
    try {
      weft::graceful_shutdown();
      weft::yield();
      log.push_back("not cancelled");
    } catch (const weft::cancelled_error&) {
      log.push_back("cancelled");
      // The cancellation was delivered; cleanup may still suspend.
      weft::sleep_for(1ms);
      log.push_back("cleanup slept");
    }
  });
  EXPECT_EQ(log, (std::vector<std::string>{"cancelled", "cleanup slept"}));
}

TEST(Shutdown, MainWithAResultThatIsCancelledMakesRunThrowCancelledError) {
  // A void main cancelled by shutdown is a normal end; a main that owes a result cannot give
  // one, so run() reports the cancellation.
  try {
    run_clean([]() -> int {
      weft::graceful_shutdown();
      weft::yield();
      return 1;
    });
    ADD_FAILURE() << "run returned a result main never produced";
  } catch (const weft::cancelled_error& error) {
    EXPECT_FALSE(error.reason().empty());
  }
}

TEST(Shutdown, UncaughtExceptionInADetachedCoroutineCancelsEveryoneAndRunRethrowsTheFirst) {
  sleeper_state sleeper;
  bool second_failure_thrown = false;
  bool spawned_late_ran = false;
  bool main_cancelled = false;
  weft::scheduler scheduler;
  weft_test::clean_end_check check(scheduler);
  try {
    scheduler.run([&] {
      // Detached (the task is dropped): its exception is uncaught.
      weft::spawn([&] {
        yield_until([&] { return sleeper.sleeping; });
        weft::spawn([&] { spawned_late_ran = true; });
        throw std::runtime_error("first failure");
      });
      // Detached too; its cleanup fails as well, after the first failure: not the one rethrown.
      weft::spawn([&] {
        try {
          sleep_with_suspending_cleanup(sleeper);
        } catch (const weft::cancelled_error&) {
          second_failure_thrown = true;
          throw std::runtime_error("second failure");
        }
      });
      try {
        weft::sleep_for(1h);
      } catch (const weft::cancelled_error&) {
        main_cancelled = true;
        throw;
      }
    });
    ADD_FAILURE() << "run did not rethrow the uncaught exception";
  } catch (const std::runtime_error& error) {
    EXPECT_STREQ(error.what(), "first failure");
  }
  EXPECT_TRUE(main_cancelled);
  EXPECT_TRUE(sleeper.caught);
  EXPECT_TRUE(sleeper.cleanup_finished);
  EXPECT_TRUE(second_failure_thrown);
  EXPECT_FALSE(spawned_late_ran);
}

TEST(Shutdown, ExceptionEscapingMainPropagatesOutOfRunAfterCleanup) {
  sleeper_state sleeper;
  try {
    run_clean([&] {
      weft::spawn([&] { sleep_with_suspending_cleanup(sleeper); });
      yield_until([&] { return sleeper.sleeping; });
      throw std::invalid_argument("main failed");
    });
    ADD_FAILURE() << "run did not rethrow main's exception";
  } catch (const std::invalid_argument& error) {
    EXPECT_STREQ(error.what(), "main failed");
  }
  EXPECT_TRUE(sleeper.caught);
  EXPECT_TRUE(sleeper.cleanup_finished);
}

TEST(Shutdown, ExceptionEscapingMainWithNothingElseRunning) {
  EXPECT_THROW(run_clean([]() -> int { throw std::out_of_range("main only"); }), std::out_of_range);
}

TEST(Shutdown, DroppingTheLastHandleOfAnUnobservedFailureMakesItUncaught) {
  bool main_cancelled = false;
  try {
    run_clean([&] {
      {
        auto task = weft::spawn([] { throw std::runtime_error("nobody looked"); });
        yield_until([&] { return task.done(); });
      }  // dropped without awaiting or reading exception()
      try {
        weft::sleep_for(1h);
      } catch (const weft::cancelled_error&) {
        main_cancelled = true;
        throw;
      }
    });
    ADD_FAILURE() << "run did not rethrow the unobserved exception";
  } catch (const std::runtime_error& error) {
    EXPECT_STREQ(error.what(), "nobody looked");
  }
  EXPECT_TRUE(main_cancelled);
}

TEST(Shutdown, SchedulerCanRunAgainAfterAShutdown) {
  weft::scheduler scheduler;
  EXPECT_THROW(scheduler.run([] { throw std::runtime_error("first run fails"); }),
               std::runtime_error);
  EXPECT_EQ(scheduler.run([] { return weft::spawn([] { return 11; }).await(); }), 11);
  EXPECT_EQ(scheduler.stats().live_coroutines, 0u);
  EXPECT_FALSE(scheduler.shutting_down());
}

}  // namespace

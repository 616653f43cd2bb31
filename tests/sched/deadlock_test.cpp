// Deadlock detection: when no coroutine is ready, no microtask is queued and nothing alive in the
// reactor could wake anyone, yet coroutines are still suspended, the scheduler reports who waits
// on what, cancels all of them so their cleanup runs, and run() ends with weft::deadlock_error
// ("no active coroutines, N coroutines waiting") even if a coroutine caught the cancellation.
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include <gtest/gtest.h>

#include "test_support.hpp"
#include "weft/weft.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::destructor_flag;

// The part of a deadlock report about coroutine id: from "coroutine ID " up to the entry of the
// other coroutine of the pair (or the end of the report when that one comes first).
std::string report_entry(const std::string& report, std::uint64_t id, std::uint64_t other_id) {
  const std::size_t start = report.find("coroutine " + std::to_string(id) + " ");
  if (start == std::string::npos) {
    ADD_FAILURE() << "no entry for coroutine " << id << " in:\n" << report;
    return "";
  }
  const std::size_t end = report.find("coroutine " + std::to_string(other_id) + " ", start);
  return report.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

struct pair_outcome {
  bool alpha_caught = false;
  bool beta_caught = false;
  bool alpha_destroyed = false;
  bool beta_destroyed = false;
};

TEST(Deadlock, TwoCoroutinesAwaitingEachOtherEndTheRunWithAReport) {
  std::string reported;
  int reports = 0;
  weft::run_options options;
  options.deadlock_reporter = [&](std::string_view report) {
    reported = report;
    ++reports;
  };
  weft::scheduler scheduler(std::move(options));
  weft_test::clean_end_check check(scheduler);
  // Outside main, so they stay valid while both coroutines wait on each other after main ended.
  weft::task<void> alpha;
  weft::task<void> beta;
  pair_outcome outcome;
  int alpha_line = 0;
  int beta_line = 0;
  try {
    scheduler.run([&] {
      auto alpha_body = [&] {
        destructor_flag guard(outcome.alpha_destroyed);
        try {
          beta.await();
        } catch (const weft::cancelled_error&) {
          outcome.alpha_caught = true;
          throw;
        }
      };
      auto beta_body = [&] {
        destructor_flag guard(outcome.beta_destroyed);
        try {
          alpha.await();
        } catch (const weft::cancelled_error&) {
          outcome.beta_caught = true;
          throw;
        }
      };
      alpha_line = __LINE__ + 1;
      alpha = weft::spawn(alpha_body, {.name = "alpha"});
      beta_line = __LINE__ + 1;
      beta = weft::spawn(beta_body, {.name = "beta"});
    });
    ADD_FAILURE() << "run returned despite the deadlock";
  } catch (const weft::deadlock_error& error) {
    EXPECT_NE(std::string(error.what()).find("no active coroutines, 2 coroutines waiting"),
              std::string::npos)
        << error.what();
    EXPECT_EQ(error.waiting(), 2u);
    const std::string& report = error.report();
    EXPECT_EQ(reports, 1);
    EXPECT_EQ(reported, report);
    // Each coroutine: id, name, where it was spawned, and what it waits on (the other one).
    const std::string alpha_entry = report_entry(report, alpha.id(), beta.id());
    const std::string beta_entry = report_entry(report, beta.id(), alpha.id());
    for (const auto& [entry, expected] :
         {std::pair{alpha_entry, std::string("alpha")},
          {alpha_entry, "deadlock_test.cpp:" + std::to_string(alpha_line)},
          {alpha_entry, "task " + std::to_string(beta.id())},
          {alpha_entry, std::string("'beta'")},
          {beta_entry, std::string("beta")},
          {beta_entry, "deadlock_test.cpp:" + std::to_string(beta_line)},
          {beta_entry, "task " + std::to_string(alpha.id())},
          {beta_entry, std::string("'alpha'")}}) {
      EXPECT_NE(entry.find(expected), std::string::npos)
          << "the entry lacks '" << expected << "':\n"
          << entry << "\nfull report:\n"
          << report;
    }
  }
  EXPECT_TRUE(outcome.alpha_caught);
  EXPECT_TRUE(outcome.beta_caught);
  EXPECT_TRUE(outcome.alpha_destroyed);
  EXPECT_TRUE(outcome.beta_destroyed);
  EXPECT_EQ(scheduler.stats().deadlocks, 1u);
  ASSERT_TRUE(alpha.done());
  ASSERT_TRUE(beta.done());
  EXPECT_TRUE(alpha.exception() != nullptr);
  EXPECT_TRUE(beta.exception() != nullptr);
}

TEST(Deadlock, StillADeadlockErrorWhenTheCoroutinesSwallowTheCancellation) {
  weft::run_options options;
  std::string reported;
  options.deadlock_reporter = [&](std::string_view report) { reported = report; };
  weft::scheduler scheduler(std::move(options));
  weft_test::clean_end_check check(scheduler);
  weft::task<int> alpha;
  weft::task<int> beta;
  bool alpha_recovered = false;
  bool beta_recovered = false;
  EXPECT_THROW(scheduler.run([&] {
    alpha = weft::spawn(
        [&] {
          try {
            return beta.await();
          } catch (const weft::cancelled_error&) {
            alpha_recovered = true;
            return -1;
          }
        },
        {.name = "alpha"});
    beta = weft::spawn(
        [&] {
          try {
            return alpha.await();
          } catch (const weft::cancelled_error&) {
            beta_recovered = true;
            return -2;
          }
        },
        {.name = "beta"});
  }),
               weft::deadlock_error);
  EXPECT_TRUE(alpha_recovered);
  EXPECT_TRUE(beta_recovered);
  EXPECT_FALSE(reported.empty());
  EXPECT_EQ(alpha.exception(), nullptr);  // they ended normally, with their fallback values
  EXPECT_EQ(beta.exception(), nullptr);
}

TEST(Deadlock, MainWaitingOnADeadlockedPairCountsAsWaiting) {
  weft::run_options options;
  options.deadlock_reporter = [](std::string_view) {};
  weft::scheduler scheduler(std::move(options));
  weft_test::clean_end_check check(scheduler);
  weft::task<void> alpha;
  weft::task<void> beta;
  bool main_cancelled = false;
  try {
    scheduler.run([&] {
      alpha = weft::spawn([&] { beta.await(); }, {.name = "alpha"});
      beta = weft::spawn([&] { alpha.await(); }, {.name = "beta"});
      try {
        alpha.await();
      } catch (const weft::cancelled_error&) {
        main_cancelled = true;
        throw;
      }
    });
    ADD_FAILURE() << "run returned despite the deadlock";
  } catch (const weft::deadlock_error& error) {
    EXPECT_EQ(error.waiting(), 3u);
    EXPECT_NE(std::string(error.what()).find("no active coroutines, 3 coroutines waiting"),
              std::string::npos)
        << error.what();
    EXPECT_NE(error.report().find("main"), std::string::npos) << error.report();
  }
  EXPECT_TRUE(main_cancelled);
  EXPECT_TRUE(alpha.exception() != nullptr);
  EXPECT_TRUE(beta.exception() != nullptr);
}

TEST(Deadlock, CoroutinesInsideProtectAreCancelledToo) {
  // protect defers ordinary cancels, but nothing could ever wake these two: the run must still
  // end (instead of hanging) with deadlock_error.
  weft::run_options options;
  options.deadlock_reporter = [](std::string_view) {};
  weft::scheduler scheduler(std::move(options));
  weft_test::clean_end_check check(scheduler);
  weft::task<void> alpha;
  weft::task<void> beta;
  int cancelled = 0;
  auto body = [&](weft::task<void>& other) {
    try {
      weft::protect([&] { other.await(); });
    } catch (const weft::cancelled_error&) {
      ++cancelled;
      throw;
    }
  };
  EXPECT_THROW(scheduler.run([&] {
    alpha = weft::spawn([&] { body(beta); }, {.name = "alpha"});
    beta = weft::spawn([&] { body(alpha); }, {.name = "beta"});
  }),
               weft::deadlock_error);
  EXPECT_EQ(cancelled, 2);
  alpha.exception();  // observed
  beta.exception();
}

TEST(Deadlock, DefaultReporterWritesTheReportToStderr) {
  weft::scheduler scheduler;
  weft_test::clean_end_check check(scheduler);
  weft::task<void> alpha;
  weft::task<void> beta;
  std::string report;
  testing::internal::CaptureStderr();
  try {
    scheduler.run([&] {
      alpha = weft::spawn([&] { beta.await(); }, {.name = "stderr-alpha"});
      beta = weft::spawn([&] { alpha.await(); }, {.name = "stderr-beta"});
    });
  } catch (const weft::deadlock_error& error) {
    report = error.report();
  }
  const std::string written = testing::internal::GetCapturedStderr();
  ASSERT_FALSE(report.empty()) << "no deadlock_error";
  EXPECT_NE(written.find(report), std::string::npos) << written;
  EXPECT_NE(written.find("stderr-alpha"), std::string::npos) << written;
  alpha.exception();  // observed
  beta.exception();
}

TEST(Deadlock, SleepingCoroutineIsNotADeadlock) {
  const int result = weft_test::run_clean([] {
    auto sleeper = weft::spawn([] {
      weft::sleep_for(20ms);
      return 1;
    });
    // main waits on a coroutine that waits on a timer: everyone is suspended, but the reactor
    // holds a live timer that will wake the sleeper.
    auto waiter = weft::spawn([&] { return sleeper.await() + 1; });
    return waiter.await() + 1;
  });
  EXPECT_EQ(result, 3);
}

TEST(Deadlock, CoroutineSleepingWhileOthersWaitOnItIsNotADeadlock) {
  weft::scheduler scheduler;
  weft_test::clean_end_check check(scheduler);
  int woken = 0;
  scheduler.run([&] {
    auto sleeper = weft::spawn([] { weft::sleep_for(10ms); });
    for (int i = 0; i < 5; ++i) {
      weft::spawn([&woken, sleeper]() mutable {
        sleeper.await();
        ++woken;
      });
    }
  });
  EXPECT_EQ(woken, 5);
  EXPECT_EQ(scheduler.stats().deadlocks, 0u);
}

}  // namespace

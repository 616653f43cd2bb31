// One context switch per suspend/resume: a suspending coroutine jumps straight to the next ready
// one (never through the scheduler's own context), and a finished coroutine starts the next
// not-yet-started one on its own stack without switching at all.
#include <cstdint>

#include <gtest/gtest.h>

#include "test_support.hpp"
#include "weft/weft.hpp"

namespace {

using weft_test::fifo_options;

TEST(SwitchCount, TwoCoroutinesYieldingNTimesEachCostAboutTwoNSwitches) {
  constexpr std::uint64_t n = 1000;
  weft::scheduler scheduler(fifo_options());
  weft_test::clean_end_check check(scheduler);
  std::uint64_t before = 0;
  std::uint64_t after = 0;
  scheduler.run([&] {
    auto yielder = [] {
      for (std::uint64_t i = 0; i < n; ++i) {
        weft::yield();
      }
    };
    before = weft::current_scheduler().stats().switches;
    auto a = weft::spawn(yielder);
    auto b = weft::spawn(yielder);
    a.await();
    b.await();
    after = weft::current_scheduler().stats().switches;
  });
  const std::uint64_t switches = after - before;
  // main -> A, then A and B alternate once per yield, then back to main: 2N plus a handful.
  // Routing every suspend through the scheduler's context would cost about 4N.
  EXPECT_GE(switches, 2 * n - 2);
  EXPECT_LE(switches, 2 * n + 8);
}

TEST(SwitchCount, YieldWithNothingElseReadyDoesNotSwitch) {
  weft::scheduler scheduler;
  weft_test::clean_end_check check(scheduler);
  scheduler.run([] {
    const auto before = weft::current_scheduler().stats().switches;
    for (int i = 0; i < 100; ++i) {
      weft::yield();
    }
    EXPECT_EQ(weft::current_scheduler().stats().switches, before);
  });
}

TEST(SwitchCount, FinishedCoroutineStartsTheNextOneInPlace) {
  constexpr std::uint64_t count = 1000;
  weft::scheduler scheduler(fifo_options());
  weft_test::clean_end_check check(scheduler);
  int runs = 0;
  std::uint64_t switches_in_main = 0;
  scheduler.run([&] {
    const auto before = weft::current_scheduler().stats().switches;
    weft::task<void> last;
    for (std::uint64_t i = 0; i < count; ++i) {
      last = weft::spawn([&] { ++runs; });
    }
    last.await();
    switches_in_main = weft::current_scheduler().stats().switches - before;
  });
  EXPECT_EQ(runs, static_cast<int>(count));
  const weft::scheduler_stats& stats = scheduler.stats();
  EXPECT_EQ(stats.spawned, count + 1);
  EXPECT_EQ(stats.started, count + 1);
  // main -> first (a switch), then each finished one starts the next on its stack.
  EXPECT_GE(stats.started_in_place, count - 2);
  EXPECT_LE(switches_in_main, 4u);
  EXPECT_LE(stats.switches, 8u);
}

TEST(SwitchCount, CoroutinesSpawnedAfterMainReturnsAllStartInPlace) {
  constexpr std::uint64_t count = 500;
  weft::scheduler scheduler;
  weft_test::clean_end_check check(scheduler);
  int runs = 0;
  scheduler.run([&] {
    for (std::uint64_t i = 0; i < count; ++i) {
      weft::spawn([&] { ++runs; });
    }
  });
  EXPECT_EQ(runs, static_cast<int>(count));
  // Whatever the order, nothing ever suspends: every coroutine after main starts on the stack
  // of the one that just finished.
  EXPECT_GE(scheduler.stats().started_in_place, count - 1);
  EXPECT_LE(scheduler.stats().switches, 4u);
}

TEST(SwitchCount, AwaitingAPendingTaskCostsExactlyTwoSwitches) {
  weft::scheduler scheduler(fifo_options());
  weft_test::clean_end_check check(scheduler);
  scheduler.run([] {
    weft::scheduler& current = weft::current_scheduler();
    auto child = weft::spawn([] {
      weft::yield();  // nothing else ready: no switch
      return 3;
    });
    const auto before = current.stats().switches;
    EXPECT_EQ(child.await(), 3);  // main -> child, child ends -> main
    EXPECT_EQ(current.stats().switches - before, 2u);
  });
}

}  // namespace

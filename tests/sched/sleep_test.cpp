// Sleeping: weft::sleep_for / sleep_until suspend the coroutine on a reactor timer; sleepers wake
// in deadline order, a deadline already past does not suspend, and a busy program still notices
// its timers. Time bounds are generous on purpose: this is not a timing benchmark.
#include <chrono>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_support.hpp"
#include "weft/weft.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::run_clean;
using clock_type = std::chrono::steady_clock;
using log_type = std::vector<std::string>;

TEST(Sleep, SleepForTakesAtLeastTheDuration) {
  run_clean([] {
    const auto start = clock_type::now();
    weft::sleep_for(20ms);
    const auto elapsed = clock_type::now() - start;
    EXPECT_GE(elapsed, 20ms);
    EXPECT_LT(elapsed, 5s);
  });
}

TEST(Sleep, SleepUntilWakesAtOrAfterTheDeadline) {
  run_clean([] {
    const auto deadline = clock_type::now() + 15ms;
    weft::sleep_until(deadline);
    EXPECT_GE(clock_type::now(), deadline);
    EXPECT_LT(clock_type::now() - deadline, 5s);
  });
}

TEST(Sleep, SleepersWakeInDeadlineOrder) {
  log_type log;
  run_clean(
      [&] {
        // Deadlines fixed up front, far enough ahead that every sleeper is asleep before the first.
        const auto base = clock_type::now() + 50ms;
        auto sleeper = [&](std::string name, clock_type::time_point deadline) {
          return weft::spawn([&log, name, deadline] {
            weft::sleep_until(deadline);
            log.push_back(name);
          });
        };
        auto a = sleeper("A", base + 20ms);
        auto b = sleeper("B", base);
        auto c = sleeper("C", base + 10ms);
        auto d = sleeper("D", base + 30ms);
        a.await();
        b.await();
        c.await();
        d.await();
        EXPECT_GE(clock_type::now(), base + 30ms);
      },
      // Sleepers whose timers fire in the same reactor poll become ready together; FIFO keeps
      // them in deadline order (random order would pick among them at random).
      weft_test::fifo_options());
  EXPECT_EQ(log, (log_type{"B", "C", "A", "D"}));
}

TEST(Sleep, SleepForDurationsWakeShortestFirst) {
  log_type log;
  run_clean(
      [&] {
        std::vector<weft::task<void>> tasks;
        for (int delay_ms : {90, 30, 60}) {
          tasks.push_back(weft::spawn([&log, delay_ms] {
            weft::sleep_for(std::chrono::milliseconds(delay_ms));
            log.push_back(std::to_string(delay_ms));
          }));
        }
        for (auto& task : tasks) {
          task.await();
        }
      },
      weft_test::fifo_options());
  EXPECT_EQ(log, (log_type{"30", "60", "90"}));
}

TEST(Sleep, EqualDeadlinesWakeInTheOrderTheySleptFifo) {
  log_type log;
  run_clean(
      [&] {
        const auto deadline = clock_type::now() + 20ms;
        for (int i = 0; i < 5; ++i) {
          weft::spawn([&log, i, deadline] {
            weft::sleep_until(deadline);
            log.push_back(std::to_string(i));
          });
        }
      },
      weft_test::fifo_options());
  EXPECT_EQ(log, (log_type{"0", "1", "2", "3", "4"}));
}

TEST(Sleep, PastDeadlineOrZeroDurationReturnsWithoutSuspending) {
  run_clean([] {
    // Another coroutine is ready, so a suspension would show up as a switch.
    auto busy = weft::spawn([] {
      for (int i = 0; i < 10; ++i) {
        weft::yield();
      }
    });
    weft::scheduler& scheduler = weft::current_scheduler();
    const auto switches = scheduler.stats().switches;
    weft::sleep_until(clock_type::now() - 1s);
    weft::sleep_for(0ms);
    weft::sleep_for(-5ms);
    EXPECT_EQ(scheduler.stats().switches, switches);
    busy.await();
  });
}

TEST(Sleep, IdleSchedulerBlocksOnTheReactor) {
  weft::scheduler scheduler;
  weft_test::clean_end_check check(scheduler);
  scheduler.run([] { weft::sleep_for(10ms); });
  EXPECT_GE(scheduler.stats().reactor_waits, 1u);
}

TEST(Sleep, BusyCoroutinesStillNoticeTimers) {
  weft::scheduler scheduler;
  weft_test::clean_end_check check(scheduler);
  bool woke = false;
  scheduler.run([&] {
    auto sleeper = weft::spawn([&] {
      weft::sleep_for(5ms);
      woke = true;
    });
    // Two coroutines yielding to each other keep the scheduler busy: it must still poll the
    // reactor between switches.
    auto spinner = [&] {
      const auto limit = clock_type::now() + 10s;
      while (!woke && clock_type::now() < limit) {
        weft::yield();
      }
    };
    auto other = weft::spawn(spinner);
    spinner();
    other.await();
    sleeper.await();
  });
  EXPECT_TRUE(woke);
  EXPECT_GE(scheduler.stats().reactor_polls, 1u);
}

TEST(Sleep, ALoneYieldingCoroutineStillNoticesTimers) {
  bool woke = false;
  run_clean([&] {
    auto sleeper = weft::spawn([&] {
      weft::sleep_for(5ms);
      woke = true;
    });
    const auto limit = clock_type::now() + 10s;
    while (!woke && clock_type::now() < limit) {
      weft::yield();
    }
    EXPECT_TRUE(woke) << "a coroutine spinning on yield() starved the timer";
    sleeper.await();
  });
}

TEST(Sleep, ManySleepersAllWake) {
  int woken = 0;
  const auto start = clock_type::now();
  run_clean([&] {
    for (int i = 0; i < 1000; ++i) {
      weft::spawn([&woken, i] {
        weft::sleep_for(std::chrono::milliseconds(1 + i % 20));
        ++woken;
      });
    }
  });
  EXPECT_EQ(woken, 1000);
  EXPECT_LT(clock_type::now() - start, 5s);
}

}  // namespace

// Spawn is lazy and FIFO: a spawned coroutine starts only when its spawner suspends (or ends),
// after every coroutine queued before it.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_support.hpp"
#include "weft/weft.hpp"

namespace {

using weft_test::fifo_options;
using weft_test::run_clean;
using log_type = std::vector<std::string>;

TEST(SpawnOrder, IssueExampleInterleavesAOneBOneCOne) {
  log_type log;
  run_clean(
      [&] {
        weft::spawn([&] {
          log.push_back("A1");
          weft::yield();
          log.push_back("A2");
          weft::yield();
          log.push_back("A3");
        });
        weft::spawn([&] {
          log.push_back("B1");
          weft::yield();
          log.push_back("B2");
        });
        weft::spawn([&] { log.push_back("C1"); });
      },
      fifo_options());
  EXPECT_EQ(log, (log_type{"A1", "B1", "C1", "A2", "B2", "A3"}));
}

TEST(SpawnOrder, SameOrderWhenMainAwaitsTheTasks) {
  log_type log;
  run_clean(
      [&] {
        auto a = weft::spawn([&] {
          log.push_back("A1");
          weft::yield();
          log.push_back("A2");
          weft::yield();
          log.push_back("A3");
        });
        auto b = weft::spawn([&] {
          log.push_back("B1");
          weft::yield();
          log.push_back("B2");
        });
        auto c = weft::spawn([&] { log.push_back("C1"); });
        a.await();
        log.push_back("main");
        b.await();
        c.await();
      },
      fifo_options());
  EXPECT_EQ(log, (log_type{"A1", "B1", "C1", "A2", "B2", "A3", "main"}));
}

TEST(SpawnOrder, SpawnDoesNotStartTheCoroutineBeforeTheSpawnerSuspends) {
  log_type log;
  run_clean([&] {
    auto task = weft::spawn([&] { log.push_back("child"); });
    log.push_back("main before suspending");
    EXPECT_FALSE(task.done());
    task.await();
    log.push_back("main after await");
  });
  EXPECT_EQ(log, (log_type{"main before suspending", "child", "main after await"}));
}

TEST(SpawnOrder, MainYieldingLetsEverySpawnedCoroutineRunOnceFirst) {
  log_type log;
  run_clean(
      [&] {
        for (int i = 0; i < 3; ++i) {
          weft::spawn([&log, i] {
            log.push_back("start " + std::to_string(i));
            weft::yield();
            log.push_back("end " + std::to_string(i));
          });
        }
        weft::yield();
        log.push_back("main");
      },
      fifo_options());
  EXPECT_EQ(log, (log_type{"start 0", "start 1", "start 2", "main", "end 0", "end 1", "end 2"}));
}

TEST(SpawnOrder, CoroutineSpawnedInsideACoroutineQueuesBehindEarlierOnes) {
  log_type log;
  run_clean(
      [&] {
        weft::spawn([&] {
          log.push_back("A1");
          weft::spawn([&] {
            log.push_back("X1");
            weft::yield();
            log.push_back("X2");
          });
          weft::yield();
          log.push_back("A2");
        });
        weft::spawn([&] { log.push_back("B1"); });
      },
      fifo_options());
  // Queue after A spawns X and yields: B, X, A.
  EXPECT_EQ(log, (log_type{"A1", "B1", "X1", "A2", "X2"}));
}

TEST(SpawnOrder, NestedSpawnsAllRunExactlyOnce) {
  // A tree of coroutines, each spawning two children down to depth 6 (127 in all); every
  // coroutine runs once whatever the scheduling order.
  int runs = 0;
  struct tree {
    static void grow(int& runs, int depth) {
      ++runs;
      if (depth == 0) {
        return;
      }
      auto left = weft::spawn([&runs, depth] { grow(runs, depth - 1); });
      auto right = weft::spawn([&runs, depth] { grow(runs, depth - 1); });
      left.await();
      right.await();
    }
  };
  weft::scheduler scheduler;
  weft_test::clean_end_check check(scheduler);
  scheduler.run([&] { tree::grow(runs, 6); });
  EXPECT_EQ(runs, 127);
  EXPECT_EQ(scheduler.stats().spawned, 127u);  // main included
}

TEST(SpawnOrder, SpawnedCoroutinesRunAfterMainReturns) {
  int runs = 0;
  run_clean([&] {
    for (int i = 0; i < 10; ++i) {
      weft::spawn([&] { ++runs; });
    }
    EXPECT_EQ(runs, 0);
  });
  EXPECT_EQ(runs, 10);
}

TEST(SpawnOrder, RunReturnsTheValueOfMain) {
  EXPECT_EQ(run_clean([] { return 42; }), 42);
  EXPECT_EQ(run_clean([] { return weft::spawn([] { return std::string("from child"); }).await(); }),
            "from child");
  EXPECT_EQ(weft::run([] { return 7; }), 7);
}

TEST(SpawnOrder, CoroutineKnowsItsIdNameAndWhetherItIsMain) {
  run_clean([] {
    EXPECT_TRUE(weft::this_coroutine::is_main());
    EXPECT_EQ(weft::this_coroutine::name(), "main");
    const auto main_id = weft::this_coroutine::id();
    auto child = weft::spawn(
        [] {
          EXPECT_FALSE(weft::this_coroutine::is_main());
          EXPECT_EQ(weft::this_coroutine::name(), "worker");
          return weft::this_coroutine::id();
        },
        {.name = "worker"});
    EXPECT_EQ(child.name(), "worker");
    EXPECT_NE(child.id(), main_id);
    EXPECT_EQ(child.await(), child.id());
  });
}

}  // namespace

// Coroutine stacks: each coroutine has its own stack that survives its suspensions; stacks are
// taken lazily (a spawned coroutine has none until it starts), pooled and reused, sized by
// run_options::stacks, and cheap enough for tens of thousands of coroutines alive at once.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <gtest/gtest.h>

#include "test_support.hpp"
#include "weft/weft.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::clean_end_check;

// Fills a 1 KiB frame per level, optionally yields at the bottom, and sums the frames on the way
// back up: a corrupted or shared stack changes the sum.
[[gnu::noinline]] std::uint64_t fill_and_sum(int depth, std::uint64_t seed, bool yield_at_bottom) {
  volatile std::uint64_t frame[128];
  for (std::size_t i = 0; i < 128; ++i) {
    frame[i] = seed * 1315423911u + static_cast<std::uint64_t>(depth) * 2654435761u + i;
  }
  std::uint64_t sum = 0;
  if (depth > 0) {
    sum = fill_and_sum(depth - 1, seed, yield_at_bottom);
  } else if (yield_at_bottom) {
    weft::yield();
    weft::yield();
  }
  for (std::size_t i = 0; i < 128; ++i) {
    sum += frame[i] * (i + 1);
  }
  return sum;
}

TEST(Stack, ManyCoroutinesKeepTheirOwnDeepStacksAcrossSuspensions) {
  constexpr int coroutines = 100;
  constexpr int depth = 64;  // about 70 KiB of a 256 KiB stack
  weft::scheduler scheduler;
  clean_end_check check(scheduler);
  scheduler.run([] {
    std::vector<weft::task<std::uint64_t>> tasks;
    for (int i = 0; i < coroutines; ++i) {
      tasks.push_back(weft::spawn([i] { return fill_and_sum(depth, i, true); }));
    }
    for (int i = 0; i < coroutines; ++i) {
      EXPECT_EQ(tasks[i].await(), fill_and_sum(depth, i, false)) << "coroutine " << i;
    }
  });
  EXPECT_GE(scheduler.stats().max_live_coroutines, static_cast<std::uint64_t>(coroutines));
}

TEST(Stack, LazySpawnTakesNoStackUntilTheCoroutineStarts) {
  weft::scheduler scheduler;
  clean_end_check check(scheduler);
  scheduler.run([] {
    weft::scheduler& current = weft::current_scheduler();
    const auto allocated = current.stats().stacks_allocated;
    std::vector<weft::task<void>> tasks;
    for (int i = 0; i < 1000; ++i) {
      tasks.push_back(weft::spawn([] {}));
    }
    EXPECT_EQ(current.stats().stacks_allocated, allocated);
    EXPECT_EQ(current.stats().live_coroutines, 1001u);
    for (auto& task : tasks) {
      task.await();
    }
    // They never suspended, so each started on the stack the previous one left.
    EXPECT_LE(current.stats().stacks_allocated, allocated + 4);
  });
}

TEST(Stack, SequentialSpawnsReuseAFewPooledStacks) {
  constexpr int count = 10000;
  weft::scheduler scheduler;
  clean_end_check check(scheduler);
  int runs = 0;
  scheduler.run([&] {
    for (int i = 0; i < count; ++i) {
      // main suspends in await, so each coroutine starts on a fresh stack from the pool, not
      // in place; it goes back to the pool when the coroutine ends.
      weft::spawn([&] { ++runs; }).await();
    }
  });
  EXPECT_EQ(runs, count);
  const weft::scheduler_stats& stats = scheduler.stats();
  EXPECT_EQ(stats.started, static_cast<std::uint64_t>(count) + 1);
  // The pre-allocated floor plus main's and a couple more: not one per coroutine.
  EXPECT_LE(stats.stacks_allocated, scheduler.options().stacks.pool_floor + 8);
}

#if defined(WEFT_SANITIZE_THREAD)
// TSan keeps a fiber state of a few hundred KiB per coroutine stack: 50k of them exhaust its
// allocator, so the TSan build checks the same behaviour at a smaller scale.
constexpr int many_coroutines = 2000;
#else
constexpr int many_coroutines = 50000;
#endif

TEST(Stack, FiftyThousandSuspendedCoroutinesCancelled) {
  constexpr int count = many_coroutines;
  weft::run_options options;
  options.stacks.size = 64 * 1024;
  weft::scheduler scheduler(options);
  clean_end_check check(scheduler);
  int sleeping = 0;
  int cancelled = 0;
  const auto start = std::chrono::steady_clock::now();
  scheduler.run([&] {
    std::vector<weft::task<void>> tasks;
    tasks.reserve(count);
    for (int i = 0; i < count; ++i) {
      tasks.push_back(weft::spawn([&] {
        try {
          ++sleeping;
          weft::sleep_for(1h);
        } catch (const weft::cancelled_error&) {
          ++cancelled;
          throw;
        }
      }));
    }
    weft_test::yield_until([&] { return sleeping == count; }, 60s);
    EXPECT_EQ(weft::current_scheduler().stats().live_coroutines,
              static_cast<std::uint64_t>(count) + 1);
    for (auto& task : tasks) {
      task.cancel("test over");
    }
    for (auto& task : tasks) {
      try {
        task.await();
      } catch (const weft::cancelled_error&) {
      }
    }
  });
  EXPECT_EQ(sleeping, count);
  EXPECT_EQ(cancelled, count);
  EXPECT_GE(scheduler.stats().max_live_coroutines, static_cast<std::uint64_t>(count) + 1);
  EXPECT_EQ(scheduler.stats().cancelled, static_cast<std::uint64_t>(count));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 60s);
}

TEST(Stack, CustomStackSizeAllowsDeeperRecursion) {
  // About 640 KiB of frames: more than the default 256 KiB stack, well inside 2 MiB.
  constexpr int depth = 600;
  weft::run_options options;
  options.stacks.size = 2 * 1024 * 1024;
  options.stacks.guards = weft::guard_policy::always;
  weft::scheduler scheduler(options);
  clean_end_check check(scheduler);
  scheduler.run([] {
    auto deep = weft::spawn([] { return fill_and_sum(depth, 3, true); });
    auto other = weft::spawn([] { return fill_and_sum(depth, 4, true); });
    EXPECT_EQ(deep.await(), fill_and_sum(depth, 3, false));
    EXPECT_EQ(other.await(), fill_and_sum(depth, 4, false));
  });
  EXPECT_GE(scheduler.stats().stacks_allocated, 1u);
  EXPECT_EQ(scheduler.stats().stacks_guarded, scheduler.stats().stacks_allocated);
}

TEST(Stack, GuardPolicyNeverAllocatesNoGuardPages) {
  weft::run_options options;
  options.stacks.guards = weft::guard_policy::never;
  weft::scheduler scheduler(options);
  clean_end_check check(scheduler);
  scheduler.run([] {
    std::vector<weft::task<void>> tasks;
    for (int i = 0; i < 50; ++i) {
      tasks.push_back(weft::spawn([] { weft::yield(); }));
    }
    for (auto& task : tasks) {
      task.await();
    }
  });
  EXPECT_GE(scheduler.stats().stacks_allocated, 1u);
  EXPECT_EQ(scheduler.stats().stacks_guarded, 0u);
}

TEST(Stack, PoolKeepsAtMostPoolCapFreeStacks) {
  // stack_options::pool_cap: stacks released beyond the cap go back to the kernel.
  weft::run_options options;
  options.stacks.pool_floor = 0;
  options.stacks.pool_cap = 2;
  weft::scheduler scheduler(options);
  clean_end_check check(scheduler);
  scheduler.run([] {
    for (int round = 0; round < 3; ++round) {
      std::vector<weft::task<int>> tasks;
      for (int i = 0; i < 100; ++i) {
        tasks.push_back(weft::spawn([i] {
          weft::yield();
          return i;
        }));
      }
      for (int i = 0; i < 100; ++i) {
        EXPECT_EQ(tasks[i].await(), i);
      }
      EXPECT_LE(weft::current_scheduler().stats().stacks_pooled, 2u)
          << "round " << round << ": 100 stacks were released with pool_cap = 2";
    }
  });
}

}  // namespace

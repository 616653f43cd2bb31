// weft::spawn_thread: a scheduler on another OS thread, awaited without blocking.
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::run_clean;

TEST(SpawnThread, ReturnsTheValueOfARunOnAnotherThread) {
  run_clean([] {
    auto here = std::this_thread::get_id();
    auto remote = weft::spawn_thread([] {
      // A full scheduler of its own: coroutines, timers.
      auto half = weft::spawn([] {
        weft::sleep_for(1ms);
        return 21;
      });
      return std::pair<int, std::thread::id>(half.await() * 2, std::this_thread::get_id());
    });
    auto [value, thread] = remote.await();
    EXPECT_EQ(value, 42);
    EXPECT_NE(thread, here);
  });
}

TEST(SpawnThread, RethrowsTheThreadsException) {
  run_clean([] {
    auto failing = weft::spawn_thread([]() -> int { throw std::runtime_error("remote failure"); });
    try {
      failing.await();
      ADD_FAILURE() << "the exception should have propagated";
    } catch (const std::runtime_error& error) {
      EXPECT_STREQ(error.what(), "remote failure");
    }
  });
}

TEST(SpawnThread, TheSpawnersSchedulerKeepsRunningMeanwhile) {
  run_clean([] {
    std::atomic<bool> release{false};
    std::atomic<int> ticks{0};
    auto remote = weft::spawn_thread([&] {
      while (!release.load()) {
        weft::yield();
        std::this_thread::yield();
      }
    });
    auto ticker = weft::spawn([&] {
      while (ticks.load() < 100) {
        ++ticks;
        weft::yield();
      }
      release = true;  // only reachable if this scheduler runs while the thread is awaited
    });
    remote.await();
    ticker.await();
    EXPECT_EQ(ticks.load(), 100);
  });
}

TEST(SpawnThread, ADroppedHandleStillWaitsForItsThread) {
  std::atomic<bool> finished{false};
  run_clean([&] {
    {
      auto remote = weft::spawn_thread([&] {
        weft::sleep_for(10ms);
        finished = true;
      });
    }
    EXPECT_TRUE(finished.load()) << "dropping the handle joins the thread";
  });
}

}  // namespace

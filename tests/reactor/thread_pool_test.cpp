// weft::thread_pool::run: work off the scheduler's thread.
#include <atomic>
#include <chrono>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::run_clean;

TEST(ThreadPool, ReturnsTheValueComputedOnAnotherThread) {
  run_clean([] {
    auto loop_thread = std::this_thread::get_id();
    auto [value, worker] = weft::thread_pool::run(
        [] { return std::pair<int, std::thread::id>(6 * 7, std::this_thread::get_id()); });
    EXPECT_EQ(value, 42);
    EXPECT_NE(worker, loop_thread);
  });
}

TEST(ThreadPool, RethrowsTheJobsExceptionInTheCoroutine) {
  run_clean([] {
    try {
      weft::thread_pool::run([]() -> int { throw std::invalid_argument("bad input 17"); });
      ADD_FAILURE() << "the exception should have propagated";
    } catch (const std::invalid_argument& error) {
      EXPECT_STREQ(error.what(), "bad input 17");
    }
  });
}

TEST(ThreadPool, VoidJobsAndMoveOnlyResults) {
  run_clean([] {
    std::atomic<int> ran{0};
    weft::thread_pool::run([&] { ran = 1; });
    EXPECT_EQ(ran.load(), 1);
    auto owned = weft::thread_pool::run([] { return std::make_unique<int>(5); });
    ASSERT_NE(owned, nullptr);
    EXPECT_EQ(*owned, 5);
  });
}

TEST(ThreadPool, OtherCoroutinesRunWhileAJobBlocks) {
  // The job blocks until a coroutine on the scheduler releases it: that can only happen if the
  // scheduler keeps running coroutines while the job is out.
  run_clean([] {
    std::promise<void> release;
    std::future<void> released = release.get_future();
    auto job = weft::spawn([&] {
      return weft::thread_pool::run([&] {
        released.wait();
        return std::string("released");
      });
    });
    weft::spawn([&] {
      weft::yield();
      release.set_value();
    });
    EXPECT_EQ(job.await(), "released");
  });
}

TEST(ThreadPool, ATimeoutGivesUpButTheRunStillEndsClean) {
  // The contract under test is for a job that was already running when its caller's timeout
  // fired (one that never started is cancelled instead: the next test). On a loaded machine a
  // worker may pick the job up only after 20 ms, so a round where it had not started proves
  // nothing and is tried again with a longer limit.
  bool checked_a_started_job = false;
  for (auto limit = 20ms; !checked_a_started_job && limit <= 2560ms; limit *= 2) {
    std::promise<void> release;
    std::shared_future<void> released = release.get_future().share();
    std::atomic<bool> started{false};
    std::atomic<bool> finished{false};
    run_clean([&] {
      EXPECT_THROW(weft::thread_pool::run(
                       [&] {
                         started = true;
                         released.wait();
                         finished = true;
                       },
                       weft::timeout(limit)),
                   weft::timeout_error);
      // The job still holds a worker: let it end so run() can close the loop.
      release.set_value();
    });
    if (started.load()) {
      checked_a_started_job = true;
      EXPECT_TRUE(finished.load()) << "run() waits for the abandoned job before returning";
    }
  }
  EXPECT_TRUE(checked_a_started_job) << "no worker started the job within 2.5 s";
}

TEST(ThreadPool, ACancelledCallerWhoseJobNeverStartedMeansTheJobNeverRuns) {
  // Fill every worker with a blocked job, then queue one more and cancel its caller.
  constexpr int workers = 4;  // libuv's default pool size (UV_THREADPOOL_SIZE unset in tests)
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> started{0};
  std::atomic<bool> extra_ran{false};
  run_clean([&] {
    std::vector<weft::task<void>> blockers;
    for (int index = 0; index < workers; ++index) {
      blockers.push_back(weft::spawn([&] {
        weft::thread_pool::run([&] {
          ++started;
          released.wait();
        });
      }));
    }
    ASSERT_TRUE(weft_test::yield_until([&] { return started.load() == workers; }));
    auto extra = weft::spawn([&] { weft::thread_pool::run([&] { extra_ran = true; }); });
    weft::yield();  // extra queues its job behind the blocked ones
    extra.cancel("not needed");
    EXPECT_THROW(extra.await(), weft::cancelled_error);
    release.set_value();
    for (auto& blocker : blockers) {
      blocker.await();
    }
  });
  EXPECT_FALSE(extra_ran.load()) << "a job cancelled before it started must never run";
}

TEST(ThreadPool, OutsideACoroutineIsALogicError) {
  EXPECT_THROW(weft::thread_pool::run([] { return 1; }), std::logic_error);
}

}  // namespace

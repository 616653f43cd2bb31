// task.await(weft::timeout(d)): a time limit on an await.
#include <chrono>
#include <string>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::run_clean;

TEST(Timeout, AwaitGivesUpWithTimeoutErrorAndTheTaskKeepsRunning) {
  run_clean([] {
    auto slow = weft::spawn(
        [] {
          weft::sleep_for(200ms);
          return 7;
        },
        {.name = "slow"});
    auto start = std::chrono::steady_clock::now();
    try {
      slow.await(weft::timeout(20ms));
      ADD_FAILURE() << "the await should have timed out";
    } catch (const weft::timeout_error& error) {
      std::string message = error.what();
      EXPECT_NE(message.find("task 1 'slow'"), std::string::npos) << message;
      EXPECT_NE(message.find("timed out after 20 ms"), std::string::npos) << message;
    }
    EXPECT_GE(std::chrono::steady_clock::now() - start, 20ms);
    EXPECT_FALSE(slow.done()) << "a timed-out await leaves the task running";
    EXPECT_EQ(slow.await(), 7) << "and it can be awaited again";
  });
}

TEST(Timeout, FromCountsTheLimitFromTheGivenStart) {
  const auto start = std::chrono::steady_clock::time_point(100s);
  const auto limit = weft::timeout::from(start, 30s);
  EXPECT_TRUE(limit.bounded());
  EXPECT_EQ(limit.deadline(), start + 30s);
  EXPECT_EQ(limit.limit(), std::chrono::steady_clock::duration(30s));
  EXPECT_FALSE(weft::timeout::from(start, std::chrono::hours::max()).bounded())
      << "past the clock's end means never";
  EXPECT_EQ(weft::timeout::from(start, -5s).deadline(), start - 5s);
}

TEST(Timeout, LoopTimeIsTheLastPollNotNow) {
  const auto before = std::chrono::steady_clock::now();
  const auto outside = weft::loop_time();
  EXPECT_GE(outside, before) << "outside weft::run it is the clock";
  EXPECT_LE(outside, std::chrono::steady_clock::now());
  run_clean([] {
    const auto start = std::chrono::steady_clock::now();
    EXPECT_LE(weft::loop_time(), start);
    weft::sleep_for(10ms);  // resumed after the poll that fired its timer
    const auto polled = weft::loop_time();
    EXPECT_GE(polled, start + 10ms);
    EXPECT_LE(polled, std::chrono::steady_clock::now());
    while (std::chrono::steady_clock::now() < polled + 5ms) {
    }
    EXPECT_EQ(weft::loop_time(), polled) << "a coroutine that does not yield sees no poll";
    // A limit counted from it reads no clock, and works like any other.
    auto slow = weft::spawn([] {
      weft::sleep_for(5s);
      return 1;
    });
    EXPECT_THROW(slow.await(weft::timeout::from(weft::loop_time(), 20ms)), weft::timeout_error);
    slow.cancel();
  });
}

TEST(Timeout, AwaitWithinTheLimitReturnsTheValue) {
  run_clean([] {
    auto quick = weft::spawn([] {
      weft::yield();
      return 3;
    });
    EXPECT_EQ(quick.await(weft::timeout(5s)), 3);
  });
}

TEST(Timeout, AFinishedTaskNeverTimesOutEvenWithAPassedDeadline) {
  run_clean([] {
    auto done = weft::spawn([] { return 1; });
    ASSERT_TRUE(weft_test::yield_until([&] { return done.done(); }));
    EXPECT_EQ(done.await(weft::timeout::at(std::chrono::steady_clock::now() - 1s)), 1);
  });
}

TEST(Timeout, NeverIsAnUnboundedAwait) {
  run_clean([] {
    auto task = weft::spawn([] {
      weft::sleep_for(5ms);
      return 2;
    });
    EXPECT_FALSE(weft::timeout::never().bounded());
    EXPECT_EQ(task.await(weft::timeout::never()), 2);
  });
}

TEST(Timeout, TheTimerIsRemovedWhenTheTaskWinsSoNothingIsLeftBehind) {
  weft::scheduler scheduler;
  weft_test::clean_end_check check(scheduler);
  auto start = std::chrono::steady_clock::now();
  scheduler.run([] {
    auto quick = weft::spawn([] { weft::yield(); });
    quick.await(weft::timeout(10s));
  });
  // run() would wait for a leftover 10 s timer before returning.
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

}  // namespace

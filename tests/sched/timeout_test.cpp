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

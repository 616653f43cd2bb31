// The scheduler's edges: extreme time limits. A limit too long for the clock means "never", a
// deadline in the past means "already expired", and neither overflows (the asan preset runs
// this with UBSan, which stops the process on signed overflow).
#include <chrono>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::run_clean;
using clock_type = std::chrono::steady_clock;

template <class Body>
std::string timeout_message(Body&& body) {
  try {
    body();
  } catch (const weft::timeout_error& timed_out) {
    return timed_out.what();
  }
  ADD_FAILURE() << "the wait did not time out";
  return {};
}

TEST(SchedRobustness, TheLongestLimitsMeanNever) {
  EXPECT_FALSE(weft::timeout(std::chrono::nanoseconds::max()).bounded());
  EXPECT_FALSE(weft::timeout(std::chrono::hours::max()).bounded());
  EXPECT_FALSE(weft::timeout(clock_type::duration::max() - 1s).bounded());
  EXPECT_FALSE(weft::timeout::at(clock_type::time_point::max()).bounded());
  EXPECT_EQ(weft::timeout(std::chrono::hours::max()).limit(), clock_type::duration::max());
  // Whole units convert exactly, and saturate both ways, whatever their representation.
  EXPECT_EQ(weft::timeout(std::chrono::milliseconds(1500)).limit(), clock_type::duration(1500ms));
  EXPECT_EQ(weft::timeout(std::chrono::duration<unsigned, std::milli>(7)).limit(),
            clock_type::duration(7ms));
  EXPECT_EQ(weft::timeout(std::chrono::duration<std::uint64_t>(~std::uint64_t{0})).limit(),
            clock_type::duration::max());
  EXPECT_EQ(weft::timeout(std::chrono::hours::min()).limit(), clock_type::duration::min());
  EXPECT_EQ(weft::timeout(std::chrono::seconds(-2)).limit(), clock_type::duration(-2s));
  // A long but representable limit stays a real deadline.
  weft::timeout year(std::chrono::hours(24 * 365));
  EXPECT_TRUE(year.bounded());
  EXPECT_GT(year.deadline(), clock_type::now() + std::chrono::hours(24 * 364));
}

TEST(SchedRobustness, AnAwaitWithTheLongestLimitWaitsForTheValue) {
  run_clean([] {
    weft::promise<int> value;
    auto waiter = weft::spawn([future = value.get_future()]() mutable {
      return future.await(weft::timeout(std::chrono::nanoseconds::max()));
    });
    auto awaiting = weft::spawn([&] {
      auto slow = weft::spawn([&] {
        weft::sleep_for(2ms);
        return 1;
      });
      return slow.await(weft::timeout(std::chrono::hours::max()));
    });
    weft::sleep_for(1ms);
    EXPECT_FALSE(waiter.done()) << "a limit of nanoseconds::max() must not expire at once";
    value.set_value(9);
    EXPECT_EQ(waiter.await(), 9);
    EXPECT_EQ(awaiting.await(), 1);
  });
}

TEST(SchedRobustness, SleepingForTheLongestDurationSleepsUntilCancelled) {
  run_clean([] {
    auto sleeper = weft::spawn([] { weft::sleep_for(clock_type::duration::max()); });
    auto coarse = weft::spawn([] { weft::sleep_for(std::chrono::hours::max()); });
    auto forever = weft::spawn([] { weft::sleep_until(clock_type::time_point::max()); });
    weft::sleep_for(5ms);
    EXPECT_FALSE(sleeper.done()) << "sleep_for(duration::max()) returned at once";
    EXPECT_FALSE(coarse.done()) << "sleep_for(hours::max()) returned at once";
    EXPECT_FALSE(forever.done());
    for (auto* task : {&sleeper, &coarse, &forever}) {
      task->cancel("test over");
      EXPECT_THROW(task->await(), weft::cancelled_error);
    }
  });
}

TEST(SchedRobustness, ANegativeSleepReturnsAtOnce) {
  run_clean([] {
    auto before = clock_type::now();
    weft::sleep_for(-1h);
    weft::sleep_for(std::chrono::hours::min());
    weft::sleep_until(clock_type::time_point::min());
    EXPECT_LT(clock_type::now() - before, 5s);
  });
}

TEST(SchedRobustness, ADeadlineLongPastExpiresAtOnceWithASensibleMessage) {
  run_clean([] {
    weft::promise<int> never;
    weft::future<int> future = never.get_future();
    std::string message =
        timeout_message([&] { future.await(weft::timeout::at(clock_type::time_point::min())); });
    EXPECT_NE(message.find("deadline (time_point::min()) had already passed"), std::string::npos)
        << message;
    message = timeout_message([&] { future.await(weft::timeout(-5s)); });
    EXPECT_NE(message.find("had already passed 5000 ms before the wait began"), std::string::npos)
        << message;
    message = timeout_message([&] { future.await(weft::timeout(std::chrono::hours::min())); });
    EXPECT_NE(message.find("had already passed"), std::string::npos) << message;
    message = timeout_message([&] { future.await(weft::timeout(20ms)); });
    EXPECT_NE(message.find("timed out after 20 ms"), std::string::npos) << message;
    never.set_value(0);
  });
}

TEST(SchedRobustness, ATimerForTheLongestDurationStaysArmedAndNeverFires) {
  run_clean([] {
    weft::timer timer;
    int fired = 0;
    timer.start(clock_type::duration::max(), [&] { ++fired; });
    weft::sleep_for(5ms);
    EXPECT_TRUE(timer.armed());
    EXPECT_EQ(fired, 0);
    // A first shot soon, then a repeat too long for the clock: fires once, stays armed.
    timer.start(
        1ms, [&] { ++fired; }, clock_type::duration::max());
    weft_test::yield_until([&] { return fired == 1; });
    weft::sleep_for(5ms);
    EXPECT_EQ(fired, 1);
    EXPECT_TRUE(timer.armed());
    timer.stop();
  });
}

}  // namespace

// weft::timer: callback timers without a coroutine.
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::run_clean;

// Sleeps in short steps until condition() holds (the timers fire between the steps), failing
// after a generous limit instead of hanging.
template <class Condition>
void sleep_until_true(Condition condition) {
  auto give_up = std::chrono::steady_clock::now() + 10s;
  while (!condition() && std::chrono::steady_clock::now() < give_up) {
    weft::sleep_for(1ms);
  }
  EXPECT_TRUE(condition());
}

TEST(Timer, FiresOnceInDeadlineOrder) {
  run_clean([] {
    std::string order;
    weft::timer late;
    weft::timer early;
    late.start(20ms, [&] { order += "late "; });
    early.start(5ms, [&] { order += "early "; });
    EXPECT_TRUE(late.armed());
    sleep_until_true([&] { return order.size() == std::string("early late ").size(); });
    EXPECT_EQ(order, "early late ");
    EXPECT_FALSE(late.armed()) << "a one-shot timer is disarmed once it fired";
  });
}

TEST(Timer, RepeatsUntilStoppedFromItsOwnCallback) {
  run_clean([] {
    int fired = 0;
    weft::timer ticker;
    ticker.start(
        1ms,
        [&] {
          if (++fired == 5) {
            ticker.stop();
          }
        },
        1ms);
    sleep_until_true([&] { return fired == 5; });
    weft::sleep_for(10ms);
    EXPECT_EQ(fired, 5) << "stop() from the callback ends the repetition";
  });
}

TEST(Timer, AStoppedTimerNeverFiresAndRestartReplacesTheCallback) {
  run_clean([] {
    int first = 0;
    int second = 0;
    weft::timer once;
    once.start(5ms, [&] { ++first; });
    once.stop();
    once.start(5ms, [&] { ++second; });
    sleep_until_true([&] { return second == 1; });
    EXPECT_EQ(first, 0);
  });
}

TEST(Timer, ManyTimersAllFire) {
  constexpr int count = 100000;
  run_clean([] {
    int fired = 0;
    auto timers = std::make_unique<weft::timer[]>(count);
    for (int index = 0; index < count; ++index) {
      timers[index].start(std::chrono::microseconds(1000 + index % 10000), [&] { ++fired; });
    }
    sleep_until_true([&] { return fired == count; });
  });
}

TEST(Timer, AnExceptionFromTheCallbackIsUncaught) {
  EXPECT_THROW(run_clean([] {
                 weft::timer failing;
                 failing.start(1ms, [] { throw std::runtime_error("callback failed"); });
                 weft::sleep_for(1h);  // cancelled by the shutdown the failure starts
               }),
               std::runtime_error);
}

TEST(Timer, AnArmedTimerDoesNotKeepTheRunGoingAndOutlivesItSafely) {
  std::unique_ptr<weft::timer> leftover;
  auto start = std::chrono::steady_clock::now();
  run_clean([&] {
    leftover = std::make_unique<weft::timer>();
    leftover->start(1h, [] {});
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  EXPECT_FALSE(leftover->armed()) << "the run's end disarmed it";
  leftover.reset();  // destroying it after the run is safe
}

TEST(Timer, MisuseIsReported) {
  EXPECT_THROW(weft::timer(), std::logic_error);
  run_clean([] {
    weft::timer empty;
    EXPECT_THROW(empty.start(1ms, nullptr), std::invalid_argument);
  });
}

}  // namespace

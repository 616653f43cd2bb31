// weft::trigger: waking coroutines from other threads.
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::run_clean;

TEST(Trigger, ANotifyFromAnotherThreadWakesTheWaiterAndPublishesItsWrites) {
  run_clean([] {
    weft::trigger ready;
    int payload = 0;  // written by the thread, read by the coroutine: ordered by the trigger
    std::thread producer([&] {
      payload = 42;
      ready.notify();
    });
    ready.wait();
    EXPECT_EQ(payload, 42);
    producer.join();
  });
}

TEST(Trigger, ANotificationWithNobodyWaitingIsKeptForTheNextWait) {
  run_clean([] {
    weft::trigger ready;
    std::thread([&] { ready.notify(); }).join();
    auto start = std::chrono::steady_clock::now();
    ready.wait(weft::timeout(5s));
    EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  });
}

TEST(Trigger, OneNotifyWakesEveryWaiter) {
  run_clean([] {
    weft::trigger ready;
    int started = 0;
    int woken = 0;
    std::vector<weft::task<void>> waiters;
    for (int index = 0; index < 5; ++index) {
      waiters.push_back(weft::spawn([&] {
        ++started;  // and then waits, without suspending in between
        ready.wait();
        ++woken;
      }));
    }
    ASSERT_TRUE(weft_test::yield_until([&] { return started == 5; }));
    std::thread([&] { ready.notify(); }).join();  // one notification
    for (auto& waiter : waiters) {
      waiter.await(weft::timeout(5s));
    }
    EXPECT_EQ(woken, 5);
  });
}

TEST(Trigger, AWaitTimesOutAndTheRunEndsClean) {
  run_clean([] {
    weft::trigger never_notified;
    EXPECT_THROW(never_notified.wait(weft::timeout(10ms)), weft::timeout_error);
  });
}

TEST(Trigger, NoNotificationIsLostUnderStress) {
  // A thread bumps a counter and notifies many times; the coroutine waits until it has seen
  // them all. A lost wakeup would leave it waiting forever (the timeout turns that into a
  // failure instead of a hang).
  static constexpr int notifications = 20000;
  run_clean([] {
    weft::trigger bumped;
    std::atomic<int> counter{0};
    std::thread producer([&] {
      for (int index = 0; index < notifications; ++index) {
        counter.fetch_add(1, std::memory_order_relaxed);
        bumped.notify();
      }
    });
    while (counter.load(std::memory_order_relaxed) < notifications) {
      bumped.wait(weft::timeout(10s));
    }
    producer.join();
    EXPECT_EQ(counter.load(), notifications);
  });
}

TEST(Trigger, AWaiterIsNotADeadlockWhileAnotherThreadMayNotify) {
  run_clean([] {
    weft::trigger late;
    std::thread producer([&] {
      std::this_thread::sleep_for(20ms);  // the other thread is slow; nothing to synchronise
      late.notify();
    });
    late.wait();  // the only coroutine, waiting: not a deadlock, the trigger keeps run alive
    producer.join();
  });
}

TEST(Trigger, CreatedOutsideARunIsALogicError) { EXPECT_THROW(weft::trigger(), std::logic_error); }

}  // namespace

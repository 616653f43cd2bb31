// weft::condition_variable: producer/consumer, notify_one wakes exactly the oldest waiter,
// notify_all, timed waits, and the mutex held again however a wait ends.
#include "weft/sync/condition_variable.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_support.hpp"
#include "weft/sync/mutex.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::run_clean;
using weft_test::yield_until;

TEST(ConditionVariable, ProducerAndConsumerPassEveryValueInOrder) {
  weft::mutex guard;
  weft::condition_variable not_empty;
  weft::condition_variable not_full;
  std::deque<int> buffer;
  constexpr std::size_t capacity = 2;
  std::vector<int> received;
  run_clean([&] {
    auto consumer = weft::spawn([&] {
      for (int count = 0; count < 20; ++count) {
        std::unique_lock<weft::mutex> lock(guard);
        not_empty.wait(lock, [&] { return !buffer.empty(); });
        received.push_back(buffer.front());
        buffer.pop_front();
        not_full.notify_one();
      }
    });
    auto producer = weft::spawn([&] {
      for (int value = 0; value < 20; ++value) {
        std::unique_lock<weft::mutex> lock(guard);
        not_full.wait(lock, [&] { return buffer.size() < capacity; });
        EXPECT_LT(buffer.size(), capacity);
        buffer.push_back(value);
        not_empty.notify_one();
      }
    });
    producer.await();
    consumer.await();
  });
  std::vector<int> expected;
  for (int value = 0; value < 20; ++value) {
    expected.push_back(value);
  }
  EXPECT_EQ(received, expected);
  EXPECT_FALSE(guard.locked());
}

TEST(ConditionVariable, NotifyOneWakesExactlyTheOldestWaiter) {
  weft::mutex guard;
  weft::condition_variable changed;
  std::vector<int> woken;
  run_clean([&] {
    std::vector<weft::task<void>> waiters;
    for (int who = 0; who < 3; ++who) {
      waiters.push_back(weft::spawn([&, who] {
        std::unique_lock<weft::mutex> lock(guard);
        changed.wait(lock);
        woken.push_back(who);
      }));
      // One at a time, so that arrival order is known whatever the scheduling order.
      ASSERT_TRUE(
          yield_until([&] { return changed.waiting() == static_cast<std::size_t>(who + 1); }));
    }
    for (int round = 1; round <= 3; ++round) {
      changed.notify_one();
      EXPECT_EQ(changed.waiting(), static_cast<std::size_t>(3 - round)) << "exactly one left";
      ASSERT_TRUE(yield_until([&] { return woken.size() == static_cast<std::size_t>(round); }));
    }
    for (auto& waiter : waiters) {
      waiter.await();
    }
  });
  EXPECT_EQ(woken, (std::vector<int>{0, 1, 2}));
}

TEST(ConditionVariable, NotifyAllWakesEveryWaiterAndEachRelocksInTurn) {
  weft::mutex guard;
  weft::condition_variable changed;
  bool ready = false;
  int inside = 0;
  int most_inside = 0;
  int woken = 0;
  run_clean([&] {
    std::vector<weft::task<void>> waiters;
    for (int who = 0; who < 5; ++who) {
      waiters.push_back(weft::spawn([&] {
        std::unique_lock<weft::mutex> lock(guard);
        changed.wait(lock, [&] { return ready; });
        most_inside = std::max(most_inside, ++inside);
        weft::yield();  // still holding the mutex: the others must wait for it
        --inside;
        ++woken;
      }));
    }
    ASSERT_TRUE(yield_until([&] { return changed.waiting() == 5; }));
    {
      std::lock_guard<weft::mutex> lock(guard);
      ready = true;
      changed.notify_all();
      EXPECT_EQ(changed.waiting(), 0u);
    }
    for (auto& waiter : waiters) {
      waiter.await();
    }
  });
  EXPECT_EQ(woken, 5);
  EXPECT_EQ(most_inside, 1);
  EXPECT_FALSE(guard.locked());
}

TEST(ConditionVariable, TimedWaitsReportTheTimeoutWithTheMutexHeld) {
  weft::mutex guard;
  weft::condition_variable never_notified;
  run_clean([&] {
    std::unique_lock<weft::mutex> lock(guard);
    auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(never_notified.wait_for(lock, 5ms), std::cv_status::timeout);
    EXPECT_GE(std::chrono::steady_clock::now() - start, 5ms);
    EXPECT_TRUE(lock.owns_lock());
    EXPECT_EQ(guard.owner_id(), weft::this_coroutine::id());

    EXPECT_FALSE(never_notified.wait_for(lock, 5ms, [] { return false; }));
    EXPECT_TRUE(never_notified.wait_for(lock, 5ms, [] { return true; }));
    EXPECT_EQ(never_notified.wait_until(lock, std::chrono::system_clock::now() + 5ms),
              std::cv_status::timeout);

    try {
      never_notified.wait(lock, weft::timeout(5ms));
      ADD_FAILURE() << "the wait should have timed out";
    } catch (const weft::timeout_error& error) {
      std::string message = error.what();
      EXPECT_NE(message.find("condition_variable 0x"), std::string::npos) << message;
      EXPECT_NE(message.find("timed out after 5 ms"), std::string::npos) << message;
    }
    EXPECT_EQ(guard.owner_id(), weft::this_coroutine::id());
    EXPECT_EQ(never_notified.waiting(), 0u);
  });
  EXPECT_FALSE(guard.locked());
}

TEST(ConditionVariable, ANotifiedWaiterKeepsTheWakeEvenIfItsTimeIsNearlyUp) {
  weft::mutex guard;
  weft::condition_variable changed;
  run_clean([&] {
    auto waiter = weft::spawn([&] {
      std::unique_lock<weft::mutex> lock(guard);
      return changed.wait_for(lock, 10s);
    });
    ASSERT_TRUE(yield_until([&] { return changed.waiting() == 1; }));
    changed.notify_one();
    EXPECT_EQ(waiter.await(), std::cv_status::no_timeout);
  });
}

TEST(ConditionVariable, ACancelledWaiterHoldsTheMutexAgainBeforeTheErrorLeavesWait) {
  weft::mutex guard;
  weft::condition_variable changed;
  bool held_when_caught = false;
  run_clean([&] {
    auto waiter = weft::spawn([&] {
      std::unique_lock<weft::mutex> lock(guard);
      try {
        changed.wait(lock);
      } catch (const weft::cancelled_error&) {
        held_when_caught = lock.owns_lock() && guard.owner_id() == weft::this_coroutine::id();
        throw;
      }
    });
    ASSERT_TRUE(yield_until([&] { return changed.waiting() == 1; }));
    guard.lock();
    waiter.cancel("stop");
    // The waiter cannot finish while main holds the mutex: it queues for it first.
    ASSERT_TRUE(yield_until([&] { return guard.waiting() == 1; }));
    EXPECT_FALSE(waiter.done());
    guard.unlock();
    EXPECT_THROW(waiter.await(), weft::cancelled_error);
  });
  EXPECT_TRUE(held_when_caught);
  EXPECT_FALSE(guard.locked()) << "the waiter's unique_lock released it while unwinding";
  EXPECT_EQ(changed.waiting(), 0u);
}

TEST(ConditionVariable, ANotifyTakenByAWaiterThatIsThenCancelledIsPassedOn) {
  weft::mutex guard;
  weft::condition_variable changed;
  bool second_woken = false;
  run_clean([&] {
    auto first = weft::spawn([&] {
      std::unique_lock<weft::mutex> lock(guard);
      changed.wait(lock);
    });
    ASSERT_TRUE(yield_until([&] { return changed.waiting() == 1; }));
    auto second = weft::spawn([&] {
      std::unique_lock<weft::mutex> lock(guard);
      changed.wait(lock);
      second_woken = true;
    });
    ASSERT_TRUE(yield_until([&] { return changed.waiting() == 2; }));
    changed.notify_one();     // reaches first ...
    first.cancel("leaving");  // ... which leaves before it runs
    EXPECT_THROW(first.await(), weft::cancelled_error);
    second.await();
  });
  EXPECT_TRUE(second_woken);
  EXPECT_FALSE(guard.locked());
}

TEST(ConditionVariable, WaitingWithoutHoldingTheMutexIsALogicError) {
  weft::mutex guard;
  weft::condition_variable changed;
  run_clean([&] {
    std::unique_lock<weft::mutex> unlocked(guard, std::defer_lock);
    EXPECT_THROW(changed.wait(unlocked), std::logic_error);
    std::unique_lock<weft::mutex> empty;
    try {
      changed.wait(empty);
      ADD_FAILURE() << "expected std::logic_error";
    } catch (const std::logic_error& error) {
      EXPECT_NE(std::string(error.what()).find("holds its weft::mutex"), std::string::npos)
          << error.what();
    }
    EXPECT_EQ(changed.waiting(), 0u);
  });
}

TEST(ConditionVariable, NotifyWithNoWaiterIsNotRemembered) {
  weft::mutex guard;
  weft::condition_variable changed;
  run_clean([&] {
    changed.notify_one();
    changed.notify_all();
    std::unique_lock<weft::mutex> lock(guard);
    EXPECT_EQ(changed.wait_for(lock, 5ms), std::cv_status::timeout);
  });
}

}  // namespace

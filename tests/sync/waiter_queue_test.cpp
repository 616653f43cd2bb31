// The FIFO hand-off queue under every lock and channel: order of service, leaving by timeout or
// cancel, and a grant that races a deadline or a cancel is never lost.
#include "weft/sync/detail/waiter_queue.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::fifo_options;
using weft_test::run_clean;

// A one-permit token guarded by a waiter_queue: the smallest primitive with hand-off.
struct token {
  bool free = true;
  weft::detail::waiter_queue waiters{this, [](const void*, std::string& out) { out += "token"; }};
  std::vector<int> passed_on;

  void take(int who, const weft::timeout& limit = {}) {
    if (free && waiters.empty()) {
      free = false;
      return;
    }
    weft::detail::queued_waiter me(waiters, nullptr, static_cast<std::uintptr_t>(who));
    waiters.wait(me, limit, [&](weft::detail::queued_waiter& leaving) {
      passed_on.push_back(static_cast<int>(leaving.value));
      give();
    });
  }
  void give() {
    if (waiters.grant_front() == nullptr) {
      free = true;  // nobody waits: the token goes back on the shelf
    }
  }
};

TEST(WaiterQueue, ServesWaitersInArrivalOrderWithHandOff) {
  std::vector<int> order;
  run_clean(
      [&] {
        token shared;
        std::vector<weft::task<void>> workers;
        for (int who = 0; who < 4; ++who) {
          workers.push_back(weft::spawn([&, who] {
            for (int round = 0; round < 3; ++round) {
              shared.take(who);
              order.push_back(who);
              weft::yield();
              shared.give();
            }
          }));
        }
        for (auto& worker : workers) {
          worker.await();
        }
        EXPECT_TRUE(shared.free);
        EXPECT_TRUE(shared.waiters.empty());
      },
      fifo_options());
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3}));
}

TEST(WaiterQueue, TimedOutWaiterLeavesTheQueue) {
  run_clean([&] {
    token shared;
    shared.take(0);
    EXPECT_THROW(shared.take(1, weft::timeout(5ms)), weft::timeout_error);
    EXPECT_TRUE(shared.waiters.empty());
    shared.give();
    EXPECT_TRUE(shared.free);
  });
}

TEST(WaiterQueue, GrantThatRacesTheDeadlineWins) {
  run_clean(
      [&] {
        token shared;
        shared.take(0);
        auto waiter = weft::spawn([&] { shared.take(1, weft::timeout(20ms)); });
        weft::spawn_options urgent;
        urgent.priority = weft::priority::high;
        auto granter = weft::spawn(
            [&] {
              weft::sleep_for(10ms);
              shared.give();
            },
            urgent);
        weft::yield();  // the waiter queues, the granter sleeps
        ASSERT_EQ(shared.waiters.size(), 1u);
        // Both deadlines pass while main keeps the CPU, so one reactor poll fires both: the
        // waiter's deadline makes it ready, then the high-priority granter runs first and grants
        // to the waiter that is ready but has not run yet.
        auto until = std::chrono::steady_clock::now() + 40ms;
        while (std::chrono::steady_clock::now() < until) {
        }
        waiter.await();  // returns normally: the grant won over the deadline
        granter.await();
        EXPECT_FALSE(shared.free);
        EXPECT_TRUE(shared.waiters.empty());
        shared.give();
        EXPECT_TRUE(shared.free);
      },
      fifo_options());
}

TEST(WaiterQueue, CancelledAfterGrantPassesTheGrantOn) {
  run_clean(
      [&] {
        token shared;
        shared.take(0);
        auto first = weft::spawn([&] { shared.take(1); });
        bool second_got_it = false;
        auto second = weft::spawn([&] {
          shared.take(2);
          second_got_it = true;
          shared.give();
        });
        weft::yield();
        ASSERT_EQ(shared.waiters.size(), 2u);
        shared.give();            // granted to the first waiter ...
        first.cancel("leaving");  // ... which is cancelled before it runs
        EXPECT_THROW(first.await(), weft::cancelled_error);
        second.await();
        EXPECT_TRUE(second_got_it);
        EXPECT_EQ(shared.passed_on, (std::vector<int>{1}));
        EXPECT_TRUE(shared.free);
      },
      fifo_options());
}

// The parking path (a wait without deadline) when the tick itself wakes the waiter: nothing else
// is ready, so the tick runs a microtask, which grants (or cancels) the very coroutine that is
// parking; it must carry on without a switch.
TEST(WaiterQueue, AGrantFromTheTickWhileNothingElseIsReadyResumesTheParkingWaiter) {
  std::vector<std::string> log;
  run_clean([&] {
    token shared;
    shared.take(0);
    weft::current_scheduler().add_microtask([&] {
      log.push_back("microtask grants");
      shared.give();
    });
    log.push_back("main waits");
    shared.take(1);
    log.push_back("main has it");
    EXPECT_FALSE(shared.free);
    EXPECT_TRUE(shared.waiters.empty());
    shared.give();
    EXPECT_TRUE(shared.free);
  });
  EXPECT_EQ(log, (std::vector<std::string>{"main waits", "microtask grants", "main has it"}));
}

TEST(WaiterQueue, ACancelFromTheTickWhileNothingElseIsReadyLeavesTheQueueEmpty) {
  run_clean([&] {
    token shared;
    shared.take(0);
    weft::task<void> waiter;
    waiter = weft::spawn([&] {
      weft::current_scheduler().add_microtask([&] { waiter.cancel("from a microtask"); });
      shared.take(1);
      ADD_FAILURE() << "the cancelled take returned";
    });
    try {
      waiter.await();
      FAIL() << "expected cancelled_error";
    } catch (const weft::cancelled_error& error) {
      EXPECT_EQ(error.reason(), "from a microtask");
    }
    EXPECT_TRUE(shared.waiters.empty());    // the waiter unlinked itself while unwinding
    EXPECT_TRUE(shared.passed_on.empty());  // it was never granted
    shared.give();
    EXPECT_TRUE(shared.free);
  });
}

TEST(WaiterQueue, AWaiterCancelledWhileParkedLeavesOnlyItsOwnPlace) {
  std::vector<int> order;
  run_clean(
      [&] {
        token shared;
        shared.take(0);
        std::vector<weft::task<void>> waiters;
        for (int who = 1; who <= 3; ++who) {
          waiters.push_back(weft::spawn([&, who] {
            shared.take(who);
            order.push_back(who);
            shared.give();
          }));
        }
        weft::yield();
        ASSERT_EQ(shared.waiters.size(), 3u);
        waiters[1].cancel("not needed");
        EXPECT_THROW(waiters[1].await(), weft::cancelled_error);
        EXPECT_EQ(shared.waiters.size(), 2u);
        shared.give();
        waiters[0].await();
        waiters[2].await();
        EXPECT_TRUE(shared.passed_on.empty());
        EXPECT_TRUE(shared.free);
      },
      fifo_options());
  EXPECT_EQ(order, (std::vector<int>{1, 3}));
}

TEST(WaiterQueue, SwitchHandlersRunAroundAParkedWait) {
  std::vector<std::string> log;
  run_clean(
      [&] {
        token shared;
        shared.take(0);
        auto waiter = weft::spawn([&] {
          log.push_back("waits");
          shared.take(1);
          log.push_back("has it");
          shared.give();
        });
        waiter.on_enter([&] {
          log.push_back("enter");
          return true;
        });
        waiter.on_leave([&] {
          log.push_back("leave");
          return true;
        });
        weft::yield();
        log.push_back("main gives");
        shared.give();
        waiter.await();
      },
      fifo_options());
  EXPECT_EQ(log,
            (std::vector<std::string>{"enter", "waits", "leave", "main gives", "enter", "has it"}));
}

TEST(WaiterQueue, WaitOutsideACoroutineIsALogicError) {
  token shared;
  shared.free = false;
  try {
    shared.take(0);
    FAIL() << "expected std::logic_error";
  } catch (const std::logic_error& error) {
    EXPECT_NE(std::string(error.what()).find("token outside a coroutine"), std::string::npos)
        << error.what();
  }
}

}  // namespace

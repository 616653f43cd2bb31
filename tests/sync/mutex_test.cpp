// weft::mutex: FIFO service with hand-off, no barging, leaving by timeout or cancel, misuse
// errors, the std lock wrappers and the deadlock report.
#include "weft/sync/mutex.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "test_support.hpp"
#include "weft/sync/event.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::fifo_options;
using weft_test::run_clean;
using weft_test::yield_until;

std::string address_of(const void* object) {
  char text[32];
  std::snprintf(text, sizeof text, "%p", object);
  return text;
}

// Asserts that calling fn throws std::logic_error whose message contains every fragment.
template <class Function>
void expect_logic_error(Function&& fn, const std::vector<std::string>& fragments) {
  try {
    fn();
    ADD_FAILURE() << "expected std::logic_error";
  } catch (const std::logic_error& error) {
    for (const std::string& fragment : fragments) {
      EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos)
          << "'" << fragment << "' not in: " << error.what();
    }
  }
}

TEST(Mutex, ServesWaitersInArrivalOrder) {
  std::vector<int> order;
  weft::mutex shared;
  run_clean(
      [&] {
        std::vector<weft::task<void>> workers;
        for (int who = 0; who < 6; ++who) {
          workers.push_back(weft::spawn([&, who] {
            for (int round = 0; round < 3; ++round) {
              shared.lock();
              order.push_back(who);
              weft::yield();  // hold it across a switch, so everyone else queues
              shared.unlock();
            }
          }));
        }
        for (auto& worker : workers) {
          worker.await();
        }
      },
      fifo_options());
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5}));
  EXPECT_FALSE(shared.locked());
  EXPECT_EQ(shared.waiting(), 0u);
}

TEST(Mutex, AnUnlockerThatLocksAgainQueuesBehindTheWaiter) {
  std::string order;
  weft::mutex shared;
  run_clean(
      [&] {
        auto looper = [&](char name) {
          for (int round = 0; round < 4; ++round) {
            shared.lock();
            order += name;
            weft::yield();
            // Unlock then lock again at once: the mutex already belongs to the other waiter.
            shared.unlock();
          }
        };
        auto a = weft::spawn([&] { looper('A'); });
        auto b = weft::spawn([&] { looper('B'); });
        a.await();
        b.await();
      },
      fifo_options());
  EXPECT_EQ(order, "ABABABAB");
  EXPECT_FALSE(shared.locked());
}

TEST(Mutex, OwnershipPassesAtUnlockBeforeTheWaiterRuns) {
  weft::mutex shared;
  run_clean([&] {
    shared.lock();
    auto waiter = weft::spawn([&] {
      shared.lock();
      shared.unlock();
    });
    ASSERT_TRUE(yield_until([&] { return shared.waiting() == 1; }));
    shared.unlock();
    EXPECT_EQ(shared.owner_id(), waiter.id()) << "the waiter owns it before it has run";
    EXPECT_FALSE(shared.try_lock()) << "so the unlocker cannot take it back";
    waiter.await();
    EXPECT_FALSE(shared.locked());
  });
}

TEST(Mutex, AWaiterGrantedThenCancelledPassesTheMutexOn) {
  weft::mutex shared;
  bool second_got_it = false;
  run_clean([&] {
    shared.lock();
    auto first = weft::spawn([&] {
      shared.lock();
      shared.unlock();
    });
    ASSERT_TRUE(yield_until([&] { return shared.waiting() == 1; }));
    auto second = weft::spawn([&] {
      std::lock_guard<weft::mutex> hold(shared);
      second_got_it = true;
    });
    ASSERT_TRUE(yield_until([&] { return shared.waiting() == 2; }));
    shared.unlock();          // granted to first ...
    first.cancel("leaving");  // ... which is cancelled before it runs
    EXPECT_THROW(first.await(), weft::cancelled_error);
    second.await();
  });
  EXPECT_TRUE(second_got_it);
  EXPECT_FALSE(shared.locked());
  EXPECT_EQ(shared.waiting(), 0u);
}

TEST(Mutex, LockTimesOutLeavingTheMutexAsItWas) {
  weft::mutex shared;
  run_clean([&] {
    shared.lock();
    auto start = std::chrono::steady_clock::now();
    auto waiter = weft::spawn([&] {
      try {
        shared.lock(weft::timeout(10ms));
        ADD_FAILURE() << "the lock should have timed out";
      } catch (const weft::timeout_error& error) {
        std::string message = error.what();
        EXPECT_NE(message.find("mutex " + address_of(&shared) + " held by task 0 'main'"),
                  std::string::npos)
            << message;
        EXPECT_NE(message.find("timed out after 10 ms"), std::string::npos) << message;
      }
      EXPECT_FALSE(shared.try_lock_for(5ms));
    });
    waiter.await();
    EXPECT_GE(std::chrono::steady_clock::now() - start, 15ms);
    EXPECT_EQ(shared.owner_id(), 0u) << "main still holds it";
    EXPECT_EQ(shared.waiting(), 0u);
    shared.unlock();
    EXPECT_FALSE(shared.locked());
  });
}

TEST(Mutex, ATimedOutWaiterDoesNotDisturbTheOthersOrder) {
  weft::mutex shared;
  std::vector<std::string> served;
  run_clean([&] {
    shared.lock();
    auto first = weft::spawn([&] {
      std::lock_guard<weft::mutex> hold(shared);
      served.push_back("first");
    });
    ASSERT_TRUE(yield_until([&] { return shared.waiting() == 1; }));
    auto impatient =
        weft::spawn([&] { EXPECT_THROW(shared.lock(weft::timeout(5ms)), weft::timeout_error); });
    ASSERT_TRUE(yield_until([&] { return shared.waiting() == 2; }));
    auto last = weft::spawn([&] {
      std::lock_guard<weft::mutex> hold(shared);
      served.push_back("last");
    });
    ASSERT_TRUE(yield_until([&] { return shared.waiting() == 3; }));
    impatient.await();
    EXPECT_EQ(shared.waiting(), 2u);
    shared.unlock();
    first.await();
    last.await();
  });
  EXPECT_EQ(served, (std::vector<std::string>{"first", "last"}));
  EXPECT_FALSE(shared.locked());
}

TEST(Mutex, TryLockTakesOnlyAFreeMutex) {
  weft::mutex shared;
  run_clean([&] {
    EXPECT_TRUE(shared.try_lock());
    EXPECT_EQ(shared.owner_id(), 0u);
    auto other = weft::spawn([&] { return shared.try_lock(); });
    EXPECT_FALSE(other.await());
    shared.unlock();
    EXPECT_TRUE(shared.try_lock_for(1ms)) << "a free mutex is taken at once";
    shared.unlock();
    EXPECT_TRUE(shared.try_lock_until(std::chrono::system_clock::now() + 1s));
    shared.unlock();
  });
  EXPECT_FALSE(shared.owner_id().has_value());
}

TEST(Mutex, UnlockByAnotherCoroutineIsALogicErrorNamingBoth) {
  weft::mutex shared;
  run_clean([&] {
    shared.lock();
    auto intruder = weft::spawn(
        [&] {
          expect_logic_error([&] { shared.unlock(); },
                             {"mutex " + address_of(&shared), "task 1 'intruder' unlocks",
                              "held by task 0 'main'", "only the coroutine that locked"});
        },
        {.name = "intruder"});
    intruder.await();
    EXPECT_EQ(shared.owner_id(), 0u) << "the failed unlock changed nothing";
    shared.unlock();
  });
}

TEST(Mutex, UnlockOfAnUnlockedMutexIsALogicError) {
  weft::mutex shared;
  run_clean([&] { expect_logic_error([&] { shared.unlock(); }, {"task 0 'main'", "not locked"}); });
}

TEST(Mutex, RelockingByTheOwnerIsALogicErrorInsteadOfAHang) {
  weft::mutex shared;
  run_clean([&] {
    auto owner = weft::spawn(
        [&] {
          std::lock_guard<weft::mutex> hold(shared);
          expect_logic_error([&] { shared.lock(); }, {"task 1 'owner'", "already holds"});
          expect_logic_error([&] { (void)shared.try_lock(); }, {"already holds"});
        },
        {.name = "owner"});
    owner.await();
  });
  EXPECT_FALSE(shared.locked());
}

TEST(Mutex, LockingOutsideACoroutineIsALogicError) {
  weft::mutex shared;
  expect_logic_error([&] { shared.lock(); }, {"outside a coroutine"});
  expect_logic_error([&] { shared.unlock(); }, {"outside a coroutine"});
}

TEST(Mutex, WorksWithTheStdLockWrappers) {
  weft::mutex first_mutex;
  weft::mutex second_mutex;
  int inside = 0;
  int most_inside = 0;
  int total = 0;
  run_clean([&] {
    std::vector<weft::task<void>> workers;
    for (int worker = 0; worker < 4; ++worker) {
      workers.push_back(weft::spawn([&] {
        for (int round = 0; round < 5; ++round) {
          std::scoped_lock both(first_mutex, second_mutex);
          most_inside = std::max(most_inside, ++inside);
          weft::yield();
          --inside;
          ++total;
        }
      }));
    }
    for (auto& worker : workers) {
      worker.await();
    }
    {
      std::unique_lock<weft::mutex> hold(first_mutex);
      EXPECT_TRUE(hold.owns_lock());
      auto other = weft::spawn([&] {
        std::unique_lock<weft::mutex> tried(first_mutex, std::try_to_lock);
        EXPECT_FALSE(tried.owns_lock());
        std::unique_lock<weft::mutex> timed(first_mutex, 5ms);
        EXPECT_FALSE(timed.owns_lock());
      });
      other.await();
      hold.unlock();
      EXPECT_FALSE(first_mutex.locked());
    }
  });
  EXPECT_EQ(most_inside, 1);
  EXPECT_EQ(total, 20);
  EXPECT_FALSE(first_mutex.locked());
  EXPECT_FALSE(second_mutex.locked());
}

TEST(Mutex, DeadlockReportNamesTheMutexItsOwnerAndItsWaiters) {
  weft::mutex shared;
  weft::event never_set;
  std::string report;
  std::uint64_t writer_id = 0;
  weft::run_options options = fifo_options();
  options.deadlock_reporter = [&](std::string_view text) { report = text; };
  EXPECT_THROW(run_clean(
                   [&] {
                     auto writer = weft::spawn(
                         [&] {
                           std::lock_guard<weft::mutex> hold(shared);
                           never_set.wait();
                         },
                         {.name = "writer"});
                     writer_id = writer.id();
                     auto reader = [&] { std::lock_guard<weft::mutex> hold(shared); };
                     auto first = weft::spawn(reader, {.name = "reader"});
                     auto second = weft::spawn(reader, {.name = "reader"});
                     first.await();
                     second.await();
                     writer.await();
                   },
                   options),
               weft::deadlock_error);
  std::string expected = "mutex " + address_of(&shared) + " held by task " +
                         std::to_string(writer_id) + " 'writer', 2 waiting";
  EXPECT_NE(report.find(expected), std::string::npos) << report;
  EXPECT_FALSE(shared.locked()) << "the cancelled coroutines released and passed it on";
  EXPECT_EQ(shared.waiting(), 0u);
}

}  // namespace

// --- lock_all ------------------------------------------------------------------------------------

TEST(LockAll, CoroutinesNamingTheSameMutexesInOppositeOrdersAllFinish) {
  // With std::scoped_lock of two hand-off mutexes these two can hand the locks round forever;
  // lock_all takes them in one order whatever order they are named in.
  weft::mutex accounts;
  weft::mutex ledger;
  int both_held = 0;
  run_clean([&] {
    auto forward = weft::spawn([&] {
      for (int round = 0; round < 200; ++round) {
        weft::mutex* pair[] = {&accounts, &ledger};
        weft::lock_all(pair);
        ++both_held;
        weft::yield();  // hold both across a switch
        weft::unlock_all(pair);
        weft::yield();
      }
    });
    auto backward = weft::spawn([&] {
      for (int round = 0; round < 200; ++round) {
        weft::scoped_lock_all guard(ledger, accounts);
        EXPECT_TRUE(accounts.locked() && ledger.locked());
        ++both_held;
        weft::yield();
      }
    });
    forward.await();
    backward.await();
  });
  EXPECT_EQ(both_held, 400);
  EXPECT_FALSE(accounts.locked());
  EXPECT_FALSE(ledger.locked());
}

// The mutexes as lock_all orders them: lower address first.
std::pair<weft::mutex*, weft::mutex*> in_address_order(weft::mutex& one, weft::mutex& other) {
  return std::less<weft::mutex*>()(&one, &other) ? std::pair{&one, &other}
                                                 : std::pair{&other, &one};
}

// From inside a run: a coroutine that holds `held` until `release` is set, started and holding.
weft::task<void> hold_until(weft::mutex& held, weft::event& release) {
  auto holder = weft::spawn([&] {
    std::lock_guard<weft::mutex> hold(held);
    release.wait();
  });
  EXPECT_TRUE(yield_until([&] { return held.locked(); }));
  return holder;
}

TEST(LockAll, ATimeoutOnALaterMutexReleasesTheOnesAlreadyTaken) {
  weft::mutex one;
  weft::mutex other;
  auto [first, second] = in_address_order(one, other);
  run_clean([&, first = first, second = second] {
    weft::event release;
    auto holder = hold_until(*second, release);
    ASSERT_TRUE(second->locked());
    weft::mutex* both[] = {&one, &other};
    EXPECT_THROW(weft::lock_all(both, weft::timeout(10ms)), weft::timeout_error);
    EXPECT_FALSE(first->locked()) << "lock_all holds all or none";
    EXPECT_EQ(second->waiting(), 0u);
    release.set();
    holder.await();
  });
  EXPECT_FALSE(one.locked());
  EXPECT_FALSE(other.locked());
}

TEST(LockAll, ACancelWhileWaitingReleasesTheOnesAlreadyTaken) {
  weft::mutex one;
  weft::mutex other;
  auto [first, second] = in_address_order(one, other);
  run_clean([&, first = first, second = second] {
    weft::event release;
    auto holder = hold_until(*second, release);
    ASSERT_TRUE(second->locked());
    auto waiter = weft::spawn([&] { weft::scoped_lock_all guard(one, other); });
    ASSERT_TRUE(yield_until([&] { return second->waiting() == 1; }));
    EXPECT_TRUE(first->locked()) << "the waiter took the first mutex before waiting";
    waiter.cancel("giving up");
    EXPECT_THROW(waiter.await(), weft::cancelled_error);
    EXPECT_FALSE(first->locked()) << "a cancelled lock_all releases what it took";
    release.set();
    holder.await();
  });
  EXPECT_FALSE(one.locked());
  EXPECT_FALSE(other.locked());
}

TEST(LockAll, NamingAMutexTwiceOrANullIsALogicErrorAndTakesNothing) {
  weft::mutex shared;
  weft::mutex spare;
  run_clean([&] {
    weft::mutex* twice[] = {&spare, &shared, &shared};
    expect_logic_error([&] { weft::lock_all(twice); },
                       {"weft::lock_all", address_of(&shared), "named twice"});
    weft::mutex* with_null[] = {&shared, nullptr};
    expect_logic_error([&] { weft::lock_all(with_null); }, {"weft::lock_all", "null mutex"});
    EXPECT_FALSE(shared.locked());
    EXPECT_FALSE(spare.locked());
  });
}

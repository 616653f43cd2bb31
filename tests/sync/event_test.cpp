// weft::event (manual reset): set releases every waiter, clear makes waits wait again, a set is
// never missed by a coroutine that waited through it, timeouts and cancellation.
#include "weft/sync/event.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::run_clean;
using weft_test::yield_until;

TEST(Event, SetReleasesEveryWaiterAndLaterWaitsPassAtOnce) {
  weft::event started;
  int released = 0;
  run_clean([&] {
    std::vector<weft::task<void>> waiters;
    for (int waiter = 0; waiter < 5; ++waiter) {
      waiters.push_back(weft::spawn([&] {
        started.wait();
        ++released;
      }));
    }
    ASSERT_TRUE(yield_until([&] { return started.waiting() == 5; }));
    EXPECT_FALSE(started.is_set());
    EXPECT_EQ(released, 0);
    started.set();
    EXPECT_TRUE(started.is_set());
    EXPECT_EQ(started.waiting(), 0u);
    for (auto& waiter : waiters) {
      waiter.await();
    }
    started.wait(weft::timeout(0ms));  // set: passes without waiting
  });
  EXPECT_EQ(released, 5);
}

TEST(Event, ClearMakesWaitsWaitAgain) {
  weft::event ready(true);
  run_clean([&] {
    EXPECT_TRUE(ready.is_set());
    ready.wait();
    ready.clear();
    EXPECT_FALSE(ready.is_set());
    auto start = std::chrono::steady_clock::now();
    try {
      ready.wait(weft::timeout(5ms));
      ADD_FAILURE() << "the wait should have timed out";
    } catch (const weft::timeout_error& error) {
      std::string message = error.what();
      EXPECT_NE(message.find("event 0x"), std::string::npos) << message;
      EXPECT_NE(message.find("not set"), std::string::npos) << message;
      EXPECT_NE(message.find("timed out after 5 ms"), std::string::npos) << message;
    }
    EXPECT_GE(std::chrono::steady_clock::now() - start, 5ms);
    EXPECT_EQ(ready.waiting(), 0u);
    auto waiter = weft::spawn([&] { ready.wait(); });
    ASSERT_TRUE(yield_until([&] { return ready.waiting() == 1; }));
    ready.set();
    waiter.await();
  });
}

TEST(Event, ASetFollowedByAClearStillReleasesThoseThatWaited) {
  weft::event pulse;
  run_clean([&] {
    auto waiter = weft::spawn([&] { pulse.wait(); });
    ASSERT_TRUE(yield_until([&] { return pulse.waiting() == 1; }));
    pulse.set();
    pulse.clear();  // before the waiter has run
    waiter.await();
    EXPECT_FALSE(pulse.is_set());
  });
}

TEST(Event, ACancelledWaiterLeavesAndTheOthersAreStillReleased) {
  weft::event go;
  run_clean([&] {
    auto leaving = weft::spawn([&] { go.wait(); });
    auto staying = weft::spawn([&] { go.wait(); });
    ASSERT_TRUE(yield_until([&] { return go.waiting() == 2; }));
    leaving.cancel("stop");
    EXPECT_THROW(leaving.await(), weft::cancelled_error);
    EXPECT_EQ(go.waiting(), 1u);
    go.set();
    staying.await();
  });
  EXPECT_EQ(go.waiting(), 0u);
}

TEST(Event, SetIsIdempotent) {
  weft::event done;
  run_clean([&] {
    done.set();
    done.set();
    EXPECT_TRUE(done.is_set());
    done.wait();
  });
}

}  // namespace

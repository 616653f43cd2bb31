// weft::semaphore: FIFO service whatever the request sizes, hand-off of permits, leaving by
// timeout or cancel with the count balanced, argument checks.
#include "weft/sync/semaphore.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::fifo_options;
using weft_test::run_clean;
using weft_test::yield_until;

TEST(Semaphore, LimitsHowManyRunAtOnceAndTheCountBalances) {
  weft::semaphore slots(2);
  int inside = 0;
  int most_inside = 0;
  run_clean([&] {
    std::vector<weft::task<void>> workers;
    for (int worker = 0; worker < 6; ++worker) {
      workers.push_back(weft::spawn([&] {
        for (int round = 0; round < 3; ++round) {
          slots.acquire();
          most_inside = std::max(most_inside, ++inside);
          weft::yield();
          --inside;
          slots.release();
        }
      }));
    }
    for (auto& worker : workers) {
      worker.await();
    }
  });
  EXPECT_EQ(most_inside, 2);
  EXPECT_EQ(slots.count(), 2u);
  EXPECT_EQ(slots.waiting(), 0u);
}

TEST(Semaphore, ServesWaitersInArrivalOrder) {
  weft::semaphore slots(1);
  std::vector<int> order;
  run_clean(
      [&] {
        std::vector<weft::task<void>> workers;
        for (int who = 0; who < 4; ++who) {
          workers.push_back(weft::spawn([&, who] {
            for (int round = 0; round < 2; ++round) {
              slots.acquire();
              order.push_back(who);
              weft::yield();
              slots.release();  // and acquire again at once: queues behind the others
            }
          }));
        }
        for (auto& worker : workers) {
          worker.await();
        }
      },
      fifo_options());
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 0, 1, 2, 3}));
  EXPECT_EQ(slots.count(), 1u);
}

TEST(Semaphore, ABigRequestAtTheHeadIsNotOvertakenBySmallOnes) {
  weft::semaphore permits(0);
  std::vector<std::string> served;
  run_clean([&] {
    auto big = weft::spawn([&] {
      permits.acquire(3);
      served.push_back("big");
    });
    ASSERT_TRUE(yield_until([&] { return permits.waiting() == 1; }));
    auto small = [&] {
      permits.acquire(1);
      served.push_back("small");
    };
    auto first_small = weft::spawn(small);
    ASSERT_TRUE(yield_until([&] { return permits.waiting() == 2; }));
    auto second_small = weft::spawn(small);
    ASSERT_TRUE(yield_until([&] { return permits.waiting() == 3; }));

    permits.release(2);  // enough for both small ones, but the big one is first
    EXPECT_EQ(permits.count(), 2u);
    EXPECT_EQ(permits.waiting(), 3u);
    EXPECT_FALSE(permits.try_acquire(1)) << "no barging past the queue either";

    permits.release(1);  // the big one takes all three
    EXPECT_EQ(permits.count(), 0u);
    big.await();
    EXPECT_EQ(served, (std::vector<std::string>{"big"}));

    permits.release(2);
    first_small.await();
    second_small.await();
  });
  EXPECT_EQ(served, (std::vector<std::string>{"big", "small", "small"}));
  EXPECT_EQ(permits.count(), 0u);
}

TEST(Semaphore, AWaiterGrantedThenCancelledGivesItsPermitsToTheNext) {
  weft::semaphore permits(0);
  run_clean([&] {
    auto first = weft::spawn([&] { permits.acquire(2); });
    ASSERT_TRUE(yield_until([&] { return permits.waiting() == 1; }));
    auto second = weft::spawn([&] {
      permits.acquire(1);
      permits.release(1);
    });
    ASSERT_TRUE(yield_until([&] { return permits.waiting() == 2; }));
    permits.release(2);  // both permits handed to first ...
    EXPECT_EQ(permits.count(), 0u);
    first.cancel("leaving");  // ... which is cancelled before it runs
    EXPECT_THROW(first.await(), weft::cancelled_error);
    second.await();
  });
  EXPECT_EQ(permits.count(), 2u) << "every permit released is back";
  EXPECT_EQ(permits.waiting(), 0u);
}

TEST(Semaphore, AHeadThatTimesOutLetsTheSmallerRequestsBehindItThrough) {
  weft::semaphore permits(1);
  run_clean([&] {
    auto big = weft::spawn([&] {
      try {
        permits.acquire(3, weft::timeout(10ms));
        ADD_FAILURE() << "the acquire should have timed out";
      } catch (const weft::timeout_error& error) {
        std::string message = error.what();
        EXPECT_NE(message.find("semaphore"), std::string::npos) << message;
        EXPECT_NE(message.find("timed out after 10 ms"), std::string::npos) << message;
      }
    });
    ASSERT_TRUE(yield_until([&] { return permits.waiting() == 1; }));
    auto small = weft::spawn([&] { permits.acquire(1); });
    ASSERT_TRUE(yield_until([&] { return permits.waiting() == 2; }));
    big.await();
    small.await();  // served when the big request left, with nothing released meanwhile
    EXPECT_EQ(permits.count(), 0u);
    permits.release(1);
  });
  EXPECT_EQ(permits.count(), 1u);
  EXPECT_EQ(permits.waiting(), 0u);
}

TEST(Semaphore, AcquireTimesOutTakingNothing) {
  weft::semaphore permits(0);
  run_clean([&] {
    auto start = std::chrono::steady_clock::now();
    EXPECT_THROW(permits.acquire(weft::timeout(5ms)), weft::timeout_error);
    EXPECT_GE(std::chrono::steady_clock::now() - start, 5ms);
    EXPECT_EQ(permits.waiting(), 0u);
    permits.release();
    EXPECT_EQ(permits.count(), 1u);
    permits.acquire(weft::timeout(5ms));  // a free permit is taken at once
  });
  EXPECT_EQ(permits.count(), 0u);
}

TEST(Semaphore, TryAcquireNeverWaits) {
  weft::semaphore permits(3);
  run_clean([&] {
    EXPECT_TRUE(permits.try_acquire(2));
    EXPECT_FALSE(permits.try_acquire(2));
    EXPECT_TRUE(permits.try_acquire());
    EXPECT_EQ(permits.count(), 0u);
    permits.release(3);
  });
  EXPECT_EQ(permits.count(), 3u);
}

TEST(Semaphore, RejectsRequestsThatCouldNeverBeMeaningful) {
  EXPECT_THROW(weft::semaphore(3, 2), std::invalid_argument);
  EXPECT_THROW(weft::semaphore(0, 0), std::invalid_argument);
  weft::semaphore permits(1, 4);
  run_clean([&] {
    EXPECT_THROW(permits.acquire(0), std::invalid_argument);
    EXPECT_THROW((void)permits.try_acquire(0), std::invalid_argument);
    EXPECT_THROW(permits.release(0), std::invalid_argument);
    try {
      permits.acquire(5);
      ADD_FAILURE() << "expected std::invalid_argument";
    } catch (const std::invalid_argument& error) {
      EXPECT_NE(std::string(error.what()).find("acquire(5) exceeds the semaphore's max of 4"),
                std::string::npos)
          << error.what();
    }
    try {
      permits.release(4);
      ADD_FAILURE() << "expected std::logic_error";
    } catch (const std::logic_error& error) {
      EXPECT_NE(std::string(error.what())
                    .find("release(4) would raise the count from 1 past its "
                          "max of 4"),
                std::string::npos)
          << error.what();
    }
    EXPECT_EQ(permits.count(), 1u) << "a rejected call changes nothing";
    EXPECT_EQ(permits.waiting(), 0u);
  });
}

TEST(Semaphore, DeadlockReportShowsTheSemaphore) {
  weft::semaphore permits(0);
  std::string report;
  weft::run_options options;
  options.deadlock_reporter = [&](std::string_view text) { report = text; };
  EXPECT_THROW(run_clean([&] { permits.acquire(2); }, options), weft::deadlock_error);
  EXPECT_NE(report.find("semaphore 0x"), std::string::npos) << report;
  EXPECT_NE(report.find("(count 0, 1 waiting, the oldest for 2 permits)"), std::string::npos)
      << report;
  EXPECT_EQ(permits.waiting(), 0u);
}

}  // namespace

// weft::wait_group: many waiters released together at zero, misuse below zero, timeouts.
#include "weft/sync/wait_group.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::run_clean;
using weft_test::yield_until;

TEST(WaitGroup, EveryWaiterIsReleasedWhenTheLastJobIsDone) {
  weft::wait_group jobs;
  int finished_jobs = 0;
  std::vector<int> seen_by_waiters;
  run_clean([&] {
    jobs.add(3);
    std::vector<weft::task<void>> waiters;
    for (int waiter = 0; waiter < 4; ++waiter) {
      waiters.push_back(weft::spawn([&] {
        jobs.wait();
        seen_by_waiters.push_back(finished_jobs);
      }));
    }
    std::vector<weft::task<void>> workers;
    for (int worker = 0; worker < 3; ++worker) {
      workers.push_back(weft::spawn([&] {
        weft::yield();
        ++finished_jobs;
        jobs.done();
      }));
    }
    jobs.wait();
    EXPECT_EQ(finished_jobs, 3);
    for (auto& waiter : waiters) {
      waiter.await();
    }
    for (auto& worker : workers) {
      worker.await();
    }
  });
  EXPECT_EQ(seen_by_waiters, (std::vector<int>{3, 3, 3, 3}));
  EXPECT_EQ(jobs.count(), 0);
  EXPECT_EQ(jobs.waiting(), 0u);
}

TEST(WaitGroup, WaitOnAZeroCounterReturnsAtOnce) {
  weft::wait_group jobs;
  run_clean([&] {
    jobs.wait();
    jobs.wait(weft::timeout(0ms));
    jobs.add(2);
    jobs.add(-2);
    jobs.wait(weft::timeout(0ms));
  });
}

TEST(WaitGroup, ReleasedWaitersStayReleasedWhenANewRoundStarts) {
  weft::wait_group jobs;
  run_clean([&] {
    jobs.add();
    auto waiter = weft::spawn([&] { jobs.wait(); });
    ASSERT_TRUE(yield_until([&] { return jobs.waiting() == 1; }));
    jobs.done();
    jobs.add();  // before the waiter has run: it was already released
    waiter.await();
    EXPECT_EQ(jobs.count(), 1);
    jobs.done();
  });
}

TEST(WaitGroup, GoingBelowZeroIsALogicErrorAndChangesNothing) {
  weft::wait_group jobs;
  run_clean([&] {
    jobs.add(1);
    jobs.done();
    try {
      jobs.done();
      ADD_FAILURE() << "expected std::logic_error";
    } catch (const std::logic_error& error) {
      std::string message = error.what();
      EXPECT_NE(message.find("done() with the counter at 0 would take it below zero"),
                std::string::npos)
          << message;
    }
    jobs.add(2);
    EXPECT_THROW(jobs.add(-3), std::logic_error);
    EXPECT_EQ(jobs.count(), 2);
    jobs.add(-2);
  });
  EXPECT_EQ(jobs.count(), 0);
}

TEST(WaitGroup, WaitTimesOutAndLeavesTheOtherWaitersQueued) {
  weft::wait_group jobs;
  run_clean([&] {
    jobs.add();
    auto patient = weft::spawn([&] { jobs.wait(); });
    ASSERT_TRUE(yield_until([&] { return jobs.waiting() == 1; }));
    try {
      jobs.wait(weft::timeout(5ms));
      ADD_FAILURE() << "the wait should have timed out";
    } catch (const weft::timeout_error& error) {
      std::string message = error.what();
      EXPECT_NE(message.find("wait_group 0x"), std::string::npos) << message;
      EXPECT_NE(message.find("counter 1"), std::string::npos) << message;
      EXPECT_NE(message.find("timed out after 5 ms"), std::string::npos) << message;
    }
    EXPECT_EQ(jobs.waiting(), 1u);
    jobs.done();
    patient.await();
  });
  EXPECT_EQ(jobs.waiting(), 0u);
}

TEST(WaitGroup, ACancelledWaiterLeavesTheQueue) {
  weft::wait_group jobs;
  run_clean([&] {
    jobs.add();
    auto waiter = weft::spawn([&] { jobs.wait(); });
    ASSERT_TRUE(yield_until([&] { return jobs.waiting() == 1; }));
    waiter.cancel("stop");
    EXPECT_THROW(waiter.await(), weft::cancelled_error);
    EXPECT_EQ(jobs.waiting(), 0u);
    EXPECT_EQ(jobs.count(), 1);
    jobs.done();
  });
}

}  // namespace

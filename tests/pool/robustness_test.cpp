// weft::pool at its edges: releases that before_release rejects count against the circuit
// breaker, and durations too long for the clock (hours::max(), nanoseconds::max()) mean
// "never" instead of overflowing a deadline (this file is also run under ASan+UBSan).
#include <gtest/gtest.h>

#include <chrono>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "pool_fixture.hpp"
#include "test_support.hpp"
#include "weft/pool/pool.hpp"

namespace {

using namespace std::chrono_literals;
using pool_test::backend;
using pool_test::connection;
using pool_test::expect_accounting;
using weft::circuit_state;
using weft_test::run_clean;
using weft_test::yield_until;

// Records what the pool reports, and opens after `threshold` failures in a row.
class recording_strategy final : public weft::circuit_breaker_strategy {
 public:
  explicit recording_strategy(std::size_t threshold) : threshold_(threshold) {}
  void on_success(weft::circuit_breaker&) override {
    ++successes;
    in_a_row_ = 0;
  }
  void on_failure(weft::circuit_breaker& breaker, const std::exception_ptr& error) override {
    failures.push_back(weft::detail::what_of(error));
    if (++in_a_row_ >= threshold_ && breaker.state() == circuit_state::closed) {
      breaker.open();
    }
  }
  bool should_try_recovery(const weft::circuit_breaker&) override { return false; }

  int successes = 0;
  std::vector<std::string> failures;

 private:
  std::size_t threshold_;
  std::size_t in_a_row_ = 0;
};

TEST(PoolRobustness, EveryReleaseVetoedOpensTheBreakerAfterItsThreshold) {
  backend server;
  run_clean([&] {
    weft::pool_options<connection> options = server.options(2);
    options.before_release = [](connection&) { return false; };  // every session comes back bad
    auto strategy = std::make_shared<recording_strategy>(3);
    options.breaker_strategy = strategy;
    weft::pool<connection> connections(std::move(options));
    for (int round = 0; round < 3; ++round) {
      EXPECT_EQ(connections.breaker().state(), circuit_state::closed) << "round " << round;
      connections.acquire().release();
    }
    EXPECT_EQ(connections.breaker().state(), circuit_state::open);
    EXPECT_THROW(connections.acquire(), weft::service_unavailable_error);
    ASSERT_EQ(strategy->failures.size(), 3u);
    EXPECT_NE(strategy->failures[0].find("before_release rejected a returned resource"),
              std::string::npos)
        << strategy->failures[0];
    EXPECT_EQ(strategy->successes, 0)
        << "neither the creations (the breaker was closed) nor the vetoed releases";
    weft::pool_stats stats = connections.stats();
    EXPECT_EQ(stats.rejected_releases, 3u);
    EXPECT_EQ(stats.destroyed, 3u);
    expect_accounting(stats, server);
  });
}

TEST(PoolRobustness, AThrowingVetoIsReportedWithItsErrorAndAWaiterThenFailsFast) {
  backend server;
  run_clean([&] {
    weft::pool_options<connection> options = server.options(1);
    options.before_release = [](connection&) -> bool {
      throw std::runtime_error("ROLLBACK failed: server closed the connection");
    };
    auto strategy = std::make_shared<recording_strategy>(1);
    options.breaker_strategy = strategy;
    weft::pool<connection> connections(std::move(options));
    weft::lease<connection> held = connections.acquire();
    auto waiter = weft::spawn([&] { return connections.acquire()->id; });
    yield_until([&] { return connections.stats().waiters == 1; });
    held.release();  // vetoed: the breaker opens before the slot reaches the waiter
    EXPECT_THROW(waiter.await(), weft::service_unavailable_error);
    ASSERT_EQ(strategy->failures.size(), 1u);
    EXPECT_EQ(strategy->failures[0], "ROLLBACK failed: server closed the connection");
    EXPECT_EQ(server.next_id, 1) << "the open breaker kept the waiter from the backend";
    weft::pool_stats stats = connections.stats();
    EXPECT_EQ(stats.reserved, 0u);
    EXPECT_EQ(stats.rejected_releases, 1u);
    expect_accounting(stats, server);
  });
}

TEST(PoolRobustness, AReleaseIntoAClosedPoolIsNotAFailure) {
  backend server;
  run_clean([&] {
    weft::pool_options<connection> options = server.options(1);
    options.before_release = [](connection&) { return false; };
    auto strategy = std::make_shared<recording_strategy>(1);
    options.breaker_strategy = strategy;
    weft::pool<connection> connections(std::move(options));
    weft::lease<connection> held = connections.acquire();
    connections.close();
    held.release();
    EXPECT_TRUE(strategy->failures.empty());
    EXPECT_EQ(server.alive, 0);
  });
}

TEST(PoolRobustness, HugeDurationsMeanNever) {
  backend server;
  run_clean([&] {
    weft::pool_options<connection> options = server.options(1, 1);
    options.healthcheck_interval = std::chrono::hours::max();
    options.acquire_timeout = std::chrono::hours::max();
    options.validate_after_idle = std::chrono::hours::max();
    int validations = 0;
    options.validate = [&](connection&, const weft::timeout&) {
      ++validations;
      return true;
    };
    options.breaker_strategy =
        std::make_shared<weft::consecutive_failures>(1, std::chrono::hours::max());
    weft::pool<connection> connections(std::move(options));
    yield_until([&] { return connections.stats().idle == 1; });  // pre-warmed, not overflowed

    // An acquire with the longest limit there is waits, and a release satisfies it.
    weft::lease<connection> held = connections.acquire();
    auto longest = weft::spawn(
        [&] { return connections.acquire(weft::timeout(std::chrono::nanoseconds::max()))->id; });
    auto defaulted = weft::spawn([&] { return connections.acquire()->id; });  // hours::max()
    yield_until([&] { return connections.stats().waiters == 2; });
    held.release();
    EXPECT_EQ(longest.await(), 0);
    EXPECT_EQ(defaulted.await(), 0);
    auto at_the_end =
        connections.acquire(weft::timeout::at(std::chrono::steady_clock::time_point::max()));
    EXPECT_EQ(at_the_end->id, 0);
    at_the_end.release();
    EXPECT_EQ(validations, 0) << "never idle for hours::max()";
    EXPECT_EQ(connections.stats().timeouts, 0u);
    EXPECT_EQ(connections.stats().healthcheck_failures, 0u);

    // A cool-down of hours::max() never ends: the breaker stays open until closed by hand.
    weft::lease<connection> broken = connections.acquire();
    broken.discard(std::make_exception_ptr(std::runtime_error("lost")));
    EXPECT_EQ(connections.breaker().state(), circuit_state::open);
    EXPECT_THROW(connections.acquire(), weft::service_unavailable_error);
    connections.breaker().close();
    EXPECT_EQ(connections.acquire(weft::timeout(std::chrono::hours::max()))->id, 1);
    connections.close();
    EXPECT_EQ(server.alive, 0);
  });
}

TEST(PoolRobustness, SaturatingDurationClampsToTheClock) {
  using steady = std::chrono::steady_clock::duration;
  EXPECT_EQ(weft::saturating_duration(std::chrono::hours::max()).get(), steady::max());
  EXPECT_EQ(weft::saturating_duration(std::chrono::hours::min()).get(), steady::min());
  EXPECT_TRUE(weft::saturating_duration(std::chrono::hours::max()).is_max());
  EXPECT_EQ(weft::saturating_duration(std::chrono::milliseconds(1500)).get(), 1500ms);
  EXPECT_FALSE(weft::saturating_duration(1h).is_max());
  EXPECT_LT(weft::saturating_duration(1h), weft::saturating_duration(2h));
}

}  // namespace

namespace {

TEST(PoolRobustness, ACancelTokenEndsAnAcquireAndTheSlotGoesToTheNextWaiter) {
  backend server;
  run_clean([&] {
    weft::pool<connection> connections(server.options(1, 1));
    weft::lease<connection> held = connections.acquire();
    weft::promise<void> stop;
    auto cancelled = weft::spawn([&] {
      EXPECT_THROW(connections.acquire(weft::cancel_on(stop.get_future())),
                   weft::wait_cancelled_error);
    });
    auto patient = weft::spawn([&] { return connections.acquire(weft::timeout(10s))->id; });
    yield_until([&] { return connections.stats().waiters == 2; });
    stop.set_value();
    cancelled.await();
    EXPECT_EQ(connections.stats().waiters, 1u) << "the cancelled acquire left the queue";
    held.release();
    EXPECT_EQ(patient.await(), 0) << "the released connection reached the waiter behind it";
  });
}

}  // namespace

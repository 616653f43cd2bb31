// weft::circuit_breaker with the built-in consecutive_failures strategy and under manual control,
// on its own and inside a weft::pool (which fails fast while it is open).
#include "weft/pool/circuit_breaker.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <vector>

#include "pool_fixture.hpp"
#include "test_support.hpp"
#include "weft/pool/pool.hpp"

namespace {

using namespace std::chrono_literals;
using pool_test::backend;
using pool_test::connection;
using weft::circuit_breaker;
using weft::circuit_state;
using weft_test::run_clean;
using weft_test::yield_until;

std::exception_ptr refused() {
  return std::make_exception_ptr(std::runtime_error("connection refused"));
}

TEST(CircuitBreaker, OpensAfterNConsecutiveFailuresAndASuccessResetsTheCount) {
  run_clean([] {
    circuit_breaker breaker(std::make_shared<weft::consecutive_failures>(3, 1h));
    breaker.record_failure(refused());
    breaker.record_failure(refused());
    breaker.record_success();  // not consecutive any more
    breaker.record_failure(refused());
    breaker.record_failure(refused());
    EXPECT_EQ(breaker.state(), circuit_state::closed);
    breaker.record_failure(refused());
    EXPECT_EQ(breaker.state(), circuit_state::open);
    EXPECT_EQ(breaker.admit(), circuit_breaker::admission::refused) << "cool-down not over";
    EXPECT_EQ(breaker.times_opened(), 1u);
  });
}

TEST(CircuitBreaker, AfterTheCoolDownOneProbeGoesThroughAndItsSuccessCloses) {
  run_clean([] {
    circuit_breaker breaker(std::make_shared<weft::consecutive_failures>(1, 2ms));
    breaker.record_failure(refused());
    ASSERT_EQ(breaker.state(), circuit_state::open);
    weft::sleep_for(3ms);
    EXPECT_EQ(breaker.admit(), circuit_breaker::admission::probe);
    EXPECT_EQ(breaker.state(), circuit_state::half_open);
    EXPECT_EQ(breaker.admit(), circuit_breaker::admission::refused) << "one probe at a time";
    breaker.record_success();
    EXPECT_EQ(breaker.state(), circuit_state::closed);
    EXPECT_EQ(breaker.admit(), circuit_breaker::admission::allowed);
  });
}

TEST(CircuitBreaker, AFailedProbeReopensAndRestartsTheCoolDown) {
  run_clean([] {
    circuit_breaker breaker(std::make_shared<weft::consecutive_failures>(2, 2ms));
    breaker.record_failure(refused());
    breaker.record_failure(refused());
    weft::sleep_for(3ms);
    ASSERT_EQ(breaker.admit(), circuit_breaker::admission::probe);
    auto before = std::chrono::steady_clock::now();
    breaker.record_failure(refused());
    EXPECT_EQ(breaker.state(), circuit_state::open) << "one failed probe is enough to reopen";
    EXPECT_GE(breaker.opened_at(), before);
    EXPECT_EQ(breaker.times_opened(), 2u);
  });
}

TEST(CircuitBreaker, ManualControlOverridesTheStrategy) {
  run_clean([] {
    circuit_breaker breaker(std::make_shared<weft::consecutive_failures>(5, 1h));
    breaker.open();
    EXPECT_EQ(breaker.state(), circuit_state::open);
    EXPECT_EQ(breaker.admit(), circuit_breaker::admission::refused);
    breaker.half_open();
    EXPECT_EQ(breaker.admit(), circuit_breaker::admission::probe);
    breaker.close();
    EXPECT_EQ(breaker.admit(), circuit_breaker::admission::allowed);
    circuit_breaker manual;  // no strategy: failures alone never open it
    for (int failure = 0; failure < 100; ++failure) {
      manual.record_failure(refused());
    }
    EXPECT_EQ(manual.state(), circuit_state::closed);
  });
}

TEST(CircuitBreaker, RejectsAZeroThreshold) {
  run_clean([] { EXPECT_THROW(weft::consecutive_failures(0, 1s), std::invalid_argument); });
}

TEST(PoolCircuitBreaker, FactoryFailuresOpenItAndThenAcquireFailsFastWithoutTheFactory) {
  backend server;
  server.down = true;
  run_clean([&] {
    weft::pool_options<connection> options = server.options(2);
    options.breaker_strategy = std::make_shared<weft::consecutive_failures>(2, 1h);
    int factory_calls = 0;
    auto real_factory = options.factory;
    options.factory = [&] {
      ++factory_calls;
      return real_factory();
    };
    weft::pool<connection> connections(std::move(options));
    EXPECT_THROW(connections.acquire(), std::runtime_error);
    EXPECT_THROW(connections.acquire(), std::runtime_error);
    EXPECT_EQ(connections.breaker().state(), circuit_state::open);
    EXPECT_THROW(connections.acquire(), weft::service_unavailable_error);
    EXPECT_THROW(connections.try_acquire(), weft::service_unavailable_error);
    EXPECT_EQ(factory_calls, 2) << "an open breaker does not touch the backend";
  });
}

TEST(PoolCircuitBreaker, AProbeAcquireClosesItWhenTheBackendIsBack) {
  backend server;
  server.down = true;
  run_clean([&] {
    weft::pool_options<connection> options = server.options(2);
    options.breaker_strategy = std::make_shared<weft::consecutive_failures>(1, 2ms);
    weft::pool<connection> connections(std::move(options));
    EXPECT_THROW(connections.acquire(), std::runtime_error);
    ASSERT_EQ(connections.breaker().state(), circuit_state::open);
    weft::sleep_for(3ms);
    EXPECT_THROW(connections.acquire(), std::runtime_error) << "probe: still down";
    EXPECT_EQ(connections.breaker().state(), circuit_state::open);
    weft::sleep_for(3ms);
    server.down = false;
    weft::lease<connection> probe = connections.acquire();
    EXPECT_EQ(connections.breaker().state(), circuit_state::closed);
  });
}

TEST(PoolCircuitBreaker, ALeaseDiscardedWithAnErrorCountsAsAFailure) {
  backend server;
  run_clean([&] {
    weft::pool_options<connection> options = server.options(3);
    options.breaker_strategy = std::make_shared<weft::consecutive_failures>(2, 1h);
    weft::pool<connection> connections(std::move(options));
    weft::lease<connection> first = connections.acquire();
    weft::lease<connection> second = connections.acquire();
    weft::lease<connection> third = connections.acquire();
    first.discard();  // broken without blaming the backend: no verdict
    second.discard(refused());
    EXPECT_EQ(connections.breaker().state(), circuit_state::closed);
    third.discard(refused());
    EXPECT_EQ(connections.breaker().state(), circuit_state::open);
    EXPECT_EQ(server.alive, 0);
  });
}

TEST(PoolCircuitBreaker, AFailedHealthcheckCountsAsAFailure) {
  backend server;
  run_clean([&] {
    weft::pool_options<connection> options = server.options(2, 1);
    options.healthcheck_interval = 1ms;
    options.breaker_strategy = std::make_shared<weft::consecutive_failures>(1, 1h);
    weft::pool<connection> connections(std::move(options));
    yield_until([&] { return connections.stats().idle == 1; });
    server.unhealthy = {0};
    yield_until([&] { return connections.breaker().state() == circuit_state::open; });
    EXPECT_EQ(connections.stats().healthcheck_failures, 1u);
    EXPECT_EQ(server.next_id, 1) << "no refill while the breaker is open";
  });
}

TEST(PoolCircuitBreaker, WaitersGivenASlotWhileItIsOpenFailFastInsteadOfHanging) {
  backend server;
  run_clean([&] {
    weft::pool<connection> connections(server.options(1));
    weft::lease<connection> held = connections.acquire();
    int unavailable = 0;
    std::vector<weft::task<void>> waiters;
    for (int waiter = 0; waiter < 3; ++waiter) {
      waiters.push_back(weft::spawn([&] {
        try {
          connections.acquire();
        } catch (const weft::service_unavailable_error&) {
          ++unavailable;
        }
      }));
    }
    yield_until([&] { return connections.stats().waiters == 3; });
    connections.breaker().open();  // manual: the operator takes the backend out
    held.discard();
    for (auto& waiter : waiters) {
      waiter.await();
    }
    EXPECT_EQ(unavailable, 3);
    EXPECT_EQ(server.next_id, 1);
    EXPECT_EQ(connections.stats().reserved, 0u);
  });
}

TEST(PoolCircuitBreaker, ManualCloseLetsAcquiresThroughAgain) {
  backend server;
  run_clean([&] {
    weft::pool<connection> connections(server.options(1));
    connections.breaker().open();
    EXPECT_THROW(connections.acquire(), weft::service_unavailable_error);
    connections.breaker().close();
    EXPECT_EQ(connections.acquire()->id, 0);
  });
}

// ---- Replacing or removing the strategy on a live breaker / pool ----

// Opens on every failure; lets a probe through only when told.
class gated final : public weft::circuit_breaker_strategy {
 public:
  void on_success(circuit_breaker& breaker) override {
    ++successes;
    if (breaker.state() == circuit_state::half_open) {
      breaker.close();
    }
  }
  void on_failure(circuit_breaker& breaker, const std::exception_ptr&) override {
    ++failures;
    if (breaker.state() != circuit_state::open) {
      breaker.open();
    }
  }
  bool should_try_recovery(const circuit_breaker&) override { return recovery_allowed; }

  bool recovery_allowed = false;
  int successes = 0;
  int failures = 0;
};

TEST(CircuitBreakerSwap, ANewStrategyClosesTheBreakerAndCountsFromZero) {
  run_clean([] {
    circuit_breaker breaker(std::make_shared<weft::consecutive_failures>(1, 1h));
    breaker.record_failure(refused());
    ASSERT_EQ(breaker.state(), circuit_state::open);
    auto replacement = std::make_shared<weft::consecutive_failures>(2, 1h);
    breaker.set_strategy(replacement);
    EXPECT_EQ(breaker.state(), circuit_state::closed);
    EXPECT_EQ(breaker.strategy(), replacement);
    EXPECT_EQ(breaker.admit(), circuit_breaker::admission::allowed);
    breaker.record_failure(refused());
    EXPECT_EQ(breaker.state(), circuit_state::closed) << "the old failure is not replayed";
    breaker.record_failure(refused());
    EXPECT_EQ(breaker.state(), circuit_state::open);
    EXPECT_EQ(breaker.times_opened(), 2u);
  });
}

TEST(CircuitBreakerSwap, RemovingTheStrategyLeavesOnlyManualControl) {
  run_clean([] {
    circuit_breaker breaker(std::make_shared<weft::consecutive_failures>(1, 0ms));
    breaker.record_failure(refused());
    ASSERT_EQ(breaker.state(), circuit_state::open);
    breaker.set_strategy(nullptr);
    EXPECT_FALSE(breaker.has_strategy());
    EXPECT_EQ(breaker.state(), circuit_state::closed);
    for (int failure = 0; failure < 10; ++failure) {
      breaker.record_failure(refused());
    }
    EXPECT_EQ(breaker.state(), circuit_state::closed) << "never opens by itself";
    breaker.open();
    EXPECT_EQ(breaker.admit(), circuit_breaker::admission::refused)
        << "and never recovers by itself either";
    breaker.half_open();
    EXPECT_EQ(breaker.admit(), circuit_breaker::admission::probe);
    breaker.close();
    EXPECT_EQ(breaker.admit(), circuit_breaker::admission::allowed);
  });
}

TEST(CircuitBreakerSwap, SwappingFromInsideTheStrategyIsALogicError) {
  class swapper final : public weft::circuit_breaker_strategy {
   public:
    void on_success(circuit_breaker& breaker) override { breaker.set_strategy(nullptr); }
    void on_failure(circuit_breaker&, const std::exception_ptr&) override {}
    bool should_try_recovery(const circuit_breaker&) override { return false; }
  };
  run_clean([] {
    circuit_breaker breaker(std::make_shared<swapper>());
    EXPECT_THROW(breaker.record_success(), std::logic_error);
    EXPECT_TRUE(breaker.has_strategy()) << "still there, and still usable";
    breaker.set_strategy(nullptr);
    EXPECT_FALSE(breaker.has_strategy());
  });
}

// The probe in flight at a swap becomes an ordinary request: the new strategy hears its outcome,
// and its abandonment cannot free the slot of the probe that the new strategy lets through.
TEST(PoolCircuitBreakerSwap, AProbeInFlightAtTheSwapBecomesAnOrdinaryRequest) {
  backend server;
  run_clean([&] {
    weft::pool_options<connection> options = server.options(3);
    auto first = std::make_shared<gated>();
    options.breaker_strategy = first;
    weft::pool<connection> connections(std::move(options));
    // A probe that takes an idle resource stays in flight until its lease ends (a fresh one
    // would settle it at once, by its creation).
    weft::lease<connection> failing = connections.acquire();
    connections.acquire().release();  // idle
    failing.discard(refused());
    ASSERT_EQ(connections.breaker().state(), circuit_state::open);
    first->recovery_allowed = true;
    weft::lease<connection> old_probe = connections.acquire();
    ASSERT_EQ(connections.breaker().state(), circuit_state::half_open);
    EXPECT_THROW(connections.acquire(), weft::service_unavailable_error) << "one probe at a time";
    int first_heard = first->successes + first->failures;

    auto second = std::make_shared<gated>();
    connections.set_breaker_strategy(second);
    EXPECT_EQ(connections.breaker().state(), circuit_state::closed);
    weft::lease<connection> ordinary = connections.acquire();  // no probe holds the slot now
    connections.acquire().release();                           // idle again, for the next probe
    ordinary.discard(refused());
    EXPECT_EQ(second->failures, 1);
    ASSERT_EQ(connections.breaker().state(), circuit_state::open);
    second->recovery_allowed = true;
    weft::lease<connection> new_probe = connections.acquire();
    ASSERT_EQ(connections.breaker().state(), circuit_state::half_open);

    old_probe.discard();  // abandoned without a verdict: must not free the new probe's slot
    EXPECT_THROW(connections.acquire(), weft::service_unavailable_error)
        << "the new probe still holds the slot";
    new_probe.release();
    EXPECT_EQ(connections.breaker().state(), circuit_state::closed);
    EXPECT_EQ(first->successes + first->failures, first_heard)
        << "the old strategy heard nothing after the swap";
    pool_test::expect_accounting(connections.stats(), server);
  });
}

TEST(PoolCircuitBreakerSwap, AddingAStrategyToALivePoolOpensItAndRemovingItLetsEverythingThrough) {
  backend server;
  run_clean([&] {
    weft::pool<connection> connections(server.options(2));
    server.down = true;
    for (int attempt = 0; attempt < 3; ++attempt) {
      EXPECT_THROW(connections.acquire(), std::runtime_error);
    }
    EXPECT_EQ(connections.breaker().state(), circuit_state::closed) << "no strategy yet";
    connections.set_breaker_strategy(std::make_shared<weft::consecutive_failures>(1, 1h));
    EXPECT_THROW(connections.acquire(), std::runtime_error);
    EXPECT_EQ(connections.breaker().state(), circuit_state::open);
    EXPECT_THROW(connections.acquire(), weft::service_unavailable_error);
    connections.set_breaker_strategy(nullptr);
    server.down = false;
    EXPECT_EQ(connections.acquire()->id, 0) << "closed by the swap: the backend is tried again";
    EXPECT_EQ(connections.stats().create_failures, 4u);
  });
}

}  // namespace

// weft::pool acquire: creating on demand under max, reusing idle resources, the reservation that
// keeps concurrent creators under max, try_acquire, timeouts, option checks.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <stdexcept>
#include <vector>

#include "pool_fixture.hpp"
#include "test_support.hpp"
#include "weft/pool/pool.hpp"

namespace {

using namespace std::chrono_literals;
using pool_test::backend;
using pool_test::connection;
using pool_test::expect_accounting;
using weft_test::run_clean;
using weft_test::yield_until;

TEST(PoolAcquire, CreatesOnDemandAndReusesWhatWasReleased) {
  backend server;
  run_clean([&] {
    weft::pool<connection> connections(server.options(3));
    {
      weft::lease<connection> first = connections.acquire();
      weft::lease<connection> second = connections.acquire();
      EXPECT_EQ(first->id, 0);
      EXPECT_EQ(second->id, 1);
      EXPECT_EQ(connections.stats().active, 2u);
      expect_accounting(connections.stats(), server);
    }  // both returned here, second first (locals end in reverse order)
    EXPECT_EQ(connections.stats().idle, 2u);
    EXPECT_EQ(connections.stats().active, 0u);
    weft::lease<connection> again = connections.acquire();
    EXPECT_EQ(again->id, 1) << "the resource idle longest is reused, nothing new is made";
    EXPECT_EQ(connections.stats().created, 2u);
    expect_accounting(connections.stats(), server);
  });
  EXPECT_EQ(server.alive, 0) << "the pool's destructor destroyed every resource";
}

TEST(PoolAcquire, ConcurrentCreatorsNeverExceedMaxBecauseTheSlotIsReservedFirst) {
  backend server;
  server.suspend_in_factory = true;
  std::size_t most_alive = 0;
  run_clean([&] {
    weft::pool<connection> connections(server.options(2));
    std::vector<weft::task<void>> users;
    for (int user = 0; user < 6; ++user) {
      users.push_back(weft::spawn([&] {
        weft::lease<connection> held = connections.acquire();
        weft::pool_stats stats = connections.stats();
        EXPECT_LE(stats.count() + stats.reserved, 2u);
        most_alive = std::max(most_alive, static_cast<std::size_t>(server.alive));
        weft::yield();
      }));
    }
    for (auto& user : users) {
      user.await();
    }
    EXPECT_EQ(connections.stats().created, 2u);
    EXPECT_EQ(connections.stats().reserved, 0u);
    expect_accounting(connections.stats(), server);
  });
  EXPECT_EQ(most_alive, 2u);
}

TEST(PoolAcquire, TryAcquireTakesOnlyAnIdleResourceAndNeverCreates) {
  backend server;
  run_clean([&] {
    weft::pool<connection> connections(server.options(2));
    EXPECT_FALSE(connections.try_acquire().has_value()) << "nothing idle: it must not create";
    EXPECT_EQ(connections.stats().created, 0u);
    connections.acquire().release();
    std::optional<weft::lease<connection>> taken = connections.try_acquire();
    ASSERT_TRUE(taken.has_value());
    EXPECT_EQ((*taken)->id, 0);
    EXPECT_EQ(connections.stats().active, 1u);
  });
}

TEST(PoolAcquire, GivesUpWithTimeoutErrorWhenEverythingStaysBusy) {
  backend server;
  run_clean([&] {
    weft::pool<connection> connections(server.options(1));
    weft::lease<connection> held = connections.acquire();
    auto started = std::chrono::steady_clock::now();
    EXPECT_THROW(connections.acquire(weft::timeout(10ms)), weft::timeout_error);
    EXPECT_GE(std::chrono::steady_clock::now() - started, 10ms);
    weft::pool_stats stats = connections.stats();
    EXPECT_EQ(stats.timeouts, 1u);
    EXPECT_EQ(stats.waiters, 0u);
    EXPECT_EQ(stats.active, 1u) << "a timeout leaves the pool as it was";
  });
}

TEST(PoolAcquire, ATimeoutIsNotAPoolError) {
  backend server;
  run_clean([&] {
    weft::pool<connection> connections(server.options(1));
    weft::lease<connection> held = connections.acquire();
    try {
      connections.acquire(weft::timeout(5ms));
      ADD_FAILURE() << "acquire should have timed out";
    } catch (const weft::pool_closed_error&) {
      ADD_FAILURE() << "a busy pool is not a closed one";
    } catch (const weft::service_unavailable_error&) {
      ADD_FAILURE() << "a busy pool is not an unavailable one";
    } catch (const weft::timeout_error& timed_out) {
      EXPECT_NE(std::string(timed_out.what()).find("pool(idle 0, active 1"), std::string::npos)
          << timed_out.what();
    }
  });
}

TEST(PoolAcquire, AcquireWithoutALimitUsesTheOptionsDefaultTimeout) {
  backend server;
  run_clean([&] {
    weft::pool_options<connection> options = server.options(1);
    options.acquire_timeout = 5ms;
    weft::pool<connection> connections(std::move(options));
    weft::lease<connection> held = connections.acquire();
    EXPECT_THROW(connections.acquire(), weft::timeout_error);
    EXPECT_EQ(connections.stats().timeouts, 1u);
  });
}

TEST(PoolAcquire, AWaiterIsServedByARelease) {
  backend server;
  run_clean([&] {
    weft::pool<connection> connections(server.options(1));
    weft::lease<connection> held = connections.acquire();
    int served_id = -1;
    auto waiter = weft::spawn([&] { served_id = connections.acquire()->id; });
    yield_until([&] { return connections.stats().waiters == 1; });
    held.release();
    waiter.await();
    EXPECT_EQ(served_id, 0);
    EXPECT_EQ(connections.stats().created, 1u);
  });
}

TEST(PoolAcquire, RejectsOptionsThatCouldNeverWork) {
  backend server;
  run_clean([&] {
    EXPECT_THROW(weft::pool<connection>(server.options(0)), std::invalid_argument);
    EXPECT_THROW(weft::pool<connection>(server.options(2, 3)), std::invalid_argument);
    weft::pool_options<connection> no_factory = server.options(2);
    no_factory.factory = nullptr;
    EXPECT_THROW(weft::pool<connection>(std::move(no_factory)), std::invalid_argument);
    weft::pool_options<connection> no_check = server.options(2);
    no_check.healthcheck = nullptr;
    no_check.healthcheck_interval = 1ms;
    EXPECT_THROW(weft::pool<connection>(std::move(no_check)), std::invalid_argument);
  });
}

TEST(PoolAcquire, MaintenanceNeedsACoroutine) {
  backend server;
  EXPECT_THROW(weft::pool<connection>(server.options(2, 1)), std::logic_error);
}

}  // namespace

// weft::pool's background maintenance: min resources are pre-warmed, the periodic healthcheck
// replaces unhealthy idle resources (and only idle ones), and none of it keeps the program alive.
#include <gtest/gtest.h>

#include <chrono>
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
using weft_test::run_clean;
using weft_test::yield_until;

TEST(PoolHealthcheck, MinResourcesArePreWarmedInTheBackground) {
  backend server;
  run_clean([&] {
    weft::pool<connection> connections(server.options(5, 3));
    EXPECT_EQ(connections.stats().created, 0u) << "the constructor itself does not create";
    yield_until([&] { return connections.stats().idle == 3; });
    EXPECT_EQ(connections.stats().created, 3u);
    expect_accounting(connections.stats(), server);
  });
  EXPECT_EQ(server.alive, 0);
}

TEST(PoolHealthcheck, UnhealthyIdleResourcesAreReplacedAndBusyOnesAreNeverTouched) {
  backend server;
  int checks_of_busy = 0;
  run_clean([&] {
    weft::pool_options<connection> options = server.options(3, 2);
    options.healthcheck_interval = 2ms;
    weft::lease<connection>* busy_lease = nullptr;
    options.healthcheck = [&](connection& resource) {
      if (busy_lease != nullptr && resource.id == (*busy_lease)->id) {
        ++checks_of_busy;
      }
      return server.unhealthy.count(resource.id) == 0;
    };
    weft::pool<connection> connections(std::move(options));
    yield_until([&] { return connections.stats().idle == 2; });  // ids 0 and 1
    weft::lease<connection> busy = connections.acquire();        // id 0
    busy_lease = &busy;
    server.unhealthy = {0, 1};  // all bad, but 0 is leased
    yield_until([&] { return connections.stats().healthcheck_failures >= 1; });
    yield_until([&] { return connections.stats().idle == 1 && server.next_id == 3; });
    EXPECT_EQ(server.destroyed, (std::vector<int>{1})) << "only the idle one was replaced";
    EXPECT_EQ(busy->id, 0);
    EXPECT_EQ(checks_of_busy, 0);
    expect_accounting(connections.stats(), server);
    busy_lease = nullptr;
  });
}

TEST(PoolHealthcheck, AThrowingHealthcheckCountsAsUnhealthy) {
  backend server;
  run_clean([&] {
    weft::pool_options<connection> options = server.options(2, 1);
    options.healthcheck_interval = 1ms;
    options.healthcheck = [&](connection& resource) -> bool {
      if (resource.id == 0) {
        throw std::runtime_error("SELECT 1 failed");
      }
      return true;
    };
    weft::pool<connection> connections(std::move(options));
    yield_until([&] { return server.next_id >= 2 && connections.stats().idle == 1; });
    EXPECT_EQ(server.destroyed, (std::vector<int>{0}));
    EXPECT_GE(connections.stats().healthcheck_failures, 1u);
  });
}

TEST(PoolHealthcheck, MaintenanceDoesNotKeepTheProgramAlive) {
  backend server;
  // The pool lives until main ends; its maintenance coroutine sleeps in the background and must
  // not hold run() open (run_clean also checks it finished).
  auto started = std::chrono::steady_clock::now();
  run_clean([&] {
    weft::pool_options<connection> options = server.options(2, 1);
    options.healthcheck_interval = std::chrono::hours(1);
    weft::pool<connection> connections(std::move(options));
    yield_until([&] { return connections.stats().idle == 1; });
  });
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::minutes(1));
  EXPECT_EQ(server.alive, 0);
}

TEST(PoolHealthcheck, APoolClosedBeforeItsMaintenanceRanCreatesNothingAndLeaksNothing) {
  backend server;
  run_clean([&] {
    { weft::pool<connection> connections(server.options(3, 2)); }  // never suspended meanwhile
    weft::yield();
  });
  EXPECT_EQ(server.next_id, 0);
  EXPECT_EQ(server.alive, 0);
}

TEST(PoolHealthcheck, AWaiterBlockedOnAPoolWithAHealthcheckIsStillReportedAsADeadlock) {
  backend server;
  std::string report;
  weft::run_options options;
  options.deadlock_reporter = [&](std::string_view text) { report = text; };
  EXPECT_THROW(run_clean(
                   [&] {
                     weft::pool_options<connection> pool_options = server.options(1, 1);
                     pool_options.healthcheck_interval = 1ms;
                     weft::pool<connection> connections(std::move(pool_options));
                     weft::lease<connection> held = connections.acquire();
                     connections.acquire();  // waits for itself: nothing can ever serve it
                   },
                   options),
               weft::deadlock_error);
  EXPECT_NE(report.find("pool(idle 0, active 1, reserved 0, max 1)"), std::string::npos) << report;
  EXPECT_EQ(server.alive, 0);
}

}  // namespace

// weft::pool's validation after idle: a resource that sat idle at least validate_after_idle is
// checked by the validate hook (within the acquire's limit) before it is handed out; one that
// fails is destroyed, counted against the breaker, and the acquire goes on with the next one.
#include <gtest/gtest.h>

#include <chrono>
#include <set>
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
using weft::circuit_state;
using weft_test::run_clean;
using weft_test::yield_until;

// The backend's view of which connections died while idle, and what validate was asked.
struct validation {
  std::set<int> dead;
  std::vector<int> checked;  // ids, in order
  std::vector<weft::timeout> limits;

  void install(weft::pool_options<connection>& options) {
    options.validate = [this](connection& resource, const weft::timeout& limit) {
      checked.push_back(resource.id);
      limits.push_back(limit);
      return dead.count(resource.id) == 0;
    };
  }
};

// Makes n idle connections (ids 0..n-1, idle in that order).
void fill_idle(weft::pool<connection>& connections, int n) {
  std::vector<weft::lease<connection>> leases;
  for (int each = 0; each < n; ++each) {
    leases.push_back(connections.acquire());
  }
}

TEST(PoolValidateAfterIdle, DeadIdleOnesAreDroppedAndTheAcquireGoesOnToTheNextThenAFreshOne) {
  backend server;
  validation check;
  run_clean([&] {
    weft::pool_options<connection> options = server.options(3);
    options.validate_after_idle = 0ms;  // every idle one
    check.install(options);
    auto strategy = std::make_shared<weft::consecutive_failures>(5, 1h);
    options.breaker_strategy = strategy;
    weft::pool<connection> connections(std::move(options));
    fill_idle(connections, 2);
    EXPECT_TRUE(check.checked.empty()) << "fresh ones are not validated";

    check.dead = {0};
    weft::lease<connection> got = connections.acquire();
    EXPECT_EQ(got->id, 1) << "0 died while idle: dropped, and 1 handed out";
    EXPECT_EQ(check.checked, (std::vector<int>{0, 1}));
    EXPECT_EQ(server.destroyed, (std::vector<int>{0}));
    got.release();

    check.dead = {1};
    weft::lease<connection> fresh = connections.acquire();
    EXPECT_EQ(fresh->id, 2) << "nothing idle left alive: a fresh one";
    weft::pool_stats stats = connections.stats();
    EXPECT_EQ(stats.validation_failures, 2u);
    EXPECT_EQ(strategy->failures_in_a_row(), 1u)
        << "each failure counted; the healthy release between them reset the count";
    EXPECT_EQ(connections.breaker().state(), circuit_state::closed);
    expect_accounting(stats, server);
  });
}

TEST(PoolValidateAfterIdle, OnlyResourcesIdleLongerThanTheThresholdAreChecked) {
  backend server;
  validation check;
  run_clean([&] {
    weft::pool_options<connection> options = server.options(2);
    options.validate_after_idle = 1ms;
    check.install(options);
    weft::pool<connection> connections(std::move(options));
    fill_idle(connections, 1);
    weft::sleep_for(5ms);
    connections.acquire().release();  // idle for 5 ms at least: checked
    EXPECT_EQ(check.checked, (std::vector<int>{0}));

    // Handed straight from a release to a waiter: it was never idle, so not checked.
    weft::lease<connection> first = connections.acquire();
    weft::lease<connection> second = connections.acquire();
    int first_id = first->id;
    std::size_t checked_before = check.checked.size();
    auto waiter = weft::spawn([&] { return connections.acquire()->id; });
    yield_until([&] { return connections.stats().waiters == 1; });
    weft::sleep_for(5ms);
    first.release();
    EXPECT_EQ(waiter.await(), first_id);
    EXPECT_EQ(check.checked.size(), checked_before);
  });
  EXPECT_EQ(server.alive, 0);
}

TEST(PoolValidateAfterIdle, ALongThresholdIsNotReachedAndUnsetMeansNever) {
  backend server;
  validation check;
  run_clean([&] {
    weft::pool_options<connection> options = server.options(1);
    options.validate_after_idle = 1h;
    check.install(options);
    weft::pool<connection> connections(std::move(options));
    fill_idle(connections, 1);
    connections.acquire().release();
    EXPECT_TRUE(check.checked.empty());

    weft::pool_options<connection> unset = server.options(1);
    check.install(unset);  // a hook without the setting is never called
    weft::pool<connection> plain(std::move(unset));
    fill_idle(plain, 1);
    plain.acquire().release();
    EXPECT_TRUE(check.checked.empty());
  });
}

TEST(PoolValidateAfterIdle, TheCheckIsGivenTheAcquiresLimit) {
  backend server;
  validation check;
  run_clean([&] {
    weft::pool_options<connection> options = server.options(1);
    options.validate_after_idle = 0ms;
    options.acquire_timeout = 30s;
    check.install(options);
    weft::pool<connection> connections(std::move(options));
    fill_idle(connections, 1);
    weft::timeout own(20s);
    connections.acquire(own).release();
    auto before = std::chrono::steady_clock::now();
    connections.acquire().release();  // the pool's acquire_timeout
    ASSERT_EQ(check.limits.size(), 2u);
    EXPECT_EQ(check.limits[0].deadline(), own.deadline());
    EXPECT_TRUE(check.limits[1].bounded());
    EXPECT_GE(check.limits[1].deadline(), before + 30s);
    EXPECT_LE(check.limits[1].deadline(), std::chrono::steady_clock::now() + 30s);
    ASSERT_TRUE(connections.try_acquire().has_value()) << "try_acquire validates too";
    EXPECT_EQ(check.limits.size(), 3u);
  });
}

TEST(PoolValidateAfterIdle, ACheckOutlastingTheAcquiresDeadlineTimesTheAcquireOut) {
  backend server;
  run_clean([&] {
    weft::pool_options<connection> options = server.options(1);
    options.validate_after_idle = 0ms;
    options.validate = [](connection&, const weft::timeout& limit) -> bool {
      weft::sleep_until(limit.deadline());  // a server that does not answer in time
      throw weft::timeout_error("validation timed out");
    };
    auto strategy = std::make_shared<weft::consecutive_failures>(1, 1h);
    options.breaker_strategy = strategy;
    weft::pool<connection> connections(std::move(options));
    fill_idle(connections, 1);
    EXPECT_THROW(connections.acquire(weft::timeout(10ms)), weft::timeout_error);
    weft::pool_stats stats = connections.stats();
    EXPECT_EQ(stats.timeouts, 1u);
    EXPECT_EQ(stats.validation_failures, 0u) << "the acquirer's deadline, not the backend's fault";
    EXPECT_EQ(connections.breaker().state(), circuit_state::closed);
    EXPECT_EQ(server.alive, 0) << "its state unknown, the resource was dropped";
    expect_accounting(stats, server);
  });
}

TEST(PoolValidateAfterIdle, FailedChecksOpenTheBreakerAndTheAcquireFailsFast) {
  backend server;
  validation check;
  run_clean([&] {
    weft::pool_options<connection> options = server.options(3);
    options.validate_after_idle = 0ms;
    check.install(options);
    options.breaker_strategy = std::make_shared<weft::consecutive_failures>(2, 1h);
    weft::pool<connection> connections(std::move(options));
    fill_idle(connections, 3);
    check.dead = {0, 1, 2};
    EXPECT_THROW(connections.acquire(), weft::service_unavailable_error);
    EXPECT_EQ(check.checked, (std::vector<int>{0, 1})) << "stopped at the breaker's threshold";
    EXPECT_EQ(connections.breaker().state(), circuit_state::open);
    EXPECT_EQ(server.next_id, 3) << "no connect attempt once it opened";
    weft::pool_stats stats = connections.stats();
    EXPECT_EQ(stats.validation_failures, 2u);
    EXPECT_EQ(stats.reserved, 0u);
    expect_accounting(stats, server);
  });
}

TEST(PoolValidateAfterIdle, MisconfigurationIsRefused) {
  backend server;
  run_clean([&] {
    weft::pool_options<connection> no_hook = server.options(1);
    no_hook.validate_after_idle = 1s;
    EXPECT_THROW(weft::pool<connection>(std::move(no_hook)), std::invalid_argument);
    weft::pool_options<connection> negative = server.options(1);
    negative.validate_after_idle = -1s;
    negative.validate = [](connection&, const weft::timeout&) { return true; };
    EXPECT_THROW(weft::pool<connection>(std::move(negative)), std::invalid_argument);
  });
}

}  // namespace

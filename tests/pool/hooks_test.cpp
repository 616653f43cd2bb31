// weft::pool's before_acquire and before_release hooks: a rejected resource is destroyed and
// replaced, and a release rejected while coroutines wait still serves the oldest of them.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <stdexcept>
#include <vector>

#include "pool_fixture.hpp"
#include "test_support.hpp"
#include "weft/pool/pool.hpp"

namespace {

using pool_test::backend;
using pool_test::connection;
using pool_test::expect_accounting;
using weft_test::run_clean;
using weft_test::yield_until;

TEST(PoolHooks, BeforeAcquireRejectionDiscardsAndTriesTheNextThenAFreshOne) {
  backend server;
  std::set<int> stale;
  run_clean([&] {
    weft::pool_options<connection> options = server.options(3);
    options.before_acquire = [&](connection& resource) { return stale.count(resource.id) == 0; };
    weft::pool<connection> connections(std::move(options));
    {
      auto first = connections.acquire();
      auto second = connections.acquire();
    }  // idle: 1, 0
    stale = {0, 1};
    weft::lease<connection> got = connections.acquire();
    EXPECT_EQ(got->id, 2) << "both idle ones were rejected, so a fresh one was made";
    EXPECT_EQ(server.destroyed, (std::vector<int>{1, 0}));
    EXPECT_EQ(connections.stats().idle, 0u);
    expect_accounting(connections.stats(), server);
  });
}

TEST(PoolHooks, BeforeAcquireThatThrowsCountsAsARejection) {
  backend server;
  bool throwing = false;
  run_clean([&] {
    weft::pool_options<connection> options = server.options(1);
    options.before_acquire = [&](connection&) {
      if (throwing) {
        throw std::runtime_error("ping failed");
      }
      return true;
    };
    weft::pool<connection> connections(std::move(options));
    connections.acquire().release();
    throwing = true;
    // The idle one is rejected; the fresh one is not vetted (it was just made).
    weft::lease<connection> got = connections.acquire();
    EXPECT_EQ(got->id, 1);
    EXPECT_EQ(server.destroyed, (std::vector<int>{0}));
  });
}

TEST(PoolHooks, AWaiterHandedAResourceStillVetsIt) {
  backend server;
  std::set<int> stale;
  run_clean([&] {
    weft::pool_options<connection> options = server.options(1);
    options.before_acquire = [&](connection& resource) { return stale.count(resource.id) == 0; };
    weft::pool<connection> connections(std::move(options));
    weft::lease<connection> held = connections.acquire();
    int waiter_got = -1;
    auto waiter = weft::spawn([&] { waiter_got = connections.acquire()->id; });
    yield_until([&] { return connections.stats().waiters == 1; });
    stale.insert(held->id);
    held.release();
    waiter.await();
    EXPECT_EQ(waiter_got, 1) << "the handed-off resource was stale: a fresh one replaced it";
    expect_accounting(connections.stats(), server);
  });
}

TEST(PoolHooks, BeforeReleaseRejectionDestroysInsteadOfKeeping) {
  backend server;
  run_clean([&] {
    weft::pool_options<connection> options = server.options(2);
    options.before_release = [](connection& resource) { return resource.id != 0; };
    weft::pool<connection> connections(std::move(options));
    {
      auto first = connections.acquire();
      auto second = connections.acquire();
    }
    EXPECT_EQ(server.destroyed, (std::vector<int>{0}));
    EXPECT_EQ(connections.stats().idle, 1u);
    expect_accounting(connections.stats(), server);
  });
}

TEST(PoolHooks, ARejectedReleaseWakesAWaiterToCreateAFreshOne) {
  backend server;
  run_clean([&] {
    weft::pool_options<connection> options = server.options(1);
    options.before_release = [](connection&) { return false; };  // e.g. the session is dirty
    weft::pool<connection> connections(std::move(options));
    weft::lease<connection> held = connections.acquire();
    std::vector<int> served;
    std::vector<weft::task<void>> waiters;
    for (int waiter = 0; waiter < 3; ++waiter) {
      waiters.push_back(weft::spawn([&] {
        weft::lease<connection> mine = connections.acquire();
        served.push_back(mine->id);
        weft::yield();
      }));
    }
    yield_until([&] { return connections.stats().waiters == 3; });
    held.release();
    for (auto& waiter : waiters) {
      waiter.await();
    }
    std::sort(served.begin(), served.end());
    EXPECT_EQ(served, (std::vector<int>{1, 2, 3})) << "each rejected release made room for one";
    EXPECT_EQ(connections.stats().waiters, 0u);
    EXPECT_EQ(server.alive, 0);
  });
}

TEST(PoolHooks, BeforeReleaseThatThrowsDestroysTheResource) {
  backend server;
  run_clean([&] {
    weft::pool_options<connection> options = server.options(1);
    options.before_release = [](connection&) -> bool { throw std::runtime_error("rollback"); };
    weft::pool<connection> connections(std::move(options));
    connections.acquire().release();
    EXPECT_EQ(server.destroyed, (std::vector<int>{0}));
    EXPECT_EQ(connections.stats().count(), 0u);
  });
}

}  // namespace

// weft::pool with a failing factory: the error reaches the acquirer, the reserved slot is given
// back, and every waiter gets its own try, so nobody is left hanging while the backend is down.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
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

TEST(PoolFactoryFailure, TheFactoryErrorReachesTheAcquirerAndTheSlotIsGivenBack) {
  backend server;
  server.down = true;
  run_clean([&] {
    weft::pool<connection> connections(server.options(1));
    try {
      connections.acquire();
      ADD_FAILURE() << "acquire should have failed";
    } catch (const std::runtime_error& failure) {
      EXPECT_EQ(std::string(failure.what()), "backend down: connection refused");
    }
    weft::pool_stats stats = connections.stats();
    EXPECT_EQ(stats.reserved, 0u);
    EXPECT_EQ(stats.create_failures, 1u);
    EXPECT_EQ(stats.count(), 0u);
    server.down = false;
    EXPECT_EQ(connections.acquire()->id, 0) << "the slot was not lost";
  });
}

TEST(PoolFactoryFailure, EveryWaiterGetsItsOwnTryWhileTheBackendIsDown) {
  backend server;
  run_clean([&] {
    weft::pool<connection> connections(server.options(1));
    weft::lease<connection> held = connections.acquire();
    int failures = 0;
    std::vector<weft::task<void>> waiters;
    for (int waiter = 0; waiter < 3; ++waiter) {
      waiters.push_back(weft::spawn([&] {
        try {
          connections.acquire();
        } catch (const std::runtime_error&) {
          ++failures;
        }
      }));
    }
    yield_until([&] { return connections.stats().waiters == 3; });
    server.down = true;
    held.discard();  // broken: its slot goes to the first waiter, whose factory call fails...
    for (auto& waiter : waiters) {
      waiter.await();  // ...and wakes the next, and so on: none hangs
    }
    EXPECT_EQ(failures, 3);
    EXPECT_EQ(connections.stats().create_failures, 3u);
    EXPECT_EQ(connections.stats().reserved, 0u);
    expect_accounting(connections.stats(), server);
  });
}

TEST(PoolFactoryFailure, ASuspendingFactoryThatIsCancelledGivesItsSlotBack) {
  backend server;
  run_clean([&] {
    weft::pool_options<connection> options = server.options(1);
    bool in_factory = false;
    options.factory = [&] {
      in_factory = true;
      weft::sleep_for(std::chrono::hours(1));  // a connect that never completes
      return connection{};
    };
    weft::pool<connection> connections(std::move(options));
    auto stuck = weft::spawn([&] { connections.acquire(); });
    yield_until([&] { return in_factory; });
    EXPECT_EQ(connections.stats().reserved, 1u);
    stuck.cancel();
    EXPECT_THROW(stuck.await(), weft::cancelled_error);
    EXPECT_EQ(connections.stats().reserved, 0u);
    EXPECT_EQ(connections.stats().create_failures, 0u) << "a cancellation is not a failure";
  });
}

}  // namespace

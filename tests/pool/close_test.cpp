// weft::pool close: idempotent, every waiter woken with pool_closed_error, idle resources
// destroyed exactly once (past throwing destructors, all errors reported), busy ones destroyed
// when their leases end.
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "pool_fixture.hpp"
#include "test_support.hpp"
#include "weft/pool/pool.hpp"

namespace {

using pool_test::backend;
using pool_test::connection;
using weft_test::run_clean;
using weft_test::yield_until;

TEST(PoolClose, WakesEveryWaiterWithPoolClosedError) {
  backend server;
  run_clean([&] {
    weft::pool<connection> connections(server.options(1));
    weft::lease<connection> held = connections.acquire();
    int closed_errors = 0;
    std::vector<weft::task<void>> waiters;
    for (int waiter = 0; waiter < 3; ++waiter) {
      waiters.push_back(weft::spawn([&] {
        try {
          connections.acquire();
        } catch (const weft::pool_closed_error&) {
          ++closed_errors;
        }
      }));
    }
    yield_until([&] { return connections.stats().waiters == 3; });
    connections.close();
    for (auto& waiter : waiters) {
      waiter.await();
    }
    EXPECT_EQ(closed_errors, 3);
    EXPECT_EQ(server.alive, 1) << "the busy one lives until its lease ends";
    held.release();
    EXPECT_EQ(server.destroyed, (std::vector<int>{0}));
  });
}

TEST(PoolClose, AWaiterAlreadyHandedAResourceGetsTheErrorAndItIsDestroyedOnce) {
  backend server;
  run_clean([&] {
    weft::pool<connection> connections(server.options(1));
    weft::lease<connection> held = connections.acquire();
    bool closed_error = false;
    auto waiter = weft::spawn([&] {
      try {
        connections.acquire();
      } catch (const weft::pool_closed_error&) {
        closed_error = true;
      }
    });
    yield_until([&] { return connections.stats().waiters == 1; });
    held.release();       // handed to the waiter, which has not run yet
    connections.close();  // must not destroy it: it is the waiter's
    waiter.await();       // the waiter destroys it and reports the close
    EXPECT_TRUE(closed_error);
    EXPECT_EQ(server.destroyed, (std::vector<int>{0}));
    EXPECT_EQ(connections.stats().count(), 0u);
  });
}

TEST(PoolClose, DestroysIdleResourcesAndIsIdempotent) {
  backend server;
  run_clean([&] {
    weft::pool<connection> connections(server.options(3));
    {
      auto first = connections.acquire();
      auto second = connections.acquire();
    }
    connections.close();
    connections.close();
    EXPECT_TRUE(connections.closed());
    std::vector<int> destroyed = server.destroyed;
    std::sort(destroyed.begin(), destroyed.end());
    EXPECT_EQ(destroyed, (std::vector<int>{0, 1}));
    EXPECT_EQ(connections.stats().destroyed, 2u);
  });
  EXPECT_EQ(server.destroyed.size(), 2u) << "the destructor's close destroyed nothing twice";
}

TEST(PoolClose, AcquireAndTryAcquireAfterCloseFail) {
  backend server;
  run_clean([&] {
    weft::pool<connection> connections(server.options(1));
    connections.close();
    EXPECT_THROW(connections.acquire(), weft::pool_closed_error);
    EXPECT_THROW(connections.try_acquire(), weft::pool_closed_error);
    EXPECT_EQ(connections.stats().created, 0u);
  });
}

TEST(PoolClose, ContinuesPastThrowingDestructorsAndReportsEveryError) {
  backend server;
  run_clean([&] {
    weft::pool_options<connection> options = server.options(3);
    options.destructor = [&](connection& resource) {
      --server.alive;
      server.destroyed.push_back(resource.id);
      if (resource.id != 1) {
        throw std::runtime_error("close of connection " + std::to_string(resource.id) + " failed");
      }
    };
    weft::pool<connection> connections(std::move(options));
    {
      auto first = connections.acquire();
      auto second = connections.acquire();
      auto third = connections.acquire();
    }
    try {
      connections.close();
      ADD_FAILURE() << "close should report the destructor errors";
    } catch (const weft::resource_destroy_error& failure) {
      EXPECT_EQ(failure.errors().size(), 2u);
      EXPECT_NE(std::string(failure.what()).find("2 resource destructor"), std::string::npos)
          << failure.what();
    }
    EXPECT_EQ(server.alive, 0) << "every resource was destroyed despite the errors";
    EXPECT_EQ(connections.stats().destroy_failures, 2u);
    EXPECT_NO_THROW(connections.close()) << "errors are reported once";
  });
}

TEST(PoolClose, AResourceWhoseCreationWasInFlightIsDestroyedAndItsAcquirerTold) {
  backend server;
  bool connect_may_finish = false;
  run_clean([&] {
    weft::pool_options<connection> options = server.options(2);
    auto real_factory = options.factory;
    options.factory = [&, real_factory] {
      while (!connect_may_finish) {  // a connect still in progress
        weft::yield();
      }
      return real_factory();
    };
    weft::pool<connection> connections(std::move(options));
    auto creator = weft::spawn([&] { connections.acquire(); });
    yield_until([&] { return connections.stats().reserved == 1; });
    connections.close();
    connect_may_finish = true;
    EXPECT_THROW(creator.await(), weft::pool_closed_error);
    EXPECT_EQ(server.next_id, 1) << "the factory finished";
    EXPECT_EQ(server.alive, 0) << "and what it made was destroyed, not handed out";
    EXPECT_EQ(connections.stats().reserved, 0u);
  });
}

TEST(PoolClose, AResourceReleasedAfterCloseIsDestroyed) {
  backend server;
  run_clean([&] {
    weft::pool<connection> connections(server.options(2));
    weft::lease<connection> held = connections.acquire();
    connections.close();
    EXPECT_EQ(server.alive, 1);
    held.release();
    EXPECT_EQ(server.alive, 0);
    EXPECT_EQ(connections.stats().idle, 0u);
  });
}

TEST(PoolClose, ALeaseMayOutliveItsPool) {
  backend server;
  run_clean([&] {
    weft::lease<connection> survivor;
    {
      weft::pool<connection> connections(server.options(1));
      survivor = connections.acquire();
    }
    EXPECT_EQ(server.alive, 1);
    EXPECT_EQ(survivor->id, 0);
    survivor.release();
    EXPECT_EQ(server.alive, 0);
  });
}

}  // namespace

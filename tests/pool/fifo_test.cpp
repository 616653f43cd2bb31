// weft::pool hand-off: a released resource goes to the oldest waiter, so waiters are served in
// arrival order and a coroutine that releases and acquires again cannot jump the queue.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "pool_fixture.hpp"
#include "test_support.hpp"
#include "weft/pool/pool.hpp"

namespace {

using pool_test::backend;
using pool_test::connection;
using weft_test::fifo_options;
using weft_test::run_clean;

TEST(PoolFifo, TwoWorkersOnOneResourceAlternate) {
  backend server;
  std::vector<std::string> order;
  run_clean(
      [&] {
        weft::pool<connection> connections(server.options(1));
        auto worker = [&](std::string name) {
          for (int round = 0; round < 2; ++round) {
            weft::lease<connection> held = connections.acquire();
            order.push_back(name + std::to_string(round));
            weft::yield();
          }  // released, then acquired again at once: behind the other worker
        };
        auto first = weft::spawn([&] { worker("A"); });
        auto second = weft::spawn([&] { worker("B"); });
        first.await();
        second.await();
      },
      fifo_options());
  EXPECT_EQ(order, (std::vector<std::string>{"A0", "B0", "A1", "B1"}));
  EXPECT_EQ(server.next_id, 1) << "one resource served everybody";
}

TEST(PoolFifo, SixWorkersAreServedInArrivalOrderEveryRound) {
  backend server;
  std::vector<int> order;
  run_clean(
      [&] {
        weft::pool<connection> connections(server.options(1));
        std::vector<weft::task<void>> workers;
        for (int who = 0; who < 6; ++who) {
          workers.push_back(weft::spawn([&, who] {
            for (int round = 0; round < 3; ++round) {
              weft::lease<connection> held = connections.acquire();
              order.push_back(who);
              weft::yield();
            }
          }));
        }
        for (auto& worker : workers) {
          worker.await();
        }
      },
      fifo_options());
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5, 0, 1, 2, 3, 4, 5}));
}

TEST(PoolFifo, TheReleasingCoroutineCannotTakeTheResourceBack) {
  backend server;
  run_clean([&] {
    weft::pool<connection> connections(server.options(1));
    weft::lease<connection> held = connections.acquire();
    bool waiter_served = false;
    auto waiter = weft::spawn([&] {
      weft::lease<connection> mine = connections.acquire();
      waiter_served = true;
    });
    weft_test::yield_until([&] { return connections.stats().waiters == 1; });
    held.release();
    // The waiter has not run yet, but the resource is already its own.
    EXPECT_FALSE(connections.try_acquire().has_value());
    EXPECT_EQ(connections.stats().active, 1u);
    EXPECT_EQ(connections.stats().idle, 0u);
    waiter.await();
    EXPECT_TRUE(waiter_served);
  });
}

}  // namespace

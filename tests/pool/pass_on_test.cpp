// weft::pool waiters that leave: one that times out leaves the queue to the next, and one that is
// cancelled after being served (a resource, or a slot to create one) passes it on.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

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

TEST(PoolPassOn, AWaiterThatTimesOutLeavesTheResourceToTheNextOne) {
  backend server;
  run_clean([&] {
    weft::pool<connection> connections(server.options(1));
    weft::lease<connection> held = connections.acquire();
    bool impatient_timed_out = false;
    int patient_got = -1;
    auto impatient = weft::spawn([&] {
      try {
        connections.acquire(weft::timeout(5ms));
      } catch (const weft::timeout_error&) {
        impatient_timed_out = true;
      }
    });
    auto patient = weft::spawn([&] { patient_got = connections.acquire()->id; });
    // Both queued; or, on a machine that stalled this thread past the 5 ms, the impatient one
    // already gone (its timer fired at the first reactor tick): then waiters never reaches 2.
    yield_until([&] { return connections.stats().waiters == 2 || impatient_timed_out; });
    impatient.await();
    EXPECT_TRUE(impatient_timed_out);
    EXPECT_EQ(connections.stats().waiters, 1u);
    held.release();
    patient.await();
    EXPECT_EQ(patient_got, 0);
    EXPECT_EQ(connections.stats().timeouts, 1u);
    expect_accounting(connections.stats(), server);
  });
}

TEST(PoolPassOn, AWaiterCancelledAfterBeingHandedAResourcePassesItOn) {
  backend server;
  run_clean([&] {
    weft::pool<connection> connections(server.options(1));
    weft::lease<connection> held = connections.acquire();
    bool first_cancelled = false;
    int second_got = -1;
    auto first = weft::spawn([&] {
      try {
        connections.acquire();
        ADD_FAILURE() << "the first waiter should have been cancelled";
      } catch (const weft::cancelled_error&) {
        first_cancelled = true;
      }
    });
    auto second = weft::spawn([&] { second_got = connections.acquire()->id; });
    yield_until([&] { return connections.stats().waiters == 2; });
    held.release();  // handed to the first waiter, which has not run yet...
    first.cancel();  // ...and leaves: the resource must reach the second
    first.await();
    second.await();
    EXPECT_TRUE(first_cancelled);
    EXPECT_EQ(second_got, 0);
    EXPECT_EQ(connections.stats().created, 1u);
    EXPECT_EQ(connections.stats().idle, 1u);
    expect_accounting(connections.stats(), server);
  });
}

TEST(PoolPassOn, AWaiterCancelledAfterBeingGivenACreationSlotPassesTheSlotOn) {
  backend server;
  run_clean([&] {
    weft::pool<connection> connections(server.options(1));
    weft::lease<connection> held = connections.acquire();
    int second_got = -1;
    auto first = weft::spawn([&] { connections.acquire(); });
    auto second = weft::spawn([&] { second_got = connections.acquire()->id; });
    yield_until([&] { return connections.stats().waiters == 2; });
    held.discard();  // the slot is free: reserved for the first waiter to create in...
    EXPECT_EQ(connections.stats().reserved, 1u);
    first.cancel();  // ...which leaves: the second creates instead
    EXPECT_THROW(first.await(), weft::cancelled_error);
    second.await();
    EXPECT_EQ(second_got, 1);
    EXPECT_EQ(connections.stats().reserved, 0u);
    EXPECT_EQ(connections.stats().created, 2u);
    expect_accounting(connections.stats(), server);
  });
}

TEST(PoolPassOn, AWaiterCancelledBeforeBeingServedLeavesNoTrace) {
  backend server;
  run_clean([&] {
    weft::pool<connection> connections(server.options(1));
    weft::lease<connection> held = connections.acquire();
    auto waiter = weft::spawn([&] { connections.acquire(); });
    yield_until([&] { return connections.stats().waiters == 1; });
    waiter.cancel();
    EXPECT_THROW(waiter.await(), weft::cancelled_error);
    EXPECT_EQ(connections.stats().waiters, 0u);
    held.release();
    EXPECT_EQ(connections.stats().idle, 1u) << "nobody waits: the resource goes idle";
  });
}

}  // namespace

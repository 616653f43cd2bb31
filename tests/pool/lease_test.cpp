// weft::lease misuse: a resource is returned exactly once, and only to its own pool.
#include <gtest/gtest.h>

#include <stdexcept>
#include <utility>

#include "pool_fixture.hpp"
#include "test_support.hpp"
#include "weft/pool/pool.hpp"

namespace {

using pool_test::backend;
using pool_test::connection;
using weft_test::run_clean;

TEST(PoolLease, ReleasingTwiceIsALogicError) {
  backend server;
  run_clean([&] {
    weft::pool<connection> connections(server.options(1));
    weft::lease<connection> held = connections.acquire();
    held.release();
    EXPECT_FALSE(held.valid());
    EXPECT_THROW(held.release(), std::logic_error);
    EXPECT_THROW(held.discard(), std::logic_error);
    EXPECT_THROW(held.get(), std::logic_error);
    EXPECT_EQ(connections.stats().idle, 1u) << "returned once, not twice";
  });
}

TEST(PoolLease, ReleasingIntoAnotherPoolIsALogicError) {
  backend first_server;
  backend second_server;
  run_clean([&] {
    weft::pool<connection> first(first_server.options(1));
    weft::pool<connection> second(second_server.options(1));
    weft::lease<connection> held = first.acquire();
    EXPECT_THROW(second.release(held), std::logic_error);
    EXPECT_TRUE(held.valid()) << "the refused release left the lease alone";
    first.release(held);
    EXPECT_FALSE(held.valid());
    EXPECT_EQ(first.stats().idle, 1u);
    EXPECT_EQ(second.stats().count(), 0u);
  });
}

TEST(PoolLease, AMovedLeaseReturnsTheResourceOnce) {
  backend server;
  run_clean([&] {
    weft::pool<connection> connections(server.options(1));
    weft::lease<connection> held = connections.acquire();
    weft::lease<connection> moved = std::move(held);
    EXPECT_FALSE(held.valid());
    EXPECT_THROW(held.release(), std::logic_error);
    moved.release();
    EXPECT_EQ(connections.stats().idle, 1u);
    EXPECT_EQ(connections.stats().active, 0u);
  });
}

TEST(PoolLease, DiscardDestroysInsteadOfReturning) {
  backend server;
  run_clean([&] {
    weft::pool<connection> connections(server.options(1));
    connections.acquire().discard();
    EXPECT_EQ(server.alive, 0);
    EXPECT_EQ(connections.stats().destroyed, 1u);
    EXPECT_EQ(connections.acquire()->id, 1);
  });
}

}  // namespace

// weft::pg::pool while its server goes down and comes back: the circuit breaker opens, fails
// fast while the server is away, and closes again through a half-open probe once it is back.
// On a private server (the shared one must stay up for the other test processes). A backend
// killed under a live server is pool_test.cpp's (LostConnectionIsReplaced, and the healthcheck
// replacing an idle one).
#include <chrono>
#include <cstddef>
#include <exception>
#include <memory>
#include <string>

#include "pg/pg_private_server.hpp"
#include "test_support.hpp"
#include "weft/pg/pool.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::run_clean;
namespace pg = weft::pg;

// consecutive_failures without the clock: `threshold` failures in a row open the breaker, and it
// lets a probe through only once the test says the cool-down is over. The timed strategy has its
// own tests (circuit_breaker_test.cpp); here a slow CI machine must not turn a cool-down into a
// race with the fail-fast checks.
class gated_recovery final : public weft::circuit_breaker_strategy {
 public:
  explicit gated_recovery(std::size_t threshold) : threshold_(threshold) {}
  void on_success(weft::circuit_breaker& breaker) override {
    failures_in_a_row_ = 0;
    if (breaker.state() == weft::circuit_state::half_open) {
      breaker.close();
    }
  }
  void on_failure(weft::circuit_breaker& breaker, const std::exception_ptr&) override {
    ++failures_in_a_row_;
    if (breaker.state() == weft::circuit_state::half_open ||
        (breaker.state() == weft::circuit_state::closed && failures_in_a_row_ >= threshold_)) {
      breaker.open();
    }
  }
  bool should_try_recovery(const weft::circuit_breaker&) override { return recovery_allowed; }

  bool recovery_allowed = false;

 private:
  std::size_t threshold_;
  std::size_t failures_in_a_row_ = 0;
};

class PgPoolOutage : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      server_ = std::make_unique<weft_pg_test::private_server>();
    } catch (const std::exception& failure) {
      FAIL() << failure.what();
    }
  }

  // Blocking server control, off the scheduler's thread so the pool's sockets keep being served.
  void stop_server() {
    weft::thread_pool::run([this] { server_->stop(); });
  }
  void start_server() {
    weft::thread_pool::run([this] { server_->start(); });
  }

  std::unique_ptr<weft_pg_test::private_server> server_;
};

TEST_F(PgPoolOutage, BreakerOpensWhileTheServerIsDownAndClosesOnceItIsBack) {
  constexpr std::size_t threshold = 2;
  run_clean([&] {
    pg::pool_options settings;
    settings.conninfo = server_->conninfo();
    settings.max = 2;
    settings.acquire_timeout = 10s;
    settings.connect_timeout = 5s;
    auto strategy = std::make_shared<gated_recovery>(threshold);
    settings.breaker_strategy = strategy;
    pg::pool db(std::move(settings));
    EXPECT_EQ(db.query("SELECT 41 + 1").value<int>(), 42);

    // A query in flight when the server dies fails; it does not hang.
    bool sent = false;
    auto in_flight = weft::spawn([&] {
      weft::lease<pg::connection> conn = db.acquire();
      sent = true;
      conn->query("SELECT pg_sleep(60)");
    });
    weft_test::yield_until([&] { return sent; });  // it is suspended inside query() now
    stop_server();
    try {
      in_flight.await();
      ADD_FAILURE() << "the query in flight succeeded with the server down";
    } catch (const pg::error&) {
    } catch (const std::exception& failure) {
      ADD_FAILURE() << "the query in flight failed with something other than a pg::error: "
                    << failure.what() << "\n"
                    << server_->log_tail();
    }
    EXPECT_EQ(db.stats().count(), 0u) << "the lost connection was dropped, not kept";
    EXPECT_EQ(db.stats().rejected_releases, 1u) << "and counted as the first failure";

    // New connections fail until `threshold` failures in a row open the breaker.
    std::size_t attempts = 0;
    while (db.breaker().state() != weft::circuit_state::open && attempts < 2 * threshold) {
      ++attempts;
      try {
        db.query("SELECT 1");
        ADD_FAILURE() << "a query succeeded with the server down";
      } catch (const pg::error& failure) {
        EXPECT_EQ(failure.sqlstate(), "08001") << failure.what() << "\n" << server_->log_tail();
      }
    }
    EXPECT_EQ(db.breaker().state(), weft::circuit_state::open);
    EXPECT_EQ(attempts, threshold - 1) << "the lost connection was the first failure";
    EXPECT_EQ(db.stats().create_failures, threshold - 1);

    // Open: refused at once, without trying the server.
    EXPECT_THROW(db.query("SELECT 1"), weft::service_unavailable_error);
    EXPECT_THROW(db.acquire(weft::timeout(5s)), weft::service_unavailable_error);
    EXPECT_EQ(db.stats().create_failures, threshold - 1) << "the factory was not called";

    start_server();
    // Still open until the strategy allows recovery: refused, never a connect attempt, even
    // with the server back.
    EXPECT_THROW(db.query("SELECT 1"), weft::service_unavailable_error);
    // Once the cool-down is over, the next acquire is the probe; it succeeds and closes the
    // breaker.
    strategy->recovery_allowed = true;
    int result = 0;
    try {
      result = db.query("SELECT 6 * 7").value<int>();
    } catch (const std::exception& failure) {
      ADD_FAILURE() << "the probe failed: " << failure.what() << "\n" << server_->log_tail();
    }
    EXPECT_EQ(result, 42);
    EXPECT_EQ(db.breaker().state(), weft::circuit_state::closed);
    EXPECT_EQ(db.breaker().times_opened(), 1u);
    EXPECT_EQ(db.stats().create_failures, threshold - 1) << "the probe was the only connect";

    // Back to normal: both connections usable at once.
    weft::lease<pg::connection> first = db.acquire();
    weft::lease<pg::connection> second = db.acquire();
    EXPECT_NE(first->backend_pid(), second->backend_pid());
    EXPECT_EQ(second->query("SELECT $1::int + 1", 1).value<int>(), 2);
    first.release();
    second.release();
    EXPECT_EQ(db.breaker().state(), weft::circuit_state::closed);
    db.close();
  });
}

// Without validation, an idle connection the server dropped is handed out and the first query
// on it fails ("the connection was lost"). With validate_after_idle, acquire checks it first:
// while the server is down, acquire fails with the connect error instead; once it is back, the
// pool recovers by itself.
TEST_F(PgPoolOutage, ValidationAfterIdleDropsDeadConnectionsAndThePoolRecoversByItself) {
  run_clean([&] {
    pg::pool_options settings;
    settings.conninfo = server_->conninfo();
    settings.max = 2;
    settings.acquire_timeout = 10s;
    settings.connect_timeout = 5s;
    settings.validate_after_idle = 0ms;  // every idle connection, so the test needs no clock
    pg::pool db(std::move(settings));
    {
      weft::lease<pg::connection> first = db.acquire();
      weft::lease<pg::connection> second = db.acquire();
      EXPECT_EQ(first->query("SELECT 1").value<int>(), 1);
      EXPECT_EQ(second->query("SELECT 1").value<int>(), 1);
    }
    ASSERT_EQ(db.stats().idle, 2u);

    stop_server();
    try {
      weft::lease<pg::connection> conn = db.acquire();
      ADD_FAILURE() << "acquire handed out a connection with the server down";
    } catch (const pg::error& failure) {
      EXPECT_EQ(failure.sqlstate(), "08001")
          << "a connect failure, not a lost connection: " << failure.what();
    }
    weft::pool_stats stats = db.stats();
    EXPECT_EQ(stats.validation_failures, 2u) << "both idle connections were found dead";
    EXPECT_EQ(stats.idle, 0u);
    EXPECT_EQ(stats.create_failures, 1u);

    start_server();
    EXPECT_EQ(db.query("SELECT 6 * 7").value<int>(), 42) << "no user action needed";

    // The same after a restart the pool never noticed: the idle connection is dead, the acquire
    // replaces it and the query succeeds.
    ASSERT_EQ(db.stats().idle, 1u);
    stop_server();
    start_server();
    weft::lease<pg::connection> conn = db.acquire();
    EXPECT_EQ(conn->query("SELECT 43").value<int>(), 43);
    EXPECT_EQ(db.stats().validation_failures, 3u);
    conn.release();
    db.close();
  });
}

// The breaker's strategy can be set, swapped and removed while the pool is in use.
TEST_F(PgPoolOutage, TheBreakerStrategyCanBeSwappedOnTheLivePool) {
  run_clean([&] {
    pg::pool_options settings;
    settings.conninfo = server_->conninfo();
    settings.max = 1;
    settings.connect_timeout = 5s;
    pg::pool db(std::move(settings));
    stop_server();
    for (int attempt = 0; attempt < 3; ++attempt) {
      EXPECT_THROW(db.query("SELECT 1"), pg::error);
    }
    EXPECT_EQ(db.breaker().state(), weft::circuit_state::closed) << "no strategy: never opens";
    auto strategy = std::make_shared<gated_recovery>(1);
    db.set_breaker_strategy(strategy);
    EXPECT_THROW(db.query("SELECT 1"), pg::error);
    EXPECT_EQ(db.breaker().state(), weft::circuit_state::open);
    EXPECT_THROW(db.query("SELECT 1"), weft::service_unavailable_error);
    start_server();
    db.set_breaker_strategy(nullptr);  // closes it: the next query goes to the server
    EXPECT_EQ(db.query("SELECT 8").value<int>(), 8);
    EXPECT_EQ(db.stats().create_failures, 4u);
    db.close();
  });
}

}  // namespace

// weft::pg::pool while its server goes down and comes back: the circuit breaker opens, fails
// fast while the server is away, and closes again through a half-open probe once it is back.
// On a private server (the shared one must stay up for the other test processes). A backend
// killed under a live server is pool_test.cpp's (LostConnectionIsReplaced, and the healthcheck
// replacing an idle one).
#include <chrono>
#include <memory>
#include <string>

#include "pg/pg_private_server.hpp"
#include "test_support.hpp"
#include "weft/pg/pool.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::run_clean;
namespace pg = weft::pg;

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
    // Long enough that no scheduling hiccup ends it between the failures and the fail-fast
    // checks below.
    settings.breaker_strategy = std::make_shared<weft::consecutive_failures>(threshold, 250ms);
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
    EXPECT_THROW(in_flight.await(), pg::error);
    EXPECT_EQ(db.stats().count(), 0u) << "the lost connection was dropped, not kept";

    // New connections fail until `threshold` failures in a row open the breaker.
    std::size_t attempts = 0;
    while (db.breaker().state() != weft::circuit_state::open && attempts < 2 * threshold) {
      ++attempts;
      try {
        db.query("SELECT 1");
        ADD_FAILURE() << "a query succeeded with the server down";
      } catch (const pg::error& failure) {
        EXPECT_EQ(failure.sqlstate(), "08001") << failure.what();
      }
    }
    EXPECT_EQ(db.breaker().state(), weft::circuit_state::open);
    EXPECT_EQ(attempts, threshold);
    EXPECT_EQ(db.stats().create_failures, threshold);

    // Open: refused at once, without trying the server.
    EXPECT_THROW(db.query("SELECT 1"), weft::service_unavailable_error);
    EXPECT_THROW(db.acquire(weft::timeout(5s)), weft::service_unavailable_error);
    EXPECT_EQ(db.stats().create_failures, threshold) << "the factory was not called";

    start_server();
    // Once the cool-down is over, the next acquire is the probe; it succeeds and closes the
    // breaker. Until then: refused, never a connect attempt.
    int result = 0;
    weft_test::yield_until([&] {
      try {
        result = db.query("SELECT 6 * 7").value<int>();
        return true;
      } catch (const weft::service_unavailable_error&) {
        weft::sleep_for(10ms);
        return false;
      }
    });
    EXPECT_EQ(result, 42);
    EXPECT_EQ(db.breaker().state(), weft::circuit_state::closed);
    EXPECT_EQ(db.breaker().times_opened(), 1u);
    EXPECT_EQ(db.stats().create_failures, threshold) << "the probe was the only connect";

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

}  // namespace

// weft::pg::pool: connections reused, reset between users, broken ones replaced.
#include "weft/pg/pool.hpp"

#include <chrono>
#include <string>

#include "pg/pg_server.hpp"
#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::run_clean;
namespace pg = weft::pg;

class PgPool : public weft_pg_test::pg_test {
 protected:
  pg::pool_options options(std::size_t max) const {
    pg::pool_options made;
    made.conninfo = conninfo_;
    made.max = max;
    made.acquire_timeout = 10s;
    return made;
  }
};

TEST_F(PgPool, ReleasedConnectionIsReusedByTheNextAcquire) {
  run_clean([&] {
    pg::pool db(options(2));
    int first_pid = 0;
    {
      weft::lease<pg::connection> conn = db.acquire();
      first_pid = conn->backend_pid();
      EXPECT_EQ(conn->query("SELECT $1::int + 1", 1).value<int>(), 2);
    }
    EXPECT_EQ(db.stats().idle, 1u);
    EXPECT_EQ(db.acquire()->backend_pid(), first_pid);
    EXPECT_EQ(db.query("SELECT 5").value<int>(), 5);
    EXPECT_EQ(db.stats().created, 1u);
    db.close();
  });
}

TEST_F(PgPool, ReleaseResetsTheSession) {
  run_clean([&] {
    pg::pool db(options(1));
    int pid = 0;
    {
      weft::lease<pg::connection> conn = db.acquire();
      pid = conn->backend_pid();
      conn->execute_script("SET application_name = 'dirty'; CREATE TEMP TABLE leftovers (n int)");
      conn->prepare("SELECT 1", "leftover_statement");
      conn->execute_script("BEGIN");  // and a transaction left open
    }
    weft::lease<pg::connection> conn = db.acquire();
    EXPECT_EQ(conn->backend_pid(), pid) << "the same session, reset";
    EXPECT_FALSE(conn->in_transaction());
    EXPECT_EQ(conn->query("SHOW application_name").value<std::string>(), "");
    EXPECT_EQ(conn->query("SELECT count(*) FROM pg_prepared_statements").value<int>(), 0);
    EXPECT_FALSE(conn->query("SELECT to_regclass('pg_temp.leftovers') IS NOT NULL").value<bool>());
    conn.release();
    db.close();
  });
}

TEST_F(PgPool, CancelledUserStillReturnsACleanSession) {
  run_clean([&] {
    pg::pool db(options(1));
    int pid = 0;
    bool sleeping = false;
    auto user = weft::spawn([&] {
      weft::lease<pg::connection> conn = db.acquire();
      pid = conn->backend_pid();
      conn->execute_script("BEGIN");
      sleeping = true;
      conn->query("SELECT pg_sleep(60)");
    });
    weft_test::yield_until([&] { return sleeping; });
    pg::connection observer = pg::connection::connect(conninfo_, weft::timeout(10s));
    while (observer.query("SELECT state FROM pg_stat_activity WHERE pid = $1", pid)
               .value<std::string>() != "active") {
      weft::sleep_for(1ms);  // polling the server until the sleep runs there
    }
    user.cancel("test");
    EXPECT_THROW(user.await(), weft::cancelled_error);
    weft::lease<pg::connection> conn = db.acquire();
    EXPECT_EQ(conn->backend_pid(), pid) << "the session was recovered and reset, not dropped";
    EXPECT_FALSE(conn->in_transaction());
    EXPECT_EQ(conn->query("SELECT 1").value<int>(), 1);
    conn.release();
    db.close();
  });
}

TEST_F(PgPool, LostConnectionIsReplaced) {
  run_clean([&] {
    pg::pool db(options(2));
    int lost_pid = 0;
    {
      weft::lease<pg::connection> victim = db.acquire();
      weft::lease<pg::connection> killer = db.acquire();
      lost_pid = victim->backend_pid();
      killer->query("SELECT pg_terminate_backend($1, 5000)", lost_pid);
      EXPECT_THROW(victim->query("SELECT 1"), pg::error);
    }
    EXPECT_EQ(db.stats().count(), 1u) << "the lost one was dropped on release";
    weft::lease<pg::connection> first = db.acquire();
    weft::lease<pg::connection> second = db.acquire();
    EXPECT_NE(first->backend_pid(), lost_pid);
    EXPECT_NE(second->backend_pid(), lost_pid);
    EXPECT_EQ(second->query("SELECT 1").value<int>(), 1);
    first.release();
    second.release();
    db.close();
  });
}

TEST_F(PgPool, HealthcheckReplacesAnIdleConnectionWhoseBackendDied) {
  run_clean([&] {
    pg::pool_options settings = options(2);
    settings.min = 1;
    settings.healthcheck_interval = 10ms;
    pg::pool db(std::move(settings));
    int idle_pid = 0;
    {
      weft::lease<pg::connection> conn = db.acquire();
      idle_pid = conn->backend_pid();
    }
    pg::connection killer = pg::connection::connect(conninfo_, weft::timeout(10s));
    killer.query("SELECT pg_terminate_backend($1, 5000)", idle_pid);
    while (db.stats().healthcheck_failures == 0) {
      weft::sleep_for(5ms);
    }
    weft::lease<pg::connection> conn = db.acquire();
    EXPECT_NE(conn->backend_pid(), idle_pid);
    EXPECT_EQ(conn->query("SELECT 1").value<int>(), 1);
    conn.release();
    db.close();
  });
}

}  // namespace

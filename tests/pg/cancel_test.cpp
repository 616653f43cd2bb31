// weft::pg under time limits and cancellation: the server-side query is cancelled and the
// connection stays usable; other coroutines run while a query waits.
#include <chrono>
#include <string>

#include "pg/pg_server.hpp"
#include "test_support.hpp"
#include "weft/pg/connection.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::run_clean;
namespace pg = weft::pg;

class PgCancel : public weft_pg_test::pg_test {
 protected:
  // What the server says the session with this backend pid is doing.
  static std::string backend_state(pg::connection& observer, int pid) {
    return observer.query("SELECT state FROM pg_stat_activity WHERE pid = $1", pid)
        .value<std::string>();
  }
};

TEST_F(PgCancel, QueryTimeoutCancelsTheQueryAndTheConnectionStaysUsable) {
  run_clean([&] {
    pg::connection conn = pg::connection::connect(conninfo_, weft::timeout(10s));
    pg::connection observer = pg::connection::connect(conninfo_, weft::timeout(10s));
    try {
      conn.query(weft::timeout(50ms), "SELECT pg_sleep(60)");
      FAIL() << "pg_sleep(60) finished within 50 ms";
    } catch (const weft::timeout_error& failure) {
      EXPECT_NE(std::string(failure.what()).find("pg_sleep(60)"), std::string::npos)
          << failure.what();
    }
    EXPECT_TRUE(conn.is_open());
    EXPECT_FALSE(conn.busy());
    // The server is no longer running the sleep: the session is back to idle.
    EXPECT_EQ(backend_state(observer, conn.backend_pid()), "idle");
    EXPECT_EQ(conn.query("SELECT $1::int", 5).value<int>(), 5);
  });
}

TEST_F(PgCancel, CancellingTheCoroutineCancelsTheQuery) {
  std::size_t fds_before = 0;
  run_clean([&] {
    pg::connection conn = pg::connection::connect(conninfo_, weft::timeout(10s));
    pg::connection observer = pg::connection::connect(conninfo_, weft::timeout(10s));
    fds_before = weft_pg_test::open_fd_count();
    auto sleeper = weft::spawn([&] { conn.query("SELECT pg_sleep(60)"); });
    // Wait until the server really runs it.
    while (backend_state(observer, conn.backend_pid()) != "active") {
      weft::sleep_for(1ms);
    }
    sleeper.cancel("test");
    EXPECT_THROW(sleeper.await(), weft::cancelled_error);
    EXPECT_TRUE(conn.is_open());
    EXPECT_EQ(backend_state(observer, conn.backend_pid()), "idle");
    EXPECT_EQ(conn.query("SELECT 'still usable'").value<std::string>(), "still usable");
    EXPECT_EQ(weft_pg_test::open_fd_count(), fds_before)
        << "the cancel request's own connection is closed";
  });
}

TEST_F(PgCancel, OtherCoroutinesRunWhileAQueryWaits) {
  run_clean([&] {
    pg::connection conn = pg::connection::connect(conninfo_, weft::timeout(10s));
    bool query_done = false;
    int ticks = 0;
    auto query = weft::spawn([&] {
      conn.query("SELECT pg_sleep(0.2)");
      query_done = true;
    });
    auto counter = weft::spawn([&] {
      while (!query_done) {
        ++ticks;
        weft::sleep_for(1ms);
      }
    });
    query.await();
    counter.await();
    EXPECT_GE(ticks, 3) << "the counter advanced while the query waited on the server";
  });
}

TEST_F(PgCancel, ManyConnectionsQueryConcurrently) {
  run_clean([&] {
    constexpr int sessions = 4;
    std::vector<weft::task<int>> tasks;
    for (int index = 0; index < sessions; ++index) {
      tasks.push_back(weft::spawn([&, index] {
        pg::connection conn = pg::connection::connect(conninfo_, weft::timeout(10s));
        return conn.query("SELECT $1::int FROM pg_sleep(0.05)", index).value<int>();
      }));
    }
    int sum = 0;
    for (auto& task : tasks) {
      sum += task.await();
    }
    EXPECT_EQ(sum, 0 + 1 + 2 + 3);
  });
}

TEST_F(PgCancel, TimeoutWhileNotBusyOnTheServerStillLeavesACleanSession) {
  run_clean([&] {
    pg::connection conn = pg::connection::connect(conninfo_, weft::timeout(10s));
    // A limit that has already passed: the query is sent and at once interrupted.
    EXPECT_THROW(conn.query(weft::timeout(0ms), "SELECT 1"), weft::timeout_error);
    EXPECT_TRUE(conn.is_open());
    EXPECT_EQ(conn.query("SELECT 2").value<int>(), 2);
  });
}

}  // namespace

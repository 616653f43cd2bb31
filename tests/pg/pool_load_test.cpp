// weft::pg::pool under load: many coroutines contending for a few real connections.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "pg/pg_server.hpp"
#include "test_support.hpp"
#include "weft/pg/pool.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::run_clean;
namespace pg = weft::pg;

class PgPoolLoad : public weft_pg_test::pg_test {
 protected:
  // application_name marks this test's sessions in pg_stat_activity (the server is shared with
  // other test processes); it survives the pool's DISCARD ALL, which resets to the session's
  // startup values.
  pg::pool_options options(std::size_t max) const {
    pg::pool_options made;
    made.conninfo = conninfo_ + " application_name=" + application_name();
    made.max = max;
    made.acquire_timeout = 30s;
    return made;
  }
  static std::string application_name() { return "weft_load_" + std::to_string(::getpid()); }
};

TEST_F(PgPoolLoad, HundredCoroutinesShareFiveConnectionsAndEveryQueryIsRight) {
  constexpr int coroutines = 100;
  constexpr std::size_t max = 5;
  run_clean([&] {
    pg::pool db(options(max));
    int leased = 0;
    int peak_leased = 0;
    int finished = 0;
    bool workers_done = false;
    int peak_backends = 0;
    int samples = 0;

    // Counts this test's backends from a connection of its own while the workers run.
    auto monitor = weft::spawn([&] {
      pg::connection observer = pg::connection::connect(conninfo_, weft::timeout(10s));
      while (!workers_done) {
        int backends = observer
                           .query(
                               "SELECT count(*)::int FROM pg_stat_activity "
                               "WHERE application_name = $1",
                               application_name())
                           .value<int>();
        peak_backends = std::max(peak_backends, backends);
        ++samples;
        weft::sleep_for(2ms);  // a sampling period, not a synchronisation
      }
    });

    std::vector<weft::task<void>> workers;
    for (int worker = 0; worker < coroutines; ++worker) {
      workers.push_back(weft::spawn([&, worker] {
        {
          weft::lease<pg::connection> conn = db.acquire();
          ++leased;
          peak_leased = std::max(peak_leased, leased);
          weft::pool_stats now = db.stats();
          EXPECT_LE(now.count() + now.reserved, max);
          for (int step = 0; step < 3; ++step) {
            int sent = worker * 10 + step;
            EXPECT_EQ(conn->query("SELECT $1::int + 1", sent).value<int>(), sent + 1);
          }
          // Holds the connection a while, so the others really queue.
          EXPECT_EQ(conn->query("SELECT $1::int * 2 FROM pg_sleep(0.01)", worker).value<int>(),
                    worker * 2);
          --leased;
        }
        // And once through the pool's acquire-run-release shorthand.
        EXPECT_EQ(db.query("SELECT $1::int - 1", worker).value<int>(), worker - 1);
        ++finished;
      }));
    }
    for (weft::task<void>& worker : workers) {
      worker.await();
    }
    workers_done = true;
    monitor.await();

    EXPECT_EQ(finished, coroutines) << "every coroutine got its turn";
    EXPECT_EQ(peak_leased, static_cast<int>(max)) << "the pool was saturated, never exceeded";
    EXPECT_GE(samples, 1);
    EXPECT_GE(peak_backends, 1);
    EXPECT_LE(peak_backends, static_cast<int>(max)) << "backends seen in pg_stat_activity";

    weft::pool_stats stats = db.stats();
    EXPECT_EQ(stats.waiters, 0u);
    EXPECT_EQ(stats.active, 0u);
    EXPECT_EQ(stats.reserved, 0u);
    EXPECT_EQ(stats.created, max);
    EXPECT_EQ(stats.destroyed, 0u);
    EXPECT_EQ(stats.idle + stats.active, stats.created - stats.destroyed);
    EXPECT_EQ(stats.create_failures, 0u);
    EXPECT_EQ(stats.timeouts, 0u);
    db.close();
    stats = db.stats();
    EXPECT_EQ(stats.idle, 0u);
    EXPECT_EQ(stats.destroyed, stats.created);
  });
}

// FIFO hand-off with real connections: whoever queued first is served first, whichever
// connection happens to come back.
TEST_F(PgPoolLoad, QueuedCoroutinesAreServedInArrivalOrder) {
  constexpr int coroutines = 40;
  constexpr std::size_t max = 4;
  run_clean(
      [&] {
        pg::pool db(options(max));
        std::vector<int> queued_arrivals;
        std::vector<int> queued_services;
        std::vector<weft::task<void>> workers;
        for (int worker = 0; worker < coroutines; ++worker) {
          workers.push_back(weft::spawn([&, worker] {
            weft::pool_stats before = db.stats();
            bool must_wait = before.waiters > 0 ||
                             (before.idle == 0 && before.count() + before.reserved >= before.max);
            if (must_wait) {
              queued_arrivals.push_back(worker);
            }
            weft::lease<pg::connection> conn = db.acquire();
            if (must_wait) {
              queued_services.push_back(worker);
            }
            // Connections come back in whatever order the server answers.
            EXPECT_EQ(
                conn->query("SELECT $1::int FROM pg_sleep(0.001 * ($1 % 3))", worker).value<int>(),
                worker);
          }));
        }
        for (weft::task<void>& worker : workers) {
          worker.await();
        }
        EXPECT_GE(queued_arrivals.size(), static_cast<std::size_t>(coroutines) - max);
        EXPECT_EQ(queued_services, queued_arrivals);
        EXPECT_EQ(db.stats().created, max);
        db.close();
      },
      weft_test::fifo_options());
}

}  // namespace

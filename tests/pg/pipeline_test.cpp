// Pipelining: several coroutines querying one connection at once, and weft::pg::pool::query
// sharing its connections between them.
//
// To pipeline deterministically, the first query on the connection under test blocks on the
// server: it waits for an advisory lock (keyed by this process's pid; the server is shared with
// other test processes) that a second connection holds. Everything sent after it is queued on
// the connection until that connection lets go.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "pg/pg_server.hpp"
#include "test_support.hpp"
#include "weft/pg/connection.hpp"
#include "weft/pg/pool.hpp"
#include "weft/pg/transaction.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::run_clean;
namespace pg = weft::pg;

class PgPipeline : public weft_pg_test::pg_test {
 protected:
  static int lock_key() { return static_cast<int>(::getpid()); }

  // Holds the advisory lock until release().
  struct blocker {
    pg::connection session;
    explicit blocker(const std::string& conninfo)
        : session(pg::connection::connect(conninfo, weft::timeout(10s))) {
      session.query("SELECT pg_advisory_lock($1)", lock_key());
    }
    void release() {
      EXPECT_TRUE(session.query("SELECT pg_advisory_unlock($1)", lock_key()).value<bool>());
    }
  };

  // A query that waits on the server until the blocker releases.
  static constexpr const char* blocked_query = "SELECT 0 FROM pg_advisory_xact_lock($1)";

  pg::connection connect() const { return pg::connection::connect(conninfo_, weft::timeout(10s)); }

  // Spawns `victims` coroutines that each run query(victim), cancels each after a few turns
  // (before it sends, while it waits, while it reads), and returns how many ended cancelled.
  template <class Query>
  static int cancel_mid_query(int victims, int most_turns, Query&& query) {
    int cancelled = 0;
    for (int victim = 0; victim < victims; ++victim) {
      auto doomed = weft::spawn([&query, victim] { query(victim); });
      for (int turn = 0; turn < victim % most_turns; ++turn) {
        weft::yield();
      }
      doomed.cancel();
      try {
        doomed.await();
      } catch (const weft::cancelled_error&) {
        ++cancelled;
      }
    }
    return cancelled;
  }
};

TEST_F(PgPipeline, ConcurrentQueriesAreSentAtOnceRunInSendingOrderAndEachGetsItsOwnAnswer) {
  constexpr int queries = 20;
  run_clean([&] {
    pg::connection conn = connect();
    conn.execute_script("CREATE TEMP SEQUENCE weft_sent_order");
    blocker lock(conninfo_);
    auto head = weft::spawn([&] { conn.query(blocked_query, lock_key()); });
    weft_test::yield_until([&] { return conn.in_flight() == 1; });

    std::vector<int> sending_order;
    std::vector<weft::task<void>> workers;
    for (int worker = 0; worker < queries; ++worker) {
      workers.push_back(weft::spawn([&, worker] {
        sending_order.push_back(worker);  // no suspension between this and the send
        pg::result row = conn.query("SELECT $1::int, nextval('weft_sent_order')::int", worker * 7);
        EXPECT_EQ(row[0][0].as<int>(), worker * 7) << "each caller gets its own answer";
        auto position = std::find(sending_order.begin(), sending_order.end(), worker);
        EXPECT_EQ(row[0][1].as<int>(), position - sending_order.begin() + 1)
            << "the server ran the queries in the order they were sent";
      }));
    }
    weft_test::yield_until([&] { return conn.in_flight() == queries + 1; });
    EXPECT_TRUE(conn.busy());
    lock.release();
    head.await();
    for (weft::task<void>& worker : workers) {
      worker.await();
    }
    EXPECT_EQ(conn.in_flight(), 0u);
    EXPECT_FALSE(conn.busy());
    EXPECT_EQ(conn.query("SELECT nextval('weft_sent_order')::int").value<int>(), queries + 1);
  });
}

// More queued than the socket holds: the output waits for the server, which answers
// meanwhile; everything goes out and every answer comes back.
TEST_F(PgPipeline, QueriesLargerThanTheSocketBufferAllGetThrough) {
  constexpr int queries = 40;
  constexpr std::size_t size = 256 * 1024;  // 10 MiB in all
  run_clean([&] {
    pg::connection conn = connect();
    blocker lock(conninfo_);
    auto head = weft::spawn([&] { return conn.query(blocked_query, lock_key()).value<int>(); });
    weft_test::yield_until([&] { return conn.in_flight() == 1; });
    std::vector<weft::task<int>> workers;
    for (int worker = 0; worker < queries; ++worker) {
      workers.push_back(weft::spawn([&, worker] {
        std::string text(size + static_cast<std::size_t>(worker), 'x');
        return conn.query("SELECT length($1::text)", text).value<int>();
      }));
    }
    weft_test::yield_until([&] { return conn.in_flight() == queries + 1; });
    lock.release();
    EXPECT_EQ(head.await(), 0);
    for (int worker = 0; worker < queries; ++worker) {
      EXPECT_EQ(workers[static_cast<std::size_t>(worker)].await(), static_cast<int>(size) + worker);
    }
    EXPECT_EQ(conn.in_flight(), 0u);
  });
}

TEST_F(PgPipeline, AnErrorFailsOnlyItsOwnQuery) {
  run_clean([&] {
    pg::connection conn = connect();
    blocker lock(conninfo_);
    auto head = weft::spawn([&] { conn.query(blocked_query, lock_key()); });
    weft_test::yield_until([&] { return conn.in_flight() == 1; });
    auto before = weft::spawn([&] { return conn.query("SELECT 1").value<int>(); });
    auto failing = weft::spawn([&] {
      try {
        conn.query("SELECT 1 / $1::int", 0);
        return std::string("no error");
      } catch (const pg::error& failure) {
        return failure.sqlstate();
      }
    });
    auto after = weft::spawn([&] { return conn.query("SELECT 3").value<int>(); });
    weft_test::yield_until([&] { return conn.in_flight() == 4; });
    lock.release();
    head.await();
    EXPECT_EQ(before.await(), 1);
    EXPECT_EQ(failing.await(), "22012") << "division by zero";
    EXPECT_EQ(after.await(), 3) << "the failed query did not abort the one behind it";
    EXPECT_TRUE(conn.is_open());
    EXPECT_EQ(conn.query("SELECT 4").value<int>(), 4);
  });
}

TEST_F(PgPipeline, AQueryThatTimesOutBehindAnotherIsAbandonedAndTheRestAreAnswered) {
  run_clean([&] {
    pg::connection conn = connect();
    blocker lock(conninfo_);
    auto head = weft::spawn([&] { return conn.query(blocked_query, lock_key()).value<int>(); });
    weft_test::yield_until([&] { return conn.in_flight() == 1; });
    try {
      conn.query(weft::timeout(20ms), "SELECT 2");
      ADD_FAILURE() << "a query queued behind a blocked one did not time out";
    } catch (const weft::timeout_error& failure) {
      EXPECT_NE(std::string(failure.what()).find("left to finish on the server"), std::string::npos)
          << failure.what();
    }
    EXPECT_EQ(conn.in_flight(), 2u) << "the abandoned query still runs on the server";
    auto later = weft::spawn([&] { return conn.query("SELECT 3").value<int>(); });
    weft_test::yield_until([&] { return conn.in_flight() == 3; });
    lock.release();
    EXPECT_EQ(head.await(), 0);
    EXPECT_EQ(later.await(), 3) << "the abandoned query's answer went to nobody";
    EXPECT_EQ(conn.in_flight(), 0u);
    EXPECT_EQ(conn.query("SELECT 4").value<int>(), 4);
  });
}

TEST_F(PgPipeline, TheOldestQueryTimingOutWithOthersBehindItIsNotCancelledOnTheServer) {
  run_clean([&] {
    pg::connection conn = connect();
    blocker lock(conninfo_);
    auto head = weft::spawn([&] {
      try {
        conn.query(weft::timeout(50ms), blocked_query, lock_key());
        return std::string("answered");
      } catch (const weft::timeout_error& failure) {
        return std::string(failure.what());
      }
    });
    weft_test::yield_until([&] { return conn.in_flight() == 1; });
    auto behind = weft::spawn([&] { return conn.query("SELECT 2").value<int>(); });
    weft_test::yield_until([&] { return conn.in_flight() == 2; });
    std::string head_outcome = head.await();
    EXPECT_NE(head_outcome.find("left to finish on the server"), std::string::npos) << head_outcome;
    lock.release();
    EXPECT_EQ(behind.await(), 2) << "a cancel request would have failed this query";
    EXPECT_EQ(conn.in_flight(), 0u);
  });
}

TEST_F(PgPipeline, ALoneQueryThatTimesOutIsCancelledOnTheServerWhileLaterQueriesWait) {
  run_clean([&] {
    pg::connection conn = connect();
    blocker lock(conninfo_);
    auto lone = weft::spawn([&] {
      try {
        conn.query(weft::timeout(50ms), blocked_query, lock_key());
        return std::string("answered");
      } catch (const weft::timeout_error& failure) {
        return std::string(failure.what());
      }
    });
    // Sent during the recovery, this one must wait for it rather than be cancelled.
    auto during = weft::spawn([&] {
      weft_test::yield_until([&] { return conn.recovering(); });
      return conn.query("SELECT 5").value<int>();
    });
    std::string outcome = lone.await();
    EXPECT_NE(outcome.find("cancelled on the server"), std::string::npos) << outcome;
    EXPECT_EQ(during.await(), 5);
    EXPECT_FALSE(conn.recovering());
    // The lock is still held: the blocked query no longer runs, or this would queue behind it.
    EXPECT_EQ(conn.query(weft::timeout(10s), "SELECT 6").value<int>(), 6);
    lock.release();
    EXPECT_EQ(conn.in_flight(), 0u);
    EXPECT_TRUE(conn.is_open());
  });
}

TEST_F(PgPipeline, AScriptNeedsTheConnectionToItself) {
  run_clean([&] {
    pg::connection conn = connect();
    blocker lock(conninfo_);
    auto query = weft::spawn([&] { conn.query(blocked_query, lock_key()); });
    weft_test::yield_until([&] { return conn.in_flight() == 1; });
    try {
      conn.execute_script("SELECT 1");
      ADD_FAILURE() << "a script ran while a query was in flight";
    } catch (const std::logic_error& failure) {
      EXPECT_NE(std::string(failure.what()).find("in flight"), std::string::npos) << failure.what();
    }
    lock.release();
    query.await();

    blocker second_lock(conninfo_);
    auto script = weft::spawn([&] {
      conn.execute_script("SELECT pg_advisory_xact_lock(" + std::to_string(lock_key()) + ")");
    });
    weft_test::yield_until([&] { return conn.busy(); });
    try {
      conn.query("SELECT 1");
      ADD_FAILURE() << "a query was pipelined behind a script";
    } catch (const std::logic_error& failure) {
      EXPECT_NE(std::string(failure.what()).find("script"), std::string::npos) << failure.what();
    }
    second_lock.release();
    script.await();
    EXPECT_EQ(conn.query("SELECT 1").value<int>(), 1);
  });
}

TEST_F(PgPipeline, AnotherCoroutinesQueryDuringATransactionIsALogicError) {
  run_clean([&] {
    pg::connection conn = connect();
    bool may_commit = false;
    bool begun = false;
    auto owner = weft::spawn([&] {
      pg::transaction tx(conn);
      begun = true;
      EXPECT_EQ(conn.query("SELECT 1").value<int>(), 1) << "its own coroutine may query";
      weft_test::yield_until([&] { return may_commit; });
      tx.commit();
    });
    weft_test::yield_until([&] { return begun; });
    try {
      conn.query("SELECT 2");
      ADD_FAILURE() << "a query from another coroutine ran inside the transaction";
    } catch (const std::logic_error& failure) {
      EXPECT_NE(std::string(failure.what()).find("transaction"), std::string::npos)
          << failure.what();
    }
    may_commit = true;
    owner.await();
    EXPECT_EQ(conn.query("SELECT 2").value<int>(), 2) << "anyone may query after the commit";
  });
}

TEST_F(PgPipeline, ALostConnectionFailsEveryQueryInFlight) {
  constexpr int queries = 5;
  run_clean([&] {
    pg::connection conn = connect();
    int victim_pid = conn.backend_pid();
    blocker lock(conninfo_);
    int failures = 0;
    auto counting_failures = [&](auto&& query) {
      return [&failures, query] {
        try {
          query();
        } catch (const pg::error&) {
          ++failures;
        }
      };
    };
    std::vector<weft::task<void>> workers;
    workers.push_back(
        weft::spawn(counting_failures([&] { conn.query(blocked_query, lock_key()); })));
    weft_test::yield_until([&] { return conn.in_flight() == 1; });
    for (int worker = 1; worker <= queries; ++worker) {
      workers.push_back(
          weft::spawn(counting_failures([&, worker] { conn.query("SELECT $1::int", worker); })));
    }
    weft_test::yield_until([&] { return conn.in_flight() == queries + 1; });
    lock.session.query("SELECT pg_terminate_backend($1, 5000)", victim_pid);
    for (weft::task<void>& worker : workers) {
      worker.await();
    }
    EXPECT_EQ(failures, queries + 1);
    EXPECT_FALSE(conn.is_open());
    EXPECT_EQ(conn.in_flight(), 0u);
    try {
      conn.query("SELECT 1");
      ADD_FAILURE() << "a lost connection ran a query";
    } catch (const pg::error& failure) {
      EXPECT_EQ(failure.sqlstate(), "08003");
    }
    lock.release();
  });
}

// Thirty coroutines pipelining on one connection, some with deadlines that expire (alone: a
// cancel on the server; behind others: abandoned) and some cancelled while they wait or read:
// every answer that arrives belongs to its caller, and the connection ends idle and usable.
TEST_F(PgPipeline, TimeoutsAndCancelsAmidAFullPipelineNeverMisrouteAnAnswer) {
  constexpr int workers = 30;
  constexpr int rounds = 6;
  run_clean([&] {
    pg::connection conn = connect();
    int answered = 0;
    int timed_out = 0;
    std::vector<weft::task<void>> tasks;
    for (int worker = 0; worker < workers; ++worker) {
      tasks.push_back(weft::spawn([&, worker] {
        for (int round = 0; round < rounds; ++round) {
          int sent = worker * 100 + round;
          try {
            int got = worker % 3 == 0
                          ? conn.query(weft::timeout(2ms),
                                       "SELECT $1::int FROM pg_sleep(0.001 * ($1 % 4))", sent)
                                .value<int>()
                          : conn.query("SELECT $1::int", sent).value<int>();
            EXPECT_EQ(got, sent) << "an answer reached the wrong caller";
            ++answered;
          } catch (const weft::timeout_error&) {
            ++timed_out;
          }
        }
      }));
    }
    int cancelled = cancel_mid_query(10, 3, [&](int victim) {
      EXPECT_EQ(conn.query("SELECT $1::int + 1000", victim).value<int>(), victim + 1000);
    });
    for (weft::task<void>& task : tasks) {
      task.await();
    }
    EXPECT_EQ(answered + timed_out, workers * rounds);
    EXPECT_GE(answered, workers * rounds * 2 / 3) << "only every third worker has a deadline";
    EXPECT_TRUE(conn.is_open());
    // Abandoned answers may still be on their way; a query behind them returns after them.
    EXPECT_EQ(conn.query(weft::timeout(10s), "SELECT 7").value<int>(), 7);
    EXPECT_EQ(conn.in_flight(), 0u);
    EXPECT_FALSE(conn.busy());
    conn.execute_script("SELECT 8");  // the session is the script's alone again
    std::printf("  [%d answered, %d timed out, %d cancelled]\n", answered, timed_out, cancelled);
  });
}

class PgSharedPool : public PgPipeline {
 protected:
  pg::pool_options options(std::size_t max) const {
    pg::pool_options made;
    made.conninfo = conninfo_;
    made.max = max;
    made.acquire_timeout = 30s;
    return made;
  }
  // One connection that takes one query at a time.
  pg::pool_options one_place() const {
    pg::pool_options made = options(1);
    made.pipeline_depth = 1;
    return made;
  }
  // Runs a blocked query through db; returns once it holds its connection.
  static weft::task<int> occupy(pg::pool& db) {
    auto head = weft::spawn([&db] { return db.query(blocked_query, lock_key()).value<int>(); });
    weft_test::yield_until([&] { return db.stats().active == 1; });
    return head;
  }
};

TEST_F(PgSharedPool, ManyCoroutinesShareTwoConnectionsAndEveryAnswerIsRight) {
  constexpr int coroutines = 40;
  constexpr int rounds = 5;
  run_clean([&] {
    pg::pool db(options(2));
    int answered = 0;
    std::vector<weft::task<void>> workers;
    for (int worker = 0; worker < coroutines; ++worker) {
      workers.push_back(weft::spawn([&, worker] {
        for (int round = 0; round < rounds; ++round) {
          int sent = worker * 100 + round;
          EXPECT_EQ(db.query("SELECT $1::int + 1", sent).value<int>(), sent + 1);
          ++answered;
        }
      }));
    }
    for (weft::task<void>& worker : workers) {
      worker.await();
    }
    EXPECT_EQ(answered, coroutines * rounds);
    weft::pool_stats stats = db.stats();
    EXPECT_EQ(stats.created, 2u);
    EXPECT_EQ(stats.active, 0u) << "every shared session went back when its last query ended";
    EXPECT_EQ(stats.idle, 2u);
    EXPECT_EQ(stats.waiters, 0u);
    db.close();
  });
}

TEST_F(PgSharedPool, QueriesJoinASharedSessionInsteadOfWaitingForAConnection) {
  run_clean([&] {
    pg::pool db(options(1));
    blocker lock(conninfo_);
    weft::task<int> head = occupy(db);
    int started = 0;
    std::vector<weft::task<int>> joined;
    for (int worker = 1; worker <= 5; ++worker) {
      joined.push_back(weft::spawn([&, worker] {
        ++started;  // then joins and sends without suspending in between
        return db.query("SELECT $1::int", worker).value<int>();
      }));
    }
    weft_test::yield_until([&] { return started == 5; });
    EXPECT_EQ(db.stats().waiters, 0u) << "they joined the shared session, none waits in acquire";
    EXPECT_EQ(db.stats().active, 1u);
    EXPECT_FALSE(head.done());
    lock.release();
    EXPECT_EQ(head.await(), 0);
    for (int worker = 1; worker <= 5; ++worker) {
      EXPECT_EQ(joined[worker - 1].await(), worker);
    }
    EXPECT_EQ(db.stats().created, 1u);
    EXPECT_EQ(db.stats().timeouts, 0u);
    db.close();
  });
}

TEST_F(PgSharedPool, AnExclusiveAcquireIsNotStarvedByAStreamOfQueries) {
  run_clean([&] {
    pg::pool db(options(1));
    bool stop = false;
    int answered = 0;
    std::vector<weft::task<void>> loopers;
    for (int worker = 0; worker < 8; ++worker) {
      loopers.push_back(weft::spawn([&, worker] {
        while (!stop) {
          EXPECT_EQ(db.query("SELECT $1::int", worker).value<int>(), worker);
          ++answered;
        }
      }));
    }
    weft_test::yield_until([&] { return answered >= 50; });
    {
      weft::lease<pg::connection> own = db.acquire(weft::timeout(20s));
      EXPECT_EQ(own->in_flight(), 0u) << "the shared session drained before it was handed over";
      pg::transaction tx(*own);
      EXPECT_EQ(own->query("SELECT 7").value<int>(), 7);
      tx.commit();
    }
    int answered_before = answered;
    weft_test::yield_until([&] { return answered >= answered_before + 50; });
    stop = true;
    for (weft::task<void>& looper : loopers) {
      looper.await();
    }
    EXPECT_EQ(db.stats().created, 1u);
    db.close();
  });
}

TEST_F(PgSharedPool, AQueryWaitingForAPlaceTimesOut) {
  run_clean([&] {
    pg::pool db(one_place());
    blocker lock(conninfo_);
    weft::task<int> head = occupy(db);
    EXPECT_THROW(db.query(weft::timeout(30ms), "SELECT 1"), weft::timeout_error);
    lock.release();
    EXPECT_EQ(head.await(), 0);
    EXPECT_EQ(db.query(weft::timeout(10s), "SELECT 1").value<int>(), 1);
    db.close();
  });
}

TEST_F(PgSharedPool, CloseWakesAQueryWaitingForAPlace) {
  run_clean([&] {
    pg::pool db(one_place());
    blocker lock(conninfo_);
    weft::task<int> head = occupy(db);
    bool waiting = false;
    auto second = weft::spawn([&] {
      waiting = true;
      db.query("SELECT 1");
    });
    weft_test::yield_until([&] { return waiting; });
    weft::yield();
    EXPECT_FALSE(second.done()) << "it waits for a place in the one shared session";
    db.close();
    EXPECT_THROW(second.await(), weft::pool_closed_error) << "woken by close, not by the head";
    EXPECT_FALSE(head.done());
    lock.release();
    EXPECT_EQ(head.await(), 0) << "a query under way finishes";
    EXPECT_EQ(db.stats().count(), 0u) << "its connection was destroyed on release";
  });
}

// Shared queries, exclusive leases with transactions, queries that time out (alone: cancelled
// on the server; behind others: abandoned) and coroutines cancelled mid-query, all at once on a
// small pool: every answer that arrives is right, nothing hangs, and the pool ends consistent.
TEST_F(PgSharedPool, AMixOfSharedExclusiveTimedOutAndCancelledUsersLeavesThePoolConsistent) {
  constexpr int workers = 24;
  constexpr int rounds = 8;
  run_clean([&] {
    pg::pool_options settings = options(3);
    settings.pipeline_depth = 4;
    pg::pool db(std::move(settings));
    int right = 0;
    int timed_out = 0;
    std::vector<weft::task<void>> tasks;
    for (int worker = 0; worker < workers; ++worker) {
      tasks.push_back(weft::spawn([&, worker] {
        for (int round = 0; round < rounds; ++round) {
          int sent = worker * 1000 + round;
          switch ((worker + round) % 3) {
            case 0:
              EXPECT_EQ(db.query("SELECT $1::int", sent).value<int>(), sent);
              ++right;
              break;
            case 1:
              try {
                EXPECT_EQ(db.query(weft::timeout(3ms),
                                   "SELECT $1::int FROM pg_sleep(0.001 * ($1 % 5))", sent)
                              .value<int>(),
                          sent);
                ++right;
              } catch (const weft::timeout_error&) {
                ++timed_out;
              }
              break;
            default: {
              weft::lease<pg::connection> own = db.acquire(weft::timeout(20s));
              pg::transaction tx(*own);
              EXPECT_EQ(own->query("SELECT $1::int", sent).value<int>(), sent);
              tx.commit();
              ++right;
              break;
            }
          }
        }
      }));
    }
    // Coroutines cancelled while their shared query is under way (or before it is sent).
    int cancelled = cancel_mid_query(12, 4, [&](int victim) {
      EXPECT_EQ(db.query("SELECT $1::int FROM pg_sleep(0.002)", victim).value<int>(), victim);
    });
    for (weft::task<void>& task : tasks) {
      task.await();
    }
    EXPECT_EQ(right + timed_out, workers * rounds);
    EXPECT_GE(right, workers * rounds * 2 / 3) << "only the 3 ms ones may time out";
    weft::pool_stats stats = db.stats();
    EXPECT_EQ(stats.active, 0u);
    EXPECT_EQ(stats.reserved, 0u);
    EXPECT_EQ(stats.waiters, 0u);
    EXPECT_LE(stats.count(), 3u);
    EXPECT_EQ(db.query(weft::timeout(10s), "SELECT 42").value<int>(), 42);
    db.close();
    EXPECT_EQ(db.stats().count(), 0u);
    std::printf("  [%d answered, %d timed out, %d cancelled]\n", right, timed_out, cancelled);
  });
}

// The last user of a shared session leaves while a query abandoned behind it is still on the
// server: the pool waits that one out before the reset, and keeps the connection.
TEST_F(PgSharedPool, AConnectionGivenBackWithAbandonedQueriesInFlightIsDrainedAndKept) {
  run_clean([&] {
    pg::pool db(options(1));
    blocker lock(conninfo_);
    weft::task<int> head = occupy(db);
    EXPECT_THROW(db.query(weft::timeout(30ms), "SELECT 2"), weft::timeout_error)
        << "queued behind the blocked query, in its shared session";
    lock.release();
    EXPECT_EQ(head.await(), 0);
    weft::pool_stats stats = db.stats();
    EXPECT_EQ(stats.active, 0u);
    EXPECT_EQ(stats.idle, 1u);
    EXPECT_EQ(stats.destroyed, 0u) << "drained and reset, not dropped";
    weft::lease<pg::connection> next = db.acquire(weft::timeout(10s));
    EXPECT_EQ(next->in_flight(), 0u);
    EXPECT_EQ(next->query("SELECT 3").value<int>(), 3);
    next.release();
    db.close();
  });
}

TEST_F(PgSharedPool, ZeroPipelineDepthIsRejected) {
  pg::pool_options settings = options(1);
  settings.pipeline_depth = 0;
  try {
    pg::pool db(std::move(settings));
    ADD_FAILURE() << "pipeline_depth 0 was accepted";
  } catch (const std::invalid_argument& failure) {
    EXPECT_NE(std::string(failure.what()).find("pipeline_depth"), std::string::npos)
        << failure.what();
  }
}

}  // namespace

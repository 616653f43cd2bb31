// weft::pg::pool: a weft::pool of PostgreSQL connections.
//
//   pg::pool db({.conninfo = "host=/run/postgresql dbname=app", .max = 8});
//   weft::lease<pg::connection> conn = db.acquire(weft::timeout(1s));
//   conn->query("SELECT ...", 42);                    // returned to the pool when conn ends
//   int n = db.query("SELECT count(*) FROM t").value<int>();  // a shared, pipelined session
//
// Built on weft::pool<T> (see weft/pool/pool.hpp for acquire, FIFO hand-off, the circuit
// breaker and close; the same threading rules: one scheduler, calls from its coroutines; a pool
// with min > 0 or a healthcheck interval must be made inside a coroutine). What this adds:
//   - connections are opened with connect_timeout and closed when the pool drops them;
//   - before a lease is handed out the connection must still be open (no round trip);
//   - when a connection comes back, the session is reset (ROLLBACK if a transaction was left
//     open, then DISCARD ALL: temp tables, prepared statements, session settings, advisory locks
//     go away), so the next user never sees the previous one's state; a connection that is
//     lost, or whose reset fails or takes longer than reset_timeout, is dropped instead. The
//     reset runs protected: cancelling the coroutine that releases does not cut it short;
//   - the periodic healthcheck (healthcheck_interval > 0) runs SELECT 1 on idle connections and
//     replaces those that fail;
//   - validation after idle (validate_after_idle, off by default): an idle connection that sat
//     in the pool at least that long is checked with one round trip (an empty query) before
//     acquire() or pool::query hands it out, bounded by the acquire's limit and by
//     reset_timeout. Without it, a connection the server dropped while it was idle (a restart,
//     a network cut) is handed out and the first query on it fails with "the connection was
//     lost"; with it, such a connection is dropped (a failure for the circuit breaker) and the
//     acquire goes on with the next idle one or a new connection, so the pool recovers from a
//     server restart by itself. It costs a round trip per acquire of a connection idle that
//     long: pick a threshold longer than the gaps between queries of a busy pool;
//   - a connection released lost, or whose reset fails, counts as a failure for the breaker.
// A lease of a lost connection is best discard()ed (the pool would drop it on release anyway).
// The breaker's strategy can be swapped or removed on the live pool (set_breaker_strategy; see
// weft/pool/circuit_breaker.hpp for what happens to its state). Durations saturate:
// duration::max() (or hours::max()) means never.
//
// pool::query shares sessions: it is for statements that leave no session state behind (no
// SET, no temp tables, no BEGIN; use a lease for those). While the pool can open another
// connection or has an idle one, a query takes a connection as acquire() does; once every
// connection is in use, a query joins the shared session with the fewest queries in flight and
// is pipelined behind them (see connection.hpp), so a handful of connections serve many
// coroutines without a round trip each. A shared session goes back to the pool when its last
// query ends. When every shared session holds pipeline_depth queries, or the first ones are
// still connecting, a query waits (within its limit) for a place in one. Exclusive users
// are not starved: while anyone waits in acquire(), queries stop joining shared sessions and
// wait in the same FIFO queue as acquire(), so the shared sessions drain and are handed over.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "weft/pg/connection.hpp"
#include "weft/pool/pool.hpp"
#include "weft/sync/detail/waiter_queue.hpp"

namespace weft::pg {

// The settings of a pg::pool.
struct pool_options {
  std::string conninfo;  // as for connection::connect
  std::size_t min = 0;   // connections kept open even when idle
  std::size_t max = 10;  // connections at most
  // Zero (or duration::max()): no periodic healthcheck.
  saturating_duration healthcheck_interval{};
  // What acquire() without an argument waits at most; unset: forever.
  std::optional<saturating_duration> acquire_timeout{};
  saturating_duration connect_timeout = std::chrono::seconds(10);  // bounds each connect
  // Limit for the session reset on release, the healthcheck's SELECT 1 and the validation
  // after idle.
  saturating_duration reset_timeout = std::chrono::seconds(5);
  // Validate a connection idle at least this long before handing it out (see above). Unset:
  // never; zero: every idle connection.
  std::optional<saturating_duration> validate_after_idle{};
  bool reset_on_release = true;  // reset the session when a lease comes back (see above)
  // The most queries pool::query pipelines on one shared session.
  std::size_t pipeline_depth = 32;
  // Null: no circuit breaker strategy (manual control only).
  std::shared_ptr<circuit_breaker_strategy> breaker_strategy{};
  std::string name = "pg";  // in error messages and deadlock reports
};

class pool {
 public:
  // Opens min connections (from a coroutine when min > 0 or with a healthcheck, see above).
  explicit pool(pool_options options);

  // A lease of a connection of its own (see weft::pool::acquire): without a limit the wait is
  // acquire_timeout.
  weft::lease<connection> acquire() { return connections_.acquire(); }
  weft::lease<connection> acquire(const timeout& limit) { return connections_.acquire(limit); }
  // A lease when a connection is free now, nullopt otherwise.
  std::optional<weft::lease<connection>> try_acquire() { return connections_.try_acquire(); }

  // Runs one query on a shared session (see above); limit bounds the wait for a connection
  // and the query itself. Without a limit the wait is the pool's acquire_timeout.
  template <class... Params>
  result query(std::string_view sql, const Params&... params) {
    shared_use session(*this, std::nullopt);
    return session.get().query(sql, params...);
  }
  template <class... Params>
  result query(const timeout& limit, std::string_view sql, const Params&... params) {
    shared_use session(*this, limit);
    return session.get().query(limit, sql, params...);
  }

  // Closes the pool: idle connections close, leases close theirs on return, waiters get
  // pool_closed_error.
  void close() {
    connections_.close();
    shared_waiters_.grant_all(0);  // they find the pool closed
  }
  bool closed() const { return connections_.closed(); }      // whether close() was called
  pool_stats stats() const { return connections_.stats(); }  // counts of connections and waits
  // The pool's circuit breaker, for manual control.
  circuit_breaker& breaker() { return connections_.breaker(); }
  // See weft::pool::set_breaker_strategy.
  void set_breaker_strategy(std::shared_ptr<circuit_breaker_strategy> strategy) {
    connections_.set_breaker_strategy(std::move(strategy));
  }

 private:
  // A leased connection that pool::query calls share; users counts the queries on it.
  struct shared_session {
    weft::lease<connection> lease;
    std::size_t users = 0;
  };
  // One query's use of a shared session: taken in the constructor, given up in the destructor
  // (the last user returns the lease to the pool).
  class shared_use {
   public:
    shared_use(pool& owner, const std::optional<timeout>& limit);
    ~shared_use();
    shared_use(const shared_use&) = delete;
    shared_use& operator=(const shared_use&) = delete;
    connection& get() const { return *session_->lease; }

   private:
    pool& owner_;
    shared_session* session_;
  };

  static weft::pool_options<connection> adapt(pool_options options);
  static void describe_shared_waiters(const void* owner, std::string& out);
  shared_session* share(const std::optional<timeout>& limit);
  void unshare(shared_session* session) noexcept;

  std::size_t pipeline_depth_;
  std::optional<saturating_duration> acquire_timeout_;
  std::string name_;
  std::vector<std::unique_ptr<shared_session>> shared_;
  std::size_t shared_connecting_ = 0;  // pool::query calls inside acquire() for a session
  // Queries waiting for a place in a shared session (sessions full, or still connecting).
  weft::detail::waiter_queue shared_waiters_{this, &describe_shared_waiters};
  weft::pool<connection> connections_;
};

}  // namespace weft::pg

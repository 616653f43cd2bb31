// weft::pg::pool: a weft::pool of PostgreSQL connections.
//
//   pg::pool db({.conninfo = "host=/run/postgresql dbname=app", .max = 8});
//   weft::lease<pg::connection> conn = db.acquire(weft::timeout(1s));
//   conn->query("SELECT ...", 42);                    // returned to the pool when conn ends
//   int n = db.query("SELECT count(*) FROM t").value<int>();  // acquire, run, release
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
//     replaces those that fail.
// A lease of a lost connection is best discard()ed (the pool would drop it on release anyway).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "weft/pg/connection.hpp"
#include "weft/pool/pool.hpp"

namespace weft::pg {

struct pool_options {
  std::string conninfo;  // as for connection::connect
  std::size_t min = 0;
  std::size_t max = 10;
  // Zero: no periodic healthcheck.
  std::chrono::steady_clock::duration healthcheck_interval{};
  // What acquire() without an argument waits at most; unset: forever.
  std::optional<std::chrono::steady_clock::duration> acquire_timeout{};
  std::chrono::steady_clock::duration connect_timeout = std::chrono::seconds(10);
  // Limit for the session reset on release and for the healthcheck's SELECT 1.
  std::chrono::steady_clock::duration reset_timeout = std::chrono::seconds(5);
  bool reset_on_release = true;
  std::shared_ptr<circuit_breaker_strategy> breaker_strategy{};
  std::string name = "pg";
};

class pool {
 public:
  explicit pool(pool_options options);

  weft::lease<connection> acquire() { return connections_.acquire(); }
  weft::lease<connection> acquire(const timeout& limit) { return connections_.acquire(limit); }
  std::optional<weft::lease<connection>> try_acquire() { return connections_.try_acquire(); }

  // Acquires a connection, runs one query on it and gives it back.
  template <class... Params>
  result query(std::string_view sql, const Params&... params) {
    weft::lease<connection> session = acquire();
    return session->query(sql, params...);
  }
  template <class... Params>
  result query(const timeout& limit, std::string_view sql, const Params&... params) {
    weft::lease<connection> session = acquire(limit);
    return session->query(limit, sql, params...);
  }

  void close() { connections_.close(); }
  bool closed() const { return connections_.closed(); }
  pool_stats stats() const { return connections_.stats(); }
  circuit_breaker& breaker() { return connections_.breaker(); }

 private:
  static weft::pool_options<connection> adapt(pool_options options);

  weft::pool<connection> connections_;
};

}  // namespace weft::pg

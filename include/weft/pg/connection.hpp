// weft::pg::connection: one PostgreSQL session over libpq, driven by weft's reactor.
//
// Blocking: connect, query, execute, prepare and execute_script suspend only the calling
// coroutine; the connection's socket is non-blocking and waited on with weft::wait_readable /
// wait_writable, so the other coroutines run meanwhile. Each takes an optional weft::timeout
// (first argument for query/execute, so the parameters can stay variadic) and is a
// cancellation point. When a query times out or its coroutine is cancelled, the server is sent
// a cancel request (PQcancel, run on weft::thread_pool since it blocks) and the query's
// remaining results are drained, so the connection is ready for the next query when the
// timeout_error / cancelled_error reaches the caller; if that recovery fails within 10 s the
// connection is closed instead (the next call says why).
//
// Several coroutines may query one connection at once: their queries are pipelined (libpq's
// pipeline mode), sent at once without waiting for the ones before, run by the server one
// after another in the order sent, and each answered to its own caller. Each query has its own
// Sync, so it is its own implicit transaction and an error fails only that query. This is what
// weft::pg::pool::query does to keep a few connections busy for many coroutines. A query that
// times out or is cancelled while later queries are pipelined behind it is abandoned, not
// cancelled on the server (a cancel request stops whatever the session runs when it arrives,
// which could be one of those later queries): the server finishes it, its result is dropped, and
// the queries behind it wait for it. A lone query is cancelled on the server as described above;
// queries sent meanwhile wait until that recovery ends.
//
// What needs the session to itself: execute_script (the simple protocol, which cannot be
// pipelined) while other queries are in flight, or a query from another coroutine while one
// runs a script, is a std::logic_error; so is a query from another coroutine while a
// weft::pg::transaction is open on the connection (it would run inside that transaction).
// Statements that change the session (SET, temp tables, an explicit BEGIN) affect every query
// pipelined after them: share a connection only between coroutines that expect that.
//
// Threads: a connection belongs to the scheduler (thread) whose coroutines use it; calls
// must come from one of its coroutines (outside a coroutine: std::logic_error). The connection must
// not be destroyed or closed while a query runs on it.
//
// Host names in the conninfo are resolved by libpq itself, blocking the thread; use a unix
// socket directory, a numeric address or hostaddr= to keep connect fully non-blocking.
//
// Errors: pg::error (see error.hpp) for whatever the server rejects and for connections that
// fail or are lost; a lost connection stays closed (is_open() false) and every later call
// throws pg::error "08003" saying why. COPY is not supported (the connection is closed and a
// std::logic_error thrown).
//
// NUL bytes: libpq takes SQL text, statement names and the connection string as C strings, so
// one holding a NUL byte is refused with std::invalid_argument (naming the offset) before
// anything is sent; a text parameter holding one is a pg::error "22021" (see param.hpp). Either
// way the connection stays usable. Binary data travels as weft::pg::bytea.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "weft/pg/error.hpp"
#include "weft/pg/param.hpp"
#include "weft/pg/result.hpp"
#include "weft/sched/timeout.hpp"

namespace weft::pg {

// A statement prepared on one connection (PQsendPrepare); run it with connection::query. Cheap
// to copy. Using it on another connection is a std::logic_error; after DISCARD ALL or
// DEALLOCATE it no longer exists on the server (pg::error "26000").
class statement {
 public:
  statement() = default;
  // The name it was prepared under, and its SQL.
  const std::string& name() const noexcept { return name_; }
  const std::string& sql() const noexcept { return sql_; }  // the statement's SQL text

 private:
  friend class connection;
  statement(std::string name, std::string sql, std::uint64_t connection_id)
      : name_(std::move(name)), sql_(std::move(sql)), connection_id_(connection_id) {}
  std::string name_;
  std::string sql_;
  std::uint64_t connection_id_ = 0;
};

class connection {
 public:
  // Opens a session. conninfo is a libpq connection string ("host=/run/pg dbname=app user=me")
  // or URI ("postgresql://me:secret@localhost:5432/app"). pg::error "08001" naming the server
  // (never the password) when it cannot connect; timeout_error when limit passes first. A
  // connection string libpq cannot parse is a pg::error "08001" quoting it (passwords shown as
  // ***) with libpq's reason ("missing \"=\" after \"dbname\" in connection info string"). A
  // connect that is cancelled or times out leaves nothing open.
  static connection connect(std::string_view conninfo, const timeout& limit = timeout::never());

  connection() noexcept;  // not connected; every call but is_open() is a std::logic_error
  connection(connection&& other) noexcept;
  connection& operator=(connection&& other) noexcept;
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;
  ~connection();  // closes the session (see close())

  // Runs one statement with $1, $2, ... bound to params (see param.hpp) and returns its rows.
  template <class... Params>
  result query(std::string_view sql, const Params&... params) {
    return query(timeout::never(), sql, params...);
  }
  template <class... Params>
  result query(const timeout& limit, std::string_view sql, const Params&... params) {
    const std::array<param, sizeof...(Params)> encoded{to_param(params)...};
    return query_params(limit, sql, encoded);
  }
  // Runs a prepared statement.
  template <class... Params>
  result query(const statement& prepared, const Params&... params) {
    return query(timeout::never(), prepared, params...);
  }
  template <class... Params>
  result query(const timeout& limit, const statement& prepared, const Params&... params) {
    const std::array<param, sizeof...(Params)> encoded{to_param(params)...};
    return query_prepared(limit, prepared, encoded);
  }

  // Same as query(...).affected_rows(): for INSERT / UPDATE / DELETE.
  template <class... Args>
  std::uint64_t execute(const Args&... args) {
    return query(args...).affected_rows();
  }

  // The non-template forms behind query().
  result query_params(const timeout& limit, std::string_view sql, std::span<const param> params);
  result query_prepared(const timeout& limit, const statement& prepared,
                        std::span<const param> params);

  // Prepares sql on the server (parameter types are inferred there). An empty name picks a
  // unique one ("weft_1", ...).
  statement prepare(std::string_view sql, std::string name = {},
                    const timeout& limit = timeout::never());

  // Runs several ';'-separated statements without parameters (the simple query protocol: a
  // schema, a migration, "DISCARD ALL"); returns the last statement's result. Stops at the
  // first statement that fails, with its pg::error.
  result execute_script(std::string_view sql, const timeout& limit = timeout::never());

  // True while the session is usable: connected and not lost.
  bool is_open() const noexcept;
  // True while a query or script is in flight (or an interrupted one is being recovered).
  bool busy() const noexcept;
  // Queries sent and not yet answered (pipelined ones included; an abandoned one counts until
  // the server has answered it).
  std::size_t in_flight() const noexcept;
  // True while a lone interrupted query is being cancelled on the server and its answer
  // drained; queries sent meanwhile wait for that to end.
  bool recovering() const noexcept;
  // Inside BEGIN ... COMMIT (including a failed transaction that awaits ROLLBACK).
  bool in_transaction() const noexcept;
  // The server process serving this session (for pg_cancel_backend / pg_stat_activity).
  int backend_pid() const;
  // The server's version as an integer: 150004 for 15.4.
  int server_version() const;

  // Receives the server's notices and warnings ("there is no transaction in progress"); they
  // are dropped when no handler is set. Called inside a call on this connection, on the
  // coroutine reading its answers at the time (with queries pipelined, not necessarily the one
  // whose query caused the notice); it must not throw (it is called from inside libpq: an exception
  // terminates the program).
  void set_notice_handler(std::function<void(std::string_view)> handler);

  // Ends the session (a Terminate message, without waiting). Idempotent. std::logic_error
  // while a coroutine waits on it (a query, a script, a recovery); queries abandoned by a
  // timeout or a cancel do not count, their answers are dropped with the session.
  void close();

  struct state;  // the libpq connection and what this side knows about it (connection.cpp)

 private:
  friend class transaction;
  explicit connection(std::unique_ptr<state> opened) noexcept;
  // The coroutine (this_coroutine::id()) whose weft::pg::transaction is open here, 0 for none.
  void set_transaction_owner(std::uint64_t coroutine_id) noexcept;
  // The open session, for an operation that needs it to itself (nothing else in flight)...
  state& usable_state(const char* qualified) const;
  // ... or for a query that may be pipelined (waits out a recovery in progress). qualified
  // names the call in messages: "weft::pg::connection::query".
  state& pipeline_state(const char* qualified, const timeout& limit) const;

  std::unique_ptr<state> state_;
};

}  // namespace weft::pg

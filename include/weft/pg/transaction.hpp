// weft::pg::transaction: BEGIN on construction, ROLLBACK unless commit() was called.
//
//   pg::transaction tx(conn);          // BEGIN
//   conn.execute("UPDATE ...", 1);
//   tx.commit();                       // COMMIT; without it, leaving the scope rolls back
//
// The destructor rolls back when the transaction is still open: on an exception, on
// cancellation (the rollback runs inside weft::protect, so it is not interrupted) or on a plain
// return without commit. It never throws: if that rollback fails within 10 s the connection is
// closed, which makes the server roll back. commit() on a transaction the server had already
// marked failed (a statement in it raised an error) rolls back instead and throws pg::error
// "25P02", so a lost update is never silent.
//
// While it is open, only the coroutine that began it may run queries on the connection: another
// coroutine's query (which would run inside the transaction) is a std::logic_error.
// Same threading and blocking rules as the connection (see connection.hpp); the connection must
// outlive the transaction. Nested transactions are not supported: beginning one while the
// connection is already in a transaction is a std::logic_error (use SAVEPOINT statements).
#pragma once

#include <string_view>

#include "weft/pg/connection.hpp"
#include "weft/sched/timeout.hpp"

namespace weft::pg {

class transaction {
 public:
  // begin_command lets the caller pick the mode: "BEGIN ISOLATION LEVEL SERIALIZABLE",
  // "BEGIN READ ONLY", ...
  explicit transaction(connection& session, const timeout& limit = timeout::never(),
                       std::string_view begin_command = "BEGIN");
  transaction(const transaction&) = delete;
  transaction& operator=(const transaction&) = delete;
  ~transaction();

  void commit(const timeout& limit = timeout::never());
  void rollback(const timeout& limit = timeout::never());

  // True until commit() or rollback() succeeded.
  bool active() const noexcept { return active_; }
  connection& session() const noexcept { return session_; }

 private:
  connection& session_;
  bool active_ = false;
};

}  // namespace weft::pg

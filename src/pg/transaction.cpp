// weft::pg::transaction: BEGIN / COMMIT / ROLLBACK, and the rollback on scope exit.
#include "weft/pg/transaction.hpp"

#include <chrono>
#include <stdexcept>

#include "weft/sched/this_coroutine.hpp"

namespace weft::pg {

namespace {
using namespace std::chrono_literals;
// The destructor's rollback must end even if the server stops answering.
constexpr auto rollback_limit = 10s;
}  // namespace

transaction::transaction(connection& session, const timeout& limit, std::string_view begin_command)
    : session_(session) {
  if (session.in_transaction()) {
    throw std::logic_error(
        "weft::pg::transaction: the connection is already in a transaction; nested "
        "transactions are not supported (use SAVEPOINT statements inside the outer one)");
  }
  session.execute_script(begin_command, limit);
  active_ = true;
  session.set_transaction_owner(weft::this_coroutine::id());
}

transaction::~transaction() {
  struct release_owner {
    connection& session;
    ~release_owner() { session.set_transaction_owner(0); }
  } release{session_};
  // Nothing to undo once the session ended (the server rolled back), or when the transaction
  // was already ended by hand (a COMMIT statement, say).
  if (!active_ || !session_.is_open() || !session_.in_transaction() || session_.busy()) {
    return;
  }
  weft::protect([&] {
    try {
      session_.execute_script("ROLLBACK", timeout(rollback_limit));
    } catch (...) {
      // A destructor cannot report it; closing the session makes the server roll back.
      try {
        session_.close();
      } catch (...) {
      }
    }
  });
}

void transaction::commit(const timeout& limit) {
  if (!active_) {
    throw std::logic_error(
        "weft::pg::transaction::commit: the transaction already ended (commit or rollback was "
        "called)");
  }
  result done = session_.execute_script("COMMIT", limit);
  active_ = false;
  session_.set_transaction_owner(0);
  if (done.command_tag() == "ROLLBACK") {
    throw error(
        "weft::pg: COMMIT rolled back instead: a statement in the transaction had failed, so "
        "none of its changes were saved (SQLSTATE 25P02)",
        "25P02", "current transaction was aborted, commit rolled back");
  }
}

void transaction::rollback(const timeout& limit) {
  if (!active_) {
    throw std::logic_error(
        "weft::pg::transaction::rollback: the transaction already ended (commit or rollback "
        "was called)");
  }
  session_.execute_script("ROLLBACK", limit);
  active_ = false;
  session_.set_transaction_owner(0);
}

}  // namespace weft::pg

// What connection.cpp, exchange.cpp and pipeline.cpp share (internal to weft::pg; not installed).
//
// connection.cpp is the API (connect, the queries' entry points, the accessors, close);
// exchange.cpp runs one exchange that has the session to itself (send, flush, collect, recover)
// and the socket and error helpers every exchange uses; pipeline.cpp runs pipelined queries
// (one reader at a time hands every caller its answer; interrupted ones are cancelled or
// abandoned). All of it runs on the connection's uv loop thread, in the calling coroutine.
#pragma once

#include <libpq-fe.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "weft/error.hpp"
#include "weft/pg/connection.hpp"
#include "weft/reactor/fd.hpp"
#include "weft/sched/timeout.hpp"
#include "weft/sync/detail/waiter_queue.hpp"

namespace weft::pg {

namespace detail {
void describe_answers(const void* owner, std::string& out);
void describe_gate(const void* owner, std::string& out);
struct answer;
}  // namespace detail

struct connection::state {
  PGconn* session = nullptr;
  std::uint64_t id = 0;         // tells this connection's prepared statements from others'
  bool script_running = false;  // execute_script: the session is the script's alone
  std::uint64_t statements_prepared = 0;
  std::string target;         // "user@host:port/dbname", for messages (never the password)
  std::string closed_reason;  // why session is null, for the next call's error
  std::function<void(std::string_view)> notice_handler;
  // The socket stays registered with the reactor for the session's life: every query waits on
  // it, and registering it per wait costs several syscalls (see weft/reactor/fd.hpp). Reset
  // before PQfinish closes the socket.
  weft::fd_registration socket_watch;
  std::uint64_t transaction_owner = 0;  // coroutine id; see connection::set_transaction_owner

  // Pipelining. `pending` holds the answers of the queries in flight in the order they were
  // sent, which is the order the server answers them, from the oldest unanswered (null for one
  // abandoned by its caller); an answer leaves it once all its results, up to its Sync, are read.
  // At most one coroutine reads the socket at a time (reading); it fills in each completed answer
  // and wakes its caller, and hands the reading on when its own is in. Only the reader flushes
  // (what every query queued) and consumes input: libpq reads input into its buffer when a flush
  // would block, so a flush by another coroutine could take in the answers a reader waits for on
  // the socket and leave it waiting for nothing.
  bool pipeline_mode = false;
  bool reading = false;
  bool recovering = false;  // a lone interrupted query is being cancelled; see `gate`
  std::deque<detail::answer*> pending;
  // What the oldest unanswered query has returned so far: its last result and its first error.
  result gathered;
  std::unique_ptr<PGresult, detail::result_deleter> gathered_error;
  weft::detail::waiter_queue gate{this, &detail::describe_gate};  // queries held while recovering

  state() = default;
  state(const state&) = delete;
  state& operator=(const state&) = delete;
  ~state() {
    socket_watch.reset();
    if (session != nullptr) {
      PQfinish(session);
    }
  }
};

namespace detail {

using state = connection::state;

// How long recovering from an interrupted query (cancel + drain) or the destructor's rollback
// may take before the session is given up.
inline constexpr auto recovery_limit = std::chrono::seconds(10);

// text without its trailing newlines and spaces (libpq's messages end in one).
std::string trimmed(std::string_view text);
std::string text_or_empty(const char* text);

// What an exchange is, for messages: `query "SELECT ..."`.
struct exchange {
  const char* operation;
  std::string_view sql;

  std::string describe() const {
    constexpr std::size_t shown = 120;
    std::string text = std::string(operation) + " \"" + std::string(sql.substr(0, shown));
    return text + (sql.size() > shown ? "...\"" : "\"");
  }
};

// ---- exchange.cpp: the socket, errors, and one exchange with the session to itself ----------

// Closes the session (if still open) and remembers the first reason given.
void mark_closed(state& session, std::string reason);
[[noreturn]] void throw_lost(state& session, const exchange& what);
int socket_of(state& session, const exchange& what);
error server_error(const PGresult* raw, state& session, const exchange& what, bool connection_lost);
// The socket buffer is full. Keep reading while waiting to write, so that a server blocked on
// sending us something (notices, an early error, answers) cannot deadlock both sides: wait for
// writability in slices, and the caller consumes input between them.
void wait_writable_slice(state& session, const timeout& limit, const exchange& what);
void flush_output(state& session, const timeout& limit, const exchange& what);
// An exchange reports its first error; later ones (a failed Sync after it, say) are freed.
void keep_first_error(std::unique_ptr<PGresult, detail::result_deleter>& first,
                      PGresult* raw) noexcept;
// Reads every result of the exchange; returns the last one or throws the first error.
result collect(state& session, const timeout& limit, const exchange& what);
// Asks the server to stop whatever the session runs (on the thread pool: PQcancel blocks).
void send_cancel(state& session, const timeout& limit);
// Brings an interrupted exchange back to ReadyForQuery, or closes the session. Protected.
void recover(state& session, const exchange& what) noexcept;
[[noreturn]] void throw_refused(state& session, const exchange& what);

// One exchange that has the session to itself (a script, in the simple query protocol, which
// pipeline mode does not allow): send, flush, collect; recovering the session when interrupted.
// The caller has checked that nothing else is in flight.
template <class Send>
result run_exchange(state& session, const timeout& limit, const exchange& what, Send&& send) {
  if (session.pipeline_mode) {
    if (PQexitPipelineMode(session.session) == 0) {
      throw_refused(session, what);
    }
    session.pipeline_mode = false;
  }
  session.script_running = true;
  struct idle_again {
    state& session;
    ~idle_again() { session.script_running = false; }
  } idle{session};
  if (send() == 0) {
    throw_refused(session, what);
  }
  try {
    flush_output(session, limit, what);
    return collect(session, limit, what);
  } catch (const timeout_error&) {
    recover(session, what);
    std::string outcome = session.session != nullptr
                              ? "; it was cancelled on the server and the connection is ready "
                                "for the next query"
                              : "; the connection was closed: " + session.closed_reason;
    throw timeout_error("weft::pg: " + what.describe() + " on " + session.target + " " +
                        weft::detail::timed_out_after(limit) + outcome);
  } catch (const cancelled_error&) {
    recover(session, what);
    throw;
  }
}

// ---- pipeline.cpp: pipelined queries ---------------------------------------------------------

// One pipelined query's answer, filled in by whichever coroutine reads it. Lives on the
// querying coroutine's stack; the reader reaches it through state::pending, from which it is
// removed (nulled) when its query is abandoned.
struct answer {
  explicit answer(state& session) : wakeup(&session, &describe_answers) {}
  bool ready = false;
  bool lost = false;    // the connection was lost before the whole answer came
  bool parked = false;  // its coroutine waits in wakeup (so can be handed the reading)
  result value;
  std::unique_ptr<PGresult, detail::result_deleter> failure;  // the server's first error
  weft::detail::waiter_queue wakeup;
};

// Waits for mine to be answered: reads for everyone while nobody else does, else parks until
// its answer comes or the reading is handed to it.
void await_answer(state& session, answer& mine, const timeout& limit, const exchange& what);
// A pipelined query was interrupted before its answer came: cancels it (alone in flight) or
// abandons it. Returns what the caller's error should add.
std::string abandon(state& session, answer& mine, const exchange& what) noexcept;
// The outcome of an answered query: its result, or its error.
result take_answer(state& session, answer& mine, const exchange& what);

// One pipelined query: send it with its own Sync, flush, await its answer.
template <class Send>
result run_pipelined(state& session, const timeout& limit, const exchange& what, Send&& send) {
  if (!session.pipeline_mode) {
    if (PQenterPipelineMode(session.session) == 0) {
      throw_refused(session, what);
    }
    session.pipeline_mode = true;
  }
  if (send() == 0 || PQpipelineSync(session.session) == 0) {
    throw_refused(session, what);
  }
  answer mine(session);
  session.pending.push_back(&mine);
  try {
    await_answer(session, mine, limit, what);  // the reader flushes it
  } catch (const timeout_error&) {
    std::string outcome = abandon(session, mine, what);
    throw timeout_error("weft::pg: " + what.describe() + " on " + session.target + " " +
                        weft::detail::timed_out_after(limit) + outcome);
  } catch (const cancelled_error&) {
    abandon(session, mine, what);
    throw;
  }
  return take_answer(session, mine, what);
}

}  // namespace detail

}  // namespace weft::pg

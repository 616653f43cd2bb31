// weft::pg::connection on libpq's asynchronous API.
//
// Every exchange follows libpq's non-blocking recipe: send (PQsend*), PQflush until the output
// is out, then PQconsumeInput + PQisBusy until PQgetResult has a whole result, waiting on the
// socket with weft::wait_readable / wait_writable in between, so only the calling coroutine
// blocks. An interrupted exchange (timeout, cancellation) is recovered before the error reaches
// the caller: cancel request, then drain to ReadyForQuery; a session that cannot be recovered
// is closed, and remembers why for the next call.
#include "weft/pg/connection.hpp"

#include <libpq-fe.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "weft/error.hpp"
#include "weft/reactor/fd.hpp"
#include "weft/reactor/operation.hpp"
#include "weft/reactor/thread_pool.hpp"
#include "weft/sched/this_coroutine.hpp"
#include "weft/sync/waiter_queue.hpp"

namespace weft::pg {

namespace {
void describe_answers(const void* owner, std::string& out);
void describe_gate(const void* owner, std::string& out);
struct answer;
}  // namespace

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
  std::deque<answer*> pending;
  // What the oldest unanswered query has returned so far: its last result and its first error.
  result gathered;
  std::unique_ptr<PGresult, detail::result_deleter> gathered_error;
  weft::detail::waiter_queue gate{this, &describe_gate};  // queries held while recovering

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

namespace {

using namespace std::chrono_literals;
using state = connection::state;

// How long recovering from an interrupted query (cancel + drain) or the destructor's rollback
// may take before the session is given up.
constexpr auto recovery_limit = 10s;
// While the output buffer is full we also keep reading (see flush_output); this is how long one
// wait for writability lasts before reading again.
constexpr auto flush_slice = 50ms;

std::atomic<std::uint64_t> next_connection_id{1};

std::string trimmed(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) {
    text.remove_suffix(1);
  }
  return std::string(text);
}

std::string text_or_empty(const char* text) { return text == nullptr ? std::string() : text; }

std::string describe_target(PGconn* session) {
  return text_or_empty(PQuser(session)) + "@" + text_or_empty(PQhost(session)) + ":" +
         text_or_empty(PQport(session)) + "/" + text_or_empty(PQdb(session));
}

// libpq takes SQL text, statement names and the connection string as C strings: an embedded
// NUL would silently cut them short there. That is the caller's mistake, refused before
// anything is sent.
void refuse_nul(std::string_view text, const char* qualified, const char* what) {
  std::size_t at = text.find('\0');
  if (at != std::string_view::npos) {
    throw std::invalid_argument(std::string(qualified) + ": the " + what +
                                " contains a NUL byte at offset " + std::to_string(at) +
                                "; libpq takes it as a C string and would cut it short there, "
                                "so nothing was sent");
  }
}

// The connection string as it may be shown in a message: every password replaced by ***, and
// the passwords themselves (to take out of libpq's messages, which may quote the string). It
// goes by the text alone, since it also serves strings libpq could not parse: the value after a
// `password` keyword (key=value, or a URI's ?password=), and a URI's user:password@. In doubt it
// masks too much rather than too little.
struct masked_conninfo {
  std::string text;
  std::vector<std::string> secrets;

  // message with every secret replaced by ***.
  std::string scrub(std::string message) const {
    for (const std::string& secret : secrets) {
      for (std::size_t at = message.find(secret); at != std::string::npos;
           at = message.find(secret, at + 3)) {
        message.replace(at, secret.size(), "***");
      }
    }
    return message;
  }
};

masked_conninfo mask_passwords(std::string_view conninfo) {
  std::vector<std::pair<std::size_t, std::size_t>> hidden;  // [begin, end) ranges
  bool uri = conninfo.starts_with("postgresql://") || conninfo.starts_with("postgres://");
  if (uri) {
    std::size_t authority = conninfo.find("://") + 3;
    std::size_t at = conninfo.rfind('@');
    std::size_t colon = conninfo.find(':', authority);
    if (at != std::string_view::npos && at > authority && colon < at) {
      hidden.emplace_back(colon + 1, at);
    }
  }
  constexpr std::string_view keyword = "password";
  for (std::size_t found = conninfo.find(keyword); found != std::string_view::npos;
       found = conninfo.find(keyword, found + 1)) {
    char before = found == 0 ? ' ' : conninfo[found - 1];
    if (before != ' ' && before != '\t' && before != '\n' && before != '?' && before != '&') {
      continue;  // part of another word
    }
    std::size_t index = found + keyword.size();
    while (index < conninfo.size() && (conninfo[index] == ' ' || conninfo[index] == '\t')) {
      ++index;
    }
    if (index == conninfo.size() || conninfo[index] != '=') {
      continue;
    }
    ++index;
    while (index < conninfo.size() && (conninfo[index] == ' ' || conninfo[index] == '\t')) {
      ++index;
    }
    std::size_t end = index;
    if (end < conninfo.size() && conninfo[end] == '\'') {
      for (++end; end < conninfo.size() && conninfo[end] != '\''; ++end) {
        end += conninfo[end] == '\\' ? 1 : 0;
      }
      end = std::min(end + 1, conninfo.size());
    } else {
      while (end < conninfo.size() && conninfo[end] != ' ' && conninfo[end] != '\t' &&
             conninfo[end] != '\n' && !(uri && conninfo[end] == '&')) {
        ++end;
      }
    }
    if (end > index) {
      hidden.emplace_back(index, end);
    }
  }
  std::sort(hidden.begin(), hidden.end());
  masked_conninfo masked;
  std::size_t shown = 0;
  for (auto [begin, end] : hidden) {
    if (end <= shown) {
      continue;  // inside a range already hidden
    }
    begin = std::max(begin, shown);
    masked.text.append(conninfo.substr(shown, begin - shown));
    masked.text += "***";
    masked.secrets.emplace_back(conninfo.substr(begin, end - begin));
    shown = end;
  }
  masked.text.append(conninfo.substr(shown));
  // Longest first, so that a secret containing another is replaced whole.
  std::sort(masked.secrets.begin(), masked.secrets.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  return masked;
}

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

void mark_closed(state& session, std::string reason) {
  session.socket_watch.reset();
  if (session.session != nullptr) {
    PQfinish(session.session);
    session.session = nullptr;
  }
  if (session.closed_reason.empty()) {
    session.closed_reason = std::move(reason);
  }
}

[[noreturn]] void throw_lost(state& session, const exchange& what) {
  std::string reason = trimmed(PQerrorMessage(session.session));
  mark_closed(session, "the connection was lost: " + reason);
  throw error("weft::pg: " + what.describe() + " on " + session.target +
                  " failed: the connection was lost (" + reason + "); open a new connection",
              "08006", reason);
}

int socket_of(state& session, const exchange& what) {
  int socket = PQsocket(session.session);
  if (socket < 0) {
    throw_lost(session, what);
  }
  return socket;
}

error server_error(const PGresult* raw, state& session, const exchange& what,
                   bool connection_lost) {
  std::string sqlstate = text_or_empty(PQresultErrorField(raw, PG_DIAG_SQLSTATE));
  std::string primary = text_or_empty(PQresultErrorField(raw, PG_DIAG_MESSAGE_PRIMARY));
  std::string detail = text_or_empty(PQresultErrorField(raw, PG_DIAG_MESSAGE_DETAIL));
  std::string hint = text_or_empty(PQresultErrorField(raw, PG_DIAG_MESSAGE_HINT));
  std::string severity = text_or_empty(PQresultErrorField(raw, PG_DIAG_SEVERITY));
  if (primary.empty()) {
    primary = trimmed(PQresultErrorMessage(raw));  // an error libpq itself raised
  }
  if (sqlstate.empty()) {
    sqlstate = connection_lost ? "08006" : "XX000";
  }
  std::string message = "weft::pg: " + what.describe() + " on " + session.target +
                        " failed: " + (severity.empty() ? "" : severity + ": ") + primary +
                        " (SQLSTATE " + sqlstate + ")";
  if (!detail.empty()) {
    message += "; detail: " + detail;
  }
  if (!hint.empty()) {
    message += "; hint: " + hint;
  }
  if (connection_lost) {
    message += "; the connection is closed, open a new one";
  }
  return error(message, sqlstate, primary, detail, hint);
}

// Text-format parameters reach libpq as C strings too (it ignores their length), so a NUL would
// cut the value short; PostgreSQL text cannot hold one anyway. Refused before anything is sent,
// as bad data (pg::error, with the SQLSTATE the server gives such text) rather than misuse.
// Binary ones (bytea) keep every byte, but their length must fit the protocol's int32.
void check_params(std::span<const param> params, const state& session, const exchange& what) {
  for (std::size_t index = 0; index < params.size(); ++index) {
    const param& each = params[index];
    if (!each.value) {
      continue;
    }
    std::string position = "parameter $" + std::to_string(index + 1);
    if (each.value->size() > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
      std::string problem = position + " is " + std::to_string(each.value->size()) +
                            " bytes, more than a PostgreSQL message can carry";
      throw error("weft::pg: " + what.describe() + " on " + session.target + ": " + problem +
                      "; nothing was sent",
                  "54000", problem);
    }
    if (each.binary) {
      continue;
    }
    std::size_t at = each.value->find('\0');
    if (at != std::string::npos) {
      std::string problem = position + " contains a NUL byte at offset " + std::to_string(at) +
                            "; text cannot hold NUL";
      throw error("weft::pg: " + what.describe() + " on " + session.target + ": " + problem +
                      ", so nothing was sent (pass binary data as weft::pg::bytea)",
                  "22021", problem);
    }
  }
}

// The socket buffer is full. Keep reading while waiting to write, so that a server blocked on
// sending us something (notices, an early error, answers) cannot deadlock both sides: wait for
// writability in slices, and the caller consumes input between them.
void wait_writable_slice(state& session, const timeout& limit, const exchange& what) {
  bool slice_is_limit = limit.bounded() && limit.deadline() <= clock::now() + flush_slice;
  try {
    // The slice keeps the limit's cancel token: a token ends a flush as it ends any wait.
    wait_writable(socket_of(session, what), limit.capped(flush_slice));
  } catch (const timeout_error&) {
    if (slice_is_limit) {
      throw;
    }
  }
}

void flush_output(state& session, const timeout& limit, const exchange& what) {
  for (;;) {
    int status = PQflush(session.session);
    if (status == 0) {
      return;
    }
    if (status < 0) {
      throw_lost(session, what);
    }
    if (PQconsumeInput(session.session) == 0) {
      throw_lost(session, what);
    }
    wait_writable_slice(session, limit, what);
  }
}

// Waits until PQgetResult will not block.
void await_result_ready(state& session, const timeout& limit, const exchange& what) {
  while (PQisBusy(session.session) != 0) {
    wait_readable(socket_of(session, what), limit);
    if (PQconsumeInput(session.session) == 0) {
      return;  // the read failed: PQgetResult reports it without blocking
    }
  }
}

// An exchange reports its first error; later ones (a failed Sync after it, say) are freed.
void keep_first_error(std::unique_ptr<PGresult, detail::result_deleter>& first,
                      PGresult* raw) noexcept {
  if (first == nullptr) {
    first.reset(raw);
  } else {
    PQclear(raw);
  }
}

[[noreturn]] void refuse_copy(state& session, const exchange& what) {
  mark_closed(session, "a COPY statement was run, which weft::pg does not support");
  throw std::logic_error("weft::pg: " + what.describe() +
                         " started a COPY, which weft::pg does not support; the connection "
                         "was closed (use INSERT / SELECT instead)");
}

// Reads every result of the exchange; returns the last one or throws the first error.
result collect(state& session, const timeout& limit, const exchange& what) {
  result last;
  std::unique_ptr<PGresult, detail::result_deleter> first_error;
  for (;;) {
    await_result_ready(session, limit, what);
    PGresult* raw = PQgetResult(session.session);
    if (raw == nullptr) {
      break;
    }
    switch (PQresultStatus(raw)) {
      case PGRES_FATAL_ERROR:
      case PGRES_BAD_RESPONSE:
      case PGRES_NONFATAL_ERROR:
        keep_first_error(first_error, raw);
        break;
      case PGRES_COPY_IN:
      case PGRES_COPY_OUT:
      case PGRES_COPY_BOTH:
        PQclear(raw);
        refuse_copy(session, what);
      default:
        last = result(raw);
        break;
    }
  }
  bool lost = PQstatus(session.session) == CONNECTION_BAD;
  if (first_error != nullptr) {
    error failure = server_error(first_error.get(), session, what, lost);
    if (lost) {
      mark_closed(session, "the connection was lost: " + failure.primary_message());
    }
    throw failure;
  }
  if (lost) {
    throw_lost(session, what);
  }
  return last;
}

// Asks the server to stop whatever the session runs. PQcancel blocks (it opens a connection of
// its own), so it runs on the thread pool; the cancel object is shared with that job so it
// stays valid even if this wait is abandoned.
void send_cancel(state& session, const timeout& limit) {
  std::shared_ptr<PGcancel> request(PQgetCancel(session.session), PQfreeCancel);
  if (request == nullptr) {
    throw weft::error("could not prepare the cancel request");
  }
  std::string failure = thread_pool::run(
      [request] {
        char message[256] = {};
        return PQcancel(request.get(), message, sizeof(message)) != 0 ? std::string()
                                                                      : std::string(message);
      },
      limit);
  if (!failure.empty()) {
    throw weft::error("the cancel request failed: " + trimmed(failure));
  }
}

// Brings an interrupted exchange back to ReadyForQuery: finish sending, cancel what still runs
// on the server, discard the remaining results (the cancelled query's "57014" included). Runs
// protected: the caller's cancellation must not interrupt its own cleanup. A session that
// cannot be recovered in time is closed.
void recover(state& session, const exchange& what) noexcept {
  weft::protect([&] {
    try {
      timeout limit(recovery_limit);
      flush_output(session, limit, what);
      bool cancel_sent = false;
      for (;;) {
        if (PQisBusy(session.session) != 0 && !cancel_sent) {
          send_cancel(session, limit);
          cancel_sent = true;
        }
        await_result_ready(session, limit, what);
        PGresult* raw = PQgetResult(session.session);
        if (raw == nullptr) {
          break;
        }
        ExecStatusType status = PQresultStatus(raw);
        PQclear(raw);
        if (status == PGRES_COPY_IN || status == PGRES_COPY_OUT || status == PGRES_COPY_BOTH) {
          mark_closed(session, "a COPY statement was interrupted");
          return;
        }
      }
      if (PQstatus(session.session) == CONNECTION_BAD) {
        mark_closed(session,
                    "the connection was lost: " + trimmed(PQerrorMessage(session.session)));
      }
    } catch (const std::exception& failure) {
      mark_closed(session, "it could not be brought back after " + what.describe() +
                               " was interrupted (" + failure.what() + ")");
    }
  });
}

[[noreturn]] void throw_refused(state& session, const exchange& what) {
  if (PQstatus(session.session) == CONNECTION_BAD) {
    throw_lost(session, what);
  }
  throw std::logic_error("weft::pg: " + what.describe() +
                         " was refused by libpq: " + trimmed(PQerrorMessage(session.session)));
}

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

// ---- Pipelined queries ----------------------------------------------------------------------

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

// queued_waiter outcomes for a parked query.
constexpr std::uint8_t outcome_answered = 0;  // its answer is filled in
constexpr std::uint8_t outcome_read = 1;      // the reading is handed to it

void describe_answers(const void* owner, std::string& out) {
  const auto& session = *static_cast<const state*>(owner);
  out += "the answer of a query on PostgreSQL connection " + session.target + " (" +
         std::to_string(session.pending.size()) + " queries in flight)";
}

void describe_gate(const void* owner, std::string& out) {
  const auto& session = *static_cast<const state*>(owner);
  out += "PostgreSQL connection " + session.target +
         " (an interrupted query is being cancelled on the server)";
}

// The oldest unanswered query is complete: hand it what was gathered (and wake its coroutine
// if parked). An answer nobody waits for any more (abandoned) is dropped.
void deliver(state& session, bool lost) {
  answer* target = session.pending.front();
  session.pending.pop_front();
  if (target == nullptr) {
    session.gathered = result();
    session.gathered_error.reset();
    return;
  }
  target->value = std::move(session.gathered);
  target->failure = std::move(session.gathered_error);
  target->lost = lost;
  target->ready = true;
  if (target->parked) {
    target->wakeup.grant_front(outcome_answered);
  }
}

// The reader is done: the oldest parked query reads next. A query still sending (not parked yet)
// finds nobody reading when it comes to wait, and reads itself.
void hand_reading_on(state& session) noexcept {
  session.reading = false;
  for (answer* each : session.pending) {
    if (each != nullptr && each->parked && !each->ready) {
      session.reading = true;
      each->parked = false;
      each->wakeup.grant_front(outcome_read);
      return;
    }
  }
}

// The session is gone: every query still in flight is answered "lost".
void lose_everything(state& session, std::string reason) {
  while (!session.pending.empty()) {
    deliver(session, true);
  }
  mark_closed(session, std::move(reason));
  session.gate.grant_all(0);  // they find the session closed
}

// Reads answers (for everyone) until mine is ready. Timeouts and cancels reach the caller with
// mine unanswered; everything read until then was handed out.
void read_answers(state& session, answer& mine, const timeout& limit, const exchange& what) {
  while (!mine.ready) {
    int empty_in_a_row = 0;
    while (!mine.ready && PQisBusy(session.session) == 0 && empty_in_a_row < 2) {
      PGresult* raw = PQgetResult(session.session);
      if (raw == nullptr) {
        ++empty_in_a_row;  // the end of one query's results; its Sync comes next
        continue;
      }
      empty_in_a_row = 0;
      switch (PQresultStatus(raw)) {
        case PGRES_PIPELINE_SYNC:
          PQclear(raw);
          deliver(session, false);
          break;
        case PGRES_FATAL_ERROR:
        case PGRES_BAD_RESPONSE:
        case PGRES_NONFATAL_ERROR:
        case PGRES_PIPELINE_ABORTED:
          keep_first_error(session.gathered_error, raw);
          break;
        case PGRES_COPY_IN:
        case PGRES_COPY_OUT:
        case PGRES_COPY_BOTH:
          PQclear(raw);
          lose_everything(session, "a COPY statement was run, which weft::pg does not support");
          throw std::logic_error("weft::pg: a query on " + session.target +
                                 " started a COPY, which weft::pg does not support; the "
                                 "connection was closed (use INSERT / SELECT instead)");
        default:
          session.gathered = result(raw);
          break;
      }
    }
    if (mine.ready) {
      return;
    }
    if (PQstatus(session.session) == CONNECTION_BAD) {
      lose_everything(session,
                      "the connection was lost: " + trimmed(PQerrorMessage(session.session)));
      return;
    }
    // Send what the queries queued since (theirs and others'), then wait for more answers; while
    // the output does not fit, wait to write in slices and take in answers between them.
    int flushed = PQflush(session.session);
    if (flushed == 0) {
      wait_readable(socket_of(session, what), limit);
    } else if (flushed > 0) {
      wait_writable_slice(session, limit, what);
    }
    if (flushed < 0 || PQconsumeInput(session.session) == 0) {
      lose_everything(session,
                      "the connection was lost: " + trimmed(PQerrorMessage(session.session)));
      return;
    }
  }
}

// Waits for mine to be answered: reads for everyone while nobody else does, else parks until
// its answer comes or the reading is handed to it.
void await_answer(state& session, answer& mine, const timeout& limit, const exchange& what) {
  bool handed_reading = false;
  while (!mine.ready) {
    if (handed_reading || !session.reading) {
      session.reading = true;
      struct pass_reading {
        state& session;
        ~pass_reading() { hand_reading_on(session); }
      } pass{session};
      read_answers(session, mine, limit, what);
      return;
    }
    weft::detail::queued_waiter waiter(mine.wakeup);
    mine.parked = true;
    try {
      mine.wakeup.wait(waiter, limit, [&](weft::detail::queued_waiter& granted) {
        if (granted.outcome == outcome_read) {
          hand_reading_on(session);  // cancelled after the hand-over: someone else reads
        }
      });
    } catch (...) {
      mine.parked = false;
      throw;
    }
    mine.parked = false;
    handed_reading = waiter.outcome == outcome_read;
  }
}

// A pipelined query was interrupted before its answer came. Alone in flight, it is cancelled on
// the server and its answer drained (queries sent meanwhile wait at the gate); with later
// queries behind it, it is abandoned. Returns what the caller's error should add.
std::string abandon(state& session, answer& mine, const exchange& what) noexcept {
  if (mine.ready) {
    return "";
  }
  bool alone = session.pending.size() == 1;  // then it is mine: mine is not answered yet
  if (!alone || session.reading || session.session == nullptr) {
    auto place = std::find(session.pending.begin(), session.pending.end(), &mine);
    if (place != session.pending.end()) {
      *place = nullptr;  // its answer is dropped
    }
    return "; it was left to finish on the server (other queries were pipelined behind it, and "
           "a cancel request could stop one of those) and its result will be dropped";
  }
  session.recovering = true;
  session.reading = true;
  weft::protect([&] {
    try {
      timeout limit(recovery_limit);
      flush_output(session, limit, what);
      send_cancel(session, limit);
      read_answers(session, mine, limit, what);
    } catch (const std::exception& failure) {
      lose_everything(session, "it could not be brought back after " + what.describe() +
                                   " was interrupted (" + failure.what() + ")");
    }
  });
  session.reading = false;
  session.recovering = false;
  session.gate.grant_all(0);
  return session.session != nullptr
             ? "; it was cancelled on the server and the connection is ready for the next query"
             : "; the connection was closed: " + session.closed_reason;
}

// The outcome of an answered query: its result, or its error.
result take_answer(state& session, answer& mine, const exchange& what) {
  if (mine.failure != nullptr) {
    error failure = server_error(mine.failure.get(), session, what, mine.lost);
    throw failure;
  }
  if (mine.lost) {
    throw error("weft::pg: " + what.describe() + " on " + session.target +
                    " failed: " + session.closed_reason + "; open a new connection",
                "08006", session.closed_reason);
  }
  return std::move(mine.value);
}

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

// The arrays PQsendQueryParams / PQsendQueryPrepared take, pointing into params.
struct encoded_params {
  std::vector<oid> types;
  std::vector<const char*> values;
  std::vector<int> lengths;
  std::vector<int> formats;

  explicit encoded_params(std::span<const param> params) {
    types.reserve(params.size());
    values.reserve(params.size());
    lengths.reserve(params.size());
    formats.reserve(params.size());
    for (const param& each : params) {
      types.push_back(each.type);
      values.push_back(each.value ? each.value->data() : nullptr);
      lengths.push_back(each.value ? static_cast<int>(each.value->size()) : 0);
      formats.push_back(each.binary ? 1 : 0);
    }
  }
  int count() const { return static_cast<int>(types.size()); }
};

// noexcept: an exception must not unwind through libpq's C frames.
void on_notice(void* context, const char* message) noexcept {
  auto* session = static_cast<state*>(context);
  if (session->notice_handler) {
    session->notice_handler(trimmed(message));
  }
}

}  // namespace

connection::connection() noexcept = default;
connection::connection(std::unique_ptr<state> opened) noexcept : state_(std::move(opened)) {}
connection::connection(connection&& other) noexcept = default;
connection& connection::operator=(connection&& other) noexcept = default;
connection::~connection() = default;

connection connection::connect(std::string_view conninfo, const timeout& limit) {
  weft::detail::current_uv_loop("weft::pg::connection::connect");
  refuse_nul(conninfo, "weft::pg::connection::connect", "connection string");
  std::string info(conninfo);
  // Parsed first so that a string libpq cannot read is reported as such, naming it: once
  // PQconnectStart has failed on it there is no host or user to name ("@:/").
  char* parse_failure = nullptr;
  PQconninfoOption* parsed = PQconninfoParse(info.c_str(), &parse_failure);
  if (parsed == nullptr) {
    masked_conninfo masked = mask_passwords(conninfo);
    std::string reason =
        parse_failure == nullptr ? "out of memory" : masked.scrub(trimmed(parse_failure));
    PQfreemem(parse_failure);
    throw error("weft::pg: connect failed: the connection string \"" + masked.text +
                    "\" is not valid: " + reason,
                "08001", reason);
  }
  PQconninfoFree(parsed);
  auto opened = std::make_unique<state>();
  opened->session = PQconnectStart(info.c_str());
  if (opened->session == nullptr) {
    throw std::bad_alloc();
  }
  opened->target = describe_target(opened->session);
  auto failed = [&] {
    std::string reason = trimmed(PQerrorMessage(opened->session));
    return error("weft::pg: connect to " + opened->target + " failed: " + reason +
                     "; check that the server runs and the connection string is right",
                 "08001", reason);
  };
  if (PQstatus(opened->session) == CONNECTION_BAD) {
    throw failed();
  }
  // libpq's recipe: start as if PQconnectPoll had asked to write, then wait for what it asks.
  // The socket may change between polls (libpq tries each host in turn), so ask for it each time.
  PostgresPollingStatusType polled = PGRES_POLLING_WRITING;
  try {
    while (polled != PGRES_POLLING_OK) {
      if (polled == PGRES_POLLING_FAILED) {
        throw failed();
      }
      int socket = PQsocket(opened->session);
      if (socket < 0) {
        throw failed();
      }
      if (polled == PGRES_POLLING_READING) {
        wait_readable(socket, limit);
      } else {
        wait_writable(socket, limit);
      }
      polled = PQconnectPoll(opened->session);
    }
  } catch (const timeout_error&) {
    throw timeout_error("weft::pg: connect to " + opened->target + " " +
                        weft::detail::timed_out_after(limit));
  }
  opened->target = describe_target(opened->session);  // the host that answered
  if (PQsetnonblocking(opened->session, 1) != 0) {
    throw failed();
  }
  PQsetNoticeProcessor(opened->session, &on_notice, opened.get());
  opened->socket_watch = weft::fd_registration(PQsocket(opened->session));
  opened->id = next_connection_id.fetch_add(1, std::memory_order_relaxed);
  return connection(std::move(opened));
}

namespace {

// qualified: "weft::pg::connection::query", for messages.
state& open_state(const std::unique_ptr<state>& opened, const char* qualified) {
  if (opened == nullptr) {
    throw std::logic_error(std::string(qualified) +
                           ": the connection is not connected (default-constructed or moved "
                           "from); open one with weft::pg::connection::connect");
  }
  weft::detail::current_uv_loop(qualified);
  if (opened->session == nullptr) {
    throw error(std::string(qualified) + " on " + opened->target + ": the connection is closed (" +
                    opened->closed_reason + "); open a new connection",
                "08003", "the connection is closed");
  }
  return *opened;
}

}  // namespace

connection::state& connection::usable_state(const char* qualified) const {
  state& session = open_state(state_, qualified);
  if (session.script_running || !session.pending.empty() || session.recovering) {
    throw std::logic_error(std::string(qualified) +
                           ": other queries are in flight on this connection, and this needs "
                           "the session to itself; wait for them (or use another connection)");
  }
  return session;
}

connection::state& connection::pipeline_state(const char* qualified, const timeout& limit) const {
  state* session = &open_state(state_, qualified);
  if (session->script_running) {
    throw std::logic_error(std::string(qualified) +
                           ": a script (execute_script) is running on this connection, and "
                           "scripts cannot be pipelined; wait for it (or use another "
                           "connection)");
  }
  if (session->transaction_owner != 0 && session->transaction_owner != weft::this_coroutine::id()) {
    throw std::logic_error(std::string(qualified) +
                           ": another coroutine has a transaction open on this connection, and "
                           "this query would run inside it; use another connection (or a pool)");
  }
  while (session->recovering) {
    weft::detail::queued_waiter waiter(session->gate);
    session->gate.wait(waiter, limit);
    session = &open_state(state_, qualified);  // the recovery may have closed it
  }
  return *session;
}

result connection::query_params(const timeout& limit, std::string_view sql,
                                std::span<const param> params) {
  refuse_nul(sql, "weft::pg::connection::query", "SQL text");
  state& session = pipeline_state("weft::pg::connection::query", limit);
  std::string text(sql);
  check_params(params, session, exchange{"query", sql});
  encoded_params encoded(params);
  return run_pipelined(session, limit, exchange{"query", sql}, [&] {
    return PQsendQueryParams(session.session, text.c_str(), encoded.count(), encoded.types.data(),
                             encoded.values.data(), encoded.lengths.data(), encoded.formats.data(),
                             0);
  });
}

result connection::query_prepared(const timeout& limit, const statement& prepared,
                                  std::span<const param> params) {
  state& session = pipeline_state("weft::pg::connection::query", limit);
  if (prepared.connection_id_ != session.id) {
    throw std::logic_error(
        "weft::pg::connection::query: statement \"" + prepared.name() +
        "\" was not prepared on this connection (" +
        (prepared.connection_id_ == 0 ? "it is empty" : "it belongs to another") +
        "); prepare it on the connection that runs it");
  }
  check_params(params, session, exchange{"prepared statement", prepared.sql()});
  encoded_params encoded(params);
  return run_pipelined(session, limit, exchange{"prepared statement", prepared.sql()}, [&] {
    return PQsendQueryPrepared(session.session, prepared.name().c_str(), encoded.count(),
                               encoded.values.data(), encoded.lengths.data(),
                               encoded.formats.data(), 0);
  });
}

statement connection::prepare(std::string_view sql, std::string name, const timeout& limit) {
  refuse_nul(sql, "weft::pg::connection::prepare", "SQL text");
  refuse_nul(name, "weft::pg::connection::prepare", "statement name");
  state& session = pipeline_state("weft::pg::connection::prepare", limit);
  if (name.empty()) {
    name = "weft_" + std::to_string(++session.statements_prepared);
  }
  std::string text(sql);
  run_pipelined(session, limit, exchange{"prepare", sql}, [&] {
    return PQsendPrepare(session.session, name.c_str(), text.c_str(), 0, nullptr);
  });
  return statement(std::move(name), std::move(text), session.id);
}

result connection::execute_script(std::string_view sql, const timeout& limit) {
  refuse_nul(sql, "weft::pg::connection::execute_script", "SQL text");
  state& session = usable_state("weft::pg::connection::execute_script");
  std::string text(sql);
  return run_exchange(session, limit, exchange{"script", sql},
                      [&] { return PQsendQuery(session.session, text.c_str()); });
}

bool connection::is_open() const noexcept {
  return state_ != nullptr && state_->session != nullptr &&
         PQstatus(state_->session) == CONNECTION_OK;
}

bool connection::busy() const noexcept {
  return state_ != nullptr &&
         (state_->script_running || !state_->pending.empty() || state_->recovering);
}

std::size_t connection::in_flight() const noexcept {
  return state_ == nullptr ? 0 : state_->pending.size();
}

bool connection::recovering() const noexcept { return state_ != nullptr && state_->recovering; }

void connection::set_transaction_owner(std::uint64_t coroutine_id) noexcept {
  if (state_ != nullptr) {
    state_->transaction_owner = coroutine_id;
  }
}

bool connection::in_transaction() const noexcept {
  if (state_ == nullptr || state_->session == nullptr) {
    return false;
  }
  PGTransactionStatusType status = PQtransactionStatus(state_->session);
  return status == PQTRANS_INTRANS || status == PQTRANS_INERROR;
}

int connection::backend_pid() const {
  if (!is_open()) {
    throw std::logic_error("weft::pg::connection::backend_pid: the connection is not open");
  }
  return PQbackendPID(state_->session);
}

int connection::server_version() const {
  if (!is_open()) {
    throw std::logic_error("weft::pg::connection::server_version: the connection is not open");
  }
  return PQserverVersion(state_->session);
}

void connection::set_notice_handler(std::function<void(std::string_view)> handler) {
  if (state_ == nullptr) {
    throw std::logic_error(
        "weft::pg::connection::set_notice_handler: the connection is not connected");
  }
  state_->notice_handler = std::move(handler);
}

void connection::close() {
  if (state_ == nullptr) {
    return;
  }
  // Queries abandoned by a timeout or a cancel wait for nobody: their answers go with the
  // session (the server stops them when it sees the connection gone).
  const state& session = *state_;
  bool someone_waits = session.script_running || session.reading || session.recovering ||
                       std::any_of(session.pending.begin(), session.pending.end(),
                                   [](const answer* each) { return each != nullptr; });
  if (someone_waits) {
    throw std::logic_error(
        "weft::pg::connection::close: a query is running on this connection; cancel its "
        "coroutine (or let it finish) before closing");
  }
  mark_closed(*state_, "it was closed by close()");
  state_->pending.clear();
  state_->gathered = result();
  state_->gathered_error.reset();
}

}  // namespace weft::pg

// One exchange on a weft::pg connection that has the session to itself, and the socket and
// error helpers every exchange uses (see session.hpp).
//
// Every exchange follows libpq's non-blocking recipe: send (PQsend*), PQflush until the output
// is out, then PQconsumeInput + PQisBusy until PQgetResult has a whole result, waiting on the
// socket with weft::wait_readable / wait_writable in between, so only the calling coroutine
// blocks. An interrupted exchange (timeout, cancellation) is recovered before the error reaches
// the caller: cancel request, then drain to ReadyForQuery; a session that cannot be recovered
// is closed, and remembers why for the next call.
#include <libpq-fe.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "pg/session.hpp"
#include "weft/error.hpp"
#include "weft/reactor/fd.hpp"
#include "weft/reactor/thread_pool.hpp"
#include "weft/sched/this_coroutine.hpp"

namespace weft::pg::detail {

namespace {

using namespace std::chrono_literals;

// While the output buffer is full we also keep reading (see flush_output); this is how long one
// wait for writability lasts before reading again.
constexpr auto flush_slice = 50ms;

}  // namespace

std::string trimmed(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) {
    text.remove_suffix(1);
  }
  return std::string(text);
}

std::string text_or_empty(const char* text) { return text == nullptr ? std::string() : text; }

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

namespace {

// Waits until PQgetResult will not block.
void await_result_ready(state& session, const timeout& limit, const exchange& what) {
  while (PQisBusy(session.session) != 0) {
    wait_readable(socket_of(session, what), limit);
    if (PQconsumeInput(session.session) == 0) {
      return;  // the read failed: PQgetResult reports it without blocking
    }
  }
}

}  // namespace

void keep_first_error(std::unique_ptr<PGresult, detail::result_deleter>& first,
                      PGresult* raw) noexcept {
  if (first == nullptr) {
    first.reset(raw);
  } else {
    PQclear(raw);
  }
}

namespace {

[[noreturn]] void refuse_copy(state& session, const exchange& what) {
  mark_closed(session, "a COPY statement was run, which weft::pg does not support");
  throw std::logic_error("weft::pg: " + what.describe() +
                         " started a COPY, which weft::pg does not support; the connection "
                         "was closed (use INSERT / SELECT instead)");
}

}  // namespace

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

}  // namespace weft::pg::detail

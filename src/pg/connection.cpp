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

#include <atomic>
#include <chrono>
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

namespace weft::pg {

struct connection::state {
  PGconn* session = nullptr;
  std::uint64_t id = 0;  // tells this connection's prepared statements from others'
  bool busy = false;
  std::uint64_t statements_prepared = 0;
  std::string target;         // "user@host:port/dbname", for messages (never the password)
  std::string closed_reason;  // why session is null, for the next call's error
  std::function<void(std::string_view)> notice_handler;
  // The socket stays registered with the reactor for the session's life: every query waits on
  // it, and registering it per wait costs several syscalls (see weft/reactor/fd.hpp). Reset
  // before PQfinish closes the socket.
  weft::fd_registration socket_watch;

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

void flush_output(state& session, const timeout& limit, const exchange& what) {
  for (;;) {
    int status = PQflush(session.session);
    if (status == 0) {
      return;
    }
    if (status < 0) {
      throw_lost(session, what);
    }
    // The socket buffer is full. Keep reading while waiting to write, so that a server blocked
    // on sending us something (notices, an early error) cannot deadlock both sides: wait for
    // writability in slices and consume input between them.
    if (PQconsumeInput(session.session) == 0) {
      throw_lost(session, what);
    }
    bool slice_is_limit = limit.bounded() && limit.deadline() <= clock::now() + flush_slice;
    try {
      wait_writable(socket_of(session, what), slice_is_limit ? limit : timeout(flush_slice));
    } catch (const timeout_error&) {
      if (slice_is_limit) {
        throw;
      }
    }
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
        if (first_error == nullptr) {
          first_error.reset(raw);
        } else {
          PQclear(raw);
        }
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

// One exchange: send, flush, collect; recovering the session when interrupted.
template <class Send>
result run_exchange(state& session, const timeout& limit, const exchange& what, Send&& send) {
  session.busy = true;
  struct idle_again {
    state& session;
    ~idle_again() { session.busy = false; }
  } idle{session};
  if (send() == 0) {
    if (PQstatus(session.session) == CONNECTION_BAD) {
      throw_lost(session, what);
    }
    throw std::logic_error("weft::pg: " + what.describe() +
                           " was refused by libpq: " + trimmed(PQerrorMessage(session.session)));
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
  auto opened = std::make_unique<state>();
  std::string info(conninfo);
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

connection::state& connection::usable_state(const char* operation) const {
  if (state_ == nullptr) {
    throw std::logic_error(std::string("weft::pg::connection::") + operation +
                           ": the connection is not connected (default-constructed or moved "
                           "from); open one with weft::pg::connection::connect");
  }
  std::string qualified = std::string("weft::pg::connection::") + operation;
  weft::detail::current_uv_loop(qualified.c_str());
  if (state_->busy) {
    throw std::logic_error(qualified +
                           ": a query is already running on this connection; a connection runs "
                           "one query at a time, so give each coroutine its own connection (or "
                           "a pool)");
  }
  if (state_->session == nullptr) {
    throw error(qualified + " on " + state_->target + ": the connection is closed (" +
                    state_->closed_reason + "); open a new connection",
                "08003", "the connection is closed");
  }
  return *state_;
}

result connection::query_params(const timeout& limit, std::string_view sql,
                                std::span<const param> params) {
  state& session = usable_state("query");
  std::string text(sql);
  encoded_params encoded(params);
  return run_exchange(session, limit, exchange{"query", sql}, [&] {
    return PQsendQueryParams(session.session, text.c_str(), encoded.count(), encoded.types.data(),
                             encoded.values.data(), encoded.lengths.data(), encoded.formats.data(),
                             0);
  });
}

result connection::query_prepared(const timeout& limit, const statement& prepared,
                                  std::span<const param> params) {
  state& session = usable_state("query");
  if (prepared.connection_id_ != session.id) {
    throw std::logic_error(
        "weft::pg::connection::query: statement \"" + prepared.name() +
        "\" was not prepared on this connection (" +
        (prepared.connection_id_ == 0 ? "it is empty" : "it belongs to another") +
        "); prepare it on the connection that runs it");
  }
  encoded_params encoded(params);
  return run_exchange(session, limit, exchange{"prepared statement", prepared.sql()}, [&] {
    return PQsendQueryPrepared(session.session, prepared.name().c_str(), encoded.count(),
                               encoded.values.data(), encoded.lengths.data(),
                               encoded.formats.data(), 0);
  });
}

statement connection::prepare(std::string_view sql, std::string name, const timeout& limit) {
  state& session = usable_state("prepare");
  if (name.empty()) {
    name = "weft_" + std::to_string(++session.statements_prepared);
  }
  std::string text(sql);
  run_exchange(session, limit, exchange{"prepare", sql}, [&] {
    return PQsendPrepare(session.session, name.c_str(), text.c_str(), 0, nullptr);
  });
  return statement(std::move(name), std::move(text), session.id);
}

result connection::execute_script(std::string_view sql, const timeout& limit) {
  state& session = usable_state("execute_script");
  std::string text(sql);
  return run_exchange(session, limit, exchange{"script", sql},
                      [&] { return PQsendQuery(session.session, text.c_str()); });
}

bool connection::is_open() const noexcept {
  return state_ != nullptr && state_->session != nullptr &&
         PQstatus(state_->session) == CONNECTION_OK;
}

bool connection::busy() const noexcept { return state_ != nullptr && state_->busy; }

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
  if (state_->busy) {
    throw std::logic_error(
        "weft::pg::connection::close: a query is running on this connection; cancel its "
        "coroutine (or let it finish) before closing");
  }
  mark_closed(*state_, "it was closed by close()");
}

}  // namespace weft::pg

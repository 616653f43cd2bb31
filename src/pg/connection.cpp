// weft::pg::connection on libpq's asynchronous API: connecting, the queries' entry points (their
// checks of the caller's input and of the session's use), the accessors and close. What one
// exchange does on the wire is in exchange.cpp (a session to itself) and pipeline.cpp
// (pipelined queries); session.hpp holds the state they share.
#include "weft/pg/connection.hpp"

#include <libpq-fe.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "pg/session.hpp"
#include "weft/error.hpp"
#include "weft/reactor/detail/operation.hpp"
#include "weft/reactor/fd.hpp"
#include "weft/sched/this_coroutine.hpp"
#include "weft/sync/detail/waiter_queue.hpp"

namespace weft::pg {

namespace {

using detail::answer;
using detail::exchange;
using detail::mark_closed;
using detail::run_exchange;
using detail::run_pipelined;
using detail::state;
using detail::text_or_empty;
using detail::trimmed;

std::atomic<std::uint64_t> next_connection_id{1};

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

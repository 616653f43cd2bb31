// One HTTP connection: the request loop. The request parser runs over the connection's own
// input buffer (net::connection::input()), consuming what it parsed, so a request costs the
// parser's copy of its head and nothing else. Responses are batched in `out` and written when
// the loop must wait for more bytes: the answers to the requests of one read leave in one write.
#include <chrono>
#include <exception>
#include <string>
#include <string_view>

#include "http/chars.hpp"
#include "http/describe.hpp"
#include "http/server_state.hpp"
#include "weft/http/forms.hpp"
#include "weft/sched/scheduler.hpp"
#include "weft/sched/timeout.hpp"

namespace weft::http::detail {

namespace {
// A queue of at most this many bytes between requests counts as written (serve_requests).
constexpr std::size_t reply_written_below = 64 * 1024;

using steady = std::chrono::steady_clock;
// An unread request body is read and dropped after the handler up to this much; past it the
// connection is closed instead (reading a huge upload nobody wants costs more than a reconnect).
constexpr std::uint64_t discard_limit = std::uint64_t{1} << 20;
// Batched responses are written once they reach this size even while requests remain.
constexpr std::size_t batch_limit = 64 * 1024;

// The server's limits (idle, keep-alive, header, body) count from the scheduler's last poll,
// not from a clock reading: they are seconds long, and ending them early by the microseconds
// since that poll saves one of the two clock readings a keep-alive request cost (the other was
// the wait's own check, fd.cpp).
timeout limit_of(std::chrono::milliseconds value) {
  return value.count() > 0 ? timeout::from(loop_time(), value) : timeout();
}
}  // namespace

// Spaces whose storage grew past this (a big body read whole, a long batch) are freed rather
// than kept: a spare should cost what an ordinary request needs.
constexpr std::size_t spare_space_limit = 64 * 1024;

std::unique_ptr<request_space> request_spaces::take(const parser_limits& limits) {
  if (std::optional<std::unique_ptr<request_space>> spare = spare_.take()) {
    return std::move(*spare);
  }
  return std::make_unique<request_space>(limits);
}

void request_spaces::give(std::unique_ptr<request_space> space) noexcept {
  const request& r = space->parser.message();
  if (!spare_.has_room() || space->out.capacity() > spare_space_limit ||
      r.body.capacity() > spare_space_limit || r.target.capacity() > spare_space_limit) {
    return;
  }
  space->parser.reset();
  space->out.clear();
  space->params.clear();
  space->captured.clear();
  spare_.give(std::move(space));
}

connection_state::connection_state(server_state& s, net::connection& c)
    : server(s),
      counters(s.counters[c.worker()]),
      conn(c),
      space(s.spaces[c.worker()].take(s.options.limits)),
      parser(space->parser),
      out(space->out),
      requests_served(c.carried()),
      params(space->params),
      captured(space->captured) {}

connection_state::~connection_state() {
  if (stream != stream_mode::none && !stream_logged) {
    end_stream_log(true);
  }
  server.spaces[conn.worker()].give(std::move(space));
}

void connection_state::log(std::string_view line) const noexcept {
  if (!server.options.log) {
    return;
  }
  try {
    std::string text =
        "weft.http worker " + std::to_string(conn.worker()) + " " + conn.peer_address() + ": ";
    text += line;
    server.options.log(text);
  } catch (...) {
    // A logger that throws cannot be told about it.
  }
}

[[gnu::hot]] bool connection_state::keep_alive_now() const noexcept {
  if (!keep_alive || failed || conn.stopping()) {
    return false;
  }
  // The client waits for 100 Continue that will not come: it may never send the body, so the
  // request stream cannot go on.
  if (!body_done && !continue_sent && awaits_continue()) {
    return false;
  }
  return true;
}

[[gnu::hot]] void connection_state::flush() {
  if (out.empty()) {
    return;
  }
  conn.send(out);
  out.clear();
}

namespace {

// Counts a response of status s in its class (1xx to 5xx).
[[gnu::always_inline]] inline void count_response(worker_counters& counters, status s) {
  const unsigned hundreds = code_of(s) / 100;
  if (hundreds >= 1 && hundreds <= 5) {
    counters.responses[hundreds - 1].add(1);
  }
}

// A logged response whose body is larger than this waits in respond() until the socket took
// it, so that its access line counts what was written (a client gone mid-body shows, as for
// files); a smaller one is logged when it is batched, at most this much off for a client that
// left (kernel buffers hold more), and batched responses keep their one write.
constexpr std::uint64_t logged_at_queue_limit = 64 * 1024;

}  // namespace

[[gnu::hot]] void connection_state::note_response(status s, std::uint64_t body_bytes) {
  count_response(counters, s);
  if (server.options.log || server.options.access_log) {
    if (body_bytes > logged_at_queue_limit) {
      log_large_response(s, body_bytes);
      return;
    }
    log_response(s, body_bytes);
  }
}

void connection_state::log_large_response(status s, std::uint64_t body_bytes) {
  // The body ends `out`: its place in the connection's output is after what was written, what
  // is queued, and what `out` holds before it.
  const std::uint64_t end = conn.counters().bytes_out + conn.queued() + out.size();
  log_once_sent(s, end - body_bytes, body_bytes, [this] { flush(); });
}

void connection_state::note_response_head(status s) { count_response(counters, s); }

void connection_state::log_sent(status s, std::uint64_t body_bytes, bool aborted) noexcept {
  if (!server.options.log && !server.options.access_log) {
    return;
  }
  try {
    log_response(s, body_bytes, aborted);
  } catch (...) {
    // Out of memory for the line: called on the way out of a failed send too, and must not
    // throw over its exception.
  }
}

void connection_state::note_stream_response(status s) {
  count_response(counters, s);
  stream_status = s;
}

void connection_state::end_stream_log(bool aborted) noexcept {
  if (stream_logged) {
    return;
  }
  stream_logged = true;
  if (!server.options.log && !server.options.access_log) {
    return;
  }
  try {
    log_response(stream_status, head_request ? 0 : stream_written, aborted);
  } catch (...) {
    // Out of memory for the line: the destructor calls this too, and must not throw.
  }
}

void connection_state::log_response(status s, std::uint64_t body_bytes, bool aborted) {
  const request& r = parser.message();
  if (server.options.access_log) {
    access_record record;
    record.peer = conn.peer_address();
    record.time = std::chrono::system_clock::now();
    if (request_started != std::chrono::steady_clock::time_point{}) {
      record.duration = std::chrono::steady_clock::now() - request_started;
      request_started = {};  // the next error answer before a head is complete takes no time
    }
    record.method = r.method;
    record.target = r.target;
    record.version_minor = r.version_minor;
    record.status = s;
    record.body_bytes = body_bytes;
    record.aborted = aborted;
    record.referer = r.headers.get("Referer").value_or(std::string_view());
    record.user_agent = r.headers.get("User-Agent").value_or(std::string_view());
    record.worker = conn.worker();
    try {
      server.options.access_log(record);
    } catch (...) {
      // As for `log`: an access log that throws cannot be told about it.
    }
  }
  if (!server.options.log) {
    return;
  }
  std::string line;
  line.reserve(64 + r.target.size());
  line += '"';
  line += method_name(r.method);
  line += ' ';
  line += r.target;
  line += " HTTP/1.";
  line += static_cast<char>('0' + (r.version_minor % 10));
  line += "\" ";
  line += std::to_string(code_of(s));
  line += ' ';
  line += std::to_string(body_bytes);
  if (aborted) {
    line += " aborted";
  }
  log(line);
}

void connection_state::send_continue() {
  const request& r = parser.message();
  if (continue_sent || body_done || responded || r.version_minor == 0 || !awaits_continue()) {
    return;
  }
  continue_sent = true;
  out.append("HTTP/1.1 100 Continue\r\n\r\n");
  counters.responses[0].add(1);
  flush();
}

[[gnu::hot]] void connection_state::check_not_responded(const char* operation) const {
  if (responded) {
    throw std::logic_error(std::string("weft::http::exchange::") + operation + ": " +
                           method_name(parser.message().method).data() + " " +
                           parser.message().target + " was already responded to");
  }
}

void connection_state::fail_request(status s, std::string_view reason) {
  failed = true;
  timed_out = s == status::request_timeout;
  log(std::string("error ") + std::to_string(code_of(s)) + ": " + std::string(reason));
  if (responded) {
    if (stream != stream_mode::none && !stream_finished) {
      end_stream_log(true);
      conn.destroy();  // a body is under way: only an abort tells the client it is broken
    }
    return;  // the response made stands; the connection closes after it
  }
  responded = true;
  std::string body(reason_phrase(s));
  body += ": ";
  body += reason;
  body += '\n';
  append_simple_head(out, s, server.options.server_name, "text/plain; charset=utf-8", body.size(),
                     false, 1);
  out += body;
  note_response(s, body.size());
}

// Waits for more input. False when the connection's input ended.
[[gnu::hot]] bool connection_state::wait_bytes(const timeout& limit, bool mid_message) {
  return conn.read_input(limit, mid_message);
}

// Reads and parses up to the end of the next request's head. False: the connection ends (the
// peer closed, a timeout, an error answered).
[[gnu::hot]] bool connection_state::read_head() {
  // header_timeout bounds the rest of a head once part of it is here. The clock is read at the
  // first wait for that rest, not when the first bytes are parsed: a head that arrives whole
  // (nearly every one) costs no clock reading, and the bytes were read and parsed just before
  // the wait, so the deadline moves by microseconds.
  steady::time_point head_deadline{};
  for (;;) {
    std::string_view in = conn.input();
    if (!in.empty()) {
      parse_result r = parser.parse(in);
      conn.consume_input(r.consumed);
      if (r.event == parse_event::headers_complete) {
        return true;
      }
      if (r.event == parse_event::error) {
        head_failed(parser.error_status(), parser.error_reason());
        return false;
      }
    }
    flush();
    try {
      const bool partial = !conn.input().empty();
      if (partial) {
        if (head_deadline == steady::time_point{} && server.options.header_timeout.count() > 0) {
          head_deadline = steady::now() + server.options.header_timeout;
        }
        if (!wait_bytes(
                head_deadline == steady::time_point{} ? timeout() : timeout::at(head_deadline),
                true)) {
          return false;
        }
      } else {
        // Between requests: the first waits up to header_timeout from the accept, the next ones
        // keep_alive_timeout; either way a connection that sends nothing is closed quietly. The
        // idle time starts once the last reply is written (a large body to a slow client): timed
        // from its queueing, a busy connection was closed under its download (nginx's
        // keepalive_timeout also starts after the response). A queue a socket's buffer takes
        // whole is as good as written: it is not waited for (on the uring driver every reply
        // is queued until the ring's next enter sends it, and the wait cost a switch per
        // request).
        if (conn.queued() > reply_written_below || conn.queued_files() > 0) {
          conn.wait_sent();
        }
        const auto idle = requests_served == 0 ? server.options.header_timeout
                                               : server.options.keep_alive_timeout;
        if (may_hibernate && conn.worker_connections() > server.options.hibernate_above &&
            !conn.stopping() && conn.is_open()) {
          // Wait without a coroutine: the handler is called again when bytes come (or the
          // limit passes: the first read then throws timeout_error, handled below).
          conn.hibernate(limit_of(idle), requests_served);
          hibernating = true;
          return false;
        }
        // Called again after a hibernation (requests served, none yet in this call): the
        // hibernation's limit bounds this first read already.
        const bool resumed = requests_served > 0 && !may_hibernate;
        if (!wait_bytes(resumed ? timeout() : limit_of(idle), false)) {
          return false;
        }
      }
    } catch (const timeout_error&) {
      if (conn.input().empty()) {
        conn.close();
        return false;
      }
      head_timed_out();
      return false;
    }
  }
}

void connection_state::head_timed_out() {
  head_failed(status::request_timeout, "the request head did not arrive within " +
                                           std::to_string(server.options.header_timeout.count()) +
                                           " ms (header_timeout)");
}

void connection_state::head_failed(status s, std::string_view reason) {
  counters.requests.add(1);
  // A new request, not the one served before it on this connection: that one's response was
  // made (and batched), so fail_request would otherwise take this one for answered already and
  // close without the 400 or 408.
  begin_request();
  // A body comes after a head refused for what it says of the body (its Content-Length past the
  // limit: 413; a transfer coding weft does not decode: 501): the close lingers for it. Other
  // refused heads leave the close to look for bytes still coming (net::connection::close).
  body_done = !(s == status::content_too_large || s == status::not_implemented);
  fail_request(s, reason);
}

std::optional<std::string_view> connection_state::next_body_piece() {
  if (body_done) {
    return std::nullopt;
  }
  send_continue();
  for (;;) {
    parse_result r = parser.parse(conn.input());
    conn.consume_input(r.consumed);
    switch (r.event) {
      case parse_event::body:
        if (!r.body.empty()) {
          return r.body;
        }
        continue;
      case parse_event::message_complete:
        body_done = true;
        return std::nullopt;
      case parse_event::error: {
        const status s = parser.error_status();
        std::string reason = parser.error_reason();
        fail_request(s, reason);
        throw body_error("weft::http: the request body cannot be read: " + reason, s);
      }
      default:
        break;
    }
    flush();  // before any wait for input: a response made may be what the client waits for
    bool more = false;
    try {
      more = wait_bytes(discarding ? discard_wait() : limit_of(server.options.body_timeout), true);
    } catch (const timeout_error&) {
      if (discarding) {
        discard_stopped = true;  // the response stands; discard_body() ends the connection
        return std::nullopt;
      }
      const std::string reason = "no body bytes for " +
                                 std::to_string(server.options.body_timeout.count()) +
                                 " ms (body_timeout)";
      fail_request(status::request_timeout, reason);
      throw body_error("weft::http: the request body cannot be read: " + reason,
                       status::request_timeout);
    }
    if (!more) {
      failed = true;
      throw body_error(
          "weft::http: the request body cannot be read: the client closed the "
          "connection before its end",
          status::bad_request);
    }
  }
}

// The wait for the next bytes of a body being discarded: discard_gap (0: none), no later than
// discard_end.
timeout connection_state::discard_wait() const {
  timeout::clock::time_point until = discard_end;
  if (discard_gap.count() > 0) {
    until = std::min(until, loop_time() + discard_gap);
  }
  return timeout::at(until);
}

// Reads and drops what the handler left of the body, after its response, so that the next
// request can be read. False: the connection must close. Bounded as nginx bounds its discard:
// discard_limit bytes; keep_alive_timeout between bytes (the client has its answer and the
// server waits for it as between requests; nginx's lingering_timeout, 5 s), body_timeout where
// shorter; linger_time in all (nginx's lingering_time; body_timeout where linger_time is 0).
// Without those a client trickling the rest of a large announced body held its connection and
// coroutine for 30 s a gap, up to the 1 MiB the discard reads.
bool connection_state::discard_body() {
  using std::chrono::milliseconds;
  const server_options& o = server.options;
  milliseconds gap = o.body_timeout;
  if (o.keep_alive_timeout.count() > 0 && (gap.count() == 0 || o.keep_alive_timeout < gap)) {
    gap = o.keep_alive_timeout;
  }
  const milliseconds whole = o.linger_time.count() > 0 ? o.linger_time : o.body_timeout;
  discard_gap = gap;
  discard_end = whole.count() > 0 ? loop_time() + whole : timeout::clock::time_point::max();
  discarding = true;
  std::uint64_t dropped = 0;
  struct end_discard {
    bool& flag;
    ~end_discard() { flag = false; }
  } ending{discarding};
  while (!body_done) {
    if (dropped > discard_limit) {
      return false;
    }
    auto piece = next_body_piece();
    if (discard_stopped) {
      log("closed after the response: the " + std::to_string(dropped) +
          " bytes of unread body that came were dropped, and the rest stopped coming (" +
          std::to_string(gap.count()) + " ms between bytes, " + std::to_string(whole.count()) +
          " ms in all)");
      return false;
    }
    if (!piece) {
      break;
    }
    dropped += piece->size();
  }
  return true;
}

[[gnu::hot]] void connection_state::run() {
  for (;;) {
    if (!read_head()) {
      break;
    }
    serve_one();
    if (failed || upgraded || !keep_alive || conn.closed_by().has_value()) {
      break;
    }
    if (out.size() >= batch_limit) {
      flush();
    }
  }
  if (hibernating) {
    return;  // read_head flushed everything before hibernating
  }
  if (!out.empty() && conn.is_open()) {
    try {
      flush();
    } catch (const cancelled_error&) {
      throw;
    } catch (const std::exception&) {
      return;  // the connection is gone; its close reason says why
    }
  }
  if (!body_done && !timed_out && !discard_stopped) {
    // The client may still be sending the body it announced (left unread past discard_limit or
    // by a handler whose response closes, refused with 413 or 501, cut by a framing error):
    // closed at once, the socket would answer its bytes with a reset that can destroy the
    // response on its way (net::connection::close).
    conn.close_lingering();
  } else {
    conn.close();
  }
}

[[gnu::hot]] void connection_state::begin_request() noexcept {
  head_request = parser.message().method == method::head;
  responded = false;
  continue_sent = false;
  body_read = false;
  body_done = false;
  stream = stream_mode::none;
  stream_finished = false;
  stream_logged = false;
  stream_expected = stream_written = 0;
  params.clear();
}

[[gnu::hot]] void connection_state::serve_one() {
  counters.requests.add(1);
  if (server.options.access_log) {
    request_started = std::chrono::steady_clock::now();
  }
  ++requests_served;
  may_hibernate = true;
  keep_alive =
      parser.keep_alive() && (server.options.max_requests_per_connection == 0 ||
                              requests_served < server.options.max_requests_per_connection);
  begin_request();
  if (!parser.body_expected()) {
    // No body: the parser's message_complete comes with nothing consumed.
    parse_result done = parser.parse(conn.input());
    conn.consume_input(done.consumed);
    body_done = true;
  }
  if (parser.has_expect() && server.options.refuse_unknown_expectations && refuse_expectation())
      [[unlikely]] {
    after_handler();
    return;
  }

  try {
    server.serve_request(ex);
  } catch (const cancelled_error&) {
    if (!hung_up) {
      throw;  // the server's stop (or the scheduler's shutdown) cancelled the handler
    }
    // A hangup_watch destroyed the connection and cancelled the handler: abandoned below.
  } catch (const body_error&) {
    // Answered (or the connection is gone) where it was thrown.
    failed = true;
  } catch (const net::connection_closed_error&) {
    failed = true;
  } catch (const form_error& failure) {
    // A form body the handler could not read: the client's mistake, answered with its status.
    if (!conn.is_open()) {
      failed = true;
    } else {
      handler_failed(std::string("the form body was refused: ") + failure.what(), failure.status(),
                     std::string(failure.what()) + "\n");
    }
  } catch (const std::exception& failure) {
    if (!conn.is_open()) {
      failed = true;  // a send found the connection closed (send limit, peer reset)
    } else {
      handler_failed(std::string("the handler threw: ") + failure.what());
    }
  } catch (...) {
    handler_failed("the handler threw a non-std exception");
  }
  if (hung_up) [[unlikely]] {
    abandoned();
  } else if (!failed) {
    after_handler();
  }
}

// RFC 9110 10.1.1: a server that cannot meet an expectation answers 417. weft meets only
// 100-continue (ignored in HTTP/1.0 requests, as the RFC asks); any other member of any Expect
// field is refused before the handler, as Go's net/http and Node's http refuse it, instead of
// serving the request as if the client had asked nothing of it. An empty Expect asks nothing.
// The client sends the body of such a request without waiting (it awaits no 100), so the
// body is discarded after the 417 and the connection goes on, unless 100-continue was also
// asked: that client may wait for a 100 that will not come, and the connection closes.
bool connection_state::refuse_expectation() {
  const request& r = parser.message();
  std::string_view unmet;
  bool awaits_continue = false;
  for (std::string_view list : r.headers.get_all("Expect")) {
    while (!list.empty()) {
      const std::size_t comma = list.find(',');
      const std::string_view member = trim_ows(list.substr(0, comma));
      list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
      if (iequals(member, "100-continue")) {
        awaits_continue = r.version_minor >= 1;
      } else if (!member.empty() && unmet.empty()) {
        unmet = member;
      }
    }
  }
  if (unmet.empty()) {
    return false;
  }
  if (awaits_continue && !body_done) {
    keep_alive = false;
  }
  const std::string what = "the expectation " + quoted(unmet) + " cannot be met";
  handler_failed("417: " + what + " (Expect; weft meets only 100-continue)",
                 status::expectation_failed, what + " (only 100-continue can)\n");
  return true;
}

void connection_state::abandoned() noexcept {
  failed = true;
  if (stream != stream_mode::none && !stream_finished) {
    end_stream_log(true);
  }
  try {
    const request& r = parser.message();
    log("the client closed the connection; its request was abandoned (" +
        std::string(method_name(r.method)) + " " + r.target + ")");
  } catch (...) {
    // Out of memory for the line.
  }
}

void connection_state::handler_failed(std::string_view what, http::status answer,
                                      std::string_view body) {
  const request& r = parser.message();
  log(std::string(what) + " (" + std::string(method_name(r.method)) + " " + r.target + ")");
  if (responded) {
    if (stream != stream_mode::none && !stream_finished) {
      end_stream_log(true);
      failed = true;
      conn.destroy();  // the head went out: only an abort tells the client the body is broken
    }
    return;
  }
  // Answer and go on: the request stream is intact (after_handler drains the body).
  responded = true;
  append_simple_head(out, answer, server.options.server_name, "text/plain; charset=utf-8",
                     body.size(), keep_alive_now(), r.version_minor);
  if (!head_request) {
    out += body;
  }
  if (!keep_alive_now()) {
    keep_alive = false;
  }
  note_response(answer, body.size());
}

bool connection_state::finish_stream() {
  if (stream == stream_mode::length && stream_written != stream_expected) {
    log("the handler returned after writing " + std::to_string(stream_written) + " of the " +
        std::to_string(stream_expected) +
        " body bytes its Content-Length announced; "
        "connection aborted");
    end_stream_log(true);
    failed = true;
    conn.destroy();
    return false;
  }
  try {
    exchange::body_writer finishing(ex);
    finishing.finish();
  } catch (const cancelled_error&) {
    throw;
  } catch (const std::exception&) {
    failed = true;
    return false;
  }
  return true;
}

[[gnu::hot]] void connection_state::after_handler() {
  if (!responded) {
    handler_failed("the handler returned without responding");
  }
  if (stream != stream_mode::none && !stream_finished && !finish_stream()) {
    return;
  }
  if (stream == stream_mode::close) {
    keep_alive = false;
  }
  if (!keep_alive) {
    return;
  }
  if (!body_done) {
    if (!continue_sent && awaits_continue()) {
      keep_alive = false;  // the response said Connection: close (keep_alive_now)
      return;
    }
    try {
      if (!discard_body()) {
        keep_alive = false;
      }
    } catch (const body_error&) {
      failed = true;
    }
  }
}

}  // namespace weft::http::detail

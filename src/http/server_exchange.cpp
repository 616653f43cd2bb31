// exchange: what a handler does with one request: read its body, respond whole, stream, or send
// a file. Responses are appended to the connection's batch (connection_state::out); streamed
// bodies and files write it out first.
#include <poll.h>
#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

#include "http/chars.hpp"
#include "http/compression.hpp"
#include "http/date.hpp"
#include "http/fields_builder.hpp"
#include "http/scan.hpp"
#include "http/server_state.hpp"
#include "http/upgrade_offer.hpp"
#include "weft/sched/scheduler.hpp"

namespace weft::http {

namespace {

void check_field_value(std::string_view value, const char* what) {
  // 16 bytes at a time to the first control (find_control: a content type checked byte by byte
  // cost 120 instructions per response); a tab, the one control allowed, goes on past it.
  const char* end = value.data() + value.size();
  const char* p = detail::find_control(value.data(), end);
  while (p != end && *p == '\t') {
    p = detail::find_control(p + 1, end);
  }
  if (p != end) {
    const auto c = static_cast<unsigned char>(*p);
    throw std::invalid_argument(std::string("weft::http::exchange::respond: the ") + what +
                                " has the control character " + std::to_string(c) +
                                " (a header value may not carry CR, LF or controls)");
  }
}

}  // namespace

namespace detail {

namespace {

// The heads the server writes itself repeat: response after response carries the same status
// line, Server, Date (within a second) and Content-Type, and only Content-Length and Connection
// vary, and mostly not even those. Each thread keeps its last few such heads whole, keyed on
// what they were made from: the prefix up to "Content-Length: " (or up to the Connection line
// for a status without content) on the status, the Date's second, the Server name and the
// Content-Type, and after it the suffix of its last use (the length's digits, the Connection
// line, the empty line) on that length and Connection line. A response whose head is there is
// one append; one whose prefix is there rewrites the suffix in place first; the others assemble
// the head (callgrind, hello, the Date included: 420 instructions a head assembled, 334 with the
// prefix kept and the suffix written after it, 253 with the head kept whole). Only heads without
// caller fields are kept (respond(status, body, type) and the server's own answers).
struct kept_head {
  bool date = false;
  std::uint8_t connection = 0;  // the suffix's Connection line: 0 none, 1 close, 2 keep-alive
  std::uint16_t code = 0;
  std::uint16_t server_at = 0;  // where the Server name sits in bytes, and its size
  std::uint16_t server_size = 0;
  std::uint16_t type_at = 0;  // the same for the Content-Type
  std::uint16_t type_size = 0;
  std::uint16_t size = 0;    // the prefix's bytes; 0: an empty slot (no head is empty)
  std::uint16_t whole = 0;   // the prefix's and the suffix's bytes
  std::time_t second = 0;    // of the Date in it (0 when it has none)
  std::uint64_t length = 0;  // the Content-Length in the suffix
  char bytes[288] = {};
};

// The longest suffix: 20 digits, CRLF, "Connection: keep-alive" CRLF, CRLF.
constexpr std::size_t max_suffix = 20 + 2 + 24 + 2;

struct kept_heads {
  kept_head slot[4];
  unsigned next = 0;  // the slot the next miss replaces (round robin)
};

// Constant-initialised, so reaching it costs no thread_local guard.
thread_local kept_heads thread_heads;

bool same(const kept_head& p, std::uint16_t at, std::uint16_t size, std::string_view text) {
  return size == text.size() && equal_short_bytes(p.bytes + at, text.data(), size);
}

// What follows a head's prefix: the length's digits and CRLF (with content), the Connection
// line (connection: 0 none, 1 close, 2 keep-alive), the empty line; at most max_suffix bytes.
// Returns the end of what it wrote.
[[gnu::hot]] char* put_suffix(char* at, bool content, std::uint64_t length,
                              std::uint8_t connection) {
  constexpr std::string_view crlf = "\r\n";
  constexpr std::string_view close_line = "Connection: close\r\n";
  constexpr std::string_view keep_alive_line = "Connection: keep-alive\r\n";
  if (content) {
    at = std::to_chars(at, at + 20, length).ptr;
    std::memcpy(at, crlf.data(), crlf.size());
    at += crlf.size();
  }
  if (connection != 0) {
    const std::string_view line = connection == 1 ? close_line : keep_alive_line;
    std::memcpy(at, line.data(), line.size());
    at += line.size();
  }
  std::memcpy(at, crlf.data(), crlf.size());
  return at + crlf.size();
}

// A head with no slot of thread_heads for its prefix (or with caller fields): assembled piece by
// piece into out, and kept in a slot when it has no caller fields. Out of line, so that the
// lookup's path saves few registers and keeps a small frame.
[[gnu::noinline]] void assemble_head(std::string& out, std::uint16_t code, status s,
                                     std::string_view server_name, std::string_view type,
                                     bool content, std::uint64_t length, std::uint8_t connection,
                                     std::string_view wire_fields, bool date, std::time_t second,
                                     std::string_view date_value) {
  // An empty piece may be a default string_view, whose data() is null: memcpy must not be
  // given it even for zero bytes (UBSan), so put skips empty pieces for every caller.
  const auto put = [](char*& at, std::string_view piece) {
    if (!piece.empty()) {
      std::memcpy(at, piece.data(), piece.size());
      at += piece.size();
    }
  };
  // Sized first and written with one resize: a head appended piece by piece (fifteen appends,
  // each checking the capacity) cost about four times as much.
  const std::string_view reason = reason_phrase(s);
  constexpr std::string_view crlf = "\r\n";
  constexpr std::string_view status_prefix = "HTTP/1.1 ";
  constexpr std::string_view server_field = "Server: ";
  constexpr std::string_view date_field = "Date: ";
  constexpr std::string_view type_field = "Content-Type: ";
  constexpr std::string_view length_field = "Content-Length: ";
  std::size_t size = status_prefix.size() + 4 + reason.size() + crlf.size();
  if (date) {
    size += date_field.size() + date_value.size() + crlf.size();
  }
  size += wire_fields.size();
  if (!server_name.empty()) {
    size += server_field.size() + server_name.size() + crlf.size();
  }
  if (!type.empty()) {
    size += type_field.size() + type.size() + crlf.size();
  }
  if (content) {
    size += length_field.size();
  }
  const std::size_t prefix_size = size;
  const std::size_t start = out.size();
  out.resize(start + prefix_size + max_suffix);
  char* const head = out.data() + start;
  char* at = head;
  put(at, status_prefix);
  *at++ = static_cast<char>('0' + code / 100 % 10);
  *at++ = static_cast<char>('0' + code / 10 % 10);
  *at++ = static_cast<char>('0' + code % 10);
  *at++ = ' ';
  put(at, reason);
  put(at, crlf);
  std::size_t server_at = 0;
  if (!server_name.empty()) {
    put(at, server_field);
    server_at = static_cast<std::size_t>(at - head);
    put(at, server_name);
    put(at, crlf);
  }
  if (date) {
    put(at, date_field);
    put(at, date_value);
    put(at, crlf);
  }
  std::size_t type_at = 0;
  if (!type.empty()) {
    put(at, type_field);
    type_at = static_cast<std::size_t>(at - head);
    put(at, type);
    put(at, crlf);
  }
  put(at, wire_fields);
  if (content) {
    put(at, length_field);
  }
  const std::size_t whole =
      static_cast<std::size_t>(put_suffix(at, content, length, connection) - head);
  out.resize(start + whole);
  if (wire_fields.empty() && prefix_size + max_suffix <= sizeof(kept_head::bytes)) {
    kept_heads& heads = thread_heads;
    kept_head& p = heads.slot[heads.next];
    heads.next = (heads.next + 1) % std::size(heads.slot);
    p.date = date;
    p.code = code;
    p.second = second;
    p.server_at = static_cast<std::uint16_t>(server_at);
    p.server_size = static_cast<std::uint16_t>(server_name.size());
    p.type_at = static_cast<std::uint16_t>(type_at);
    p.type_size = static_cast<std::uint16_t>(type.size());
    p.size = static_cast<std::uint16_t>(prefix_size);
    p.whole = static_cast<std::uint16_t>(whole);
    p.length = length;
    p.connection = connection;
    std::memcpy(p.bytes, head, whole);
  }
}

// The kept head for what a head is made from (a Date of `second`, or none), appended to out with
// the suffix for length and connection. False: no slot keeps that prefix; nothing appended.
[[gnu::hot]] bool append_kept_head(std::string& out, std::uint16_t code, bool content,
                                   std::string_view server_name, std::string_view type, bool date,
                                   std::time_t second, std::uint64_t length,
                                   std::uint8_t connection) {
  for (kept_head& p : thread_heads.slot) {
    if (p.size != 0 && p.code == code && p.date == date && p.second == second &&
        same(p, p.server_at, p.server_size, server_name) && same(p, p.type_at, p.type_size, type)) {
      if (p.length != length || p.connection != connection) {
        p.whole = static_cast<std::uint16_t>(
            put_suffix(p.bytes + p.size, content, length, connection) - p.bytes);
        p.length = length;
        p.connection = connection;
      }
      out.append(p.bytes, p.whole);
      return true;
    }
  }
  return false;
}

std::uint8_t connection_line(bool keep_alive, int version_minor) {
  return !keep_alive ? 1 : version_minor == 0 ? 2 : 0;
}

}  // namespace

[[gnu::hot]] void append_simple_head(std::string& out, status s, std::string_view server_name,
                                     std::string_view content_type, std::size_t length,
                                     bool keep_alive, int version_minor,
                                     std::string_view wire_fields, bool date, bool check_type) {
  const std::uint16_t code = code_of(s);
  const bool content = !forbids_content(s);
  const std::string_view type = content ? content_type : std::string_view();
  // A kept head's content type was checked when it was made (47 instructions a response for
  // "text/plain", callgrind), so only a head assembled anew checks it. A status without content
  // drops the type from its head, where any type would match a kept one: checked first.
  if (check_type && !content) {
    check_field_value(content_type, "content type");
  }
  std::time_t second = 0;
  const std::string_view date_value = date ? detail::http_date(second) : std::string_view();
  const std::uint8_t connection = connection_line(keep_alive, version_minor);
  if (wire_fields.empty() &&
      append_kept_head(out, code, content, server_name, type, date, second, length, connection)) {
    return;
  }
  if (check_type && content) {
    check_field_value(content_type, "content type");
  }
  assemble_head(out, code, s, server_name, type, content, length, connection, wire_fields, date,
                second, date_value);
}

}  // namespace detail

[[gnu::hot]] http::request& exchange::request() noexcept { return state_.parser.message(); }

std::string_view exchange::param(std::string_view name) const {
  for (const auto& [key, value] : state_.params) {
    if (key == name) {
      return value;
    }
  }
  return {};
}

const std::string& exchange::read_body() {
  http::request& r = state_.parser.message();
  if (!state_.body_read) {
    state_.body_read = true;
    r.body.clear();
  }
  while (auto piece = state_.next_body_piece()) {
    r.body.append(*piece);
  }
  return r.body;
}

std::optional<std::string_view> exchange::read_body_chunk() { return state_.next_body_piece(); }

bool exchange::responded() const noexcept { return state_.responded; }

net::connection& exchange::connection() noexcept { return state_.conn; }

unsigned exchange::worker() const noexcept { return state_.conn.worker(); }

hangup_watch::hangup_watch(exchange& ex, std::chrono::milliseconds every)
    : state_(ex.state_),
      handler_(weft::detail::running_coroutine(current_scheduler())),
      every_(every) {
  if (every.count() <= 0) {
    throw std::invalid_argument("weft::http: a hangup_watch's period must be positive, not " +
                                std::to_string(every.count()) + " ms");
  }
  if (handler_ == nullptr) {
    throw std::logic_error("weft::http: a hangup_watch outside a coroutine");
  }
  state_.server.sweepers[state_.conn.worker()].add(*this);
}

hangup_watch::~hangup_watch() {
  if (linked_) {
    state_.server.sweepers[state_.conn.worker()].remove(*this);
  }
}

bool hangup_watch::fired() const noexcept { return state_.hung_up; }

namespace detail {

void hangup_sweeper::add(hangup_watch& watch) {
  if (!timer_) {
    timer_.emplace();
  }
  // Within its period of the last poll (the time a coroutine runs in); the first sweep past that
  // looks. No clock read for a watch dropped before its first look.
  watch.due_ = loop_time() + watch.every_;
  watch.prev_ = nullptr;
  watch.next_ = first_;
  if (first_ != nullptr) {
    first_->prev_ = &watch;
  }
  first_ = &watch;
  watch.linked_ = true;
  if (!timer_->armed() || watch.every_ < tick_) {
    tick_ = timer_->armed() ? std::min(tick_, watch.every_) : watch.every_;
    timer_->start(
        tick_, [this] { sweep(); }, tick_);
  }
}

void hangup_sweeper::remove(hangup_watch& watch) noexcept {
  if (watch.prev_ != nullptr) {
    watch.prev_->next_ = watch.next_;
  } else {
    first_ = watch.next_;
  }
  if (watch.next_ != nullptr) {
    watch.next_->prev_ = watch.prev_;
  }
  watch.prev_ = watch.next_ = nullptr;
  watch.linked_ = false;
}

// From the reactor tick, on the worker's thread: no coroutine runs meanwhile, so no watch is
// made or dropped during the sweep; look() unlinks only the watch it looks at (and a cancelled
// handler runs after the sweep), so the due watches stay valid to its end. The sockets of the
// watches due go to one poll(2): a sweep costs one system call, not one a watch (ten thousand
// handlers under 1 s watches made ten thousand a second), and look() polls again, alone, only
// a socket that poll saw hung up, reset or half-closed.
void hangup_sweeper::sweep() noexcept {
  if (first_ == nullptr) {
    timer_->stop();  // the next watch starts it again
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  due_.clear();
  sockets_.clear();
  for (hangup_watch* watch = first_; watch != nullptr;) {
    hangup_watch* const next = watch->next_;
    if (now >= watch->due_) {
      watch->due_ = now + watch->every_;
      const int fd = watch->state_.conn.native_handle();
      if (!watch->state_.conn.is_open() || fd < 0) {
        look(*watch);  // unlinks it, no system call
      } else {
        try {
          due_.push_back(watch);
          sockets_.push_back(pollfd{fd, POLLRDHUP, 0});
        } catch (const std::bad_alloc&) {
          due_.resize(sockets_.size());
          look(*watch);  // out of memory for the batch: this one looks alone
        }
      }
    }
    watch = next;
  }
  if (sockets_.empty() || ::poll(sockets_.data(), sockets_.size(), 0) <= 0) {
    return;  // nothing to report (or EINTR/ENOMEM: the next sweep will tell)
  }
  for (std::size_t i = 0; i < sockets_.size(); ++i) {
    if ((sockets_[i].revents & (POLLHUP | POLLERR | POLLRDHUP)) != 0) {
      look(*due_[i]);
    }
  }
}

void hangup_sweeper::look(hangup_watch& watch) noexcept {
  net::connection& conn = watch.state_.conn;
  if (!conn.is_open()) {
    remove(watch);  // closed for another reason (the server's stop, a send that failed)
    return;
  }
  if (!conn.close_if_peer_gone()) {
    return;
  }
  remove(watch);
  watch.state_.hung_up = true;
  // The handler's coroutine is suspended (or ready) inside the watch's lifetime: the wait it is
  // in raises the cancellation.
  try {
    weft::detail::cancel_coroutine(current_scheduler(), *watch.handler_,
                                   "weft::http: the client closed the connection");
  } catch (...) {
    // Out of memory for the reason: the destroyed connection fails the handler's next send.
  }
}

}  // namespace detail

net::connection& exchange::upgrade(std::shared_ptr<const net::protocol> p) {
  detail::connection_state& s = state_;
  if (p == nullptr) {
    throw std::invalid_argument("weft::http::exchange::upgrade: the protocol is null");
  }
  s.check_not_responded("upgrade");
  const http::request& r = s.parser.message();
  if (!s.body_done) {
    // The client's mistake, not the handler's (a WebSocket handshake is a GET without one): a
    // 400, as read_body() answers a body it cannot read, rather than a 500.
    const std::string reason = "an upgrade request has no body, and this one has one";
    s.fail_request(status::bad_request, reason);
    throw body_error(std::string("weft::http::exchange::upgrade: ") + method_name(r.method).data() +
                         " " + r.target + ": " + reason,
                     status::bad_request);
  }
  // The new protocol reads the request again from its first byte: its head, as parsed (the
  // fields in their order; the parser kept no other copy of the wire bytes), in origin form:
  // an absolute-form target ("GET http://host/ws", which a server accepts: RFC 9112 3.2.2)
  // goes on as its path and query, the form the protocol's own handshake parser takes.
  std::string head;
  if (!r.target.empty() && r.target.front() != '/') {
    http::request origin_form = r;
    origin_form.target = r.raw_path();
    if (const std::string_view query = r.raw_query(); !query.empty()) {
      origin_form.target += '?';
      origin_form.target += query;
    }
    serialize(origin_form, head);
  } else {
    serialize(r, head);
  }
  s.flush();  // the answers to earlier pipelined requests go first
  const std::string name = p->name();
  s.conn.switch_protocol(std::move(p), head);
  s.responded = true;  // the new protocol answers (WebSocket: 101 or an error)
  s.keep_alive = false;
  s.upgraded = true;
  s.log("upgraded to " + name);
  return s.conn;
}

net::connection& exchange::switch_protocols(const http::response& head) {
  detail::connection_state& s = state_;
  s.check_not_responded("switch_protocols");
  const http::request& r = s.parser.message();
  const auto refuse = [&r](const std::string& why) {
    return std::string("weft::http::exchange::switch_protocols: ") + method_name(r.method).data() +
           " " + r.target + ": " + why;
  };
  const auto offered = r.headers.get("Upgrade");
  if (!offered) {
    throw std::logic_error(refuse("the request has no Upgrade field; nothing was offered"));
  }
  if (!s.body_done) {
    throw std::logic_error(refuse("its body was not read to the end"));
  }
  const auto chosen = head.headers.get("Upgrade");
  if (!chosen || !detail::upgrade_offered(r.headers, *chosen)) {
    throw std::invalid_argument(
        refuse("the 101 must name in its Upgrade field protocols the request offered ('" +
               std::string(*offered) + "'), not " +
               (chosen ? "'" + std::string(*chosen) + "'" : std::string("nothing"))));
  }
  if (head.headers.contains("Content-Length") || head.headers.contains("Transfer-Encoding")) {
    throw std::invalid_argument(
        refuse("a 101 has no body; Content-Length or Transfer-Encoding "
               "in its fields cannot be sent"));
  }
  for (const char c : head.reason) {
    if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7F) {
      throw std::invalid_argument(refuse("the reason phrase has a control character"));
    }
  }
  s.flush();  // the answers to earlier pipelined requests go first
  std::string wire = "HTTP/1.1 101 ";
  wire += head.reason.empty() ? reason_phrase(status::switching_protocols) : head.reason;
  wire += "\r\n";
  for (const auto field : head.headers) {
    wire += field.name;
    wire += ": ";
    wire += field.value;
    wire += "\r\n";
  }
  if (!head.headers.has_token("Connection", "upgrade")) {
    wire += "Connection: Upgrade\r\n";
  }
  wire += "\r\n";
  s.responded = true;
  s.keep_alive = false;
  s.upgraded = true;
  s.conn.send(wire);
  s.note_response(status::switching_protocols, 0);
  s.log("switched protocols to " + std::string(*chosen));
  return s.conn;
}

namespace {

response_context context_of(const detail::connection_state& state) {
  response_context context;
  context.request_version_minor = state.parser.message().version_minor;
  context.head_request = state.head_request;
  context.keep_alive = state.keep_alive_now();
  return context;
}

void add_server_field(const detail::connection_state& state, http::response& r) {
  if (!state.server.options.server_name.empty() && !r.headers.contains("Server")) {
    r.headers.add("Server", state.server.options.server_name);
  }
}

}  // namespace

const compression_options* exchange::compression() const noexcept {
  const compression_options& options = state_.server.options.compression;
  return options.enabled ? &options : nullptr;
}

void exchange::respond(http::response r) {
  state_.check_not_responded("respond");
  if (is_informational(r.status)) {
    throw std::invalid_argument("weft::http::exchange::respond: status " +
                                std::to_string(code_of(r.status)) +
                                " is informational; respond() makes the final response");
  }
  if (const compression_options* options = compression()) {
    detail::compress_response(r, state_.parser.message().headers, *options);
  }
  add_server_field(state_, r);
  const std::size_t mark = state_.out.size();
  bool keep = false;
  try {
    keep = serialize(r, state_.out, context_of(state_));
  } catch (...) {
    state_.out.resize(mark);
    throw;
  }
  if (!keep) {
    state_.keep_alive = false;
  }
  state_.responded = true;
  state_.note_response(r.status, state_.head_request ? 0 : r.body.size());
}

namespace {

// The checks of the two respond(status, ...) fast paths, before anything is written.
[[gnu::hot]] void check_simple_response(const detail::connection_state& state, http::status s,
                                        std::string_view body) {
  state.check_not_responded("respond");
  if (is_informational(s)) {
    throw std::invalid_argument("weft::http::exchange::respond: status " +
                                std::to_string(code_of(s)) +
                                " is informational; respond() makes the final response");
  }
  if (forbids_content(s) && !body.empty()) {
    throw std::invalid_argument(
        "weft::http::exchange::respond: status " + std::to_string(code_of(s)) +
        " may not carry content, but the body has " + std::to_string(body.size()) + " bytes");
  }
}

// A fast path's response that qualifies for compression, made a response object and given to
// respond(response), where compression applies (compression.hpp's compress_response).
void respond_through_compression(exchange& ex, http::status s, http::headers fields,
                                 std::string_view body) {
  http::response r;
  r.status = s;
  r.headers = std::move(fields);
  r.body.assign(body);
  ex.respond(std::move(r));
}

// The end of both fast paths, once the head is appended: the body (not for HEAD), the
// connection's fate, the counters.
void finish_simple_response(detail::connection_state& state, http::status s, std::string_view body,
                            bool keep) {
  if (!state.head_request) {
    state.out.append(body);
  }
  if (!keep) {
    state.keep_alive = false;
  }
  state.responded = true;
  state.note_response(s, state.head_request ? 0 : body.size());
}

}  // namespace

[[gnu::hot]] void exchange::respond(http::status s, std::string_view body,
                                    std::string_view content_type) {
  check_simple_response(state_, s, body);
  if (const compression_options* options = compression();
      options != nullptr && body.size() >= options->min_size &&
      detail::compressible_type(content_type, *options)) [[unlikely]] {
    http::headers fields;
    fields.add("Content-Type", content_type);
    respond_through_compression(*this, s, std::move(fields), body);
    return;
  }
  const bool keep = state_.keep_alive_now();
  detail::append_simple_head(state_.out, s, state_.server.options.server_name, content_type,
                             body.size(), keep, state_.parser.message().version_minor, {}, true,
                             true);
  finish_simple_response(state_, s, body, keep);
}

void exchange::respond(http::status s, const http::headers& fields, std::string_view body) {
  check_simple_response(state_, s, body);
  // One pass over the fields, comparing the cheap name hash first (a cached static file's five
  // fields cost a few dozen instructions here, where five lookups cost several hundred).
  constexpr std::string_view server_name = "Server";
  constexpr std::string_view date_name = "Date";
  constexpr std::string_view framing_names[] = {"Content-Length", "Transfer-Encoding",
                                                "Connection"};
  constexpr std::uint32_t server_hash = detail::name_hash(server_name);
  constexpr std::uint32_t date_hash = detail::name_hash(date_name);
  constexpr std::uint32_t framing_hashes[] = {detail::name_hash(framing_names[0]),
                                              detail::name_hash(framing_names[1]),
                                              detail::name_hash(framing_names[2])};
  bool has_server = false;
  bool has_date = false;
  for (headers::field f : fields) {
    const std::uint32_t hash = detail::name_hash(f.name);
    has_server = has_server || (hash == server_hash && detail::iequals(f.name, server_name));
    has_date = has_date || (hash == date_hash && detail::iequals(f.name, date_name));
    for (std::size_t i = 0; i < std::size(framing_names); ++i) {
      if (hash == framing_hashes[i] && detail::iequals(f.name, framing_names[i])) {
        throw std::invalid_argument("weft::http::exchange::respond: the fields hold '" +
                                    std::string(f.name) +
                                    "'; the server frames the response itself (use "
                                    "respond(response) or start_response to set it)");
      }
    }
  }
  if (const compression_options* options = compression();
      options != nullptr && body.size() >= options->min_size) [[unlikely]] {
    const std::optional<std::string_view> type = fields.get("Content-Type");
    if (type && detail::compressible_type(*type, *options)) {
      respond_through_compression(*this, s, fields, body);
      return;
    }
  }
  // The lines into a buffer of the thread's, reused: no allocation once it has grown.
  thread_local std::string wire;
  wire.clear();
  detail::append_fields(wire, fields);
  const bool keep = state_.keep_alive_now();
  detail::append_simple_head(state_.out, s,
                             has_server ? std::string_view() : state_.server.options.server_name,
                             std::string_view(), body.size(), keep,
                             state_.parser.message().version_minor, wire, !has_date);
  finish_simple_response(state_, s, body, keep);
}

void exchange::respond_prepared(http::status s, std::string_view wire_fields,
                                std::string_view body) {
  check_simple_response(state_, s, body);
  const bool keep = state_.keep_alive_now();
  detail::append_simple_head(state_.out, s, state_.server.options.server_name, std::string_view(),
                             body.size(), keep, state_.parser.message().version_minor, wire_fields);
  finish_simple_response(state_, s, body, keep);
}

exchange::body_writer exchange::start_response(http::response head) {
  state_.check_not_responded("start_response");
  if (is_informational(head.status) || forbids_content(head.status)) {
    throw std::invalid_argument("weft::http::exchange::start_response: status " +
                                std::to_string(code_of(head.status)) +
                                " carries no body to stream; use respond()");
  }
  add_server_field(state_, head);
  head.body.clear();
  const int minor = state_.parser.message().version_minor;
  const std::size_t mark = state_.out.size();
  try {
    if (auto length = head.headers.get("Content-Length")) {
      const std::optional<std::uint64_t> n = detail::decimal_value(*length);
      if (!n) {
        throw std::invalid_argument("weft::http::exchange::start_response: Content-Length '" +
                                    std::string(*length) + "' is not one decimal number");
      }
      if (!serialize_head(head, state_.out, context_of(state_))) {
        state_.keep_alive = false;
      }
      state_.stream = detail::stream_mode::length;
      state_.stream_expected = *n;
    } else if (minor >= 1) {
      head.headers.set("Transfer-Encoding", "chunked");
      if (!serialize_head(head, state_.out, context_of(state_))) {
        state_.keep_alive = false;
      }
      state_.stream = detail::stream_mode::chunked;
    } else {
      // HTTP/1.0 knows no chunked coding: the body ends when the connection does. The head is
      // serialize_head's but without the Content-Length it would add for an empty body.
      if (head.headers.contains("Transfer-Encoding")) {
        throw std::invalid_argument(
            "weft::http::exchange::start_response: an HTTP/1.0 client cannot receive "
            "Transfer-Encoding; leave it out");
      }
      response_context context = context_of(state_);
      context.keep_alive = false;
      std::string framed;
      serialize_head(head, framed, context);
      const std::size_t at = framed.find("\r\nContent-Length: 0\r\n");
      if (at != std::string::npos) {
        framed.erase(at + 2, 19);
      }
      state_.out += framed;
      state_.keep_alive = false;
      state_.stream = detail::stream_mode::close;
    }
  } catch (...) {
    state_.out.resize(mark);
    state_.stream = detail::stream_mode::none;
    throw;
  }
  state_.responded = true;
  state_.note_stream_response(head.status);
  state_.flush();
  return body_writer(*this);
}

bool exchange::body_writer::finished() const noexcept {
  return owner_ == nullptr || owner_->state_.stream_finished;
}

void exchange::body_writer::write(std::string_view data) {
  if (owner_ == nullptr) {
    throw std::logic_error("weft::http::exchange::body_writer::write: a moved-from writer");
  }
  detail::connection_state& state = owner_->state_;
  if (state.stream_finished) {
    throw std::logic_error("weft::http::exchange::body_writer::write: the body was finished");
  }
  if (data.empty()) {
    return;
  }
  if (state.stream == detail::stream_mode::length &&
      data.size() > state.stream_expected - state.stream_written) {
    throw std::length_error(
        "weft::http::exchange::body_writer::write: " + std::to_string(data.size()) +
        " more bytes would pass the " + std::to_string(state.stream_expected) +
        " of the Content-Length (" + std::to_string(state.stream_written) + " written)");
  }
  state.stream_written += data.size();
  if (state.head_request) {
    return;  // HEAD: the head only
  }
  if (state.stream == detail::stream_mode::chunked) {
    append_chunk(state.out, data);
    state.flush();
  } else {
    state.flush();
    state.conn.send(data);
  }
}

void exchange::body_writer::finish(const headers& trailers) {
  if (owner_ == nullptr) {
    throw std::logic_error("weft::http::exchange::body_writer::finish: a moved-from writer");
  }
  detail::connection_state& state = owner_->state_;
  if (state.stream_finished) {
    throw std::logic_error("weft::http::exchange::body_writer::finish: finished twice");
  }
  if (state.stream != detail::stream_mode::chunked && !trailers.empty()) {
    throw std::invalid_argument(
        "weft::http::exchange::body_writer::finish: trailers need a chunked body (this one has "
        "Content-Length or is delimited by the connection's close)");
  }
  if (state.stream == detail::stream_mode::length &&
      state.stream_written != state.stream_expected) {
    throw std::length_error("weft::http::exchange::body_writer::finish: " +
                            std::to_string(state.stream_written) + " bytes written of the " +
                            std::to_string(state.stream_expected) + " of the Content-Length");
  }
  state.stream_finished = true;
  if (state.stream == detail::stream_mode::chunked && !state.head_request) {
    append_last_chunk(state.out, trailers);
  }
  state.end_stream_log(false);
}

namespace {

void check_file_status(const http::response& head) {
  if (forbids_content(head.status)) {
    throw std::invalid_argument("weft::http::exchange::send_file: status " +
                                std::to_string(code_of(head.status)) + " carries no body");
  }
}

// Writes a file response's head (Content-Length: length) into the batch and flushes it when
// the file's bytes follow; returns whether they do (not for HEAD, not for an empty range).
bool write_file_head(detail::connection_state& state, http::response& head, std::uint64_t length) {
  add_server_field(state, head);
  head.body.clear();
  head.headers.remove("Transfer-Encoding");
  head.headers.set("Content-Length", std::to_string(length));
  const std::size_t mark = state.out.size();
  try {
    if (!serialize_head(head, state.out, context_of(state))) {
      state.keep_alive = false;
    }
  } catch (...) {
    state.out.resize(mark);
    throw;
  }
  state.responded = true;
  if (state.head_request || length == 0) {
    state.note_response(head.status, 0);
    return false;
  }
  state.note_response_head(head.status);
  state.flush();
  return true;
}

// Queues the file's range behind its head (queue: net's send_file or adopt_file) and logs it
// once it went out (log_once_sent). Logged at queueing, an aborted download of a large file
// showed as complete, and its duration as the head's.
template <class Queue>
void send_file_body(detail::connection_state& state, http::status s, std::uint64_t length,
                    Queue&& queue) {
  net::connection& conn = state.conn;
  // The body's place in the connection's output: after what was written and what is queued.
  state.log_once_sent(s, conn.counters().bytes_out + conn.queued(), length,
                      std::forward<Queue>(queue));
}

}  // namespace

void exchange::send_file(http::response head, int fd, std::uint64_t offset, std::uint64_t length) {
  state_.check_not_responded("send_file");
  check_file_status(head);
  // The range is checked before the head goes out (net's send_file checks it again).
  struct stat info {};
  if (fd < 0 || ::fstat(fd, &info) != 0) {
    throw std::invalid_argument("weft::http::exchange::send_file: fd " + std::to_string(fd) +
                                " is not an open file");
  }
  if (S_ISREG(info.st_mode)) {
    const auto size = static_cast<std::uint64_t>(info.st_size);
    if (offset > size || length > size - offset) {
      throw std::invalid_argument("weft::http::exchange::send_file: the range of " +
                                  std::to_string(length) + " bytes at offset " +
                                  std::to_string(offset) + " goes past the end of the file (" +
                                  std::to_string(size) + " bytes)");
    }
  }
  if (write_file_head(state_, head, length)) {
    send_file_body(state_, head.status, length, [&] { state_.conn.send_file(fd, offset, length); });
  }
}

void exchange::send_file(http::response head, file_handle file, std::uint64_t offset,
                         std::uint64_t length) {
  state_.check_not_responded("send_file");
  check_file_status(head);
  if (!file) {
    throw std::invalid_argument("weft::http::exchange::send_file: the file_handle is empty");
  }
  if (write_file_head(state_, head, length)) {
    send_file_body(state_, head.status, length,
                   [&] { state_.conn.adopt_file(file.release(), offset, length); });
  }
}

}  // namespace weft::http

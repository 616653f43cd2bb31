// connection: construction and the receive path. The hot path of a request is one recv(2) into
// the input buffer, the framer's measure/decode over it, and, when the socket is drained, one
// wait on the kept fd registration (no epoll_ctl per request: the registration stays armed for
// reading). After a read that did not fill the buffer the socket is known to be empty, so the
// next receive waits first instead of paying a recv(2) that would only say EAGAIN (libuv's
// uv__read reasons the same way).
#include "weft/net/connection.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "net/address.hpp"
#include "net/hibernation.hpp"
#include "net/keepalive.hpp"
#include "net/proxy_header.hpp"
#include "net/ring_output.hpp"
#include "net/socket_calls.hpp"
#include "net/spare_list.hpp"
#include "net/tls_session.hpp"
#include "net/worker_state.hpp"
#include "weft/sched/detail/coroutine.hpp"
#include "weft/sched/scheduler.hpp"

#if defined(WEFT_SANITIZE_ADDRESS)
#include <sanitizer/asan_interface.h>
#endif

namespace weft::net {

namespace {
using steady = std::chrono::steady_clock;
constexpr std::size_t initial_input = 4096;
constexpr std::size_t max_read = 256 * 1024;  // a read never asks for more than this

// Input buffers of idle connections, lent back to their thread (nginx frees a keep-alive
// connection's request buffer the same way). A connection about to wait for input with nothing
// buffered gives its buffer (of the initial size) here, and its next read takes the buffer given
// back last. Reads on one thread come one after another, so with a thousand connections each
// read lands in a buffer the previous request just used, hot in the cache, instead of in one of
// a thousand cold ones: the kernel's copy into it, the framer's scan and the reply that copies
// from it then miss nothing (perf at 1000 connections put the misses on these lines among
// weft's own costliest), and an idle connection holds no input buffer at all. input()'s view
// is documented to end at the next read, so no caller can see a buffer change hands.
class input_buffers {
 public:
  std::unique_ptr<char[]> take() {
    std::optional<std::unique_ptr<char[]>> buffer = spare_.take();
    if (!buffer) {
      return std::make_unique_for_overwrite<char[]>(initial_input);
    }
#if defined(WEFT_SANITIZE_ADDRESS)
    ASAN_UNPOISON_MEMORY_REGION(buffer->get(), initial_input);
#endif
    return std::move(*buffer);
  }
  // Keeps at most the list's bound; the rest go back to the allocator.
  void give(std::unique_ptr<char[]> buffer) noexcept {
    if (spare_.has_room()) {
#if defined(WEFT_SANITIZE_ADDRESS)
      // A stale input() view read after its next read_input() is reported, not served.
      ASAN_POISON_MEMORY_REGION(buffer.get(), initial_input);
#endif
      spare_.give(std::move(buffer));
    }
  }

 private:
  detail::spare_list<std::unique_ptr<char[]>> spare_;
};

input_buffers& thread_input_buffers() {
  thread_local input_buffers buffers;
  return buffers;
}
}  // namespace

const char* to_string(close_reason reason) noexcept {
  switch (reason) {
    case close_reason::peer:
      return "peer";
    case close_reason::local:
      return "local";
    case close_reason::idle_timeout:
      return "idle timeout";
    case close_reason::handshake_timeout:
      return "handshake timeout";
    case close_reason::message_timeout:
      return "message timeout";
    case close_reason::too_big:
      return "too big";
    case close_reason::protocol_error:
      return "protocol error";
    case close_reason::send_limit:
      return "send limit";
    case close_reason::close_timeout:
      return "close timeout";
    case close_reason::max_connections:
      return "max connections";
    case close_reason::server_stop:
      return "server stop";
    case close_reason::error:
      return "error";
    case close_reason::ping_timeout:
      return "ping timeout";
  }
  return "unknown";
}

connection::connection(private_tag, int fd, const connection_options& options, std::uint64_t id,
                       unsigned worker_index, detail::worker_state* worker,
                       std::string peer_address)
    : fd_(fd),
      worker_index_(worker_index),
      worker_(worker),
      scheduler_(&current_scheduler()),
      options_(options),
      id_(id),
      peer_address_(std::move(peer_address)),
      registration_(fd),
      room_(false),
      resumed_(true),
      released_(false) {
  if (options_.send_buffer_limit == 0) {
    throw std::invalid_argument("weft::net: send_buffer_limit must be at least 1 byte");
  }
  if (options_.max_message_size == 0) {
    throw std::invalid_argument("weft::net: max_message_size must be at least 1 byte");
  }
  if (options_.protocol != nullptr) {
    framer_ = options_.protocol->make_framer();
  }
  if (options_.tls != nullptr && options_.tls->is_server()) {
    tls_ = std::make_unique<detail::tls_session>(*options_.tls, std::string_view());
  }
  if (options_.idle_timeout.count() > 0 || options_.handshake_timeout.count() > 0 ||
      options_.message_timeout.count() > 0 ||
      (options_.tls != nullptr && options_.tls_handshake_timeout.count() > 0)) {
    started_at_ = steady::now();
    last_input_at_ = started_at_;
  }
  if (framer_ != nullptr) {
    take_ping_schedule();
  }
  if (options_.keepalive.idle.count() > 0) {
    // (checked by tcp_server's options and by connect, before any socket)
    detail::apply_keepalive(fd_, options_.keepalive);
  }
  if (weft::detail::ring_io* ring = weft::detail::current_ring(); ring != nullptr) {
    ring_out_ = std::make_unique<detail::ring_output>(*this, *ring);
  }
  if (options_.no_delay) {
    int on = 1;
    // Best effort: a unix socket or an odd socket type refuses it, and nothing depends on it.
    static_cast<void>(::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on));
  }
}

connection::~connection() {
  drop_hibernation();
  if (fd_ >= 0) {
    // Dropped while open (a net::connect connection nobody holds): no coroutine can be inside
    // it (each holds a reference), so the socket closes now; nothing is queued, or the flusher
    // would hold a reference.
    registration_.reset();
    ::close(fd_);
    fd_ = -1;
  }
}

[[gnu::hot]] std::size_t connection::worker_connections() const noexcept {
  return worker_ != nullptr ? worker_->live : 0;
}

[[gnu::hot]] std::optional<close_reason> connection::closed_by() const noexcept {
  if (state_ == state::open) {
    return std::nullopt;
  }
  return reason_;
}

std::string connection::local_address() const {
  if (fd_ < 0) {
    return {};
  }
  return detail::local_address_of(fd_);
}

connection_events& connection::events() {
  if (own_events_ == nullptr) {
    own_events_ = std::make_unique<connection_events>();
  }
  return *own_events_;
}

void connection::set_send_buffer_limit(std::size_t bytes) {
  if (bytes == 0) {
    throw std::invalid_argument(
        "weft::net::connection::set_send_buffer_limit: the limit must be "
        "at least 1 byte");
  }
  options_.send_buffer_limit = bytes;
  if (queued() < bytes && room_.waiting() > 0) {
    room_.set();
  }
}

void connection::set_max_message_size(std::size_t bytes) {
  if (bytes == 0) {
    throw std::invalid_argument(
        "weft::net::connection::set_max_message_size: the limit must be "
        "at least 1 byte");
  }
  options_.max_message_size = bytes;
}

void connection::pause_recv() noexcept {
  paused_ = true;
  resumed_.clear();
}

void connection::resume_recv() noexcept {
  paused_ = false;
  resumed_.set();
}

std::optional<message> connection::receive(const timeout& limit) {
  message out;
  if (!receive(out, limit)) {
    return std::nullopt;
  }
  return out;
}

// Marks the connection as being received from for one call (receive, read_input): a second
// coroutine receiving at the same time is misuse, named with the operation.
struct connection::reader_guard {
  [[gnu::hot]] reader_guard(connection& owner, const char* operation) : self(owner) {
    if (self.reader_active_) {
      throw std::logic_error(std::string("weft::net::connection::") + operation + ": connection " +
                             std::to_string(self.id_) + " (" + self.peer_address_ +
                             ") is already being received from by another coroutine; one "
                             "reader at a time");
    }
    self.reader_active_ = true;
  }
  reader_guard(const reader_guard&) = delete;
  reader_guard& operator=(const reader_guard&) = delete;
  [[gnu::hot]] ~reader_guard() { self.reader_active_ = false; }
  connection& self;
};

// Marks one receive() or read_input() call as the first read after a hibernation, whose waits the
// hibernation's deadline caps (wait_input).
struct connection::first_read_scope {
  explicit first_read_scope(connection& owner) noexcept : self(owner) {
    self.hibernate_cap_active_ = std::exchange(self.hibernate_cap_, false);
  }
  first_read_scope(const first_read_scope&) = delete;
  first_read_scope& operator=(const first_read_scope&) = delete;
  ~first_read_scope() { self.hibernate_cap_active_ = false; }
  connection& self;
};

namespace {
// receive()'s refusals of a framer's measure, out of line (see the input calls below).
[[noreturn, gnu::cold, gnu::noinline]] void throw_unit_beyond_input(const char* protocol,
                                                                    std::size_t unit,
                                                                    std::size_t buffered) {
  throw protocol_error(std::string(protocol) + " framer measured a " + std::to_string(unit) +
                       "-byte unit in " + std::to_string(buffered) + " buffered bytes");
}
[[noreturn, gnu::cold, gnu::noinline]] void throw_message_too_big(const char* protocol,
                                                                  std::size_t buffered,
                                                                  std::size_t limit) {
  throw message_too_big_error(protocol, buffered, limit);
}
[[noreturn, gnu::cold, gnu::noinline]] void throw_receive_timed_out(const std::string& peer,
                                                                    const timeout& limit) {
  throw timeout_error("weft::net::connection::receive from " + peer + ": no message, " +
                      weft::detail::timed_out_after(limit));
}
}  // namespace

[[gnu::hot]] bool connection::receive(message& out, const timeout& limit) {
  reader_guard guard(*this, "receive");
  first_read_scope first(*this);
  // A wait whose deadline passed still returns when bytes are ready: the limit is checked here
  // too, from the second read on, so that a peer that keeps sending what is no message (pings,
  // empty fragments) cannot hold the call past it.
  bool pulled = false;

  for (;;) {
    if (state_ != state::open || finished_) {
      return false;
    }
    if (paused_ && !stopping_) {
      wait_resumed(limit);
      continue;
    }
    if (buffered() > 0) {
      std::string_view input(in_.get() + in_begin_, buffered());
      if (framer_ == nullptr) {
        // clear() and append(), not assign(): the same bytes without the general replace's
        // overlap checks (52 -> about 20 instructions a message, callgrind, echo).
        out.data.clear();
        out.data.append(input);
        out.kind = message_kind::binary;
        in_begin_ = in_end_ = 0;
      } else {
        bool for_user = false;
        try {
          std::size_t unit = framer_->measure(input, link_);
          if (unit == 0 && peer_ended_) {
            unit = framer_->measure_at_end(input, link_);  // the stream has ended
          }
          if (state_ != state::open || finished_) {
            return false;
          }
          if (unit > input.size()) {
            throw_unit_beyond_input(options_.protocol->name(), unit, input.size());
          }
          if (unit > 0) {
            for_user = framer_->decode(input.substr(0, unit), out, link_);
            in_begin_ += unit;
            if (in_begin_ == in_end_) {
              in_begin_ = in_end_ = 0;
            } else if (options_.message_timeout.count() > 0) {
              partial_since_ = last_input_at_;
            }
          }
          if (unit == 0 && buffered() > options_.max_message_size + 65536) {
            // A framer that never checks the limit still cannot make the buffer grow unbounded.
            throw_message_too_big(options_.protocol->name(), buffered(), options_.max_message_size);
          }
          if (queued() > 0 && !flusher_running_) {
            flush_now();  // what the framer sent itself (a handshake answer, a pong)
            if (queued() > 0 && state_ == state::open) {
              continue_flushing();
            }
          }
          if (queued() >= options_.send_buffer_limit && !wait_answers_drained()) {
            return false;
          }
          if (state_ != state::open || finished_) {
            return false;
          }
          if (unit > 0 && !for_user) {
            continue;
          }
        } catch (const message_too_big_error& failure) {
          protocol_failed(failure, true);
          return false;
        } catch (const protocol_error& failure) {
          protocol_failed(failure, false);
          return false;
        }
        if (!for_user) {
          goto need_bytes;
        }
      }
      first_message_ = true;
      ++counters_.messages_in;
      if (worker_ != nullptr) {
        worker_->counters.messages_in.add(1);
      }
      return true;
    }
  need_bytes:
    if (pulled && limit.bounded() && timeout::clock::now() >= limit.deadline()) [[unlikely]] {
      throw_receive_timed_out(peer_address_, limit);
    }
    pulled = true;
    if (!pull_input(limit, buffered() > 0)) {
      return false;
    }
  }
}

// One step towards more input, for receive() and read_input() once what is buffered is not
// enough: the input ends when the peer has closed (what was partly received is logged as
// dropped) or when the server is stopping and the reader is between messages (what already
// arrived is read once more, then it ends at the boundary); otherwise it reads, waiting for the
// socket first unless the last read filled the buffer. False: the input has ended.
[[gnu::hot]] bool connection::pull_input(const timeout& limit, bool partial) {
  if (peer_ended_) {
    if (partial) {
      log_partial_drop();
    }
    if (options_.half_close && state_ == state::open && !write_shut_) {
      in_begin_ = in_end_ = 0;
      return false;  // the input ended; sending goes on (half_close)
    }
    end_input(close_reason::peer);
    return false;
  }
  if (stopping_ && !partial) {
    if (stop_read_done_ || !read_once()) {
      if (state_ == state::open) {
        if (framer_ != nullptr && sendable()) {
          framer_->encode_going_away(out_);  // a WebSocket peer hears why (1001)
        }
        end_input(close_reason::server_stop);
      }
      return false;
    }
    stop_read_done_ = true;
    return true;
  }
  if (!read_first_) {
    // On the uring driver the wait is a recv queued in the ring, into the input buffer, which
    // it keeps meanwhile: the wait also reads (no recv(2)), and the bytes are in when it ends.
    const bool by_ring = ring_out_ != nullptr && tls_ == nullptr;
    if (!by_ring) {
      release_idle_input();
    }
    if (!wait_input(limit, by_ring) || by_ring) {
      return true;  // cut short (the caller looks at its state again), or read
    }
  }
  read_once();
  return true;
}

// Idle with nothing buffered: the input buffer goes back to the thread's spares (read_once
// takes one back).
[[gnu::hot]] void connection::release_idle_input() noexcept {
  if (buffered() == 0 && in_capacity_ == initial_input) {
    in_begin_ = in_end_ = in_capacity_ = 0;
    thread_input_buffers().give(std::move(in_));
  }
}

// Waits while receiving is paused (an interrupt or resume_recv ends the wait).
void connection::wait_resumed(const timeout& limit) {
  reader_waiting_ = true;
  reader_ = weft::detail::running_coroutine(*scheduler_);
  try {
    resumed_.wait(limit);
  } catch (const cancelled_error&) {
    reader_waiting_ = false;
    if (!reader_interrupt_) {
      throw;
    }
    reader_interrupt_ = false;
    try_release();
    return;
  } catch (...) {
    reader_waiting_ = false;
    try_release();
    throw;
  }
  reader_waiting_ = false;
  try_release();
}

namespace {
// Out of line, as the other cold throws of the per-message calls: inline, the strings gave
// consume_input (called twice per HTTP request) a 216-byte frame and six saved registers.
[[noreturn, gnu::cold, gnu::noinline]] void throw_read_in_place_with_protocol(
    std::uint64_t id, const char* protocol) {
  throw std::logic_error(std::string("weft::net::connection::read_input: connection ") +
                         std::to_string(id) + " speaks the " + protocol +
                         " protocol; receiving in place is for connections without one "
                         "(use receive())");
}

[[noreturn, gnu::cold, gnu::noinline]] void throw_consume_beyond(std::size_t bytes,
                                                                 std::size_t buffered) {
  throw std::out_of_range("weft::net::connection::consume_input: " + std::to_string(bytes) +
                          " bytes asked, " + std::to_string(buffered) + " buffered");
}
}  // namespace

[[gnu::hot]] void connection::consume_input(std::size_t bytes) {
  if (bytes > buffered()) {
    throw_consume_beyond(bytes, buffered());
  }
  in_begin_ += bytes;
  if (in_begin_ == in_end_) {
    in_begin_ = in_end_ = 0;
  }
}

void connection::switch_protocol(std::shared_ptr<const net::protocol> p, std::string_view replay) {
  if (p == nullptr) {
    throw std::invalid_argument("weft::net::connection::switch_protocol: the protocol is null");
  }
  const std::string who = "weft::net::connection::switch_protocol: connection " +
                          std::to_string(id_) + " (" + peer_address_ + ")";
  if (framer_ != nullptr) {
    throw std::logic_error(who + " already speaks the " + options_.protocol->name() +
                           " protocol; only a connection without one can switch");
  }
  if (reader_active_) {
    throw std::logic_error(who + " is being received from; switch between reads");
  }
  if (state_ != state::open) {
    throw connection_closed_error(who + " is closed");
  }
  if (!replay.empty()) {
    if (replay.size() <= in_begin_) {
      // Room before the unconsumed input (the usual case: the replay is what was just consumed).
      in_begin_ -= replay.size();
      std::memcpy(in_.get() + in_begin_, replay.data(), replay.size());
    } else {
      const std::size_t total = replay.size() + buffered();
      std::size_t capacity = in_capacity_ == 0 ? initial_input : in_capacity_;
      while (capacity < total + 2048) {
        capacity *= 2;
      }
      auto bigger = std::make_unique_for_overwrite<char[]>(capacity);
      std::memcpy(bigger.get(), replay.data(), replay.size());
      if (buffered() > 0) {
        std::memcpy(bigger.get() + replay.size(), in_.get() + in_begin_, buffered());
      }
      in_ = std::move(bigger);
      in_capacity_ = capacity;
      in_begin_ = 0;
      in_end_ = total;
    }
  }
  options_.protocol = std::move(p);
  framer_ = options_.protocol->make_framer();
  take_ping_schedule();
  first_message_ = false;  // the new protocol's handshake (if any) is still to come
}

void connection::take_ping_schedule() noexcept {
  const framer::ping_schedule pings = framer_->pings();
  ping_interval_ = pings.interval.count() > 0 ? pings.interval : std::chrono::milliseconds(0);
  ping_timeout_ = pings.timeout.count() > 0 ? pings.timeout : ping_interval_;
  ping_outstanding_ = false;
  if (ping_interval_.count() > 0) {
    last_input_at_ = steady::now();  // (read_once keeps it from now on)
  }
}

void connection::send_ping() {
  ping_outstanding_ = true;
  ping_sent_at_ = steady::now();
  if (!sendable()) {
    return;
  }
  framer_->encode_ping(out_);
  note_queued(queued());
  if (!flusher_running_) {
    flush_now();
    if (queued() > 0 && state_ == state::open) {
      continue_flushing();
    }
  }
}

[[gnu::hot]] bool connection::read_input(const timeout& limit, bool mid_message) {
  if (framer_ != nullptr) {
    throw_read_in_place_with_protocol(id_, options_.protocol->name());
  }
  reader_guard guard(*this, "read_input");
  first_read_scope first(*this);
  const std::size_t before = buffered();
  for (;;) {
    if (state_ != state::open) {
      return false;
    }
    if (paused_ && !stopping_) {
      wait_resumed(limit);
      continue;
    }
    if (buffered() > before) {
      return true;
    }
    if (!pull_input(limit, buffered() > 0 || mid_message)) {
      return false;
    }
  }
}

// The TLS handshake, read by read through the usual machinery (its timeouts: the handshake
// timeout until the first message; the limit; a stop). True once it is complete; false when the
// connection closed instead (the reason says why; a failure was logged and reported).
bool connection::establish_tls(const timeout& limit) {
  reader_guard guard(*this, "handshake");
  while (state_ == state::open && !tls_->established()) {
    if (!pull_input(limit, false)) {
      break;
    }
  }
  return state_ == state::open && tls_->established();
}

// The PROXY protocol header (tcp_server_options::proxy_protocol), before TLS and the protocol.
// It is parsed where the reads put their bytes (the input buffer), so nothing past it is taken:
// what follows in the same read stays there for the protocol, or goes to the TLS session as the
// start of its ciphertext.
bool connection::read_proxy_header(std::chrono::milliseconds within) {
  // The header comes before any TLS record: read it in the clear, the session set aside (and
  // put back however this ends, an exception included).
  struct set_aside {
    std::unique_ptr<detail::tls_session>& slot;
    std::unique_ptr<detail::tls_session> session;
    ~set_aside() { slot = std::move(session); }
  } tls{tls_, std::move(tls_)};
  const timeout limit = within.count() > 0 ? timeout(within) : timeout::never();
  try {
    reader_guard guard(*this, "the PROXY protocol header");
    while (state_ == state::open) {
      const detail::proxy_header header =
          detail::parse_proxy_header(in_.get() + in_begin_, buffered());
      if (header.result == detail::proxy_header::outcome::complete) {
        proxy_address_ = peer_address_;
        if (header.addresses) {
          peer_address_ = detail::format_address(reinterpret_cast<const sockaddr*>(&header.source),
                                                 header.source_length);
        }
        consume_input(header.size);
        break;
      }
      if (header.result == detail::proxy_header::outcome::invalid) {
        protocol_error failure("PROXY protocol: " + header.why);
        log(std::string("closed: ") + failure.what());
        in_begin_ = in_end_ = 0;
        report(failure);
        begin_close(close_reason::protocol_error, false);
        break;
      }
      if (!pull_input(limit, buffered() > 0)) {
        break;
      }
    }
  } catch (const timeout_error&) {
    if (state_ == state::open) {
      log("closed: no complete PROXY protocol header within " + std::to_string(within.count()) +
          " ms");
      begin_close(close_reason::handshake_timeout, false);
    }
  }
  if (state_ != state::open || proxy_address_.empty()) {
    return false;
  }
  if (tls.session != nullptr && buffered() > 0) {
    // The client's first flight, read with the header: the session's first ciphertext.
    tls.session->supply(in_.get() + in_begin_, buffered());
    tls.session->keep_rest();
    in_begin_ = in_end_ = 0;
    read_first_ = true;  // the handshake reads the session's bytes before it waits
  }
  return true;
}

// Waits until the socket is readable. False when the wait was cut short (an interrupt, a server
// timeout that closed the connection); timeout_error or cancelled_error from the caller's limit.
[[gnu::hot]] steady::time_point connection::timeouts_deadline(close_reason* which) const noexcept {
  steady::time_point deadline = steady::time_point::max();
  close_reason reason = close_reason::idle_timeout;
  if (options_.handshake_timeout.count() > 0 &&
      (!first_message_ || (framer_ != nullptr && framer_->handshaking()))) {
    deadline = started_at_ + options_.handshake_timeout;
    reason = close_reason::handshake_timeout;
  }
  if (tls_ != nullptr && options_.tls_handshake_timeout.count() > 0 && !tls_->established() &&
      started_at_ + options_.tls_handshake_timeout < deadline) {
    deadline = started_at_ + options_.tls_handshake_timeout;
    reason = close_reason::handshake_timeout;
  }
  if (options_.message_timeout.count() > 0 && buffered() > 0 &&
      partial_since_ + options_.message_timeout < deadline) {
    deadline = partial_since_ + options_.message_timeout;
    reason = close_reason::message_timeout;
  }
  if (options_.idle_timeout.count() > 0 && last_input_at_ + options_.idle_timeout < deadline) {
    deadline = last_input_at_ + options_.idle_timeout;
    reason = close_reason::idle_timeout;
  }
  if (ping_interval_.count() > 0 && !framer_->handshaking()) {
    // The next ping's time, or its answer's deadline (input_timed_out tells them apart).
    const steady::time_point due =
        ping_outstanding_ ? ping_sent_at_ + ping_timeout_ : last_input_at_ + ping_interval_;
    if (due < deadline) {
      deadline = due;
      reason = close_reason::ping_timeout;
    }
  }
  if (which != nullptr) {
    *which = reason;
  }
  return deadline;
}

// The cold ends of the input calls, out of line: inline, their strings gave each call on the
// way to a read (read_input, pull_input, wait_input, read_once) a frame of 120-260 bytes and six
// saved registers, on the stack of every connection's coroutine at every request.
void connection::log_partial_drop() const {
  log("peer closed in the middle of a message (" + std::to_string(buffered()) +
      " bytes of it dropped)");
}

void connection::input_timed_out(close_reason which) {
  auto limit_ms = [](std::chrono::milliseconds value) {
    return std::to_string(value.count()) + " ms";
  };
  if (which == close_reason::ping_timeout && !ping_outstanding_) {
    send_ping();  // the peer was quiet for ping_interval: not a close yet
    return;
  }
  if (which == close_reason::idle_timeout) {
    log("closed: idle timeout (no bytes for " + limit_ms(options_.idle_timeout) + ")");
  } else if (which == close_reason::ping_timeout) {
    log("closed: ping timeout (nothing came in the " + limit_ms(ping_timeout_) +
        " after a keep-alive ping)");
  } else if (which == close_reason::handshake_timeout && tls_ != nullptr && !tls_->established()) {
    log("closed: handshake timeout (the TLS handshake did not complete within " +
        limit_ms(options_.handshake_timeout.count() > 0 &&
                         options_.handshake_timeout < options_.tls_handshake_timeout
                     ? options_.handshake_timeout
                     : options_.tls_handshake_timeout) +
        ")");
  } else if (which == close_reason::handshake_timeout) {
    log("closed: handshake timeout (no complete first message within " +
        limit_ms(options_.handshake_timeout) + ")");
  } else {
    log("closed: message timeout (a message of which " + std::to_string(buffered()) +
        " bytes came did not end within " + limit_ms(options_.message_timeout) + ")");
  }
  end_input(which);
}

void connection::read_failed(int error_number) {
  if (error_number == ECONNRESET) {
    begin_close(close_reason::peer, false);
    return;
  }
  io_error failure(-error_number, "read", peer_address_, std::strerror(error_number));
  log(std::string("closed: ") + failure.what());
  report(failure);
  begin_close(close_reason::error, false);
}

[[gnu::hot]] bool connection::wait_input(const timeout& given, bool by_ring) {
  // The first read after a hibernation waits no later than the hibernation's deadline
  // (connection::hibernate).
  timeout capped;
  const timeout& limit =
      hibernate_cap_active_ ? (capped = given.capped(hibernate_until_ - steady::now())) : given;
  close_reason which = close_reason::idle_timeout;
  const steady::time_point deadline = timeouts_deadline(&which);
  const bool bounded = deadline != steady::time_point::max();
  reader_waiting_ = true;
  reader_ = weft::detail::running_coroutine(*scheduler_);
  // Resumed with a thousand others in between, the coroutine comes back to a cold connection:
  // the scheduler fetches its lines with the coroutine's stack (coroutine::set_prefetch_hint).
  // With few connections on the worker they stay in the cache and are not hinted.
  if (worker_ != nullptr && worker_->live >= weft::detail::coroutine::prefetch_worth_from) {
    reader_->set_prefetch_hint(this);
  }
  try {
    if (by_ring) {
      if (!bounded) {
        ring_read(limit);
      } else {
        ring_read(limit.capped(deadline - steady::now()));
      }
    } else if (!bounded) {
      wait_readable(fd_, limit);
    } else {
      wait_readable(fd_, limit.capped(deadline - steady::now()));
    }
  } catch (const cancelled_error&) {
    reader_waiting_ = false;
    if (!reader_interrupt_) {
      try_release();
      throw;
    }
    reader_interrupt_ = false;
    try_release();
    return false;
  } catch (const timeout_error&) {
    reader_waiting_ = false;
    if (bounded && steady::now() >= deadline && state_ == state::open) {
      input_timed_out(which);
      try_release();
      return false;
    }
    try_release();
    throw;
  } catch (...) {
    reader_waiting_ = false;
    try_release();
    throw;
  }
  reader_waiting_ = false;
  if (state_ != state::open) {
    try_release();
    return false;
  }
  return true;
}

// wait_input's wait on the uring driver: one recv through the ring into the input buffer,
// taken as read_once takes a recv(2)'s (ring_receive: it never outlives the call; bytes that
// came as the limit passed are kept).
//
// While the recv is in flight nothing else reads (read_once() returns at once: a close's reads
// of the peer's last bytes), so the buffer stays where it is; a close may drop what was buffered
// meanwhile (in_end_ back to 0), and the bytes then move down to follow what is kept.
void connection::ring_read(const timeout& limit) {
  make_input_room();
  const std::size_t room = std::min(in_capacity_ - in_end_, max_read);
  const std::size_t target = in_end_;
  std::exception_ptr early;
  ring_reading_ = true;
  int got = 0;
  try {
    got = weft::detail::ring_receive(ring_out_->ring, fd_, in_.get() + target, room, limit, early);
  } catch (...) {
    ring_reading_ = false;  // (the submission failed: nothing in flight)
    throw;
  }
  ring_reading_ = false;
  if (got > 0 && in_end_ != target) {
    std::memmove(in_.get() + in_end_, in_.get() + target, static_cast<std::size_t>(got));
  }
  if (got != -ECANCELED) {
    took_input(got >= 0 ? got : -1, room, got >= 0 ? 0 : -got);
  }
  if (early != nullptr) {
    std::rethrow_exception(early);
  }
}

// read_once's first step: an input buffer with room for a read (the thread's spare when the
// connection has none; what was consumed moved out; doubled when little room is left).
[[gnu::hot]] void connection::make_input_room() {
  if (in_capacity_ - in_end_ < 2048 || (read_first_ && in_end_ == in_capacity_)) {
    if (in_begin_ > 0) {
      std::memmove(in_.get(), in_.get() + in_begin_, buffered());
      in_end_ -= in_begin_;
      in_begin_ = 0;
    }
    if (in_capacity_ == 0) {
      in_ = thread_input_buffers().take();
      in_capacity_ = initial_input;
    } else if (in_capacity_ - in_end_ < 2048) {
      std::size_t grown = in_capacity_ * 2;
      auto bigger = std::make_unique_for_overwrite<char[]>(grown);
      if (in_end_ > 0) {
        std::memcpy(bigger.get(), in_.get(), in_end_);
      }
      in_ = std::move(bigger);
      in_capacity_ = grown;
    }
  }
}

// One recv(2) into the input buffer. True when bytes came or the peer ended the stream.
[[gnu::hot]] bool connection::read_once() {
  if (ring_reading_) [[unlikely]] {
    return false;  // the reader's recv is in the ring: it takes what comes (ring_read)
  }
  make_input_room();
  if (tls_ != nullptr) {
    return read_once_tls();
  }
  const std::size_t room = std::min(in_capacity_ - in_end_, max_read);
  for (;;) {
    // recv, not read: a connection is always a socket (send() is used the same way), and
    // recv skips the VFS layer read(2) goes through (fdget_pos, rw_verify_area, the
    // read_iter dispatch) on the way to the same sock_recvmsg: about 70 ns less per call on
    // this machine's loopback (a bare send/read against send/recv loop). Made directly, not
    // through glibc's cancellation point (socket_calls.hpp).
    const ssize_t got = detail::socket_recv(fd_, in_.get() + in_end_, room, 0);
    if (got < 0 && errno == EINTR) {
      continue;
    }
    return took_input(got, room, got < 0 ? errno : 0);
  }
}

// What a read of room bytes into the input buffer returned (got, or -1 and error_number), taken:
// true when bytes came or the peer ended the stream; false when there was nothing (EAGAIN) or
// the read failed (the connection is closed).
[[gnu::hot]] bool connection::took_input(std::ptrdiff_t got, std::size_t room, int error_number) {
  if (got > 0) {
    const auto bytes = static_cast<std::size_t>(got);
    if (buffered() == 0 && options_.message_timeout.count() > 0) {
      partial_since_ = steady::now();
      last_input_at_ = partial_since_;
      ping_outstanding_ = false;
    } else if (options_.idle_timeout.count() > 0 || options_.message_timeout.count() > 0 ||
               ping_interval_.count() > 0) {
      last_input_at_ = steady::now();
      ping_outstanding_ = false;  // any byte answers a keep-alive ping
    }
    in_end_ += bytes;
    counters_.bytes_in += bytes;
    if (worker_ != nullptr) {
      worker_->counters.bytes_in.add(bytes);
    }
    // A full buffer means more may be waiting (and the buffer doubles next time, up to
    // max_read, for a bulk sender); a short read means the socket is drained.
    read_first_ = bytes == room;
    if (read_first_ && in_capacity_ < max_read && in_end_ == in_capacity_) {
      std::size_t grown = in_capacity_ * 2;
      auto bigger = std::make_unique_for_overwrite<char[]>(grown);
      std::memcpy(bigger.get(), in_.get(), in_end_);
      in_ = std::move(bigger);
      in_capacity_ = grown;
    }
    return true;
  }
  if (got == 0) {
    peer_ended_ = true;
    return true;
  }
  if (error_number == EAGAIN || error_number == EWOULDBLOCK) {
    read_first_ = false;
    return false;
  }
  read_failed(error_number);
  return false;
}

void connection::protocol_failed(const protocol_error& failure, bool too_big) {
  log(std::string("closed: ") + (too_big ? "too big: " : "protocol error: ") + failure.what());
  in_begin_ = in_end_ = 0;  // nothing after a protocol error reaches the user
  framer_failed_ = true;    // RFC 6455 7.1.7: nothing more is read, not even a close frame
  if (framer_ != nullptr && failure.close_code() != 0 && state_ == state::open) {
    try {
      framer_->encode_close(failure.close_code(), failure.what(), out_);
    } catch (const std::exception& encode_failure) {
      log(std::string("encode_close failed: ") + encode_failure.what());
    }
  }
  report(failure);
  if (state_ == state::open) {
    begin_close(too_big ? close_reason::too_big : close_reason::protocol_error, true);
  }
}

void connection::end_input(close_reason reason) { begin_close(reason, true); }

void connection::link::send_raw(std::string_view bytes) {
  if ((owner_.state_ == state::open && !owner_.write_shut_) || owner_.state_ == state::closing) {
    owner_.out_.append(bytes);
    owner_.note_queued(owner_.queued());
  }
}

void connection::link::finish() {
  owner_.finished_ = true;
  owner_.begin_close(close_reason::peer, true);
}

std::size_t connection::link::max_message_size() const noexcept {
  return owner_.options_.max_message_size;
}

void connection::link::peer_closed(std::uint16_t code, std::string_view reason) {
  owner_.peer_close_ = std::make_unique<close_message>(close_message{code, std::string(reason)});
}

void connection::log(std::string_view line) const noexcept {
  if (worker_ == nullptr || worker_->log == nullptr || !*worker_->log) {
    return;
  }
  try {
    std::string text = "weft.net worker " + std::to_string(worker_index_) + " connection " +
                       std::to_string(id_) + " " + peer_address_ + ": ";
    text += line;
    (*worker_->log)(text);
  } catch (...) {
    // A logger that throws cannot be told about it; the stats still count the close.
  }
}

}  // namespace weft::net

// connection: closing, and the callbacks. The socket is closed only once the connection is
// closed and no coroutine is suspended on its fd (the reader in receive, the flusher): closing a
// fd under a wait would leave that wait hanging on the epoll drivers and could hand the number
// to a new socket while the old wait still watches it. A close wakes those coroutines by
// cancelling their wait (flagged, so they tell it from a real cancellation of the coroutine);
// the last one to leave releases the socket.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <string>

#include "net/hibernation.hpp"
#include "net/ring_output.hpp"
#include "net/socket_calls.hpp"
#include "net/tls_session.hpp"
#include "net/worker_state.hpp"
#include "weft/net/connection.hpp"
#include "weft/sched/this_coroutine.hpp"

namespace weft::net {

namespace {
constexpr const char* interrupt_reason = "weft.net: connection state changed";
}

void connection::close() noexcept { begin_close(close_reason::local, true); }

void connection::destroy() noexcept { begin_close(close_reason::local, false); }

void connection::close_lingering() noexcept {
  linger_asked_ = true;
  begin_close(close_reason::local, true);
}

bool connection::close_if_peer_gone() noexcept {
  if (state_ != state::open || fd_ < 0) {
    return false;
  }
  // POLLRDHUP stays set once the peer's FIN arrived, whatever is still buffered before it (a
  // pipelined request, a TLS close_notify), where a MSG_PEEK read would see those bytes first.
  pollfd look{fd_, POLLRDHUP, 0};
  if (::poll(&look, 1, 0) != 1) {
    return false;  // nothing to report (or EINTR/ENOMEM: the next look will tell)
  }
  const short gone = options_.half_close ? (POLLHUP | POLLERR) : (POLLHUP | POLLERR | POLLRDHUP);
  if ((look.revents & gone) == 0) {
    return false;
  }
  begin_close(close_reason::peer, false);
  return true;
}

void connection::close(std::uint16_t code, std::string_view reason) {
  if (framer_ != nullptr && sendable()) {
    // Into the queue behind what was sent before; encode_close throws before writing anything
    // for a code or reason it may not send.
    framer_->encode_close(code, reason, out_);
  }
  begin_close(close_reason::local, true);
}

void connection::shutdown_write() noexcept {
  if (!sendable()) {
    return;
  }
  if (input_ended()) {
    begin_close(close_reason::local, true);  // both directions done
    return;
  }
  write_shut_ = true;
  if (!pending()) {
    if (!flusher_running_) {
      send_fin();
    }  // (a flusher about to end sends it: run_flusher)
    return;
  }
  if (!flusher_running_) {
    try {
      start_flusher();  // it sends the FIN after the queue
    } catch (...) {
      begin_close(close_reason::local, false);  // no coroutine to flush with
    }
  }
}

void connection::send_fin() noexcept {
  fin_sent_ = true;
  if (tls_ != nullptr) {
    tls_goodbye();
  }
  ::shutdown(fd_, SHUT_WR);
}

std::string connection::not_sendable_reason() const {
  if (state_ == state::open) {
    return "its sending direction was shut down (shutdown_write)";
  }
  return std::string("the connection is closed (") + to_string(reason_) + ")";
}

void connection::wait_closed(const timeout& limit) {
  while (state_ != state::released) {
    released_.wait(limit);
  }
}

void connection::begin_close(close_reason reason, bool graceful) noexcept {
  if (state_ == state::closed || state_ == state::released) {
    return;
  }
  if (state_ == state::open) {
    reason_ = reason;
  }
  if (graceful && state_ == state::open) {
    state_ = state::closing;
    close_deadline_ = options_.close_timeout.count() > 0
                          ? std::chrono::steady_clock::now() + options_.close_timeout
                          : std::chrono::steady_clock::time_point::max();
    // Nothing buffered reaches the user any more. It is kept where the closing handshake reads
    // on (the peer's close frame may be in it already), and when the framer itself ended the
    // conversation: receive() is still inside its decode() and moves past the unit after it.
    if (!close_reply_due() && !finished_) {
      in_begin_ = in_end_ = 0;
    }
    room_.set();
    resumed_.set();
    interrupt_reader();
    if (!pending() && !flusher_running_) {
      shut_down_and_release();
    } else if (flusher_running_) {
      interrupt_flusher();  // it waits again, now with the close deadline
    } else {
      try {
        start_flusher();
      } catch (...) {
        begin_close(reason, false);  // no coroutine to flush with: close now
      }
    }
    return;
  }
  if (graceful) {
    return;  // already closing
  }
  // Now: what is queued is dropped (the close reason reports it).
  state_ = state::closed;
  drop_output();
  in_begin_ = in_end_ = 0;
  // Wakes the coroutines waiting on the fd (both ways ready) on every driver; the socket itself
  // closes when they have left. With a ring send in flight (cancelled by drop_output), once it
  // has completed (ring_sent): what the socket took at once still goes, as after a send(2).
  if (!ring_busy_) {
    ::shutdown(fd_, SHUT_RDWR);
  }
  room_.set();
  resumed_.set();
  interrupt_reader();
  interrupt_flusher();
  try_release();
}

void connection::shut_down_and_release() noexcept {
  // FIN after the last queued byte (a TLS connection says close_notify first), unless the
  // protocol leaves the end to the peer; then read what the peer sent meanwhile, so that
  // close(2) finds nothing unread and does not answer with a reset that could destroy replies
  // still in flight to the peer.
  if (!fin_sent_ && !fin_held()) {  // (shutdown_write() may have sent it already)
    send_fin();
  }
  const int input = read_closing_input();
  // A peer that is still sending (or that the protocol says may be) gets a lingering close, and
  // so does a closing handshake still under way (for close_timeout where linger_time is 0);
  // during a server's stop only while the peer has not acknowledged everything sent to it.
  const bool handshake = input >= 0 && (close_reply_due() || fin_held());
  const bool linger = handshake || input > 0 || (input == 0 && linger_asked_);
  std::chrono::milliseconds bound = options_.linger_time;
  if (bound.count() <= 0 && handshake) {
    bound = options_.close_timeout;
  }
  if (linger && bound.count() > 0 && !(stopping_ && detail::unacknowledged_bytes(fd_) == 0)) {
    lingering_ = true;
    linger_end_ = std::chrono::steady_clock::now() + bound;
    if (flusher_running_) {
      return;  // run_flusher goes on with linger()
    }
    try {
      start_flusher();
      return;
    } catch (...) {
      lingering_ = false;  // no coroutine to linger with: close now
    }
  }
  if (!fin_sent_ && state_ == state::closing) {
    send_fin();  // held back for the peer's, which is not waited for (a TLS close_notify)
  }
  finish_close();
}

int connection::drop_input() noexcept {
  char sink[4096];
  int result = 0;
  for (int round = 0; round < 16; ++round) {
    const ssize_t got = ::read(fd_, sink, sizeof sink);
    if (got > 0) {
      result = 1;
      // Read from the socket like any input (connection_counters::bytes_in), though dropped.
      counters_.bytes_in += static_cast<std::uint64_t>(got);
      if (worker_ != nullptr) {
        worker_->counters.bytes_in.add(static_cast<std::uint64_t>(got));
      }
    } else if (got < 0 && errno == EINTR) {
      continue;
    } else if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return result;
    } else {
      return -1;  // the peer's end, or a reset
    }
  }
  return result;
}

int connection::read_close_reply() noexcept {
  int result = 0;
  try {
    message dropped;
    for (int round = 0; round < 16; ++round) {
      const bool came = read_once();  // (through TLS where there is a session)
      if (state_ != state::closing) {
        return -1;  // a reset or a failure destroyed the connection
      }
      if (came && buffered() > 0) {
        result = 1;
      }
      while (buffered() > 0 && framer_->awaits_peer_close()) {
        const std::string_view input(in_.get() + in_begin_, buffered());
        const std::size_t unit = framer_->measure(input, link_);
        if (unit == 0 || unit > input.size()) {
          break;
        }
        framer_->decode(input.substr(0, unit), dropped, link_);
        in_begin_ += unit;
      }
      if (in_begin_ == in_end_) {
        in_begin_ = in_end_ = 0;
      }
      if (peer_ended_ || buffered() > options_.max_message_size + 65536) {
        return -1;  // the end of the peer's stream, or a framer that cannot cut what came
      }
      if (!framer_->awaits_peer_close() || (!came && !read_first_)) {
        return result;  // the reply came, or the socket is drained
      }
    }
  } catch (...) {
    framer_failed_ = true;  // a protocol error in what came (or no memory): stop reading it
    return -1;
  }
  return result;
}

int connection::read_closing_input() noexcept {
  if (!close_reply_due()) {
    return drop_input();
  }
  const int input = read_close_reply();
  return input > 0 && !close_reply_due() ? 0 : input;
}

// Waits for the peer's bytes and drops them until it ends its direction (or resets), sends
// nothing for close_timeout, or linger_time passes; during a server's stop, until the peer has
// acknowledged everything (looked at every 50 ms: acknowledgements do not make the socket
// readable). A destroy() meanwhile (the stop's deadline) interrupts the wait. While the
// protocol's closing handshake is under way the bytes go through its framer, and the linger
// ends when the peer's closing message has come (and, where the peer ends the transport first,
// its FIN); then this side sends its FIN if it held it back.
void connection::linger() {
  using steady = std::chrono::steady_clock;
  const bool quiet_ends = options_.close_timeout.count() > 0;
  steady::time_point quiet_until =
      quiet_ends ? steady::now() + options_.close_timeout : steady::time_point::max();
  while (state_ == state::closing) {
    if (stopping_ && detail::unacknowledged_bytes(fd_) <= 0) {
      break;
    }
    const steady::time_point now = steady::now();
    if (now >= linger_end_ || now >= quiet_until) {
      break;
    }
    steady::time_point until = std::min(linger_end_, quiet_until);
    if (stopping_) {
      until = std::min(until, now + std::chrono::milliseconds(50));
    }
    flusher_waiting_ = true;
    try {
      wait_readable(fd_, timeout::at(until));
    } catch (const timeout_error&) {
      flusher_waiting_ = false;
      continue;  // the loop's checks tell which limit it was
    } catch (const cancelled_error&) {
      flusher_waiting_ = false;
      if (flusher_interrupt_) {
        flusher_interrupt_ = false;
        continue;  // a stop (look again) or a destroy (no longer closing)
      }
      lingering_ = false;
      throw;  // the worker is being torn down: run_flusher destroys the connection
    }
    flusher_waiting_ = false;
    const bool reply_was_due = close_reply_due();
    const int input = read_closing_input();
    if (input < 0) {
      break;
    }
    if (reply_was_due && !close_reply_due() && !fin_held()) {
      break;  // the closing handshake is complete: nothing more comes
    }
    if (input > 0 && quiet_ends) {
      quiet_until = steady::now() + options_.close_timeout;
    }
  }
  lingering_ = false;
  if (state_ == state::closing) {
    if (!fin_sent_) {
      send_fin();  // held back for the peer's (a TLS client's close_notify goes with it)
    }
    finish_close();
  }
}

void connection::finish_close() noexcept {
  state_ = state::closed;
  room_.set();
  resumed_.set();
  interrupt_reader();
  try_release();
}

[[gnu::hot]] void connection::try_release() noexcept {
  if (state_ != state::closed || reader_waiting_ || flusher_running_ || ring_busy_) {
    return;
  }
  state_ = state::released;
  drop_hibernation();  // its deadline may still be in the timer heap (lazy)
  registration_.reset();
  ::close(fd_);
  fd_ = -1;
  in_.reset();
  in_capacity_ = in_begin_ = in_end_ = 0;
  std::string().swap(out_);
  out_head_ = 0;
  if (ring_out_ != nullptr) {
    ring_out_->reset(0);
    ring_queued_ = 0;
  }
  drop_files();
  tls_queued_ = 0;  // (the session stays, for failure() and the details, until the destructor)
  if (worker_ != nullptr) {
    worker_->counters.closed[static_cast<std::size_t>(reason_)].add(1);
    worker_->counters.connections.subtract(1);
  }
  released_.set();
  const close_reason reason = reason_;
  auto call = [&](const connection_events* events) {
    if (events == nullptr || !events->on_close) {
      return;
    }
    try {
      events->on_close(*this, reason);
    } catch (const std::exception& failure) {
      log(std::string("on_close threw: ") + failure.what());
    } catch (...) {
      log("on_close threw a non-std exception");
    }
  };
  call(server_events_);
  call(own_events_.get());
  if (release_unlinks_) {
    // After the callbacks, as the serving coroutine unlinks after wait_released(); the flusher
    // calling this holds the connection alive until it ends.
    detail::unlink_connection(*worker_, *this);
    detail::notify_if_drained(*worker_);
  }
}

void connection::interrupt_reader() noexcept {
  if (hibernation_ != nullptr && hibernation_->hibernating) {
    hibernation_ready();  // no reader is waiting: the handler is called again to see what changed
    return;
  }
  if (reader_waiting_ && !reader_interrupt_ && reader_ != nullptr) {
    reader_interrupt_ = true;
    try {
      weft::detail::cancel_coroutine(*scheduler_, *reader_, interrupt_reason);
    } catch (...) {
      reader_interrupt_ = false;  // another thread: cannot happen, a connection is one thread's
    }
  }
}

void connection::interrupt_flusher() noexcept {
  if (flusher_waiting_ && !flusher_interrupt_ && flusher_.valid()) {
    flusher_interrupt_ = true;
    try {
      flusher_.cancel(interrupt_reason);
    } catch (...) {
      flusher_interrupt_ = false;
    }
  }
}

void connection::report(const std::exception& failure) noexcept {
  auto call = [&](const connection_events* events) {
    if (events == nullptr || !events->on_error) {
      return;
    }
    try {
      events->on_error(*this, failure);
    } catch (const std::exception& nested) {
      log(std::string("on_error threw: ") + nested.what());
    } catch (...) {
      log("on_error threw a non-std exception");
    }
  };
  call(server_events_);
  call(own_events_.get());
}

void connection::fire_full() noexcept {
  full_ = true;
  auto call = [&](const connection_events* events) {
    if (events == nullptr || !events->on_buffer_full) {
      return;
    }
    try {
      events->on_buffer_full(*this);
    } catch (const std::exception& failure) {
      report(failure);
    }
  };
  call(server_events_);
  call(own_events_.get());
}

void connection::fire_drain() noexcept {
  full_ = false;
  auto call = [&](const connection_events* events) {
    if (events == nullptr || !events->on_buffer_drain) {
      return;
    }
    try {
      events->on_buffer_drain(*this);
    } catch (const std::exception& failure) {
      report(failure);
    }
  };
  call(server_events_);
  call(own_events_.get());
}

namespace detail {

void connection_access::stop(connection& c) noexcept {
  c.stopping_ = true;
  if (c.lingering_) {
    c.interrupt_flusher();  // it ends once the peer has acknowledged everything (linger())
  }
  if (c.buffered() == 0) {
    c.interrupt_reader();
  }
}

void connection_access::destroy(connection& c, close_reason reason) noexcept {
  c.begin_close(reason, false);
}

void connection_access::close(connection& c, close_reason reason) noexcept {
  c.begin_close(reason, true);
}

void connection_access::wait_released(connection& c) {
  protect([&] {
    while (c.state_ != connection::state::released) {
      c.released_.wait();
    }
  });
}

bool connection_access::hand_over_release(connection& c) noexcept {
  if (c.state_ == connection::state::released || !c.flusher_running_ || c.reader_waiting_ ||
      c.worker_ == nullptr) {
    return false;
  }
  c.release_unlinks_ = true;
  return true;
}

bool connection_access::released(const connection& c) noexcept {
  return c.state_ == connection::state::released;
}

void link_connection(worker_state& worker, connection& c) noexcept {
  connection_access::next(c) = worker.first;
  connection_access::prev(c) = nullptr;
  if (worker.first != nullptr) {
    connection_access::prev(*worker.first) = &c;
  }
  worker.first = &c;
  ++worker.live;
}

void unlink_connection(worker_state& worker, connection& c) noexcept {
  connection* before = connection_access::prev(c);
  connection* after = connection_access::next(c);
  if (before != nullptr) {
    connection_access::next(*before) = after;
  } else {
    worker.first = after;
  }
  if (after != nullptr) {
    connection_access::prev(*after) = before;
  }
  connection_access::prev(c) = connection_access::next(c) = nullptr;
  --worker.live;
}

}  // namespace detail
}  // namespace weft::net

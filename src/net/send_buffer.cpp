// connection: the send path. A send with nothing queued writes straight to the socket (raw bytes
// without a copy; a framed message after encoding it into the buffer); only what the socket did
// not take stays queued, and only then does a flusher coroutine watch writability and write the
// rest. So an echo costs one send(2) per reply and never touches the fd's watch for writing.
// send(2) with MSG_NOSIGNAL rather than write(2): the same system call cost, and a peer that
// reset the connection gives EPIPE instead of killing the process with SIGPIPE.
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

#include "net/ring_output.hpp"
#include "net/socket_calls.hpp"
#include "net/tls_session.hpp"
#include "net/worker_state.hpp"
#include "weft/net/connection.hpp"
#include "weft/reactor/fd.hpp"
#include "weft/sched/task.hpp"

namespace weft::net {

namespace {
// An emptied buffer above this size gives its memory back (a connection that once queued a
// burst should not keep a megabyte for the rest of its life).
constexpr std::size_t keep_capacity = 256 * 1024;
}  // namespace

[[gnu::hot]] void connection::send(std::string_view payload, message_kind kind) {
  if (sendable() && queued() < options_.send_buffer_limit) {
    enqueue(payload, kind, true);
    return;
  }
  send(payload, kind, timeout::never());
}

[[gnu::hot]] void connection::send(std::string_view payload, message_kind kind,
                                   const timeout& limit) {
  for (;;) {
    if (!sendable()) {
      throw connection_closed_error("weft::net::connection::send to " + peer_address_ + ": " +
                                    not_sendable_reason());
    }
    if (queued() < options_.send_buffer_limit) {
      enqueue(payload, kind, true);
      return;
    }
    if (!room_stretch(limit)) {
      const bool caller = limit.bounded() && timeout::clock::now() >= limit.deadline();
      const std::size_t waiting = queued();
      log("closed: send limit (" + std::to_string(waiting) + " bytes queued, limit " +
          std::to_string(options_.send_buffer_limit) + "; the peer does not read)");
      begin_close(close_reason::send_limit, false);
      throw timeout_error("weft::net::connection::send to " + peer_address_ +
                          ": the send buffer stayed at its limit (" + std::to_string(waiting) +
                          " bytes queued, limit " + std::to_string(options_.send_buffer_limit) +
                          "): the peer does not read; connection closed (send limit), " +
                          (caller ? weft::detail::timed_out_after(limit)
                                  : "the peer took nothing for " +
                                        std::to_string(options_.send_timeout.count()) +
                                        " ms (the send timeout)"));
    }
  }
}

void connection::note_queued(std::size_t now_queued) noexcept {
  if (now_queued > counters_.send_buffer_high) {
    counters_.send_buffer_high = now_queued;
    if (worker_ != nullptr) {
      worker_->counters.send_buffer_high.raise_to(now_queued);
    }
  }
}

// One stretch of waiting for room below the send buffer limit, of at most the send timeout
// (when set) and limit: true when room came or the peer took bytes in it (written, or
// acknowledged out of the socket's buffer: a slow reader, not a stalled one), false when it took
// nothing or limit's deadline passed.
bool connection::room_stretch(const timeout& limit) {
  const std::uint64_t written = counters_.bytes_out;
  const std::int64_t in_flight = detail::unacknowledged_bytes(fd_);
  room_.clear();
  try {
    room_.wait(options_.send_timeout.count() > 0 ? limit.capped(options_.send_timeout) : limit);
    return true;
  } catch (const wait_cancelled_error&) {
    throw;
  } catch (const timeout_error&) {
    const bool caller = limit.bounded() && timeout::clock::now() >= limit.deadline();
    return !caller &&
           (counters_.bytes_out != written || detail::acknowledged_since(fd_, in_flight));
  }
}

// receive(): the protocol's own answers (pongs) fill the queue while the peer sends and does
// not read. No more of its input is taken until they drain below the limit, as send() would
// wait: the peer's socket buffers fill and it stops (TCP backpressure). False when the peer
// took nothing for a send timeout (closed: send limit) or the connection closed meanwhile.
bool connection::wait_answers_drained() {
  while (queued() >= options_.send_buffer_limit) {
    if (state_ != state::open) {
      return false;
    }
    if (!room_stretch(timeout::never())) {
      log("closed: send limit (" + std::to_string(queued()) + " bytes queued, limit " +
          std::to_string(options_.send_buffer_limit) +
          ", by the protocol's own answers; the peer sends and does not read)");
      begin_close(close_reason::send_limit, false);
      return false;
    }
  }
  return state_ == state::open;
}

bool connection::wait_sent(const timeout& limit) {
  const bool stalls = options_.send_timeout.count() > 0;
  while (pending() && (state_ == state::open || state_ == state::closing)) {
    // room_ is set at every write while a wait_sent() waits (after_write), and when the
    // connection closes: each wait below is one stretch in which the socket took nothing.
    const std::uint64_t written = counters_.bytes_out;
    const std::int64_t in_flight = detail::unacknowledged_bytes(fd_);
    room_.clear();
    ++sent_waiters_;
    try {
      room_.wait(stalls ? limit.capped(options_.send_timeout) : limit);
      --sent_waiters_;
    } catch (const timeout_error&) {
      --sent_waiters_;
      if (limit.bounded() && timeout::clock::now() >= limit.deadline()) {
        throw timeout_error("weft::net::connection::wait_sent to " + peer_address_ + ": " +
                            std::to_string(unsent()) + " bytes still queued, " +
                            weft::detail::timed_out_after(limit));
      }
      if (counters_.bytes_out != written || state_ != state::open ||
          detail::acknowledged_since(fd_, in_flight)) {
        continue;  // a write, an acknowledgement or the close in the stretch: not a stall
      }
      log("closed: send limit (" + std::to_string(unsent()) +
          " bytes queued; the peer took nothing for " +
          std::to_string(options_.send_timeout.count()) + " ms)");
      begin_close(close_reason::send_limit, false);
      throw timeout_error("weft::net::connection::wait_sent to " + peer_address_ +
                          ": the peer took nothing for " +
                          std::to_string(options_.send_timeout.count()) +
                          " ms (the send timeout): it does not read; connection closed (send "
                          "limit)");
    } catch (...) {
      --sent_waiters_;
      throw;
    }
  }
  return !pending() && !output_dropped_;
}

[[gnu::hot]] bool connection::try_send(std::string_view payload, message_kind kind) {
  if (!sendable() || queued() >= options_.send_buffer_limit) {
    return refuse("try_send");
  }
  enqueue(payload, kind, true);
  return true;
}

bool connection::send_raw(std::string_view bytes) {
  if (!sendable() || queued() >= options_.send_buffer_limit) {
    return refuse("send_raw");
  }
  enqueue(bytes, message_kind::binary, false);
  return true;
}

bool connection::refuse(const char* operation) {
  ++counters_.sends_refused;
  if (worker_ != nullptr) {
    worker_->counters.sends_refused.add(1);
  }
  if (!sendable()) {
    report(connection_closed_error(std::string("weft::net::connection::") + operation + " to " +
                                   peer_address_ + ": " + not_sendable_reason()));
  } else {
    report(send_refused_error(std::string("weft::net::connection::") + operation + " to " +
                              peer_address_ + ": the send buffer is full (" +
                              std::to_string(queued()) + " bytes queued, limit " +
                              std::to_string(options_.send_buffer_limit) +
                              "); wait for on_buffer_drain, or use send() to wait for room"));
  }
  return false;
}

void connection::send_file(int fd, std::uint64_t offset, std::uint64_t length) {
  if (fd < 0) {
    throw std::invalid_argument("weft::net::connection::send_file to " + peer_address_ + ": fd " +
                                std::to_string(fd) + " is not a file descriptor");
  }
  if (!sendable()) {
    throw connection_closed_error("weft::net::connection::send_file to " + peer_address_ + ": " +
                                  not_sendable_reason());
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    const int error_number = errno;
    throw std::invalid_argument("weft::net::connection::send_file to " + peer_address_ + ": fd " +
                                std::to_string(fd) +
                                " cannot be used: " + std::strerror(error_number));
  }
  if (S_ISREG(info.st_mode)) {
    const auto size = static_cast<std::uint64_t>(info.st_size);
    if (offset > size || length > size - offset) {
      throw std::invalid_argument("weft::net::connection::send_file to " + peer_address_ +
                                  ": the range of " + std::to_string(length) + " bytes at offset " +
                                  std::to_string(offset) + " goes past the end of the file (" +
                                  std::to_string(size) + " bytes)");
    }
  }
  if (length == 0) {
    return;
  }
  const int copy = ::fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (copy < 0) {
    const int error_number = errno;
    throw io_error(-error_number, "send_file (dup)", peer_address_, std::strerror(error_number));
  }
  queue_file(copy, offset, length);
}

void connection::adopt_file(int fd, std::uint64_t offset, std::uint64_t length) {
  if (fd < 0) {
    throw std::invalid_argument("weft::net::connection::adopt_file to " + peer_address_ + ": fd " +
                                std::to_string(fd) + " is not a file descriptor");
  }
  if (state_ != state::open) {
    ::close(fd);
    throw connection_closed_error("weft::net::connection::adopt_file to " + peer_address_ +
                                  ": the connection is closed (" + to_string(reason_) + ")");
  }
  if (length == 0) {
    ::close(fd);
    return;
  }
  queue_file(fd, offset, length);
}

// Queues an fd the connection owns from here on (closed once written, or when dropped).
void connection::queue_file(int copy, std::uint64_t offset, std::uint64_t length) {
  // sendfile(2) has no MSG_NOSIGNAL: a peer that reset the connection would raise SIGPIPE,
  // whose default action ends the process. The thread that sends files keeps SIGPIPE blocked
  // (once per thread, one system call) and consumes the pending one after an EPIPE.
  static thread_local bool sigpipe_blocked = false;
  if (!sigpipe_blocked) {
    sigset_t pipe_only;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    if (::pthread_sigmask(SIG_BLOCK, &pipe_only, nullptr) == 0) {
      sigpipe_blocked = true;
    }
  }
  const bool was_empty = !pending();
  try {
    files_.push_back(queued_file{copy, offset, length, out_.size()});
  } catch (...) {
    ::close(copy);
    throw;
  }
  ++counters_.messages_out;
  if (worker_ != nullptr) {
    worker_->counters.messages_out.add(1);
  }
  if (was_empty && !flusher_running_ && !flush_now()) {
    return;  // the socket or the file failed; the connection is closed
  }
  if (pending()) {
    continue_flushing();
  }
}

// Drops everything queued: plaintext, records, file ranges.
void connection::drop_output() noexcept {
  if (pending()) {
    output_dropped_ = true;
  }
  if (ring_busy_) {
    // Behind a send in flight: what the socket would have taken at once had it been written
    // when queued still goes, once the send has completed (ring_sent).
    const std::size_t end = files_.empty() ? out_.size() : files_.front().at;
    try {
      ring_out_->after.assign(out_, out_head_, end - out_head_);
    } catch (...) {
      // No memory for it: dropped with the rest.
    }
  }
  out_.clear();
  out_head_ = 0;
  ring_queued_ = 0;
  if (ring_busy_) {
    try {
      ring_out_->ring.cancel(*ring_out_);  // it completes, cancelled or with what went
    } catch (...) {
      // The ring refused the entry: a shutdown(2) ends the send (and the connection, which
      // drops its output only to close).
      ::shutdown(fd_, SHUT_RDWR);
    }
  }
  if (tls_ != nullptr) {
    tls_->outgoing_sent();
    tls_queued_ = 0;
  }
  drop_files();
}

void connection::drop_files() noexcept {
  for (const queued_file& f : files_) {
    ::close(f.fd);
  }
  files_.clear();
}

// Writes the front file range with sendfile(2) until it is done (true), the socket is full
// (true, the range stays at the front), or something failed (false, the connection is closed).
bool connection::flush_file() noexcept {
  queued_file& f = files_.front();
  while (f.left > 0) {
    auto position = static_cast<off_t>(f.offset);
    const std::size_t chunk = f.left < 0x7ffff000u ? static_cast<std::size_t>(f.left) : 0x7ffff000u;
    ssize_t wrote = ::sendfile(fd_, f.fd, &position, chunk);
    if (wrote > 0) {
      const auto bytes = static_cast<std::uint64_t>(wrote);
      f.offset += bytes;
      f.left -= bytes;
      counters_.bytes_out += bytes;
      if (worker_ != nullptr) {
        worker_->counters.bytes_out.add(bytes);
      }
      continue;
    }
    if (wrote < 0 && errno == EINTR) {
      continue;
    }
    if (wrote < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return true;
    }
    if (wrote < 0 && (errno == EPIPE || errno == ECONNRESET)) {
      const int error_number = errno;
      if (error_number == EPIPE) {
        sigset_t pipe_only;
        sigemptyset(&pipe_only);
        sigaddset(&pipe_only, SIGPIPE);
        const timespec now{0, 0};
        static_cast<void>(::sigtimedwait(&pipe_only, nullptr, &now));  // the one just raised
      }
      write_failed(error_number);
      return false;
    }
    file_failed(wrote == 0 ? 0 : errno, "sendfile");
    return false;
  }
  ::close(f.fd);
  files_.erase(files_.begin());
  return true;
}

// The file's side of a queued range failed: it ended before the range did (error_number 0: a
// short file), or it cannot be read. The peer was promised those bytes (a Content-Length): close
// at once rather than let it take what follows for them.
void connection::file_failed(int error_number, const char* operation) noexcept {
  try {
    std::string what = error_number == 0 ? "the file ended " + std::to_string(files_.front().left) +
                                               " bytes before the end of the range (a short file)"
                                         : std::string(std::strerror(error_number));
    io_error failure(error_number == 0 ? -EIO : -error_number, operation, peer_address_, what);
    log(std::string("closed: ") + failure.what());
    report(failure);
  } catch (...) {
    // Out of memory building the report: the close reason still says what happened.
  }
  begin_close(close_reason::error, false);
}

[[gnu::hot]] void connection::enqueue(std::string_view payload, message_kind kind, bool encode) {
  const bool was_empty = !pending();
  if (framer_ != nullptr && encode) {
    framer_->encode(payload, kind, out_);  // may throw (a payload the protocol cannot carry)
  } else if (tls_ != nullptr) {
    if (was_empty && !flusher_running_) {
      // Nothing queued: encrypted straight from the caller's bytes (the flush below writes it).
      if (!tls_->encrypt(payload.data(), payload.size())) {
        tls_failed(false);
        return;
      }
      sync_tls_queued();
    } else {
      out_.append(payload);
    }
  } else if (was_empty && !flusher_running_ && ring_out_ == nullptr) {
    // Nothing queued: straight from the caller's bytes, and only the rest is copied. (Through
    // the ring the bytes are copied into the queue, which flush_now hands over whole.)
    std::size_t done = 0;
    while (done < payload.size()) {
      ssize_t wrote =
          detail::socket_send(fd_, payload.data() + done, payload.size() - done, MSG_NOSIGNAL);
      if (wrote > 0) {
        done += static_cast<std::size_t>(wrote);
        continue;
      }
      if (wrote < 0 && errno == EINTR) {
        continue;
      }
      if (wrote < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
        ++counters_.messages_out;
        counters_.bytes_out += done;
        if (worker_ != nullptr) {
          worker_->counters.messages_out.add(1);
          worker_->counters.bytes_out.add(done);
        }
        // The rest of the payload was accepted and is lost with the socket. It was never
        // queued, so drop_output cannot see it: wait_sent must still say so.
        output_dropped_ = true;
        write_failed(errno);
        return;
      }
      break;
    }
    counters_.bytes_out += done;
    if (worker_ != nullptr) {
      worker_->counters.bytes_out.add(done);
    }
    if (done < payload.size()) {  // the socket took part: the rest waits (no call for none)
      out_.append(payload.substr(done));
    }
  } else {
    out_.append(payload);
  }
  ++counters_.messages_out;
  if (worker_ != nullptr) {
    worker_->counters.messages_out.add(1);
  }
  if (was_empty && !flusher_running_ && queued() > 0 && !flush_now()) {
    return;  // the socket failed; the connection is closed
  }
  const std::size_t now_queued = queued();
  if (now_queued == 0) {
    return;
  }
  note_queued(now_queued);
  continue_flushing();
  if (now_queued >= options_.send_buffer_limit && !full_) {
    fire_full();
  }
}

bool connection::flush_now() noexcept {
  if (ring_out_ != nullptr && flush_to_ring()) {
    return true;
  }
  if (tls_ != nullptr) {
    return flush_tls();
  }
  for (;;) {
    const std::size_t end = files_.empty() ? out_.size() : files_.front().at;
    if (out_head_ == end) {
      if (files_.empty()) {
        break;
      }
      const std::size_t before = files_.size();
      if (!flush_file()) {
        return false;
      }
      if (files_.size() == before) {
        break;  // the socket is full
      }
      continue;
    }
    const std::ptrdiff_t wrote = send_some(out_.data() + out_head_, end - out_head_);
    if (wrote > 0) {
      out_head_ += static_cast<std::size_t>(wrote);
      continue;
    }
    if (wrote == 0) {
      break;  // the socket is full
    }
    return false;
  }
  after_write();
  return true;
}

// One send(2) of what is queued at data (the flushes: plaintext, or a TLS session's records):
// the bytes written, counted; 0 when the socket is full; -1 when it failed (write_failed has
// closed the connection).
[[gnu::hot]] std::ptrdiff_t connection::send_some(const char* data, std::size_t size) noexcept {
  for (;;) {
    const ssize_t wrote = detail::socket_send(fd_, data, size, MSG_NOSIGNAL);
    if (wrote > 0) {
      const auto bytes = static_cast<std::size_t>(wrote);
      counters_.bytes_out += bytes;
      if (worker_ != nullptr) {
        worker_->counters.bytes_out.add(bytes);
      }
      return static_cast<std::ptrdiff_t>(wrote);
    }
    if (wrote < 0 && errno == EINTR) {
      continue;
    }
    if (wrote < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      return 0;
    }
    write_failed(wrote < 0 ? errno : EIO);
    return -1;
  }
}

void connection::after_write() noexcept {
  if (out_head_ == out_.size()) {
    if (out_.capacity() > keep_capacity) {
      std::string().swap(out_);
    } else {
      out_.clear();
    }
    for (queued_file& f : files_) {
      f.at -= out_head_;
    }
    out_head_ = 0;
  } else if (out_head_ >= 65536 && out_head_ * 2 >= out_.size()) {
    out_.erase(0, out_head_);  // keep the copy amortised: at most once per half a buffer
    for (queued_file& f : files_) {
      f.at -= out_head_;
    }
    out_head_ = 0;
  }
  if ((queued() < options_.send_buffer_limit || sent_waiters_ > 0) && room_.waiting() > 0) {
    room_.set();
  }
  if (queued() == 0 && full_) {
    fire_drain();
  }
}

// The ring's flush: goes on with what a short send left, or hands the plaintext queue over whole
// (swapped with the ring's emptied buffer: no copy). False when the classic path must write:
// TLS records, file ranges, a ring that refused the entry.
bool connection::flush_to_ring() noexcept {
  if (ring_busy_) {
    return true;  // its completion goes on with the queue
  }
  detail::ring_output& ring = *ring_out_;
  const bool rest = ring.left() > 0;
  if (!rest && (tls_ != nullptr || !files_.empty() || out_head_ == out_.size())) {
    return false;
  }
  if (!rest) {
    ring.bytes.swap(out_);
    ring.head = out_head_;
    out_.clear();
    out_head_ = 0;
  }
  try {
    if (ring.keep == nullptr) {
      ring.keep = shared_from_this();
    }
    ring.ring.submit_send(fd_, ring.bytes.data() + ring.head, ring.left(), ring);
  } catch (...) {
    // The ring refused (its queue full and the kernel not taking it): the bytes go back to the
    // front of the queue and out with send(2).
    if (ring.keep != nullptr) {
      ring.keep.reset();  // (not the last owner: the caller holds the connection)
    }
    out_.insert(0, ring.bytes, ring.head);
    for (queued_file& f : files_) {
      f.at += ring.left();
    }
    ring.reset(keep_capacity);
    ring_queued_ = 0;
    return false;
  }
  ring_busy_ = true;
  ring_queued_ = ring.left();
  if (!rest) {
    after_write();  // the queue was emptied: room, and on_buffer_drain where it was full
  }
  return true;
}

// A ring send completed (from the driver's poll): counts what went, and goes on with the rest
// of a short send or with what was queued meanwhile; a failure closes the connection as a
// failed send(2) does. With the flusher running (a close, a wait for a slow peer) it only wakes
// it: the flusher's flush_now goes on.
void connection::ring_sent(int result) noexcept {
  detail::ring_output& ring = *ring_out_;
  ring_busy_ = false;
  // Released last, when no send is in flight any more: it may be the last owner.
  std::shared_ptr<connection> hold = std::move(ring.keep);
  if (result > 0) {
    const auto bytes = static_cast<std::size_t>(result);
    ring.head += bytes;
    counters_.bytes_out += bytes;
    if (worker_ != nullptr) {
      worker_->counters.bytes_out.add(bytes);
    }
    if (ring.left() == 0) {
      ring.reset(keep_capacity);
    }
    if (ring_queued_ != 0) {
      ring_queued_ = ring.left();  // (0 already when dropped)
    }
  } else if (state_ == state::open || state_ == state::closing) {
    write_failed(result == 0 ? EIO : -result);  // (counts the ring's bytes as not delivered)
  }
  if (state_ == state::closed || state_ == state::released) {
    if (state_ == state::closed) {
      if (result > 0 && ring.left() == 0 && !ring.after.empty()) {
        // What was queued behind the send when the connection was destroyed: what the socket
        // takes at once goes, as it would have gone with send(2) when queued.
        const ssize_t wrote = detail::socket_send(fd_, ring.after.data(), ring.after.size(),
                                                  MSG_NOSIGNAL | MSG_DONTWAIT);
        if (wrote > 0) {
          counters_.bytes_out += static_cast<std::uint64_t>(wrote);
          if (worker_ != nullptr) {
            worker_->counters.bytes_out.add(static_cast<std::uint64_t>(wrote));
          }
        }
      }
      ::shutdown(fd_, SHUT_RDWR);  // held back for this send (begin_close)
    }
    std::string().swap(ring.after);
    ring.reset(keep_capacity);
    ring_queued_ = 0;
    ring.idle.set();
    try_release();
    return;
  }
  if (flusher_running_) {
    ring.idle.set();
    return;
  }
  ring.keep = std::move(hold);       // a send submitted now keeps it
  const bool flushed = flush_now();  // (false: the socket or a file failed; closed)
  if (!ring_busy_) {
    hold = std::move(ring.keep);
    if (flushed && pending()) {
      try {
        start_flusher();  // a file range the socket did not take whole
      } catch (...) {
        begin_close(close_reason::error, false);  // no coroutine to flush with
      }
    }
  }
}

void detail::ring_output::ring_completed(int result) noexcept { owner.ring_sent(result); }

void connection::continue_flushing() {
  if (!flusher_running_ && !ring_busy_) {
    start_flusher();
  }
}

std::uint64_t connection::unsent() const noexcept {
  std::uint64_t bytes = queued();
  for (const queued_file& f : files_) {
    bytes += f.left;
  }
  return bytes;
}

void connection::write_failed(int error_number) noexcept {
  const std::uint64_t lost = unsent();
  drop_output();
  if (state_ == state::closed || state_ == state::released) {
    return;
  }
  const bool by_peer = error_number == EPIPE || error_number == ECONNRESET;
  try {
    io_error failure(-error_number, "write", peer_address_,
                     std::string(std::strerror(error_number)) +
                         (lost > 0 ? "; " + std::to_string(lost) + " queued bytes not delivered"
                                   : std::string()));
    log(std::string("closed: ") + failure.what());
    report(failure);
  } catch (...) {
    // Out of memory building the report: the close reason still says what happened.
  }
  begin_close(by_peer ? close_reason::peer : close_reason::error, false);
}

void connection::start_flusher() {
  flusher_running_ = true;
  try {
    // The coroutine keeps the connection alive while it runs (a net::connect connection may be
    // dropped with bytes queued), but not through its stored callable: the connection holds the
    // task, so a reference kept there would be a cycle. It moves into the running frame.
    flusher_ = weft::spawn(
        [self = shared_from_this()]() mutable {
          std::shared_ptr<connection> keep = std::move(self);
          keep->run_flusher();
        },
        spawn_options{.name = "weft.net flusher", .stack_at_spawn = true});
  } catch (...) {
    flusher_running_ = false;
    throw;
  }
}

// Writes the queue as the socket drains; ends once it is empty (watching writability no more),
// or the connection is closed. While closing it has the close deadline, which every write moves
// on: close_timeout bounds a stretch in which the peer takes nothing, not the whole flush (a
// slow client's large reply is still written whole; nginx's send_timeout is the same rule).
void connection::run_flusher() {
  try {
    for (;;) {
      if (state_ == state::closed || state_ == state::released) {
        break;
      }
      if (lingering_) {
        linger();
        break;
      }
      const std::uint64_t written = counters_.bytes_out;
      if (!flush_now()) {
        break;
      }
      if (state_ == state::closing && counters_.bytes_out != written &&
          options_.close_timeout.count() > 0) {
        close_deadline_ = std::chrono::steady_clock::now() + options_.close_timeout;
      }
      if (!pending()) {
        if (state_ == state::closing) {
          shut_down_and_release();
          continue;  // closed, or lingering (above)
        }
        if (write_shut_ && !fin_sent_) {
          send_fin();
        }
        break;
      }
      flusher_waiting_ = true;
      const std::int64_t in_flight =
          state_ == state::closing ? detail::unacknowledged_bytes(fd_) : -1;
      try {
        if (ring_busy_) {
          // A ring send in flight: its completion wakes this (the kernel waits for room).
          ring_out_->idle.clear();
          ring_out_->idle.wait(state_ == state::closing ? timeout::at(close_deadline_)
                                                        : timeout::never());
          if (state_ == state::closing && counters_.bytes_out != written &&
              options_.close_timeout.count() > 0) {
            close_deadline_ = std::chrono::steady_clock::now() + options_.close_timeout;
          }
        } else if (state_ == state::closing) {
          wait_writable(fd_, timeout::at(close_deadline_));
        } else {
          wait_writable(fd_);
        }
      } catch (const timeout_error&) {
        flusher_waiting_ = false;
        if (detail::acknowledged_since(fd_, in_flight)) {
          // The peer is taking the bytes in the socket's buffer, too slowly to make room yet.
          close_deadline_ = std::chrono::steady_clock::now() + options_.close_timeout;
          continue;
        }
        log("closed: close timeout (" + std::to_string(unsent()) +
            " queued bytes not written; the peer took nothing for " +
            std::to_string(options_.close_timeout.count()) + " ms)");
        reason_ = close_reason::close_timeout;
        begin_close(close_reason::close_timeout, false);
        break;
      } catch (const cancelled_error&) {
        flusher_waiting_ = false;
        if (!flusher_interrupt_) {
          throw;  // below
        }
        flusher_interrupt_ = false;
        continue;
      }
      flusher_waiting_ = false;
    }
  } catch (const cancelled_error&) {
    // The worker is being torn down (linger() lets this through too): nothing will write the
    // queue, or read what the peer still sends, any more.
    begin_close(close_reason::server_stop, false);
    flusher_running_ = false;
    try_release();
    throw;
  }
  flusher_running_ = false;
  try_release();
}

}  // namespace weft::net

// connection: the TLS paths (tls.hpp, tls_session.hpp). The socket is read and written here as
// for a plain connection; the session turns records into plaintext on the way in and plaintext
// into records on the way out.
//
// Out: out_ and the file ranges hold plaintext in the order it was sent, as on a plain
// connection, and the records the session writes wait in its outgoing buffer. The flush sends
// those records first, and only once they are all written encrypts the next piece (64 KiB of
// out_, or of the front file), so that records go out in the order their plaintext was queued
// and at most one piece of records waits in memory beyond what queued() already counted.
//
// In: one recv(2) into the thread's scratch buffer hands the session ciphertext, which it
// decrypts straight into the connection's input buffer; what it could not take yet (the input
// buffer was full) is stashed, and read_first_ tells the next read to decrypt it before waiting
// for the socket (and the hibernation not to start: enter_hibernation).
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "net/socket_calls.hpp"
#include "net/tls_session.hpp"
#include "net/worker_state.hpp"
#include "weft/net/connection.hpp"

namespace weft::net {

namespace {
using steady = std::chrono::steady_clock;
// A read decrypts at most this much (connection.cpp's max_read, for a plain read).
constexpr std::size_t max_plaintext_read = 256 * 1024;
// How much plaintext one encryption takes: four full records.
constexpr std::size_t tls_piece = 64 * 1024;
// Receives to make at most in one read without plaintext (a handshake's flights): past them the
// read returns and the next one goes on.
constexpr int tls_receives = 16;

// Ciphertext read from the socket and file bytes read for encryption pass through here: neither
// outlives the call that filled it (the session stashes what it did not consume).
char* tls_scratch() {
  thread_local std::unique_ptr<char[]> scratch = std::make_unique_for_overwrite<char[]>(tls_piece);
  return scratch.get();
}
}  // namespace

std::string connection::tls_version() const { return tls_ != nullptr ? tls_->version() : ""; }
std::string connection::tls_cipher() const { return tls_ != nullptr ? tls_->cipher() : ""; }
std::string connection::alpn_protocol() const { return tls_ != nullptr ? tls_->alpn() : ""; }
bool connection::tls_resumed() const noexcept { return tls_ != nullptr && tls_->resumed(); }
std::string connection::tls_server_name() const {
  return tls_ != nullptr ? tls_->server_name() : "";
}
std::string connection::peer_certificate() const {
  return tls_ != nullptr ? tls_->peer_subject() : "";
}

void connection::sync_tls_queued() noexcept { tls_queued_ = tls_->outgoing_size(); }

bool connection::read_once_tls() {
  detail::tls_session& session = *tls_;
  bool plaintext = false;
  bool full_receive = false;
  int receives = 0;
  for (;;) {
    std::size_t room = in_capacity_ - in_end_;
    if (room > max_plaintext_read) {
      room = max_plaintext_read;
    }
    if (room == 0) {
      break;
    }
    detail::tls_session::status result{};
    const std::size_t got = session.read(in_.get() + in_end_, room, result);
    session.keep_rest();
    if (got > 0) {
      if (buffered() == 0 && options_.message_timeout.count() > 0) {
        partial_since_ = last_input_at_;
      }
      in_end_ += got;
      plaintext = true;
      continue;
    }
    if (result == detail::tls_session::status::closed) {
      peer_ended_ = true;  // close_notify: the end of the input, as a FIN
      send_tls_output();
      return true;
    }
    if (result == detail::tls_session::status::failed) {
      tls_failed();
      return false;
    }
    // The session wants more ciphertext.
    if (plaintext) {
      break;
    }
    if (receives == tls_receives) {
      read_first_ = true;  // more may be waiting: the next read goes on without a wait
      send_tls_output();
      return false;
    }
    char* scratch = tls_scratch();
    const ssize_t received = detail::socket_recv(fd_, scratch, tls_piece, 0);
    if (received > 0) {
      ++receives;
      const auto bytes = static_cast<std::size_t>(received);
      full_receive = bytes == tls_piece;
      if (options_.idle_timeout.count() > 0 || options_.message_timeout.count() > 0 ||
          ping_interval_.count() > 0) {
        last_input_at_ = steady::now();
        ping_outstanding_ = false;  // any byte answers a keep-alive ping
      }
      counters_.bytes_in += bytes;
      if (worker_ != nullptr) {
        worker_->counters.bytes_in.add(bytes);
      }
      session.supply(scratch, bytes);
      continue;
    }
    if (received == 0) {
      peer_ended_ = true;  // a FIN without close_notify ends the input too (see tls.hpp)
      send_tls_output();
      return true;
    }
    if (errno == EINTR) {
      continue;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      read_first_ = false;
      send_tls_output();
      return false;
    }
    read_failed(errno);
    return false;
  }
  // Plaintext came (or the input buffer is full): read again before waiting when the session
  // holds more, the last receive filled the scratch, or the buffer is full.
  read_first_ = full_receive || session.buffered() || in_end_ == in_capacity_;
  send_tls_output();
  return true;
}

// Sends the records a read left in the session (handshake flights, alerts, key updates), and
// starts the flusher for what the socket does not take.
void connection::send_tls_output() {
  sync_tls_queued();
  if (tls_queued_ == 0 || flusher_running_ || (state_ != state::open && state_ != state::closing)) {
    return;
  }
  if (!flush_now()) {
    return;
  }
  if (pending() && !flusher_running_) {
    start_flusher();
  }
}

bool connection::flush_tls() noexcept {
  detail::tls_session& session = *tls_;
  for (;;) {
    std::string& records = session.outgoing();
    std::size_t& head = session.outgoing_head();
    if (head < records.size()) {
      const std::ptrdiff_t wrote = send_some(records.data() + head, records.size() - head);
      if (wrote > 0) {
        head += static_cast<std::size_t>(wrote);
        continue;
      }
      if (wrote == 0) {
        break;  // the socket is full
      }
      return false;
    }
    session.outgoing_sent();
    if (!session.established() || session.failed()) {
      break;  // plaintext waits for the handshake (none is queued before it: see serve)
    }
    const std::size_t end = files_.empty() ? out_.size() : files_.front().at;
    if (out_head_ < end) {
      const std::size_t piece = end - out_head_ < tls_piece ? end - out_head_ : tls_piece;
      if (!session.encrypt(out_.data() + out_head_, piece)) {
        tls_failed(false);  // inside the flush: no graceful close can flush after it
        return false;
      }
      out_head_ += piece;
      continue;
    }
    if (files_.empty()) {
      break;
    }
    if (!encrypt_file_piece()) {
      return false;
    }
  }
  sync_tls_queued();
  after_write();
  return true;
}

// The next piece of the front file range, read and encrypted (no sendfile(2) under TLS: the
// kernel would send the file's bytes as they are).
bool connection::encrypt_file_piece() noexcept {
  queued_file& f = files_.front();
  if (f.left > 0) {
    const std::size_t want = f.left < tls_piece ? static_cast<std::size_t>(f.left) : tls_piece;
    char* scratch = tls_scratch();
    ssize_t got;
    do {
      got = ::pread(f.fd, scratch, want, static_cast<off_t>(f.offset));
    } while (got < 0 && errno == EINTR);
    if (got <= 0) {
      file_failed(got == 0 ? 0 : errno, "read");
      return false;
    }
    if (!tls_->encrypt(scratch, static_cast<std::size_t>(got))) {
      tls_failed(false);
      return false;
    }
    f.offset += static_cast<std::uint64_t>(got);
    f.left -= static_cast<std::uint64_t>(got);
    if (f.left > 0) {
      return true;
    }
  }
  ::close(f.fd);
  files_.erase(files_.begin());
  return true;
}

// The session failed (a bad record, a failed handshake, a plaintext peer): logged and reported,
// then a graceful close writes the alert the session left (or the context's reply to a plaintext
// peer); a failure to encrypt (out of memory) closes at once. Nothing after the failure reaches
// the user.
void connection::tls_failed(bool graceful) noexcept {
  in_begin_ = in_end_ = 0;
  out_.clear();  // plaintext cannot be encrypted any more
  out_head_ = 0;
  drop_files();
  try {
    if (tls_->plaintext_peer() && options_.tls != nullptr &&
        !options_.tls->plaintext_reply().empty()) {
      tls_->outgoing().append(options_.tls->plaintext_reply());
    }
    log("closed: " + tls_->failure());
    report(tls_error("weft::net::connection " + peer_address_ + ": " + tls_->failure()));
  } catch (...) {
    // Out of memory: the close reason still says what happened.
  }
  sync_tls_queued();
  begin_close(close_reason::protocol_error, graceful);
}

// close_notify before the FIN of a graceful close, written if the socket takes it now (a peer
// that stopped reading is not waited for: the close has already flushed everything else).
void connection::tls_goodbye() noexcept {
  tls_->close_notify();
  std::string& records = tls_->outgoing();
  std::size_t& head = tls_->outgoing_head();
  while (head < records.size()) {
    const ssize_t wrote =
        detail::socket_send(fd_, records.data() + head, records.size() - head, MSG_NOSIGNAL);
    if (wrote <= 0 && !(wrote < 0 && errno == EINTR)) {
      break;
    }
    if (wrote > 0) {
      head += static_cast<std::size_t>(wrote);
      counters_.bytes_out += static_cast<std::size_t>(wrote);
    }
  }
  tls_->outgoing_sent();
  tls_queued_ = 0;
}

void connection::start_tls_client(std::string_view host) {
  tls_ = std::make_unique<detail::tls_session>(*options_.tls, host);
  if (!tls_->handshake_step()) {  // the ClientHello
    throw tls_error("weft::net::connect " + peer_address_ + ": " + tls_->failure());
  }
  send_tls_output();
}

}  // namespace weft::net

namespace weft::net::detail {

void connection_access::connect_tls(connection& c, std::string_view host, const timeout& limit) {
  try {
    c.start_tls_client(host);
    if (c.establish_tls(limit)) {
      return;
    }
  } catch (...) {
    c.destroy();
    throw;
  }
  if (!c.tls_->failed()) {
    const std::string why = std::string("the connection closed during the TLS handshake (") +
                            to_string(c.reason_) + ")";
    c.destroy();
    throw tls_error("weft::net::connect " + c.peer_address_ + ": " + why);
  }
  // The session's alert (unknown_ca, bad_certificate) is on its way out through the graceful
  // close that tls_failed began: the server learns why.
  throw tls_error("weft::net::connect " + c.peer_address_ + ": " + c.tls_->failure());
}

}  // namespace weft::net::detail

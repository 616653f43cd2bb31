// The socket of a weft::http::client connection (client_connection.hpp).
#include "http/client_connection.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "http/client_proxy.hpp"
#include "net/address.hpp"
#include "net/keepalive.hpp"
#include "net/socket_calls.hpp"
#include "net/tls_session.hpp"
#include "weft/error.hpp"

namespace weft::http::detail {

namespace {

constexpr std::size_t initial_buffer = 16 * 1024;
constexpr std::size_t max_read = 256 * 1024;

[[noreturn]] void throw_errno(int error_number, const char* operation, const std::string& subject) {
  throw io_error(-error_number, operation, subject, std::strerror(error_number));
}

}  // namespace

client_connection::client_connection(client_connection&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      registration_(std::move(other.registration_)),
      tls_(std::move(other.tls_)),
      peer_(std::move(other.peer_)),
      buffer_(std::move(other.buffer_)),
      capacity_(std::exchange(other.capacity_, 0)),
      begin_(std::exchange(other.begin_, 0)),
      end_(std::exchange(other.end_, 0)),
      read_first_(other.read_first_),
      sending_records_(other.sending_records_),
      idle_since_(other.idle_since_),
      exchanges_(other.exchanges_),
      parser_(std::move(other.parser_)),
      output_(std::move(other.output_)) {}

client_connection::~client_connection() { close(); }

void client_connection::connect(const std::string& host, std::uint16_t port, const timeout& limit,
                                const net::tls_context* tls, const net::tcp_keepalive& keepalive,
                                const client_proxy* via, bool tunnel, const std::string& subject) {
  close();
  const std::string& dial_host = via != nullptr ? via->host : host;
  const std::uint16_t dial_port = via != nullptr ? via->port : port;
  const std::string bracketed = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  const std::string host_port = bracketed + ":" + std::to_string(port);
  const std::string& where = via != nullptr ? via->where : host_port;
  std::vector<net::detail::socket_address> candidates =
      net::detail::addresses_of(dial_host, dial_port, limit, where);
  int last_error = 0;
  std::string last_where = where;
  for (net::detail::socket_address& candidate : candidates) {
    const int fd =
        ::socket(candidate.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      throw_errno(errno, "socket", where);
    }
    // Each request goes out in one send; without TCP_NODELAY a request written in pieces (a
    // large body) could wait for the ACK of the first (Nagle with delayed ACKs, 40 ms).
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (keepalive.idle.count() > 0) {
      net::detail::apply_keepalive(fd, keepalive);  // checked by the client's constructor
    }
    int error_number = 0;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&candidate.storage), candidate.length) != 0) {
      error_number = errno;
      if (error_number == EINPROGRESS) {
        try {
          fd_registration registration(fd);
          wait_writable(fd, limit);
          registration_ = std::move(registration);
        } catch (...) {
          ::close(fd);
          throw;
        }
        socklen_t size = sizeof error_number;
        error_number = 0;
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error_number, &size);
      }
    } else {
      registration_ = fd_registration(fd);
    }
    if (error_number == 0) {
      fd_ = fd;
      peer_ = where;
      begin_ = end_ = 0;
      read_first_ = false;
      exchanges_ = 0;
      parser_.reset();
      if (via != nullptr && (tunnel || tls != nullptr)) {
        try {
          if (via->socks) {
            socks_connect(host, port, host_port, *via, limit, subject);
          } else {
            open_tunnel(host_port, *via, limit, subject);
          }
          peer_ = host_port + " through " + via->where;
        } catch (...) {
          close();
          throw;
        }
      }
      if (tls != nullptr) {
        try {
          handshake(host, *tls, limit);
        } catch (...) {
          close();
          throw;
        }
      }
      return;
    }
    registration_.reset();
    ::close(fd);
    last_error = error_number;
    if (candidates.size() > 1) {
      last_where = where + " (" +
                   net::detail::format_address(reinterpret_cast<sockaddr*>(&candidate.storage),
                                               candidate.length) +
                   ")";
    }
  }
  throw_errno(last_error, "connect", last_where);
}

void client_connection::close() noexcept {
  if (fd_ >= 0 && tls_ != nullptr) {
    tls_->close_notify();
    std::string& records = tls_->outgoing();
    if (tls_->outgoing_head() < records.size()) {
      // Best effort, never waiting: a server may already have closed its side.
      static_cast<void>(::send(fd_, records.data() + tls_->outgoing_head(),
                               records.size() - tls_->outgoing_head(),
                               MSG_NOSIGNAL | MSG_DONTWAIT));
    }
  }
  tls_.reset();
  if (fd_ >= 0) {
    registration_.reset();  // before the fd goes (fd.hpp)
    ::close(fd_);
    fd_ = -1;
  }
  begin_ = end_ = 0;
}

// One send(2) of what the socket takes now: the bytes it took, or 0 after waiting for it to
// have room (EAGAIN) or an EINTR.
void client_connection::wait_for(bool input, const timeout& limit,
                                 std::chrono::milliseconds stall) {
  const auto wait_on = [&](const timeout& wait) {
    if (input) {
      wait_readable(fd_, wait);
    } else {
      wait_writable(fd_, wait);
    }
  };
  if (stall.count() <= 0) {
    wait_on(limit);
    return;
  }
  // What the peer has not acknowledged, before each stretch: a fall of it through the stretch
  // is progress. A read looks only once a stretch passed (a response usually comes first: no
  // ioctl per response): bytes still unacknowledged then give it one more stretch to show
  // progress, none make the stall final.
  constexpr std::int64_t not_looked = -2;
  std::int64_t in_flight = input ? not_looked : net::detail::unacknowledged_bytes(fd_);
  for (;;) {
    const timeout wait = limit.capped(stall);
    const bool stall_binds = !limit.bounded() || wait.deadline() < limit.deadline();
    try {
      wait_on(wait);
      return;
    } catch (const timeout_error&) {
      if (!stall_binds) {
        throw;
      }
      if (in_flight == not_looked) {
        in_flight = net::detail::unacknowledged_bytes(fd_);
        if (in_flight <= 0) {
          throw;
        }
        continue;
      }
      if (!net::detail::acknowledged_since(fd_, in_flight)) {
        throw;
      }
    }
    in_flight = net::detail::unacknowledged_bytes(fd_);
  }
}

std::size_t client_connection::send_some(const char* data, std::size_t size, const timeout& limit,
                                         const std::string& subject,
                                         std::chrono::milliseconds stall) {
  const ssize_t sent = ::send(fd_, data, size, MSG_NOSIGNAL);
  if (sent >= 0) {
    return static_cast<std::size_t>(sent);
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK) {
    wait_for_room(limit, stall);
    return 0;
  }
  if (errno != EINTR) {
    throw_errno(errno, "send", subject);
  }
  return 0;
}

// Every byte of data to the socket, waiting for it when it is full.
void client_connection::send_bytes(std::string_view data, const timeout& limit,
                                   const std::string& subject, std::chrono::milliseconds stall) {
  while (!data.empty()) {
    data.remove_prefix(send_some(data.data(), data.size(), limit, subject, stall));
  }
}

void client_connection::write_all(std::string_view data, const timeout& limit,
                                  const std::string& subject, std::chrono::milliseconds stall) {
  if (tls_ != nullptr) {
    if (!tls_->encrypt(data.data(), data.size())) {
      throw net::tls_error("weft::http::client " + subject + ": " + tls_->failure());
    }
    send_records(limit, subject, false, stall);
    read_first_ = tls_->buffered();
    return;
  }
  send_bytes(data, limit, subject, stall);
  // The answer cannot be there yet: wait for it before reading rather than pay a read that
  // says EAGAIN.
  read_first_ = false;
}

std::size_t client_connection::make_room() {
  if (begin_ == end_) {
    begin_ = end_ = 0;
  }
  if (capacity_ - end_ < 2048) {
    if (begin_ > 0) {
      std::memmove(buffer_.get(), buffer_.get() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    if (capacity_ - end_ < 2048) {
      // Only a header section (bounded by the parser's limits) or a partial chunk line is
      // ever kept, so the buffer grows only as far as those need.
      const std::size_t grown = capacity_ == 0 ? initial_buffer : capacity_ * 2;
      auto bigger = std::make_unique_for_overwrite<char[]>(grown);
      if (end_ > 0) {
        std::memcpy(bigger.get(), buffer_.get(), end_);
      }
      buffer_ = std::move(bigger);
      capacity_ = grown;
    }
  }
  return std::min(capacity_ - end_, max_read);
}

std::size_t client_connection::fill(const timeout& limit, const std::string& subject,
                                    std::chrono::milliseconds stall) {
  const std::size_t room = make_room();
  if (tls_ != nullptr) {
    return fill_tls(room, limit, subject, stall);
  }
  for (;;) {
    if (!read_first_) {
      wait_for_input(limit, stall);
    }
    const ssize_t got = ::read(fd_, buffer_.get() + end_, room);
    if (got >= 0) {
      const auto bytes = static_cast<std::size_t>(got);
      end_ += bytes;
      read_first_ = bytes == room && bytes > 0;
      return bytes;
    }
    if (errno == EINTR) {
      continue;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      read_first_ = false;
      continue;
    }
    throw_errno(errno, "read", subject);
  }
}

void client_connection::consume(std::size_t n) noexcept {
  begin_ += n;
  if (begin_ == end_) {
    begin_ = end_ = 0;
  }
}

bool client_connection::reusable(std::chrono::milliseconds idle_limit) const noexcept {
  if (fd_ < 0 || begin_ != end_ || (tls_ != nullptr && tls_->buffered())) {
    return false;
  }
  const auto idle = std::chrono::steady_clock::now() - idle_since_;
  if (idle_limit.count() > 0 && idle >= idle_limit) {
    return false;
  }
  // Asked every time, however short the idle: a server that sent something unasked while the
  // connection sat in the pool (a 408 before closing, a body after a HEAD answer, a stray
  // response) would have it taken for the next request's answer, and every answer after it
  // would be one late. Go's client drops such a connection ("Unsolicited response received on
  // idle HTTP channel"), nginx's upstream keepalive closes it. It costs a system call per
  // reuse (bench/http/README.md, "The proxy's peek before every reuse"); skipping it for
  // connections idle under a second, as weft did and curl does, gave wrong answers.
  return quiet();
}

bool client_connection::answered(const timeout& limit, const std::string& subject) {
  if (begin_ != end_) {
    return true;
  }
  if (fd_ < 0) {
    return false;
  }
  // Not quiet(): bytes, the server's end, or an error are all an answer to stop for.
  return tls_ == nullptr ? !quiet() : answered_tls(limit, subject);
}

bool client_connection::quiet() const noexcept {
  char probe;
  const ssize_t got = ::recv(fd_, &probe, 1, MSG_PEEK | MSG_DONTWAIT);
  // EAGAIN: open and quiet. 0: the server closed it; bytes: it sent something unasked (a 408
  // before closing), which would be taken for the next request's answer; an error: broken.
  return got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

namespace {
// Records received from the socket pass through here into the session (which stashes what it
// does not consume at once).
char* record_scratch() {
  thread_local std::unique_ptr<char[]> scratch = std::make_unique_for_overwrite<char[]>(max_read);
  return scratch.get();
}
}  // namespace

void client_connection::handshake(const std::string& host, const net::tls_context& tls,
                                  const timeout& limit) {
  tls_ = std::make_unique<net::detail::tls_session>(tls, host);
  const std::string subject = "TLS handshake with " + peer_;
  for (;;) {
    const bool advanced = tls_->handshake_step();
    send_records(limit, subject);  // the ClientHello, the Finished, or an alert
    if (!advanced) {
      throw net::tls_error("weft::http::client: connect " + peer_ + ": " + tls_->failure());
    }
    if (tls_->established()) {
      read_first_ = tls_->buffered();
      return;
    }
    if (receive_records(limit, subject, {}) == 0) {
      throw net::tls_error("weft::http::client: connect " + peer_ +
                           ": the server closed the connection during the TLS handshake");
    }
  }
}

// RFC 9110 9.3.6: "CONNECT host:port" with the same authority in Host, and the proxy's
// credentials; any 2xx opens the tunnel (its header fields are ignored, and it has no body).
// Nothing comes from the origin before the ClientHello (or a plain tunnel's first request), so
// the input is empty after the head.
void client_connection::open_tunnel(const std::string& authority, const client_proxy& via,
                                    const timeout& limit, const std::string& subject) {
  std::string head = "CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n";
  if (!via.authorization.empty()) {
    head += "Proxy-Authorization: " + via.authorization + "\r\n";
  }
  head += "\r\n";
  write_all(head, limit, subject);
  parser_.set_request_method(method::connect);
  for (;;) {
    const parse_result r = parser_.parse(input());
    consume(r.consumed);
    if (r.event == parse_event::headers_complete) {
      const response& answer = parser_.message();
      const std::uint16_t code = code_of(answer.status);
      if (code >= 100 && code < 200) {
        continue;  // an interim answer: the final one follows
      }
      if (code >= 200 && code < 300) {
        parser_.reset();
        return;
      }
      throw error(
          error_kind::proxy_refused, subject,
          "the " + via.where + " answered CONNECT " + authority + " with " + std::to_string(code) +
              " " +
              (answer.reason.empty() ? std::string(reason_phrase(answer.status)) : answer.reason));
    }
    if (r.event == parse_event::error) {
      throw error(error_kind::malformed_response, subject,
                  "the " + via.where + "'s answer to CONNECT " + authority +
                      " is not HTTP: " + parser_.error_reason());
    }
    if (r.event == parse_event::need_more && fill(limit, subject) == 0) {
      throw error(
          error_kind::proxy_refused, subject,
          "the " + via.where + " closed the connection without answering CONNECT " + authority);
    }
  }
}

void client_connection::send_records(const timeout& limit, const std::string& subject, bool reading,
                                     std::chrono::milliseconds stall) {
  // An upgraded connection is read by one coroutine while another writes: reading may make the
  // session add records (a TLS 1.3 key update) while a writer waits for the socket in here. The
  // coroutine in here sends them too (the loop looks at outgoing() again after every wait, never
  // keeping a view of it across one: appending may move it). A reader finding one in here
  // leaves its records to it and goes on reading; a writer waits its turn, so that what it
  // encrypted is on its way when it returns and the records never pile up unsent.
  while (sending_records_) {
    if (reading) {
      return;
    }
    wait_writable(fd_, limit);
  }
  sending_records_ = true;
  struct done {
    bool& flag;
    ~done() { flag = false; }
  } reset{sending_records_};
  while (tls_->outgoing_size() > 0) {
    const std::string& records = tls_->outgoing();
    std::size_t& head = tls_->outgoing_head();
    head += send_some(records.data() + head, records.size() - head, limit, subject, stall);
  }
  tls_->outgoing_sent();
}

void client_connection::shutdown_write(const timeout& limit, const std::string& subject) {
  if (fd_ < 0) {
    return;
  }
  if (tls_ != nullptr) {
    tls_->close_notify();
    send_records(limit, subject);
  }
  if (::shutdown(fd_, SHUT_WR) != 0) {
    throw_errno(errno, "shutdown", subject);
  }
}

// One recv(2) of records into the session, waiting for the socket first: the bytes received, 0
// when the server ended the stream.
std::size_t client_connection::receive_records(const timeout& limit, const std::string& subject,
                                               std::chrono::milliseconds stall) {
  char* scratch = record_scratch();
  for (;;) {
    const ssize_t got = ::recv(fd_, scratch, max_read, 0);
    if (got > 0) {
      tls_->supply(scratch, static_cast<std::size_t>(got));
      return static_cast<std::size_t>(got);
    }
    if (got == 0) {
      return 0;
    }
    if (errno == EINTR) {
      continue;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      wait_for_input(limit, stall);
      continue;
    }
    throw_errno(errno, "read", subject);
  }
}

std::size_t client_connection::decrypt(std::size_t room, const timeout& limit,
                                       const std::string& subject,
                                       net::detail::tls_session::status& result) {
  const std::size_t got = tls_->read(buffer_.get() + end_, room, result);
  tls_->keep_rest();
  if (tls_->outgoing_size() > 0) {
    send_records(limit, subject, true);  // what reading made the session say (a key update)
  }
  if (got > 0) {
    end_ += got;
    read_first_ = tls_->buffered();
  }
  return got;
}

bool client_connection::answered_tls(const timeout& limit, const std::string& subject) {
  for (;;) {
    net::detail::tls_session::status result{};
    if (decrypt(make_room(), limit, subject, result) > 0) {
      return true;  // application data: the answer's first bytes, read as input() from here
    }
    if (result == net::detail::tls_session::status::closed ||
        result == net::detail::tls_session::status::failed) {
      return true;  // the server's end, or a failure the response's read reports
    }
    const ssize_t n = ::recv(fd_, record_scratch(), max_read, MSG_DONTWAIT);
    if (n > 0) {
      tls_->supply(record_scratch(), static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) {
      continue;
    }
    // Nothing more now: only records that were no answer (a session ticket) had come. A FIN or
    // an error is an answer, as on plaintext.
    return n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
  }
}

std::size_t client_connection::fill_tls(std::size_t room, const timeout& limit,
                                        const std::string& subject,
                                        std::chrono::milliseconds stall) {
  for (;;) {
    net::detail::tls_session::status result{};
    if (const std::size_t got = decrypt(room, limit, subject, result); got > 0) {
      return got;
    }
    if (result == net::detail::tls_session::status::closed) {
      return 0;  // close_notify: the end of the stream
    }
    if (result == net::detail::tls_session::status::failed) {
      throw net::tls_error("weft::http::client " + subject + ": " + tls_->failure());
    }
    if (receive_records(limit, subject, stall) == 0) {
      return 0;  // a FIN without close_notify ends it too (the parser knows if a body was cut)
    }
  }
}

}  // namespace weft::http::detail

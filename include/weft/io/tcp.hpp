// TCP for coroutines: weft::tcp::listener (listen, accept) and weft::tcp::connect, both giving a
// weft::tcp::stream (a weft::stream with TCP options). IPv4 and IPv6.
//
// Blocking: accept() and connect() suspend only the calling coroutine; both take a
// weft::timeout and are cancellable. Threads, ownership and errors: as for weft::stream (see
// stream.hpp); a listener, like a stream, must be closed or destroyed before run() returns.
//
// Hosts: a numeric address ("127.0.0.1", "::1", "[::1]") is used as is; anything else is
// resolved with getaddrinfo on libuv's thread pool (a cancellable wait too), and connect tries
// each address in turn.
#pragma once

#include <cstdint>
#include <string>

#include "weft/io/detail/handle_owner.hpp"
#include "weft/io/stream.hpp"
#include "weft/sched/timeout.hpp"

namespace weft {
namespace detail {
struct stream_access;
struct listener_state;
}  // namespace detail

namespace tcp {

// A connected TCP socket: a weft::stream (read, write, shutdown) with TCP's options.
class stream : public weft::stream {
 public:
  stream() noexcept = default;

  // TCP_NODELAY: send small writes at once instead of coalescing them (Nagle).
  void set_nodelay(bool enabled);
  // SO_KEEPALIVE with the first probe after delay_seconds of silence (ignored when disabling).
  void set_keepalive(bool enabled, unsigned delay_seconds = 60);
  // Closes the connection with a reset (RST) instead of an orderly FIN: the peer's next read or
  // write fails with ECONNRESET / EPIPE. Idempotent with close().
  void close_reset() noexcept;

 private:
  friend struct detail::stream_access;
  explicit stream(detail::stream_state* state) noexcept : weft::stream(state) {}
};

// Options of listener::listen.
struct listen_options {
  int backlog = 511;          // pending connections the kernel holds before refusing more
  bool reuse_address = true;  // SO_REUSEADDR (libuv sets it on every TCP bind on Unix)
  bool reuse_port = false;    // SO_REUSEPORT: several listeners share the port (load balanced)
  bool ipv6_only = false;     // for "::": accept IPv6 only, not IPv4-mapped connections too
  // accept() when out of file descriptors: throw, or back off and retry (see stream.hpp).
  fd_exhaustion out_of_fds = fd_exhaustion::report;
};

// A listening TCP socket (see above).
class listener {
 public:
  listener() noexcept = default;
  // Binds host:port (port 0: an ephemeral port, see port()) and starts listening.
  // io_error "listen 127.0.0.1:80: permission denied".
  static listener listen(const std::string& host, std::uint16_t port,
                         const listen_options& options = {});

  // Assigning over a listener, or destroying it, closes it (as close()).
  listener(listener&& other) noexcept = default;
  listener& operator=(listener&& other) noexcept = default;
  listener(const listener&) = delete;
  listener& operator=(const listener&) = delete;
  ~listener() = default;

  // Waits for the next connection. Connections that arrive while nobody accepts are held in the
  // kernel backlog for the next accept. One acceptor at a time (a second concurrent accept is a
  // std::logic_error). io_error UV_ECANCELED once the listener is closed. Out of file
  // descriptors: io_error UV_EMFILE / UV_ENFILE naming the cause, or a wait that retries, as
  // listen_options::out_of_fds says; the queued connections are kept either way, and accept()
  // takes them once descriptors are free again.
  tcp::stream accept(const timeout& limit = timeout::never());

  std::uint16_t port() const;         // the bound port (the kernel's pick for port 0)
  std::string local_address() const;  // "127.0.0.1:41234", "[::]:8080"
  bool is_open() const noexcept;      // false once closed or moved from
  // Stops listening; a coroutine waiting in accept() gets io_error UV_ECANCELED. Idempotent.
  void close() noexcept;

 private:
  detail::handle_owner<detail::listener_state> state_;
};

// Options of tcp::connect.
struct connect_options {
  bool nodelay = false;  // TCP_NODELAY on the new connection (see stream::set_nodelay)
};

// Connects to host:port. io_error "connect 127.0.0.1:1: connection refused"; timeout_error when
// limit passes first (the half-open attempt is closed).
tcp::stream connect(const std::string& host, std::uint16_t port,
                    const timeout& limit = timeout::never(), const connect_options& options = {});

}  // namespace tcp
}  // namespace weft

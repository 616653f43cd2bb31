// One TCP connection of weft::http::client: a non-blocking socket driven by the reactor's fd
// readiness (weft/reactor/fd.hpp), its input buffer and response parser, kept in an origin's
// weft::pool between exchanges.
//
// Why a socket of its own and not net::connection or weft::tcp::stream: net::connection is
// the server framework's connection (a graceful close that shuts down and drains, a flusher
// coroutine, server timeouts, logging, and a copy of every read into a message), and
// tcp::stream goes through libuv handles and their read-ahead buffer; a client exchange needs
// neither, and needs to see the exact errno of a write or a read to tell a stale kept-alive
// connection from a broken one. This is the path a bare epoll client takes: per request one
// send(2), a readiness wait and read(2) into a buffer the parser reads in place, with the fd
// registered with the driver once for the connection's life (no epoll_ctl per request).
//
// https: a TLS session (net's, src/net/tls_session.hpp) sits between the socket and the buffer:
// write_all encrypts and sends its records, fill receives records and decrypts into the buffer,
// and connect ends with the handshake (within the connect limit); a failed one is
// net::tls_error naming host:port and OpenSSL's reason.
//
// Pool slots: the pool's factory makes an unconnected connection (no I/O), and the client
// connects it after acquiring it, so each connect is bounded by the caller's own deadline
// and its errors reach the caller untouched. Used by one coroutine at a time (its lease).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "net/tls_session.hpp"
#include "weft/http/parser.hpp"
#include "weft/net/keepalive.hpp"
#include "weft/net/tls.hpp"
#include "weft/reactor/fd.hpp"
#include "weft/sched/timeout.hpp"

namespace weft::http::detail {

struct client_proxy;

class client_connection {
 public:
  explicit client_connection(const parser_limits& limits) : parser_(limits) {}
  client_connection(client_connection&& other) noexcept;
  client_connection& operator=(client_connection&&) = delete;
  client_connection(const client_connection&) = delete;
  client_connection& operator=(const client_connection&) = delete;
  ~client_connection();

  bool connected() const noexcept { return fd_ >= 0; }
  // Resolves host (unless numeric) and connects to each address in turn until one answers;
  // with tls, then the TLS handshake as the client of host. io_error naming host:port (the
  // last address's error when all fail), net::tls_error for a failed handshake; timeout_error
  // or cancelled_error from limit (nothing is left open). keepalive (checked by the caller) turns
  // on the socket's TCP keep-alive probes when its idle is not zero.
  // Through via (a forward proxy; null: direct) it connects to the proxy instead (io_error
  // naming "proxy host:port"), and with tunnel (or tls, which implies it) opens a tunnel to
  // host:port first: CONNECT to an http proxy, SOCKS5's handshake to a SOCKS one (http::error
  // naming subject: proxy_refused for a refusal, or no answer; malformed_response for an answer
  // in another protocol); without either the connection is the http proxy's, the requests in
  // absolute form (client_call::run).
  void connect(const std::string& host, std::uint16_t port, const timeout& limit,
               const net::tls_context* tls = nullptr, const net::tcp_keepalive& keepalive = {},
               const client_proxy* via = nullptr, bool tunnel = false,
               const std::string& subject = {});
  // Closes the socket (registration first; a TLS connection says close_notify if the socket
  // takes it now); the connection may be connected again.
  void close() noexcept;

  // Sends every byte; io_error with the errno (EPIPE, ECONNRESET, ...) naming subject. stall
  // (when positive) bounds each wait for the socket within limit: one that passes it with the
  // server having acknowledged bytes meanwhile is followed by another (a slow reader), one in
  // which it took nothing throws timeout_error.
  void write_all(std::string_view data, const timeout& limit, const std::string& subject,
                 std::chrono::milliseconds stall = {});
  // Ends the client's direction of the stream (an upgraded connection's shutdown_write): TLS
  // close_notify sent first, then shutdown(2) SHUT_WR. io_error naming subject.
  void shutdown_write(const timeout& limit, const std::string& subject);
  // Reads once into the input buffer (waiting for readability first unless the last read
  // filled its room). Returns the bytes read, 0 when the peer ended the stream. io_error with
  // the errno naming subject. stall as write_all's: a wait through which the server kept
  // acknowledging what was written (still reading a request) is followed by another.
  std::size_t fill(const timeout& limit, const std::string& subject,
                   std::chrono::milliseconds stall = {});
  // The bytes received and not yet consumed by the parser.
  std::string_view input() const noexcept { return {buffer_.get() + begin_, end_ - begin_}; }
  void consume(std::size_t n) noexcept;
  void clear_input() noexcept { begin_ = end_ = 0; }

  // Whether an idle connection can carry a request: open, nothing unread, idle less than
  // idle_limit (zero: no limit), and quiet().
  bool reusable(std::chrono::milliseconds idle_limit) const noexcept;
  // Whether the server has sent something, or ended its side, while the request is still being
  // written (RFC 9112 9.5: a client monitors the connection for an early answer). Never waits
  // for the socket: quiet()'s peek of a plaintext one. On TLS a readable socket may hold records
  // that are no answer (a TLS 1.3 session ticket, a key update), so what has arrived is read
  // and decrypted now: only application data (kept in input()), the server's close_notify or
  // FIN, or a failure count. limit and subject are for the records that reading may make the
  // session send (a key update's answer).
  bool answered(const timeout& limit, const std::string& subject);
  // Whether the server neither closed the connection nor sent anything unasked (one recv with
  // MSG_PEEK | MSG_DONTWAIT).
  bool quiet() const noexcept;
  void mark_idle() noexcept { idle_since_ = std::chrono::steady_clock::now(); }
  // Exchanges completed on this connection since it was connected.
  std::uint64_t exchanges() const noexcept { return exchanges_; }
  void count_exchange() noexcept { ++exchanges_; }

  response_parser& parser() noexcept { return parser_; }
  // The request being serialised (kept for its capacity).
  std::string& output() noexcept { return output_; }
  const std::string& peer() const noexcept { return peer_; }

 private:
  // TLS: the handshake after the TCP connect; sending the records the session has written
  // (waiting for the socket within limit); one recv(2) of records into the session.
  void handshake(const std::string& host, const net::tls_context& tls, const timeout& limit);
  // CONNECT authority ("host:port", "[::1]:443") through the proxy this connection reached
  // (connect()).
  void open_tunnel(const std::string& authority, const client_proxy& via, const timeout& limit,
                   const std::string& subject);
  // The same through a SOCKS5 proxy (src/http/client_socks.cpp): its handshake, asking it to
  // connect to host:port (authority is that, as errors name it).
  void socks_connect(const std::string& host, std::uint16_t port, const std::string& authority,
                     const client_proxy& via, const timeout& limit, const std::string& subject);
  // Sends the session's records, waiting for the socket; `reading`: called by a read, which
  // leaves them to a writer already sending (see the definition).
  void send_records(const timeout& limit, const std::string& subject, bool reading = false,
                    std::chrono::milliseconds stall = {});
  std::size_t send_some(const char* data, std::size_t size, const timeout& limit,
                        const std::string& subject, std::chrono::milliseconds stall);
  void send_bytes(std::string_view data, const timeout& limit, const std::string& subject,
                  std::chrono::milliseconds stall);
  // Waits for the socket to take more, or to have bytes, as write_all's stall says.
  void wait_for_room(const timeout& limit, std::chrono::milliseconds stall) {
    wait_for(false, limit, stall);
  }
  void wait_for_input(const timeout& limit, std::chrono::milliseconds stall) {
    wait_for(true, limit, stall);
  }
  void wait_for(bool input, const timeout& limit, std::chrono::milliseconds stall);
  std::size_t receive_records(const timeout& limit, const std::string& subject,
                              std::chrono::milliseconds stall);
  std::size_t fill_tls(std::size_t room, const timeout& limit, const std::string& subject,
                       std::chrono::milliseconds stall);
  // Room for the next read at the end of the buffer (moving or growing it): its size.
  std::size_t make_room();
  // One decryption of what the session holds into `room` at the buffer's end (added to input()),
  // sending the records reading made the session write: the plaintext bytes, or 0 with result
  // saying why (want_read, closed, failed).
  std::size_t decrypt(std::size_t room, const timeout& limit, const std::string& subject,
                      net::detail::tls_session::status& result);
  // answered() on TLS: decrypts what the socket holds now, without waiting.
  bool answered_tls(const timeout& limit, const std::string& subject);

  int fd_ = -1;
  fd_registration registration_;
  std::unique_ptr<net::detail::tls_session> tls_;
  std::string peer_;  // "127.0.0.1:8080": what connect errors name
  std::unique_ptr<char[]> buffer_;
  std::size_t capacity_ = 0;
  std::size_t begin_ = 0;
  std::size_t end_ = 0;
  bool read_first_ = false;  // the last read filled its room: more may be waiting
  // A coroutine is in send_records(): one writing while another reads (an upgraded connection's
  // two directions) sends the records the reader's session produced too (see send_records).
  bool sending_records_ = false;
  std::chrono::steady_clock::time_point idle_since_{};
  std::uint64_t exchanges_ = 0;
  response_parser parser_;
  std::string output_;
};

}  // namespace weft::http::detail

// weft::http::server: an HTTP/1.1 server on net::tcp_server. Each connection is served by a
// coroutine that parses its requests in place in the connection's input buffer (request_parser,
// no copy beyond the parser's own) and runs the handler for each, in order. Between requests,
// once its worker has more than hibernate_above connections, an idle connection hibernates
// (net::connection::hibernate): it holds no coroutine until its next request arrives.
//
// Contract:
//   - Threads: a server is made on any thread; serve() blocks the calling thread until the
//     server has stopped (as tcp_server::serve). stop(), port() and stats() are thread-safe.
//     The handler runs on the workers' threads, inside the connection's coroutine: it may
//     suspend (sleep, await, query a database) and only that connection waits. What handlers
//     share across workers needs its own synchronisation.
//   - An exchange (one request and its response) belongs to the connection's coroutine and is
//     valid only during the handler call; request() and the string_views it hands out are
//     reused by the next request.
//   - Keep-alive (RFC 9112 9.3): HTTP/1.1 unless "Connection: close"; HTTP/1.0 only with
//     "Connection: keep-alive". Pipelined requests are answered strictly in order, and the
//     responses to requests that arrived together leave in one write: responses are batched
//     (corked) while complete requests remain in the buffer, and written when the server must
//     wait for more bytes, when a response streams (body_writer, send_file, 100 Continue), or
//     when 64 KiB are batched. (A handler that suspends for long delays the batched responses
//     of the requests before it until it returns.)
//   - Request bodies: read_body() or read_body_chunk(). Expect: 100-continue gets its
//     "100 Continue" only when the handler reads the body; a handler that answers without
//     reading it answers without 100, and the connection is then closed after the response
//     (the client may never send the body, so the request stream cannot be resynchronised).
//     An unread body of any other request is read and discarded after the handler, up to
//     1 MiB, with keep_alive_timeout at most between its bytes (body_timeout where shorter)
//     and linger_time in all (as nginx's lingering_timeout and lingering_time); past any of
//     them the connection is closed after the response.
//   - Errors the server answers itself, closing the connection afterwards: 400 (malformed
//     request), 408 (header_timeout from the first byte to the end of the head; body_timeout
//     between body bytes), 413, 414, 431 (limits), 501 (method or transfer coding), 505
//     (version). An Expect field asking anything but 100-continue gets 417 (RFC 9110 10.1.1,
//     as Go and Node answer) without the handler; its connection goes on (the body, which
//     such a client sends unasked, discarded) unless 100-continue was asked too
//     (server_options::refuse_unknown_expectations hands them to the handler instead). A handler
//     that throws gets 500 (or the connection aborted when its response head already went
//     out); a handler that returns without responding gets 500; both are logged. A
//     connection idle for keep_alive_timeout between requests is closed quietly.
//   - Streaming responses (start_response): without Content-Length the body is chunked for
//     HTTP/1.1 and delimited by closing the connection for HTTP/1.0. Each write() goes out at
//     once (waiting while the connection's send buffer is at its limit: backpressure).
//   - HEAD is answered with the head GET would have (same Content-Length) and no body.
//   - Graceful stop (stop(grace), or SIGINT/SIGTERM with handle_signals) closes idle
//     connections, lets requests in progress finish within the grace period (their responses
//     say Connection: close), and loses no response already made.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "weft/error.hpp"
#include "weft/http/file_handle.hpp"
#include "weft/http/headers.hpp"
#include "weft/http/message.hpp"
#include "weft/http/parser.hpp"
#include "weft/http/status.hpp"
#include "weft/net/connection.hpp"
#include "weft/net/tcp_server.hpp"

namespace weft::http {

class exchange;
class router;

// What serves a request: runs in the connection's coroutine, once per request, in order.
using handler = std::function<void(exchange&)>;

// Compression of response bodies with gzip (RFC 9110 8.4.1.3), as nginx's gzip module: a
// response made by respond() whose body has at least min_size bytes and whose Content-Type is
// one of `types` goes gzip-compressed to a client whose Accept-Encoding takes gzip (q above 0,
// or "*" when gzip is not named), with Content-Encoding: gzip and Content-Length of the
// compressed bytes. Every such response, compressed or not (a client that did not ask, a body
// that would not shrink), carries "Vary: Accept-Encoding", so that caches keep the two apart;
// a strong ETag of a compressed response is made weak (W/), since its bytes are not the
// identity representation's, and If-None-Match still finds it (weak comparison). HEAD gets
// the head GET would get. Left as they are: responses that already have a Content-Encoding,
// 206 and statuses without content, streamed bodies (start_response) and files sent with
// send_file (static_files' files above cache_file_max; its cached small files are compressed).
// Compressing costs CPU per response (level 1: about 10 ns per byte of text); the zlib stream
// is the worker thread's own, reset after each response.
struct compression_options {
  bool enabled = false;
  int level = 1;  // zlib's, 1 (fastest) to 9 (smallest)
  std::size_t min_size = 256;
  // Media types matched against the Content-Type's type/subtype, ignoring case and parameters;
  // an entry ending in '/' takes the whole type ("text/").
  std::vector<std::string> types = {"text/", "application/json", "application/javascript",
                                    "application/xml", "image/svg+xml"};
};

// One response as an access log sees it (server_options::access_log). The views are valid
// during the call only.
struct access_record {
  // The client ("127.0.0.1:5000", "[::1]:5000"; the PROXY header's client behind a proxy).
  std::string_view peer;
  // When the response ended (its last byte queued; for a file and a body over 64 KiB, its last
  // byte written; or its abort),
  // and how long it took from the end of the request's head (zero for a request answered before its
  // head was complete: a 400, 408, 413...).
  std::chrono::system_clock::time_point time;
  std::chrono::nanoseconds duration{0};
  http::method method = http::method::get;
  std::string_view target;  // as received
  int version_minor = 1;
  http::status status = http::status::ok;
  std::uint64_t body_bytes = 0;  // the body's bytes written (0 for HEAD)
  bool aborted = false;          // a streamed body, a file or a body over 64 KiB cut short
  std::string_view referer;      // the Referer field; empty when absent
  std::string_view user_agent;   // the User-Agent field; empty when absent
  unsigned worker = 0;
};

// The record as nginx's `combined` format writes it, then the request time in seconds with
// milliseconds (nginx's $request_time), as log analysers (GoAccess, AWStats) read it:
//   127.0.0.1 - - [06/Dec/2026:10:32:08 +0000] "GET /hello HTTP/1.1" 200 6 "-" "curl/7.88.1" 0.000
// The address without its port; the time in the process's local time zone; the request line,
// Referer and User-Agent with '"', '\\', control bytes and bytes past 0x7E escaped as \xHH (so
// a line is always one line of printable ASCII); "-" for an absent field; " aborted" last for a
// body cut short.
std::string combined_log_line(const access_record& record);

struct server_options {
  // A numeric IPv4 or IPv6 address ("0.0.0.0" all of IPv4) and the port (0: the kernel picks;
  // port() tells which).
  std::string host = "0.0.0.0";
  std::uint16_t port = 0;
  unsigned workers = 1;    // 0: one per core
  std::string driver{};    // as net::tcp_server_options::driver
  stack_options stacks{};  // as net::tcp_server_options::stacks (max_stacks: a memory bound)
  // Header, target, field and body limits of the request parser: 431, 414, 413 past them.
  parser_limits limits{};
  // Zero switches a timeout off.
  std::chrono::milliseconds header_timeout{10000};     // first byte..end of the head -> 408
  std::chrono::milliseconds keep_alive_timeout{5000};  // idle between requests: close quietly
  std::chrono::milliseconds body_timeout{30000};       // between body bytes -> 408
  // A response the client stops taking: once a respond() or a body write has waited this long
  // for room with the socket taking nothing, the connection closes and is logged (net
  // close_reason::send_limit); a slow reader that keeps taking bytes is served whole. nginx's
  // send_timeout (60 s) is the same rule; Go's WriteTimeout bounds the whole response instead.
  // (A file queued behind a handler that has returned is bounded by keep_alive_timeout, then
  // by the closing flush's 5 s without progress.)
  std::chrono::milliseconds send_timeout{30000};
  std::size_t max_connections = 0;                       // per worker; 0: no limit
  std::size_t send_buffer_limit = std::size_t{1} << 20;  // per connection, bytes in memory
  std::size_t max_requests_per_connection = 0;           // 0: no limit; the last says close
  net::tcp_keepalive keepalive{};    // TCP keep-alive probes (net/keepalive.hpp; off)
  std::string server_name = "weft";  // the Server field; "" omits it
  // A connection closed while its client may still be sending (a body the handler left unread
  // past what the server drains, a body refused by its head: 413, 501) lingers after its last
  // response, as nginx's lingering_close: the server reads and drops the client's bytes until
  // the client closes, sends nothing for 5 s, or this passes, and only then closes the socket.
  // Closed at once, the socket would answer those bytes with a reset, which destroys the
  // response still on its way to the client (a large one to a slow reader), or already received
  // and not yet read on some clients' stacks. Not after a timeout (408). Zero: no lingering.
  std::chrono::milliseconds linger_time{30000};
  // Between requests a connection waits in its own coroutine while its worker has at most this many
  // connections, and above it hibernates (net::connection::hibernate): it keeps no coroutine and no
  // stack while idle, and its next request runs on a stack the last requests used. A waiting
  // coroutine's stack stays in the CPU's cache while few connections share it, and then waiting
  // costs less than a new coroutine per request; with many connections the stacks fall out of the
  // cache and each request would miss on its own stack (bench/http/README.md has the measurements).
  // 0: always hibernate.
  std::size_t hibernate_above = 512;
  // An Expect field asking anything but 100-continue is answered 417 before the handler runs
  // (RFC 9110 10.1.1; Go's and Node's default). False: such a request reaches the handler with
  // its Expect field as sent, for an application that meets expectations of its own (Node's
  // checkExpectation event); the handler answers status::expectation_failed itself for those it
  // cannot meet. A 100-continue among them is met by the server either way (the 100 goes out
  // when the handler reads the body).
  bool refuse_unknown_expectations = true;
  bool handle_signals = false;                 // SIGINT/SIGTERM -> graceful stop
  std::chrono::milliseconds stop_grace{5000};  // of a stop by signal
  // Access lines (one per response) and error lines (the server's own errors, handler
  // failures, the net layer's closes for errors), on the workers' threads; null: none. An access
  // line reads `weft.http worker W PEER: "GET /path HTTP/1.1" STATUS BYTES`, BYTES the body's
  // (0 for HEAD). A streamed body's line comes when it ends, with the bytes written, followed by
  // " aborted" when the body was cut short (the handler failed, the client left, the server's
  // stop forced it). With either log, a file (send_file) and a respond() body over 64 KiB are
  // logged once the socket took them (respond() then waits for that), with the bytes written,
  // " aborted" when the client left first; smaller bodies are logged as they are batched.
  std::function<void(std::string_view)> log{};
  // An access log of one's own: called once per response (when a streamed body ends), on the
  // workers' threads, with what nginx's log formats take (combined_log_line() writes its
  // combined format). Null: none. Independent of `log`.
  std::function<void(const access_record&)> access_log{};
  // Per-worker resources (a pg::pool, a cache), as net::tcp_server_options' hooks of the same
  // names: run on the worker's thread, in its main coroutine (they may suspend), before its
  // first connection and after its last; an exception from either stops the server and serve()
  // rethrows it.
  std::function<void(unsigned worker)> on_worker_start{};
  std::function<void(unsigned worker)> on_worker_stop{};
  // gzip for responses that qualify (see compression_options); off by default.
  compression_options compression{};
  // HTTPS (weft/net/tls.hpp): a net::tls_context::server, whose ALPN list should offer
  // "http/1.1" if it has one. header_timeout bounds each connection's TLS handshake too. A
  // plaintext request to the port is answered 400 and closed (as nginx and Go answer it), unless
  // the context has a plaintext_reply of its own. Null: plain HTTP.
  std::shared_ptr<const net::tls_context> tls{};
  // Behind a proxy that sends the PROXY protocol (net::tcp_server_options::proxy_protocol says
  // what it does): ex.connection().peer_address() is the client the header names. A connection
  // without a valid header within header_timeout is closed unanswered.
  bool proxy_protocol = false;
  // The proxies trusted to send it (net::tcp_server_options::proxy_protocol_from: addresses or
  // CIDR blocks; any other peer is served as a direct client). Empty: every connection sends one.
  std::vector<std::string> proxy_protocol_from{};
};

// Thrown to a handler by read_body() and read_body_chunk() when the body cannot be read: too
// large (413), malformed (400), too slow (408) or the client went away; and by upgrade() for a
// request with a body the handler left unread (400). The server has already
// answered the error (when the handler had not responded) and will close the connection; a
// handler may catch it to clean up, and need not respond. status() is the status answered.
class body_error : public weft::error {
 public:
  body_error(const std::string& reason, http::status s) : weft::error(reason), status_(s) {}
  http::status status() const noexcept { return status_; }

 private:
  http::status status_;
};

namespace detail {
struct connection_state;
class hangup_sweeper;
}  // namespace detail

// Cancels the handler when its client hangs up, for a handler that waits on something else than
// its client (an upstream, a long poll, a slow query) and would otherwise hear of the client's
// leaving only when it responds, holding what it waits on meanwhile:
//
//   http::hangup_watch watch(ex);  // until the end of the block
//   auto rows = db.query(slow);    // cancelled_error here if the client leaves
//
// While the watch lives, it looks about every `every` (within twice it) whether the client is
// gone (net::connection::close_if_peer_gone: reset, or its direction ended, unless the server
// keeps half-closed connections; a poll(2), nothing read). Once it is, the connection is
// destroyed (close reason peer) and the coroutine that made the watch (the handler's) cancelled:
// the wait it is in throws cancelled_error, its reason naming the hang-up. A handler lets that go
// (or catches it to clean up and rethrows); the server logs the request as abandoned and ends the
// connection. Go's request context and nginx's proxy_ignore_client_abort off do the same;
// reverse_proxy watches so while it waits on an upstream. A watch dropped before the client left
// cancels nothing. The watches of a worker share one timer, so that making one costs a few
// pointer writes, no clock read or timer of its own. Made in a coroutine, normally the
// handler's (std::logic_error outside one), with a positive period (std::invalid_argument);
// neither copyable nor movable.
class hangup_watch {
 public:
  explicit hangup_watch(exchange& ex, std::chrono::milliseconds every = std::chrono::seconds(1));
  ~hangup_watch();
  hangup_watch(const hangup_watch&) = delete;
  hangup_watch& operator=(const hangup_watch&) = delete;
  // Whether the client was found gone (the connection destroyed, the coroutine cancelled): the
  // connection's own flag, which the server reads too, so no copy of it is kept here.
  bool fired() const noexcept;

 private:
  friend class detail::hangup_sweeper;

  detail::connection_state& state_;
  weft::detail::coroutine* handler_;  // the coroutine that made the watch, cancelled when it fires
  std::chrono::steady_clock::duration every_;
  std::chrono::steady_clock::time_point due_{};  // the next look, from the worker's sweeps
  hangup_watch* prev_ = nullptr;                 // in the worker's list while linked
  hangup_watch* next_ = nullptr;
  bool linked_ = false;
};

// One request and its response. See the file comment for its lifetime.
class exchange {
 public:
  // A streamed response body (start_response). Move-only; write() and finish() may suspend
  // (backpressure). A writer the handler drops unfinished is finished by the server when the
  // handler returns (the last chunk; for Content-Length only when every byte was written, else
  // the connection is aborted and the error logged).
  class body_writer {
   public:
    body_writer(body_writer&& other) noexcept : owner_(other.owner_) { other.owner_ = nullptr; }
    body_writer& operator=(body_writer&&) = delete;
    ~body_writer() = default;
    // Sends the next piece of the body now. More bytes than a Content-Length given is
    // std::length_error; after finish() std::logic_error.
    void write(std::string_view data);
    // Ends the body: the last chunk with these trailers (chunked only: trailers on a
    // Content-Length or close-delimited body are std::invalid_argument), or, for a
    // Content-Length body, checks that every byte was written (std::length_error otherwise).
    void finish(const headers& trailers = {});
    bool finished() const noexcept;

   private:
    friend class exchange;
    friend struct detail::connection_state;
    explicit body_writer(exchange& owner) noexcept : owner_(&owner) {}
    exchange* owner_;
  };

  exchange(const exchange&) = delete;
  exchange& operator=(const exchange&) = delete;

  // The request: method, target, version, headers; body filled by read_body().
  http::request& request() noexcept;
  // A path parameter the router matched (":id", "*rest"), percent-decoded; "" if none.
  std::string_view param(std::string_view name) const;
  // The whole body (after 100 Continue when the client expects it), within limits.max_body_size;
  // body_error when it cannot be read. Again after the body is read: the same string.
  const std::string& read_body();
  // The next piece of the body (valid until the next call), or nullopt at its end; body_error
  // as read_body. Pieces read this way are not kept in request().body.
  std::optional<std::string_view> read_body_chunk();

  // The whole response. Content-Length is added from the body; Date and Server when absent;
  // Connection as the server decides. A second response is std::logic_error; a response that
  // cannot be framed honestly is std::invalid_argument (message.hpp's serialize()).
  void respond(http::response r);
  void respond(http::status s, std::string_view body,
               std::string_view content_type = "text/plain; charset=utf-8");
  // The same with fields built beforehand (headers checks names and values as they are added,
  // so nothing is checked again here): the status line, Server (unless `fields` has one), Date
  // (likewise), `fields` in their order, Content-Length of the body, Connection as the server
  // decides, then the body, written from the view without a response object (static_files'
  // cached files are answered this way). Content-Length, Transfer-Encoding or Connection in
  // `fields` is std::invalid_argument: the server frames the message.
  void respond(http::status s, const http::headers& fields, std::string_view body);
  // The head now, the body streamed by the writer: chunked (HTTP/1.1) or close-delimited
  // (HTTP/1.0) unless head.headers has Content-Length. head.body is ignored.
  body_writer start_response(http::response head);
  // The head with Content-Length: length, then that range of the file (net::connection::
  // send_file: fd is duplicated, the caller may close its own at once; a range past the end of
  // the file is std::invalid_argument; a file that shrinks meanwhile aborts the connection).
  // Returns once the socket took the whole range (net::connection::wait_sent), so that the
  // access line has the bytes delivered and the transfer's duration, or once the connection
  // ended first (the line then counts what was written, marked aborted). A peer that takes
  // nothing for the send timeout is cut off: timeout_error.
  void send_file(http::response head, int fd, std::uint64_t offset, std::uint64_t length);
  // The same for a file the exchange takes over (static_files' replies): no dup(2) and no
  // fstat(2), the file is closed once sent (at once for HEAD); the range is trusted (a file
  // shorter than it aborts the connection). std::invalid_argument for an empty handle.
  void send_file(http::response head, file_handle file, std::uint64_t offset, std::uint64_t length);
  // Whether a response (or its head) was made.
  bool responded() const noexcept;

  net::connection& connection() noexcept;
  // Hands the connection to another protocol (RFC 9110 7.8 Upgrade; WebSocket is the one in
  // use): the responses made so far are written, then p's framer starts with this request's
  // head (the WebSocket framer checks it and answers 101, or an HTTP error and ends) followed by
  // whatever the client sent after it. Returns the connection, to receive() and send() on in
  // p's messages; the HTTP exchange is over, and when the handler returns the connection closes
  // (gracefully: what was sent is flushed). std::logic_error after a response was made, or for
  // a request with a body; std::invalid_argument for a null protocol.
  //
  //   routes.get("/ws", [ws = std::make_shared<net::websocket>()](http::exchange& ex) {
  //     net::connection& c = ex.upgrade(ws);
  //     while (auto m = c.receive()) c.send(m->data, m->kind);
  //   });
  net::connection& upgrade(std::shared_ptr<const net::protocol> p);
  // Switches the connection to a protocol the handler speaks itself, as raw bytes (RFC 9110 7.8;
  // a reverse proxy's tunnel, h2c, a protocol of one's own): the responses made so far are
  // written, then head as the 101 Switching Protocols: its reason (empty: the standard one) and
  // fields in their order, "Connection: Upgrade" added unless a Connection field lists upgrade.
  // head.status and head.body are ignored. Returns the connection, without a protocol: input()
  // and receive() start with what the client sent after the request's head; send() and
  // send_raw() write as they are. The HTTP exchange is over (the 101 is counted and logged), and
  // when the handler returns the connection closes gracefully. std::invalid_argument when head
  // has no Upgrade field, names a protocol the request's Upgrade did not offer, or has
  // Content-Length or Transfer-Encoding; std::logic_error after a response was made, for a
  // request without an Upgrade field, or with a body not read to its end.
  net::connection& switch_protocols(const http::response& head);
  // The index of the worker serving the connection (0..workers-1).
  unsigned worker() const noexcept;

 private:
  friend struct detail::connection_state;
  friend class hangup_watch;
  friend class router;
  friend class static_files;
  explicit exchange(detail::connection_state& state) noexcept : state_(state) {}
  // respond(s, fields, body) for fields the caller serialised and checked once ("Name: value"
  // lines ending in CRLF, none of Content-Length, Transfer-Encoding, Connection, Server or
  // Date): static_files' cached files, whose fields are the same for every hit.
  void respond_prepared(http::status s, std::string_view wire_fields, std::string_view body);
  // The server's compression settings when they are on; null when off.
  const compression_options* compression() const noexcept;
  detail::connection_state& state_;
};

// Per worker and in total.
struct worker_stats {
  std::uint64_t requests = 0;                // request heads parsed (errors answered included)
  std::array<std::uint64_t, 5> responses{};  // by status class: [0] 1xx (100 Continue) .. [4] 5xx
  net::worker_stats net;                     // connections open/accepted, close reasons, bytes
  std::uint64_t responses_of_class(unsigned hundreds) const noexcept {
    return hundreds >= 1 && hundreds <= 5 ? responses[hundreds - 1] : 0;
  }
};

struct server_stats {
  std::vector<worker_stats> workers;
  worker_stats total;
};

namespace detail {
struct server_state;
}

class server {
 public:
  server(server_options options, handler h);
  server(server_options options, router r);
  ~server();
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  // Binds and listens now (serve() does it if not done); io_error naming the address.
  void listen();
  // The bound port (0 before listen()).
  std::uint16_t port() const noexcept;
  // Serves until stopped; blocks like net::tcp_server::serve. A server serves once.
  void serve();
  // Graceful stop (see the file comment); a second call forces. Any thread.
  void stop(std::chrono::milliseconds grace = std::chrono::milliseconds(5000)) noexcept;
  // A new certificate (a net::tls_context::server) for the connections accepted from now on,
  // as net::tcp_server::set_tls (which says what it refuses); a plaintext request gets the same
  // 400 as with options().tls. Any thread.
  void set_tls(std::shared_ptr<const net::tls_context> context);
  server_stats stats() const;
  const server_options& options() const noexcept;

 private:
  std::unique_ptr<detail::server_state> state_;
};

}  // namespace weft::http

// weft::http::client: an HTTP/1.1 client for coroutines, with keep-alive connection pools.
//
//   weft::http::client web({.max_connections_per_host = 4});
//   weft::http::response r = web.get("http://127.0.0.1:8080/status");
//   if (r.status == weft::http::status::ok) { use(r.body); }
//   web.close();
//
// Contract:
//   - Blocking: every request call suspends only the calling coroutine (connecting, sending,
//     waiting for the response); other coroutines run meanwhile and may use the same client
//     at the same time. Nothing is done in the constructor; close() never suspends.
//   - Threads: a client belongs to the scheduler of the coroutine that makes its first request
//     (its connection pools are made there); call it only from coroutines of that scheduler's
//     thread, and close() it (or destroy it) before run() returns, so that no socket outlives
//     the run. A call from outside a coroutine is a std::logic_error (from the layers below).
//   - URLs: "http://host[:port][/path][?query]" and "https://..."; the host is a name
//     (resolved through weft::dns on every new connection), a numeric IPv4 address, or an IPv6
//     literal in brackets ("http://[::1]:8080/"). A fragment ("#...") is not sent. Anything else
//     is an http::error naming the URL: other schemes, user credentials in the URL, a missing
//     host, a bad port, spaces or control characters.
//   - https: TLS 1.2 or 1.3 through net's TLS (weft/net/tls.hpp) with client_options::tls, or
//     a context trusting the system's authorities; the server's chain and name are verified
//     (SNI carries the name). The handshake is part of connecting (connect_timeout); a failed
//     one is net::tls_error naming host:port and why ("certificate verify failed: unable to get
//     local issuer certificate"). A Secure cookie goes over https only.
//   - Connections: one weft::pool per origin (scheme, host and port), at most
//     max_connections_per_host connections each; a request waits (FIFO, within its
//     request_timeout) when all are busy.
//     A connection goes back to its pool after a complete response that lets it stay open
//     (HTTP/1.1 without "Connection: close", or HTTP/1.0 with "Connection: keep-alive", and a
//     body that did not end with the connection); otherwise it is closed. A pooled connection
//     unused for idle_timeout is closed (checked when it is next taken and by the pool's
//     periodic healthcheck). Before a pooled connection is reused, one non-blocking peek
//     checks that the server has not closed it or sent something unasked (a 408, a stray
//     response, a body after a HEAD answer), which would be taken for the next request's
//     answer; such a connection is closed and another used.
//   - Stale connections: the server may close a kept-alive connection just as a request goes
//     out on it. When a reused connection fails on the write (EPIPE, ECONNRESET) or ends
//     (EOF, ECONNRESET) before the first byte of a response, the request is sent again ONCE on
//     a fresh connection if its method is idempotent (GET, HEAD, PUT, DELETE, OPTIONS, TRACE;
//     RFC 9110 9.2.2); for any other method the io_error surfaces, saying it was not retried.
//   - Responses: 1xx responses before the final one are skipped (101 Switching Protocols is an
//     http::error, except for upgrade(), which asked for it); chunked, Content-Length and
//     close-delimited bodies; no body for HEAD, 204 and 304. Trailer fields of a chunked
//     response are in response::trailers. Limits (parser_limits) bound the header section and
//     the body; going past one is an http::error of kind response_too_large.
//   - Request bodies: framed by Content-Length (added by serialisation when absent), or chunked
//     when the request's fields say "Transfer-Encoding: chunked". Host (from the URL) and
//     User-Agent (client_options::user_agent, unless empty) are added when absent, and
//     "Accept-Encoding: gzip" unless client_options::decompress is off (a gzip answer to it is
//     then decoded as it arrives).
//   - Streamed request bodies (the overloads taking a body_source, for an upload too large to
//     hold, or a body being received elsewhere, as a proxy's): the head goes out first, then
//     each piece as the source gives it, each written before the next is asked for, so memory
//     stays within one piece. request.body must be empty (std::invalid_argument otherwise).
//     Framed by the request's Content-Length when it has one, and the source must then give
//     exactly that many bytes (std::length_error when it gives more or ends short; the
//     connection is discarded, the server never sees a message it could take as whole);
//     chunked otherwise ("Transfer-Encoding: chunked" is added, and the request's trailers
//     follow the last chunk; an HTTP/1.0 request needs a Content-Length). A body taken from
//     the source cannot be sent again: a reused connection is checked with a peek first, as
//     every one is, and the stale-connection retry happens only when the head's write failed; a
//     redirect that keeps the body (307 and 308, and 301 and 302 of anything but a POST) is
//     returned as it is, as Go's client does for a body it cannot get again, while one that
//     drops it (303, and 301 and 302 of a POST) is followed. An exception from the source
//     ends the call (the connection is discarded) and propagates. The response is read once
//     the whole body has gone, or once the server stopped taking it: a server that answered
//     early (a 413, a 401) and closed the connection gives that response (the connection is
//     not reused), and the write's io_error is the error only when no response head came.
//   - A server that answers while the body (streamed or buffered) is still being written (RFC
//     9112 9.5: the client monitors the connection as it sends): the connection is looked at
//     after every 64 KiB written (a peek, plaintext only: on TLS a record that is no answer
//     makes the socket readable too), and when something came the writing pauses for the
//     answer's head. An answer that is not a success (a 413, a 401, a redirect), or that closes
//     the connection, does not want the rest, which is never sent (nor taken from a
//     body_source), and the connection is not reused; a 1xx, or a success on a connection the
//     server keeps (a server that answers as it reads), gets the rest of the body at once. A
//     server that lingers after an early answer (nginx's lingering_close, weft's linger_time)
//     would otherwise have been sent the whole body for nothing.
//   - Expect: 100-continue (RFC 9110 10.1.1), set by the caller on a request with a body
//     (buffered or streamed): the head goes alone, and the body waits for the server's
//     100 Continue, or for expect_continue_timeout, whichever comes first. A final answer that
//     comes first (a 413, a 401, a redirect) is the response and the body is never sent, nor
//     taken from a body_source (the connection is then closed: the server may still be
//     waiting for it). Such a redirect is followed as any other, a streamed body included,
//     since it was not taken. A 417 Expectation Failed to it sends the request again at once
//     without the Expect field, as the RFC asks. Other 1xx responses before it are skipped.
//   - Redirects: off by default (the 3xx response is returned as is). With max_redirects > 0,
//     301, 302, 303, 307 and 308 with a Location are followed: 303 turns any method but HEAD
//     into GET without a body, 301 and 302 turn POST into GET (RFC 9110 15.4.2-15.4.4 allow
//     it, and every browser does it), 307 and 308 keep the method and the body. A redirect to
//     another origin (an https URL sent to http is one) drops Authorization,
//     Proxy-Authorization and Cookie. A redirect to a scheme other than http and https, a loop
//     (a URL already requested with the same method) and more
//     than max_redirects hops are http::errors. Each hop counts as a request in stats().
//   - Errors: request_timeout bounds the whole call (connecting, waiting for a pooled
//     connection, sending, every redirect hop and retry); connect_timeout bounds each connect
//     within it, and io_timeout (when set) each other wait. Either gives weft::timeout_error naming
//     the method, the URL and the phase (connect, send, response head, body); one that passed while
//     connecting is its subclass http::connect_timeout_error (nothing was sent: another server may
//     be tried). A refused or failed connect is weft::io_error naming host:port; a failed send or
//     read is weft::io_error naming the URL. A malformed response is http::error with the parser's
//     reason. Cancellation of the calling coroutine (cancelled_error at any suspension) destroys
//     the connection it was using, never returns it to the pool, so the pool stays sound; so does
//     any other exception, one thrown by a streaming callback included.
//   - Ownership: the client owns its pools and their connections; a response is a plain value
//     the caller owns. The client must outlive its calls (they refer to it while they run).
//   - Upgrades (RFC 9110 7.8): upgrade() sends a request with an Upgrade field and, when the
//     server answers 101 Switching Protocols, hands the connection over as an
//     upgraded_connection: the bytes of the protocol switched to, both ways, on the same socket
//     (and TLS session). The connection leaves its pool for good (stats().upgrades counts it; it
//     is not in connections_closed). Any other final response is returned whole, as request()
//     returns it, and the connection goes back to its pool as usual. The 101 must name in its
//     Upgrade field a protocol the request offered (malformed_response otherwise). Go's
//     http.Client hands a 101's body over as a read-write stream the same way.
//   - Forward proxies (client_options::proxy, forward_proxy_options below; off unless set):
//     http URLs go to the http proxy in absolute form, https URLs through a CONNECT tunnel
//     of the https proxy, and upgrade()s of http URLs through a tunnel of the http proxy
//     (RFC 6455 4.1); hosts in no_proxy go direct. Pools, reuse, timeouts and errors are
//     as for direct connections (connect_timeout bounds the CONNECT's answer too).
//   - After close(), every request call is a std::logic_error; close() is idempotent.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "weft/error.hpp"
#include "weft/http/cookies.hpp"
#include "weft/http/message.hpp"
#include "weft/http/parser.hpp"
#include "weft/net/keepalive.hpp"
#include "weft/net/tls.hpp"
#include "weft/sched/timeout.hpp"

namespace weft::http {

// A request body made piece by piece (see "Streamed request bodies" in the file comment): each
// call returns the next piece, a view that must stay valid until the next call, or nullopt (or
// an empty piece: what a read at the end of a file gives) at the end of the body. It runs on
// the calling coroutine and may suspend (reading a file, or a request body still arriving).
using body_source = std::function<std::optional<std::string_view>()>;

// Forward proxies, as curl's and Go's http_proxy, https_proxy and no_proxy: an http URL goes
// to the `http` proxy, which is sent the request with its target in absolute form ("GET
// http://host/path HTTP/1.1"; RFC 9112 3.2.2); an https URL goes through a tunnel the `https`
// proxy opens with CONNECT host:port (RFC 9110 9.3.6), and TLS with the origin runs inside it
// (the proxy sees neither the request nor the certificate checks).
// - A proxy is "http://[user[:password]@]host[:port][/]" (the proxy itself is reached in the
//   clear; port 80 unless given; user and password percent-decoded), a SOCKS5 proxy (RFC 1928)
//   as "socks5://..." or "socks5h://..." (port 1080 unless given), or empty: such URLs go
//   direct.
// - With a user, every request to an http proxy carries "Proxy-Authorization: Basic ...", on
//   the request itself for http and on the CONNECT alone for https (the origin never sees it).
//   A CONNECT the proxy answers with anything but 2xx is an http::error of kind proxy_refused
//   naming its status (a 407 when it wants credentials); an http proxy's own answers (a 502
//   when it cannot reach the origin, a 407) are the call's response, as they are for curl and
//   Go.
// - Through a SOCKS5 proxy every request, http or https, goes through a tunnel the proxy opens
//   to the origin and is sent as to the origin itself. socks5:// resolves the origin's name
//   here and asks for its address; socks5h:// hands the name to the proxy (hosts only its
//   network knows), as curl's schemes mean. A user and password are sent by RFC 1929 when the
//   proxy asks for them. Its refusals (of the methods offered, of the login, its reply to
//   CONNECT: "connection refused", "host unreachable"...) are http::error proxy_refused naming
//   the reason.
// - An upgrade() of an http URL through an http proxy does not go in absolute form: a proxy
//   relays an Upgrade field it does not know as hop-by-hop, or not at all. So, as RFC 6455 4.1
//   asks of WebSocket clients, the proxy is asked to CONNECT to the origin, and the request goes
//   through that tunnel in origin form, without the proxy's credentials.
// - Pools: the http proxy's requests in absolute form share one pool whatever their origin
//   (one set of kept-alive connections to the proxy, at most max_connections_per_host of them,
//   as Go and curl reuse a proxy connection across hosts); tunnels have pools of their own, one
//   per origin through the proxy; all apart from direct ones.
struct forward_proxy_options {
  std::string http;   // the proxy of http:// URLs; empty: direct
  std::string https;  // the proxy of https:// URLs (tunnels); empty: direct
  // Hosts that go direct, comma or space separated: "*" (all), a name, which also covers its
  // subdomains ("example.com", ".example.com" and "*.example.com" all match example.com and
  // a.example.com), an IPv4 or IPv6 address ("[::1]" or "::1"), or a CIDR block
  // ("10.0.0.0/8", "fd00::/8"); a name or address may end with ":port" to match that port
  // only. Compared without case, with the URL's host as written (no name is resolved).
  std::string no_proxy;

  // From the environment, as curl and Go read it: http_proxy or HTTP_PROXY (HTTP_PROXY is
  // ignored when REQUEST_METHOD is set: a CGI program's HTTP_PROXY is a request header,
  // "httpoxy"), https_proxy or HTTPS_PROXY, each falling back to all_proxy or ALL_PROXY as
  // curl's do (ALL_PROXY=socks5h://localhost:1080, an ssh -D tunnel), and no_proxy or
  // NO_PROXY, the lower-case name first. A value without a scheme ("proxy:3128") is taken as
  // http://. As Go's
  // ProxyFromEnvironment, requests to localhost and loopback addresses always go direct:
  // "localhost,127.0.0.0/8,::1" is added to no_proxy.
  static forward_proxy_options from_environment();
  // Whether a request to host:port goes direct by no_proxy (std::invalid_argument naming an
  // entry that is malformed: a bad CIDR prefix, a bad port).
  bool bypasses(std::string_view host, std::uint16_t port) const;
};

// The settings of a client (see the file comment for what each bounds).
struct client_options {
  // The size of each origin's pool: connections open at once to one host:port.
  std::size_t max_connections_per_host = 8;
  // Each TCP connect (name resolution included), within request_timeout.
  std::chrono::milliseconds connect_timeout{5000};
  // The whole call: queueing for a connection, connecting, sending, the response, redirects.
  std::chrono::milliseconds request_timeout{30000};
  // Each wait within a call: for a pooled connection, for the socket to take more of the
  // request (a wait through which the server kept acknowledging bytes, a slow reader behind a
  // large kernel buffer, is not a stall), for each next read of the response (its head, every
  // piece of its body), within request_timeout (nginx's proxy_read_timeout and
  // proxy_send_timeout). With a request_timeout
  // of milliseconds::max() (none), a response that keeps streaming lasts as long as no wait for
  // its next bytes takes this long. Zero: none (request_timeout alone).
  std::chrono::milliseconds io_timeout{0};
  // A pooled connection unused this long is closed. Zero: kept until the server closes it or
  // the client closes.
  std::chrono::milliseconds idle_timeout{30000};
  // TCP keep-alive probes on each connection (net/keepalive.hpp's tcp_keepalive: off, its
  // limits std::invalid_argument naming the field). They find a server that vanished without a
  // FIN or a reset while a long response streams quietly or a pooled connection waits, and keep
  // a NAT from forgetting the flow; Go's DefaultTransport probes after 30 s.
  net::tcp_keepalive keepalive{};
  // How long a request with a body and "Expect: 100-continue" waits, once its head is sent,
  // for the server's 100 Continue (or its final answer, when the body is then never sent)
  // before it sends the body anyway (a server may ignore the expectation: RFC 9110 10.1.1).
  // Zero: the body follows the head at once. curl and Go's DefaultTransport wait 1 s.
  std::chrono::milliseconds expect_continue_timeout{1000};
  // Redirect hops followed per call; 0 returns 3xx responses as they are.
  int max_redirects = 0;
  // Bounds on each response (header section, fields, body).
  parser_limits limits{};
  // Sent as User-Agent when the request has none; empty sends none.
  std::string user_agent = "weft";
  // As Go's Transport: a request without an Accept-Encoding of its own asks for gzip, and a
  // gzip response to it is decoded as it arrives: the body (or on_body's pieces) is the
  // decoded bytes, and Content-Encoding and Content-Length are taken out of the response's
  // fields (they describe the bytes on the wire). limits.max_body_size bounds the decoded
  // body too (past it: response_too_large), and data that does not decode is
  // malformed_response. A request that sets Accept-Encoding itself gets the body as sent.
  bool decompress = true;
  // A cookie store (cookies.hpp), shared by whoever holds it: every response's Set-Cookie
  // fields go into it (a redirect's included), and a request without a Cookie field of its own
  // carries the jar's cookies for its URL, on every hop. Null: no cookies kept or sent.
  std::shared_ptr<cookie_jar> cookies{};
  // The TLS context of https URLs (net::tls_context::client: the authorities trusted, the
  // name checks, the versions). Null: one made on the first https request that trusts the
  // system's authorities (/etc/ssl/certs) and verifies every server's name, as curl and Go do.
  std::shared_ptr<const net::tls_context> tls{};
  // Forward proxies (forward_proxy_options above; forward_proxy_options::from_environment()
  // for the environment's). Checked by the constructor: a URL that is not http://host[:port] is
  // std::invalid_argument naming the field.
  forward_proxy_options proxy{};
};

// What kind of failure an http::error reports.
enum class error_kind : std::uint8_t {
  invalid_url,          // not an http URL this client can use
  unsupported_scheme,   // ftp, ws, ...: this client speaks http and https only
  malformed_response,   // the response broke HTTP/1.1 (the parser's reason says how)
  response_too_large,   // the response went past client_options::limits
  unexpected_response,  // a well-formed response this client cannot use (101, a 3xx with no
                        // usable Location while following redirects)
  too_many_redirects,   // more than max_redirects hops
  redirect_loop,        // a redirect back to a URL already requested with the same method
  proxy_refused,        // a proxy refused the tunnel: CONNECT not 2xx, or SOCKS5 refused
};
// "invalid URL", "malformed response", ... (static strings).
const char* to_string(error_kind kind) noexcept;

// A failure of an HTTP exchange itself (not of the network, which is io_error, nor of time,
// which is timeout_error). what() names the method, the URL and the reason.
class error : public weft::error {
 public:
  // what() becomes "http URL: KIND: message".
  error(error_kind kind, std::string url, const std::string& message);
  // What went wrong, for code that reacts to it (a retry on a malformed response, ...).
  error_kind kind() const noexcept { return kind_; }
  // The URL of the request that failed (for a redirect: the hop that failed).
  const std::string& url() const noexcept { return url_; }

 private:
  error_kind kind_;
  std::string url_;
};

// The request_timeout or connect_timeout of a call passed while it was connecting: no byte of
// the request was sent (a reverse proxy may try another upstream).
class connect_timeout_error : public weft::timeout_error {
 public:
  using weft::timeout_error::timeout_error;
};

// Counters of a client since it was made (pool figures: now, summed over every origin).
struct client_stats {
  std::uint64_t requests = 0;            // requests sent (each retry and redirect hop counts)
  std::uint64_t responses = 0;           // complete final responses received
  std::uint64_t connections_opened = 0;  // TCP connections established
  std::uint64_t connections_reused = 0;  // requests sent on a kept-alive pooled connection
  std::uint64_t connections_closed = 0;  // connections closed (by either side, or discarded)
  std::uint64_t retries = 0;             // requests sent again after a stale connection
  std::uint64_t redirects = 0;           // redirect hops followed
  std::uint64_t upgrades = 0;            // connections handed over by a 101 (upgrade())
  std::size_t origins = 0;               // pools made: per host:port, per proxy, per tunnel
  std::size_t idle_connections = 0;      // pooled, open and unused now
  std::size_t active_connections = 0;    // in an exchange now
  std::size_t waiting_requests = 0;      // waiting for a connection of a full pool now
};

namespace detail {
struct client_origin;
struct client_call;
class client_connection;
struct client_proxy;
struct client_proxies;
struct client_url;
}  // namespace detail

// A connection that 101 Switching Protocols handed over (client::upgrade()): the raw bytes of the
// protocol switched to, both ways, on the socket (and TLS session) the request went out on. For
// coroutines of the client's scheduler thread. One coroutine may read while another writes (a
// proxy's two directions); two reads, or two writes, at once are not allowed. Closed by close()
// or by the destructor (on that thread, before run() returns); it does not need the client.
class upgraded_connection {
 public:
  ~upgraded_connection();
  upgraded_connection(const upgraded_connection&) = delete;
  upgraded_connection& operator=(const upgraded_connection&) = delete;

  // The next bytes from the server, first those that came right behind the 101's head: a view
  // valid until the next read() or close(). nullopt once the server ended its direction (FIN, or
  // TLS close_notify) and on a closed connection. io_error naming the URL when the read fails;
  // timeout_error past limit and cancelled_error from its token leave the connection usable.
  std::optional<std::string_view> read(const timeout& limit = timeout::never());
  // Sends every byte, waiting for the socket as it drains. io_error naming the URL (EPIPE,
  // ECONNRESET) when it fails, EBADF on a closed connection, EPIPE after shutdown_write();
  // timeout_error past limit (some of the bytes may have gone).
  void write(std::string_view bytes, const timeout& limit = timeout::never());
  // Ends this side's direction (TLS: close_notify first), as shutdown(2) SHUT_WR; read() goes on
  // until the server ends its own. Once; nothing on a closed connection. io_error as write().
  void shutdown_write(const timeout& limit = timeout::never());
  // Closes the socket at once (TLS: close_notify if the socket takes it now). Idempotent. A
  // coroutine reading or writing meanwhile must have been stopped first (cancel it): its wait
  // would otherwise last until its own limit.
  void close() noexcept;
  // Whether the socket is open (not closed by close(); the peer's end closes nothing here).
  bool is_open() const noexcept;
  // The URL of the request that was upgraded (what errors name).
  const std::string& url() const noexcept { return url_; }

 private:
  friend struct detail::client_call;
  upgraded_connection(detail::client_connection&& connection, std::string url);

  std::unique_ptr<detail::client_connection> connection_;
  std::string url_;
  std::size_t handed_ = 0;  // bytes of the last read() still in the input buffer
  bool write_shut_ = false;
};

// What client::upgrade() returns: the 101 and its connection, or the response that came instead.
struct upgrade_result {
  // The 101's head (status, reason, fields; no body), or the whole final response when the
  // server did not switch (a 426, a 200 that ignored the Upgrade field, ...).
  http::response response;
  // Set for a 101 only.
  std::unique_ptr<upgraded_connection> connection;
  // Whether the server switched (a 101 came).
  bool switched() const noexcept { return connection != nullptr; }
};

// The client: its pools, connections and counters (see the file comment for the contract).
class client {
 public:
  // Validates the options (std::invalid_argument naming the bad one); connects nothing.
  explicit client(client_options options = {});
  client(const client&) = delete;
  client& operator=(const client&) = delete;
  // Closes (see close()).
  ~client();

  // GET url with extra header fields.
  response get(std::string_view url, const headers& fields = {});
  // HEAD url: the response has the headers a GET would have, and no body.
  response head(std::string_view url, const headers& fields = {});
  // POST body (framed by Content-Length) with that Content-Type (none when empty).
  response post(std::string_view url, std::string body, std::string_view content_type = {},
                const headers& fields = {});
  // Any method: url gives the host, the port and the target (request.target is replaced by
  // the URL's path and query); the rest of the request is sent as it is.
  response request(http::request request, std::string_view url);
  // The same with the body streamed from `body` (request.body empty; see the file comment).
  response request(http::request request, std::string_view url, const body_source& body);
  // The same, streaming: on_head receives the final response's status and header fields (its
  // body empty) once they arrive, then on_body each piece of the body as it is received (views
  // valid during the call only). Nothing is buffered beyond one read; limits.max_body_size
  // still bounds the body. Skipped 1xx responses and followed redirects reach neither callback.
  // An exception from a callback ends the call (the connection is closed) and propagates.
  void request_streaming(http::request request, std::string_view url,
                         const std::function<void(const response& head)>& on_head,
                         const std::function<void(std::string_view piece)>& on_body);
  // The same with the request's body streamed from `body` (see the file comment): both
  // directions stream, and the call holds no more than a piece of either.
  void request_streaming(http::request request, std::string_view url, const body_source& body,
                         const std::function<void(const response& head)>& on_head,
                         const std::function<void(std::string_view piece)>& on_body);

  // Sends request with its Upgrade field (std::invalid_argument without one: a request without it
  // asks for no switch) to url, with "Connection: Upgrade" added unless its Connection field
  // already lists upgrade, and returns the 101 with its connection, or the final response that
  // came instead (see the file comment). Errors, limits, retries and redirects as request().
  upgrade_result upgrade(http::request request, std::string_view url);
  // The same, with the answer streamed as request_streaming() does: on_head receives the 101's
  // head or the final response's; for a 101 on_body is never called and the connection is
  // returned, otherwise the body goes to on_body and the result is null.
  std::unique_ptr<upgraded_connection> upgrade_streaming(
      http::request request, std::string_view url,
      const std::function<void(const response& head)>& on_head,
      const std::function<void(std::string_view piece)>& on_body);

  // The counters and the pools' current figures (see client_stats).
  client_stats stats() const;
  // The options the client was made with.
  const client_options& options() const noexcept { return options_; }

  // Closes every pool: idle connections at once, those in an exchange when it ends (their
  // calls finish normally); calls waiting for a connection of a full pool get
  // weft::pool_closed_error. Idempotent; never suspends. Further requests are a
  // std::logic_error.
  void close() noexcept;
  // Whether close() was called.
  bool closed() const noexcept { return closed_; }

 private:
  friend struct detail::client_call;
  // request() with its body in the request or from a source.
  response buffered_call(http::request request, std::string_view url, const body_source* body);
  // request_streaming and upgrade_streaming (upgrade_into set).
  void stream_call(http::request request, std::string_view url,
                   const std::function<void(const response& head)>& on_head,
                   const std::function<void(std::string_view piece)>& on_body,
                   std::unique_ptr<upgraded_connection>* upgrade_into,
                   const body_source* body = nullptr);
  // The pool url's request goes through: its origin's when direct; via an http proxy, the
  // proxy's own (absolute form: every origin shares it), or with tunnel a pool of CONNECT
  // tunnels to the origin through it (https, upgrade()).
  detail::client_origin& origin_for(const detail::client_url& url, const detail::client_proxy* via,
                                    bool tunnel);

  client_options options_;
  // Ordered by key ("host:port", "https://host:port", "proxy host:port" and, for tunnels,
  // "proxy host:port tunnel https://host:port"); a pool lives as long as the client.
  std::map<std::string, std::unique_ptr<detail::client_origin>> origins_;
  client_stats counters_;
  // options_.tls, or the default context once an https URL needed one.
  std::shared_ptr<const net::tls_context> tls_;
  // options_.proxy, parsed by the constructor; null when both proxies are empty.
  std::shared_ptr<const detail::client_proxies> proxies_;
  bool closed_ = false;
};

}  // namespace weft::http

// weft::http::reverse_proxy: a handler that forwards requests to an upstream HTTP server and
// streams its responses back, as nginx's proxy_pass and Go's httputil.ReverseProxy do.
//
//   weft::http::reverse_proxy api("http://127.0.0.1:9000/v1", {.strip_prefix = "/api"});
//   weft::http::server_options options;
//   api.attach(options);                       // one upstream client per worker
//   weft::http::router routes;
//   routes.any("/api/*rest", api.handler());   // GET /api/users?id=7 -> GET /v1/users?id=7
//   weft::http::server server(options, std::move(routes));
//
// Contract:
//   - Several upstreams (nginx's upstream block with its round robin or least_conn, weights
//     and passive health checks): reverse_proxy({"http://10.0.0.1:9000", "http://10.0.0.2:9000"}).
//     Each worker takes them in turn (smooth weighted round robin: weights 5, 1, 1 give
//     a a b a c a a), or with balance least_connections the one with the fewest of its
//     requests and tunnels in flight for its weight (ties in weighted turn), skipping one that
//     is down. Workers start their turns at different upstreams. A try fails when its connect
//     fails (refused, unreachable, timed out: http::connect_timeout_error), or when, connected,
//     sending the request or waiting for the response head fails or passes `timeout`. An
//     upstream is down for fail_timeout once max_fails of its tries failed within
//     fail_timeout; a response from it clears its count. When every one is down they are
//     tried in turn all the same. A failed try goes on to the next upstream (nginx's
//     proxy_next_upstream error timeout) when its connect failed (nothing was sent, so any
//     method), or when the request may be repeated (http::is_idempotent: GET, HEAD, PUT,
//     DELETE, OPTIONS, TRACE) and no response head came; each upstream is tried once at most
//     (the read body is copied for each try but the last, the fields built again), and the
//     last failure is answered as below. The state is each worker's own, as nginx's without a
//     shared zone: nothing is locked on a request's path.
//   - Workers: each worker has its own http::client (its keep-alive connections to each upstream,
//     at most max_connections, reused across requests), made by the on_worker_start hook that
//     attach() installs and closed by its on_worker_stop (after the worker's last connection).
//     attach() keeps the hooks the options already had and runs them first. A request on a
//     worker without a client (attach() was not called, or not on the options the server was
//     made with) is a std::logic_error: the server answers 500 and logs it.
//   - The target: the request's path as received (still percent-encoded), less strip_prefix
//     when it starts with it at a segment boundary ("/api" takes "/api" and "/api/x", not
//     "/apis"), appended to the upstream URL's path, and the query kept: upstream
//     "http://b:9000/v1", strip_prefix "/api", "/api/users?id=7" -> "/v1/users?id=7". A target
//     that is not a path (CONNECT's authority, OPTIONS "*"), or a path with a "." or ".."
//     segment ("/api/../admin" would leave /v1 upstream; the router refuses it first), is
//     answered 400 here.
//   - Request fields go upstream as they came, except the hop-by-hop ones (RFC 9110 7.6.1:
//     Connection and every field it names, Keep-Alive, Proxy-Connection, Proxy-Authenticate,
//     Proxy-Authorization, TE, Trailer, Transfer-Encoding, Upgrade) and Expect. Host is the
//     upstream's unless preserve_host. With forwarded_headers (the default), X-Forwarded-For
//     gets the client's address appended (after any proxies before this one),
//     X-Forwarded-Proto says http or https (whether the client's connection is TLS) and
//     X-Forwarded-Host carries the client's Host. A request body (within the server's
//     limits.max_body_size: 413 past it; "Expect: 100-continue" is answered here, when the body
//     is first read) of at most request_buffer bytes is read whole first and sent with
//     Content-Length, as nginx's proxy_request_buffering does, so that another upstream can
//     still take it after a failed try. A larger one, by its Content-Length or a chunked one
//     once it grows past request_buffer, streams upstream as it arrives (nginx's
//     proxy_request_buffering off, Go's ReverseProxy): with its Content-Length, or chunked,
//     the memory it holds within request_buffer and a read, and a slow upstream slowing the
//     client's upload (backpressure through the socket buffers). Such a request goes to
//     another upstream only when its connect failed, before a byte of the body was read. A
//     client's "Expect: 100-continue" on a body streamed by its Content-Length goes on to the
//     upstream (as HAProxy and Envoy pass it): the body is read, and the client told
//     100 Continue, once the upstream says 100 Continue (or once the proxy's client stops
//     waiting for it, after client_options::expect_continue_timeout's 1 s), and an upstream's
//     refusal (a 413, a 401) reaches the client before it sent any of the body.
//   - The response: status, reason and fields as the upstream sent them, less the hop-by-hop
//     ones; Server and Date are the upstream's when it sent them. A body whose Content-Length
//     is at most 64 KiB is held until it is whole and goes out with its head in one write (as
//     respond() makes it: the server's compression applies to it when on). Any other body is
//     streamed as it arrives (nothing is held beyond one read), with the upstream's
//     Content-Length when it gave one, else chunked to HTTP/1.1 clients and delimited by the
//     close for HTTP/1.0 ones (an event stream's pieces go out as they come); a slow client
//     slows the upstream read (backpressure through the send buffer). Bodies are not
//     decompressed. Upstream trailer fields are not forwarded.
//   - Failures before the response head went out (for a body held whole: before the body was)
//     are answered here and counted: the upstream refusing or failing the connection, TLS
//     failing, a malformed or cut response -> 502 Bad
//     Gateway; no response head within `timeout` -> 504 Gateway Timeout; a closed client (the
//     worker stopping) -> 503. After the head went out, a failure of either side aborts the
//     client's connection (the server logs it), since a status can no longer be given.
//   - A client that leaves (closes, resets, half-closes) while its request waits on the
//     upstream, or while a slow upstream streams its body, is found within client_check: the
//     upstream request is abandoned (its connection closed, as nginx does), so that an abandoned
//     long poll does not hold one of max_connections until it answers.
//   - `timeout` bounds each wait of an upstream exchange (for a free connection, for the
//     upstream to take the request, for the response head, for each next piece of the body:
//     http::client's io_timeout, nginx's proxy_read_timeout), not the exchange whole: a download
//     or an event stream lasts as long as its bytes keep coming. connect_timeout bounds each
//     connect.
//   - Upgrades (WebSocket), with `upgrades` on (the default), as Go's ReverseProxy and Caddy do
//     them: an HTTP/1.1 request whose Connection field lists upgrade goes upstream with its
//     Upgrade field and "Connection: Upgrade" (the other fields as above) through
//     http::client::upgrade. A 101 from the upstream is passed on (its fields less the hop-by-hop
//     ones, Upgrade kept; exchange::switch_protocols) and the two connections become a tunnel:
//     bytes both ways as they come, each direction's backpressure slowing the other's reader
//     (a client that does not read makes the upstream's sends wait, and the reverse). Either
//     side's end (its FIN) ends its direction only and is passed on as a FIN after what was
//     already read (half-close: a client that sends its last bytes and shuts down its writing
//     still gets the whole answer); the tunnel ends when both directions have ended, when
//     either side fails (the other is closed after what was read is flushed to it), and when no
//     byte went either way for tunnel_idle_timeout. An answer other
//     than 101 is passed on as any response (a 426 with its Upgrade field, the protocols the
//     client may ask for again). Failures before the 101 are answered as below. With
//     `upgrades` off, Upgrade is dropped as a hop-by-hop field and the upstream sees a plain
//     request. CONNECT is not tunnelled.
//   - Threads: the handler runs on every worker at once; stats() is thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "weft/http/client.hpp"
#include "weft/http/server.hpp"
#include "weft/net/tls.hpp"

namespace weft::http {

// How a worker chooses among several upstreams (see the file comment).
enum class proxy_balance {
  // Each in turn, as often as its weight says (nginx's default: smooth weighted round robin).
  round_robin,
  // The one with the fewest of this worker's requests and tunnels in flight for its weight
  // (nginx's least_conn); ties in weighted turn. For long requests and tunnels.
  least_connections,
};

// The settings of a reverse_proxy (the file comment says what each does).
struct proxy_options {
  // Taken off the front of the request's path before it is appended to the upstream's path
  // ("/api"); empty: the whole path is appended.
  std::string strip_prefix{};
  // Keep-alive connections each worker holds to the upstream at most; requests beyond them
  // wait for one (within timeout).
  std::size_t max_connections = 64;
  // Each TCP connect (and TLS handshake) to the upstream, within timeout.
  std::chrono::milliseconds connect_timeout{5000};
  // Each wait of an upstream exchange (see the file comment): 504 when no head came within it.
  std::chrono::milliseconds timeout{60000};
  // An upstream connection unused this long is closed.
  std::chrono::milliseconds idle_timeout{30000};
  // Sends the client's Host upstream instead of the upstream URL's authority.
  bool preserve_host = false;
  // X-Forwarded-For, X-Forwarded-Proto and X-Forwarded-Host (see the file comment).
  bool forwarded_headers = true;
  // Several upstreams: failed tries (see the file comment) within fail_timeout that take one
  // down (for fail_timeout), as nginx's max_fails and fail_timeout. max_fails 0: never down.
  unsigned max_fails = 1;
  std::chrono::milliseconds fail_timeout{10000};
  // Several upstreams: how each request's upstream is chosen.
  proxy_balance balance = proxy_balance::round_robin;
  // Several upstreams: each one's share of the requests, in the order the upstreams were given
  // (nginx's weight=), 1 to 1000; empty: 1 each.
  std::vector<unsigned> weights{};
  // Tunnels upgraded connections (WebSocket) to the upstream (see the file comment).
  bool upgrades = true;
  // A tunnel that carried no byte either way this long is closed (HAProxy's `timeout tunnel`;
  // nginx's proxy_read_timeout, 60 s, counts the upstream's direction only). Zero: no limit.
  std::chrono::milliseconds tunnel_idle_timeout{300000};
  // How often a request waiting on its upstream looks whether its client is still there
  // (http::hangup_watch: a poll(2) of the socket). A client that closed or reset its connection
  // (a half-close counts, as for nginx and Go's ReverseProxy) has its upstream request abandoned:
  // the upstream's connection is closed, so that a long poll or a slow query ends there too,
  // and the client's; counted in client_aborts. Zero: never looks (nginx's
  // proxy_ignore_client_abort on), the upstream's answer is awaited and dropped.
  std::chrono::milliseconds client_check{1000};
  // A request body up to this many bytes is held whole before the request goes upstream;
  // a larger one streams (see the file comment).
  std::size_t request_buffer = 64 * 1024;
  // Bounds on the upstream's response head (its body streams, unbounded).
  std::size_t max_response_header_size = 64 * 1024;
  // The TLS context of an https upstream (net::tls_context::client: its authorities, checks);
  // null: the system's authorities, the upstream's name verified.
  std::shared_ptr<const net::tls_context> tls{};
  // A line for each request answered 502, 503 or 504, naming the upstream URL and what failed
  // (the client gets the status and its phrase only); called on the worker's thread. Null: none.
  std::function<void(std::string_view)> log{};
};

// Counters since the proxy was made, over every worker.
struct proxy_stats {
  std::uint64_t requests = 0;           // requests the handler took
  std::uint64_t responses = 0;          // upstream responses passed on whole
  std::uint64_t bad_gateway = 0;        // answered 502
  std::uint64_t gateway_timeout = 0;    // answered 504
  std::uint64_t unavailable = 0;        // answered 503 (the worker's client closed)
  std::uint64_t aborted = 0;            // failures after the head went out (connection aborted)
  std::uint64_t client_aborts = 0;      // requests abandoned as their client left (client_check)
  std::uint64_t retries = 0;            // requests sent to the next upstream after a failed connect
  std::uint64_t streamed_bodies = 0;    // request bodies streamed upstream (past request_buffer)
  std::uint64_t upgrades = 0;           // tunnels opened (101 passed on)
  std::uint64_t tunnels_open = 0;       // tunnels open now
  std::uint64_t tunnel_bytes_up = 0;    // tunnelled from clients to the upstream
  std::uint64_t tunnel_bytes_down = 0;  // tunnelled from the upstream to clients
  // One upstream's counters.
  struct upstream_stats {
    std::string url;                     // as given
    std::uint64_t requests = 0;          // requests sent to it (each try counts)
    std::uint64_t connect_failures = 0;  // connects to it that failed
    std::uint64_t marked_down = 0;       // times a worker took it down (max_fails reached)
    // Tries that connected, then failed or timed out before a response head came.
    std::uint64_t response_failures = 0;
    unsigned weight = 1;          // its share (proxy_options::weights)
    std::uint64_t in_flight = 0;  // requests and tunnels to it now, over every worker
  };
  std::vector<upstream_stats> upstreams;  // per upstream, in the order given
};

// The proxy: its options, the upstream, a client per worker and the counters.
class reverse_proxy {
 public:
  // upstream: "http://host[:port][/path]" or "https://..." (no query, no fragment);
  // std::invalid_argument naming it otherwise, or naming a bad option.
  explicit reverse_proxy(std::string_view upstream, proxy_options options = {});
  // Several upstreams, each such a URL (see the file comment); none is std::invalid_argument.
  explicit reverse_proxy(const std::vector<std::string>& upstreams, proxy_options options = {});
  reverse_proxy(const reverse_proxy&) = delete;
  reverse_proxy& operator=(const reverse_proxy&) = delete;
  ~reverse_proxy();

  // Installs the per-worker hooks (see the file comment) into the server's options. Once: a
  // second call is a std::logic_error (a proxy serves the workers of one server; give another
  // server a proxy of its own).
  void attach(server_options& options);
  // The handler for a route: forwards ex's request (see the file comment). The proxy must
  // outlive the server.
  http::handler handler();
  // The handler's work, for a handler of one's own that does something first (a check, a
  // changed field) and then forwards.
  void forward(exchange& ex);

  proxy_stats stats() const;
  const proxy_options& options() const noexcept { return options_; }
  // The (first) upstream URL as given.
  const std::string& upstream() const noexcept { return upstreams_.front()->url; }

 private:
  // One upstream URL, parsed.
  struct target {
    std::string url;
    std::string origin;     // "http://host:port" as the URL gave it
    std::string base_path;  // the URL's path without a trailing '/' ("" for "/")
    std::atomic<std::uint64_t> requests{0};
    std::atomic<std::uint64_t> connect_failures{0};
    std::atomic<std::uint64_t> marked_down{0};
    std::atomic<std::uint64_t> response_failures{0};
    std::atomic<std::uint64_t> in_flight{0};
    unsigned weight = 1;
  };
  // An upstream as one worker sees it: its health, its turn, its load.
  struct health {
    unsigned fails = 0;
    std::chrono::steady_clock::time_point first_fail{};
    std::chrono::steady_clock::time_point down_until{};
    // Smooth weighted round robin's running weight (pick()).
    std::int64_t current = 0;
    // This worker's requests and tunnels to it now (least_connections).
    std::size_t active = 0;
  };
  // What one worker keeps: its client and its view of each upstream.
  struct worker_slot {
    std::unique_ptr<client> upstream_client;
    std::vector<health> upstreams;
  };
  // Counts one try to an upstream as in flight, on the worker's view and the proxy's stats,
  // until the next try, a tunnel's end or forward()'s return.
  class in_flight_guard {
   public:
    in_flight_guard() = default;
    in_flight_guard(const in_flight_guard&) = delete;
    in_flight_guard& operator=(const in_flight_guard&) = delete;
    ~in_flight_guard() { release(); }
    void hold(health& h, target& to) {
      release();
      h_ = &h;
      to_ = &to;
      ++h.active;
      to.in_flight.fetch_add(1, std::memory_order_relaxed);
    }

   private:
    void release() {
      if (h_ != nullptr) {
        --h_->active;
        to_->in_flight.fetch_sub(1, std::memory_order_relaxed);
        h_ = nullptr;
      }
    }
    health* h_ = nullptr;
    target* to_ = nullptr;
  };
  struct counters {
    std::atomic<std::uint64_t> requests{0};
    std::atomic<std::uint64_t> responses{0};
    std::atomic<std::uint64_t> client_aborts{0};
    std::atomic<std::uint64_t> bad_gateway{0};
    std::atomic<std::uint64_t> gateway_timeout{0};
    std::atomic<std::uint64_t> unavailable{0};
    std::atomic<std::uint64_t> aborted{0};
    std::atomic<std::uint64_t> retries{0};
    std::atomic<std::uint64_t> streamed_bodies{0};
    std::atomic<std::uint64_t> upgrades{0};
    std::atomic<std::uint64_t> tunnels_closed{0};
    std::atomic<std::uint64_t> tunnel_bytes_up{0};
    std::atomic<std::uint64_t> tunnel_bytes_down{0};
  };
  void start_worker(unsigned worker);
  void stop_worker(unsigned worker);
  worker_slot* slot_of(unsigned worker);
  // The upstreams one request has tried so far: a bit each, the first 64 in place (a request
  // through a proxy of up to 64 upstreams allocates nothing for it), the rest on the heap.
  class tried_set {
   public:
    explicit tried_set(std::size_t count) {
      if (count > 64) {
        rest_.resize(count - 64);
      }
    }
    bool contains(std::size_t index) const {
      return index < 64 ? (first_ >> index & 1) != 0 : static_cast<bool>(rest_[index - 64]);
    }
    void add(std::size_t index) {
      if (index < 64) {
        first_ |= std::uint64_t{1} << index;
      } else {
        rest_[index - 64] = true;
      }
    }

   private:
    std::uint64_t first_ = 0;
    std::vector<bool> rest_;
  };
  // The upstream a worker sends its next try to, among those not tried yet for this request
  // (those not down first): by options_.balance, in smooth weighted round robin.
  std::size_t pick(worker_slot& slot, std::chrono::steady_clock::time_point now,
                   const tried_set& tried) const;
  // A failed try of upstream `index` as this worker saw it (max_fails, fail_timeout): its
  // connect (`connect`), or its exchange before a response head.
  void note_failure(worker_slot& slot, unsigned worker, std::size_t index, bool connect);
  // The URL at `to` for a request's target (its path less strip_prefix, appended to the
  // upstream's path, and its query). The target is a path: forward() answers any other 400.
  std::string url_for(const request& r, const target& to) const;
  // The request to send upstream, without its body: fields filtered and added, and with
  // `upgrade` the client's Upgrade field.
  request upstream_request(exchange& ex, bool upgrade) const;
  // Carries bytes both ways between the client's switched connection and the upstream's until
  // either ends (see the file comment).
  void tunnel(exchange& ex, upgraded_connection& upstream);
  // Answers a failure before the response head went out, counts and logs it.
  void fail(exchange& ex, status answer, std::atomic<std::uint64_t>& counter,
            const std::string& url, const std::exception& e);

  std::vector<std::unique_ptr<target>> upstreams_;
  proxy_options options_;
  counters counters_;
  std::atomic<bool> attached_{false};
  // Per worker, made and closed on its thread (a client belongs to one scheduler, so another
  // worker's is never touched); the mutex guards the vector itself, which a starting worker
  // may grow while others look their own slot up.
  std::mutex mutex_;
  std::vector<std::unique_ptr<worker_slot>> workers_;
};

}  // namespace weft::http

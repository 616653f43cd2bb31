// http::reverse_proxy in front of a weft server, a scripted raw-socket upstream and nginx-less
// failures (nothing listening, silence, malformed and cut responses): the target and the fields
// as the upstream sees them, hop-by-hop fields dropped both ways, bodies streamed in both
// framings and to HTTP/1.0, HEAD/204/304, upstream keep-alive, 502/503/504, and curl through it.
// Upgrades (HttpReverseProxyTunnel): Node's ws and Go's gorilla/websocket through the tunnel,
// either side's end, refusals, the idle limit, and backpressure from a client that does not read.
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "http/server_support.hpp"
#include "refusing_port.hpp"
#include "test_support.hpp"
#include "weft/http/proxy.hpp"
#include "weft/net/websocket_protocol.hpp"
#include "weft/sched/this_coroutine.hpp"

namespace {

using namespace http_test;
using weft::http::proxy_balance;
using weft::http::proxy_options;
using weft::http::proxy_stats;
using weft::http::reverse_proxy;

// The upstream: /v1/big streams 900 KiB chunked, /v1/sized answers 512 KiB with Content-Length,
// /v1/fresh answers 304, /v1/empty 204, /v1/refuse 401 without reading the body; anything else
// echoes the request: its request line, every field as "name: value", an empty line and the body.
std::string pattern(std::size_t size) {
  std::string bytes(size, '\0');
  for (std::size_t i = 0; i < size; ++i) {
    bytes[i] = static_cast<char>('a' + (i * 7 + i / 251) % 26);
  }
  return bytes;
}

void upstream_handler(exchange& ex) {
  const weft::http::request& r = ex.request();
  const std::string_view path = r.raw_path();
  if (path == "/v1/big") {
    weft::http::response head;
    head.headers.add("Content-Type", "application/octet-stream");
    auto writer = ex.start_response(std::move(head));
    const std::string all = pattern(900 << 10);
    for (std::size_t at = 0; at < all.size(); at += 65536) {
      writer.write(std::string_view(all).substr(at, 65536));
    }
    writer.finish();
    return;
  }
  if (path == "/v1/sized") {
    ex.respond(status::ok, pattern(512 << 10), "application/octet-stream");
    return;
  }
  if (path == "/v1/fresh") {
    weft::http::response answer;
    answer.status = status::not_modified;
    answer.headers.add("ETag", "\"v7\"");
    ex.respond(std::move(answer));
    return;
  }
  if (path == "/v1/empty") {
    ex.respond(status::no_content, "");
    return;
  }
  if (path == "/v1/refuse") {
    ex.respond(status::unauthorized, "who are you\n");  // the body left unread
    return;
  }
  std::string out = std::string(weft::http::method_name(r.method)) + " " + r.target + "\n";
  for (const auto field : r.headers) {
    out += std::string(field.name) + ": " + std::string(field.value) + "\n";
  }
  out += "\n";
  out += ex.read_body();
  ex.respond(status::ok, out);
}

// The value of a field line in an echoed request ("" when absent; "<twice>" when repeated).
std::string echoed(const std::string& echo, std::string_view name) {
  std::string found;
  bool seen = false;
  std::size_t at = echo.find('\n') + 1;
  while (at < echo.size()) {
    const std::size_t end = echo.find('\n', at);
    const std::string line = echo.substr(at, end - at);
    if (line.empty()) {
      break;
    }
    const std::size_t colon = line.find(": ");
    if (colon != std::string::npos && colon == name.size() &&
        ::strncasecmp(line.data(), name.data(), colon) == 0) {
      found = seen ? "<twice>" : line.substr(colon + 2);
      seen = true;
    }
    at = end + 1;
  }
  return found;
}

std::string request_line(const std::string& echo) { return echo.substr(0, echo.find('\n')); }

std::string echoed_body(const std::string& echo) {
  const std::size_t blank = echo.find("\n\n");
  return blank == std::string::npos ? "<none>" : echo.substr(blank + 2);
}

weft::http::server_options attached(reverse_proxy& proxy) {
  weft::http::server_options options = local_http();
  proxy.attach(options);
  return options;
}

weft::http::router proxy_routes(reverse_proxy& proxy) {
  weft::http::router routes;
  routes.any("/api", proxy.handler());
  routes.any("/api/*rest", proxy.handler());
  routes.get("/local", [](exchange& ex) { ex.respond(status::ok, "served here\n"); });
  return routes;
}

// A proxy at /api in front of upstream_url, on its own thread; log lines kept.
struct front {
  explicit front(const std::string& upstream_url, proxy_options options = {})
      : proxy(upstream_url, with_log(std::move(options))),
        server(attached(proxy), proxy_routes(proxy)) {}
  front(const std::vector<std::string>& upstream_urls, proxy_options options)
      : proxy(upstream_urls, with_log(with_prefix(std::move(options)))),
        server(attached(proxy), proxy_routes(proxy)) {}

  explicit front(const std::vector<std::string>& upstream_urls)
      : front(upstream_urls, proxy_options{}) {}
  static proxy_options with_prefix(proxy_options options) {
    options.strip_prefix = "/api";
    return options;
  }
  proxy_options with_log(proxy_options options) {
    options.log = [this](std::string_view line) {
      std::lock_guard lock(mutex);
      lines.emplace_back(line);
    };
    return options;
  }
  std::vector<std::string> log() {
    std::lock_guard lock(mutex);
    return lines;
  }

  std::mutex mutex;
  std::vector<std::string> lines;
  reverse_proxy proxy;
  running_http server;
};

template <class Condition>
bool eventually(Condition done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // a bounded poll of a count
  }
  return true;
}

// Waits (bounded) until the proxy counts `n` requests in flight over its upstreams.
bool wait_in_flight(const reverse_proxy& proxy, std::uint64_t n) {
  return eventually([&] {
    std::uint64_t now = 0;
    for (const auto& up : proxy.stats().upstreams) now += up.in_flight;
    return now == n;
  });
}

// The proxy's counters once no request is in flight. A client has its whole answer before
// forward() returns and counts it (the last bytes are written first), so a test reading the
// counters right after its answer waits for that.
proxy_stats settled(const reverse_proxy& proxy) {
  EXPECT_TRUE(wait_in_flight(proxy, 0)) << "a request still in flight after 10 s";
  return proxy.stats();
}

std::optional<weft::http::response> get(client& c, const std::string& target,
                                        const std::string& fields = "") {
  c.send("GET " + target + " HTTP/1.1\r\nHost: front.example\r\n" + fields + "\r\n");
  return c.response();
}

// A raw upstream on a blocking socket: after each request head (read to its empty line) it
// writes `reply`, then closes the connection, or with hold keeps it open (unanswered when the
// reply is empty) until it is destroyed. The heads it read are kept.
class raw_upstream {
 public:
  explicit raw_upstream(std::string reply, bool hold = false)
      : reply_(std::move(reply)), hold_(hold) {
    std::tie(listener_, port_) = loopback_listener(16, "raw_upstream");
    thread_ = std::thread([this] { serve(); });
  }
  ~raw_upstream() {
    stop_ = true;
    thread_.join();
    for (int fd : held_) {
      ::close(fd);
    }
    ::close(listener_);
  }
  std::uint16_t port() const { return port_; }
  std::string url(std::string_view path = "") const {
    return "http://127.0.0.1:" + std::to_string(port_) + std::string(path);
  }
  std::vector<std::string> heads() {
    std::lock_guard lock(mutex_);
    return heads_;
  }

 private:
  void serve() {
    while (!stop_) {
      pollfd ready{.fd = listener_, .events = POLLIN, .revents = 0};
      if (::poll(&ready, 1, 20) <= 0) {
        continue;
      }
      const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) {
        continue;
      }
      std::string head;
      char chunk[4096];
      while (head.find("\r\n\r\n") == std::string::npos && !stop_) {
        pollfd in{.fd = fd, .events = POLLIN, .revents = 0};
        if (::poll(&in, 1, 20) <= 0) {
          continue;
        }
        const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
        if (n <= 0) {
          break;
        }
        head.append(chunk, static_cast<std::size_t>(n));
      }
      {
        std::lock_guard lock(mutex_);
        heads_.push_back(head);
      }
      if (!reply_.empty()) {
        ::send(fd, reply_.data(), reply_.size(), MSG_NOSIGNAL);
      }
      if (hold_) {
        held_.push_back(fd);
      } else {
        ::close(fd);
      }
    }
  }

  std::string reply_;
  bool hold_;
  int listener_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::vector<std::string> heads_;
  std::vector<int> held_;
  std::thread thread_;
};

TEST(HttpReverseProxy, ForwardsTheTargetMethodAndBody) {
  running_http upstream(local_http(), upstream_handler);
  front f(url(upstream.port(), "/v1"), {.strip_prefix = "/api"});
  client c(f.server.port());
  c.send(
      "POST /api/echo/a%20b?x=1&y=%2F HTTP/1.1\r\nHost: front.example\r\nContent-Type: "
      "text/plain\r\nContent-Length: 5\r\n\r\nhello");
  auto r = c.response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, status::ok);
  EXPECT_EQ(request_line(r->body), "POST /v1/echo/a%20b?x=1&y=%2F");
  EXPECT_EQ(echoed(r->body, "Content-Type"), "text/plain");
  EXPECT_EQ(echoed(r->body, "Content-Length"), "5");
  EXPECT_EQ(echoed_body(r->body), "hello");

  // The prefix alone, a path outside it, and a prefix that is only the start of a segment.
  r = get(c, "/api");
  ASSERT_TRUE(r);
  EXPECT_EQ(request_line(r->body), "GET /v1");
  r = get(c, "/api/");
  ASSERT_TRUE(r);
  EXPECT_EQ(request_line(r->body), "GET /v1/");
  r = get(c, "/local");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "served here\n");
  const auto stats = settled(f.proxy);
  EXPECT_EQ(stats.requests, 3u);
  EXPECT_EQ(stats.responses, 3u);
  EXPECT_EQ(stats.bad_gateway, 0u);
}

// "/api/../admin" matched as /api/* and passed on would leave the upstream's base path (/v1):
// refused with 400, by the router in front of the proxy and by the proxy as the server's only
// handler, and never sent upstream.
TEST(HttpReverseProxy, PathsWithDotSegmentsAreRefusedNotPassedOn) {
  running_http upstream(local_http(), upstream_handler);
  for (const bool routed : {true, false}) {
    SCOPED_TRACE(routed ? "behind a router" : "the server's only handler");
    reverse_proxy proxy(url(upstream.port(), "/v1"), {.strip_prefix = "/api"});
    std::optional<running_http> front;
    if (routed) {
      front.emplace(attached(proxy), proxy_routes(proxy));
    } else {
      front.emplace(attached(proxy), [&proxy](exchange& ex) { proxy.forward(ex); });
    }
    client c(front->port());
    for (const char* path : {"/api/../local", "/api/%2e%2e/x", "/api/a/./b", "/api/.%2E"}) {
      auto r = get(c, path);
      ASSERT_TRUE(r) << path;
      EXPECT_EQ(r->status, status::bad_request) << path;
      EXPECT_NE(r->body.find("\"..\" segment"), std::string::npos) << r->body;
    }
    // The connection goes on; names that only look alike are forwarded.
    auto r = get(c, "/api/.well-known/...");
    ASSERT_TRUE(r);
    EXPECT_EQ(request_line(r->body), "GET /v1/.well-known/...");
    EXPECT_EQ(settled(proxy).responses, 1u) << "a refused path reached the upstream";
  }
}

TEST(HttpReverseProxy, WithoutAPrefixTheWholePathGoesToTheUpstreamRoot) {
  running_http upstream(local_http(), upstream_handler);
  front f(url(upstream.port(), ""));
  client c(f.server.port());
  auto r = get(c, "/api/x?q=1");
  ASSERT_TRUE(r);
  EXPECT_EQ(request_line(r->body), "GET /api/x?q=1");
}

TEST(HttpReverseProxy, SetsHostAndTheForwardedFields) {
  running_http upstream(local_http(), upstream_handler);
  front f(url(upstream.port(), "/v1"), {.strip_prefix = "/api"});
  client c(f.server.port());
  auto r = get(c, "/api/who",
               "X-Forwarded-For: 10.0.0.1\r\nX-Forwarded-Proto: gopher\r\nX-Forwarded-Host: "
               "forged\r\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(echoed(r->body, "Host"), "127.0.0.1:" + std::to_string(upstream.port()));
  EXPECT_EQ(echoed(r->body, "X-Forwarded-For"), "10.0.0.1, 127.0.0.1");
  EXPECT_EQ(echoed(r->body, "X-Forwarded-Proto"), "http");
  EXPECT_EQ(echoed(r->body, "X-Forwarded-Host"), "front.example");

  front kept(url(upstream.port(), "/v1"),
             {.strip_prefix = "/api", .preserve_host = true, .forwarded_headers = false});
  client k(kept.server.port());
  r = get(k, "/api/who", "X-Forwarded-For: 10.0.0.1\r\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(echoed(r->body, "Host"), "front.example");
  EXPECT_EQ(echoed(r->body, "X-Forwarded-For"), "10.0.0.1");
  EXPECT_EQ(echoed(r->body, "X-Forwarded-Proto"), "");
}

TEST(HttpReverseProxy, HopByHopFieldsStayOnTheirHop) {
  running_http upstream(local_http(), upstream_handler);
  front f(url(upstream.port(), "/v1"), {.strip_prefix = "/api"});
  client c(f.server.port());
  auto r = get(c, "/api/hop",
               "Connection: keep-alive, X-Secret\r\nX-Secret: s\r\nKeep-Alive: timeout=5\r\nTE: "
               "trailers\r\nProxy-Authorization: Basic eDp5\r\nUpgrade: websocket\r\nX-Kept: "
               "k\r\n");
  ASSERT_TRUE(r);
  for (const char* name :
       {"Connection", "X-Secret", "Keep-Alive", "TE", "Proxy-Authorization", "Upgrade", "Expect"}) {
    EXPECT_EQ(echoed(r->body, name), "") << name;
  }
  EXPECT_EQ(echoed(r->body, "X-Kept"), "k");

  raw_upstream raw(
      "HTTP/1.1 200 OK\r\nConnection: X-Hop\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\nX-Kept: "
      "yes\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\nContent-Length: 2\r\n\r\nok");
  front g(raw.url());
  client d(g.server.port());
  r = get(d, "/api/x");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "ok");
  EXPECT_EQ(r->headers.get("X-Kept"), "yes");
  EXPECT_FALSE(r->headers.contains("X-Hop"));
  EXPECT_FALSE(r->headers.contains("Keep-Alive"));
  EXPECT_EQ(r->headers.get_all("Set-Cookie"), (std::vector<std::string_view>{"a=1", "b=2"}));
  EXPECT_FALSE(r->headers.contains("Connection"));  // the front's own keep-alive
}

TEST(HttpReverseProxy, StreamsBodiesInTheirFraming) {
  running_http upstream(local_http(), upstream_handler);
  front f(url(upstream.port(), "/v1"), {.strip_prefix = "/api"});
  client c(f.server.port());
  auto r = get(c, "/api/big");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->headers.get("Transfer-Encoding"), "chunked");
  EXPECT_EQ(r->headers.get("Content-Type"), "application/octet-stream");
  EXPECT_TRUE(r->body == pattern(900 << 10)) << r->body.size();
  r = get(c, "/api/sized");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->headers.get("Content-Length"), std::to_string(512 << 10));
  EXPECT_FALSE(r->headers.contains("Transfer-Encoding"));
  EXPECT_TRUE(r->body == pattern(512 << 10)) << r->body.size();

  // HTTP/1.0 cannot take chunks: the body ends with the connection.
  client old(f.server.port());
  old.send("GET /api/big HTTP/1.0\r\nHost: front.example\r\n\r\n");
  const std::string all = old.rest(std::chrono::milliseconds(10000));
  const std::size_t blank = all.find("\r\n\r\n");
  ASSERT_NE(blank, std::string::npos);
  EXPECT_EQ(all.find("Transfer-Encoding"), std::string::npos);
  EXPECT_TRUE(all.substr(blank + 4) == pattern(900 << 10)) << all.size();
  EXPECT_EQ(settled(f.proxy).responses, 3u);
}

TEST(HttpReverseProxy, AClientThatDoesNotReadHoldsTheUpstreamBack) {
  running_http upstream(local_http(), upstream_handler);
  reverse_proxy proxy(url(upstream.port(), "/v1"), {.strip_prefix = "/api"});
  weft::http::server_options options = attached(proxy);
  options.send_buffer_limit = 64 << 10;
  weft::http::router routes;
  routes.any("/api/*rest", [&proxy](exchange& ex) {
    small_send_buffer(ex.connection().native_handle());  // little fits in the kernel
    proxy.forward(ex);
  });
  running_http front(std::move(options), std::move(routes));
  const int fd = connect_to(front.port(), 4096);
  ASSERT_GE(fd, 0);
  send_all(fd, "GET /api/big HTTP/1.1\r\nHost: front.example\r\nConnection: close\r\n\r\n");
  // Unread, the response fills the sockets and then the front's send buffer, which stops there:
  // the proxy waits in write() instead of reading on from the upstream.
  ASSERT_TRUE(
      eventually([&] { return front.server().stats().total.net.send_buffer_high >= 32 << 10; }));
  const std::string all = read_to_end(fd);
  ::close(fd);
  const std::size_t blank = all.find("\r\n\r\n");
  ASSERT_NE(blank, std::string::npos);
  weft::http::response_parser parser;
  std::string body;
  for (std::string_view rest = all;;) {
    weft::http::parse_result r = parser.parse(rest);
    rest.remove_prefix(r.consumed);
    if (r.event == weft::http::parse_event::body) {
      body.append(r.body);
    } else if (r.event == weft::http::parse_event::message_complete ||
               r.event == weft::http::parse_event::error || r.consumed == 0) {
      ASSERT_EQ(r.event, weft::http::parse_event::message_complete) << parser.error_reason();
      break;
    }
  }
  EXPECT_TRUE(body == pattern(900 << 10)) << body.size();
  // The limit plus at most one piece of the body (64 KiB) and its chunk framing.
  EXPECT_LE(front.server().stats().total.net.send_buffer_high, (64u << 10) * 2 + 64);
  EXPECT_EQ(settled(proxy).responses, 1u);
}

TEST(HttpReverseProxy, HeadAndBodilessStatusesKeepTheConnectionInStep) {
  running_http upstream(local_http(), upstream_handler);
  front f(url(upstream.port(), "/v1"), {.strip_prefix = "/api"});
  client c(f.server.port());
  c.send("HEAD /api/sized HTTP/1.1\r\nHost: front.example\r\n\r\n");
  auto r = c.response(weft::http::method::head);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->headers.get("Content-Length"), std::to_string(512 << 10));
  EXPECT_TRUE(r->body.empty());
  c.send("HEAD /api/big HTTP/1.1\r\nHost: front.example\r\n\r\n");
  r = c.response(weft::http::method::head);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->headers.get("Transfer-Encoding"), "chunked");
  EXPECT_FALSE(r->headers.contains("Content-Length"));
  EXPECT_TRUE(r->body.empty());
  r = get(c, "/api/fresh", "If-None-Match: \"v7\"\r\n");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, status::not_modified);
  EXPECT_EQ(r->headers.get("ETag"), "\"v7\"");
  r = get(c, "/api/empty");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, status::no_content);
  EXPECT_FALSE(r->headers.contains("Content-Length"));
  r = get(c, "/api/after");
  ASSERT_TRUE(r);
  EXPECT_EQ(request_line(r->body), "GET /v1/after");
}

TEST(HttpReverseProxy, UpstreamConnectionsAreKeptAlive) {
  running_http upstream(local_http(), upstream_handler);
  front f(url(upstream.port(), "/v1"), {.strip_prefix = "/api"});
  for (int round = 0; round < 3; ++round) {
    client c(f.server.port());
    for (int i = 0; i < 10; ++i) {
      auto r = get(c, "/api/n" + std::to_string(i));
      ASSERT_TRUE(r);
      EXPECT_EQ(request_line(r->body), "GET /v1/n" + std::to_string(i));
    }
  }
  // Three client connections, thirty requests, one upstream connection.
  EXPECT_EQ(upstream.server().stats().total.requests, 30u);
  EXPECT_EQ(upstream.server().stats().total.net.accepted, 1u);
  EXPECT_EQ(f.server.server().stats().total.net.accepted, 3u);
}

// GET /api/x through a front to upstream_url: answered 502 with the bare phrase (the reason
// is logged, not sent), counted, on a connection that stays usable. Returns the log line.
std::string bad_gateway_through(const std::string& upstream_url) {
  front f(upstream_url);
  client c(f.server.port());
  auto r = get(c, "/api/x");
  EXPECT_TRUE(r && r->status == status::bad_gateway && r->body == "Bad Gateway (upstream)\n")
      << body_of(r);
  r = get(c, "/local");
  EXPECT_TRUE(r && r->status == status::ok);
  const auto stats = settled(f.proxy);
  EXPECT_EQ(stats.bad_gateway, 1u);
  EXPECT_EQ(stats.aborted, 0u);
  const auto lines = f.log();
  EXPECT_EQ(lines.size(), 1u);
  return lines.empty() ? std::string() : lines[0];
}

TEST(HttpReverseProxy, AnUpstreamThatRefusesIsABadGateway) {
  const weft_test::refusing_port refusing;
  const std::uint16_t closed_port = refusing.port();
  const std::string line = bad_gateway_through("http://127.0.0.1:" + std::to_string(closed_port));
  EXPECT_NE(line.find("GET http://127.0.0.1:" + std::to_string(closed_port) + "/api/x"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("Connection refused"), std::string::npos) << line;
  EXPECT_NE(line.find("-> 502"), std::string::npos) << line;
}

TEST(HttpReverseProxy, ASilentUpstreamIsAGatewayTimeout) {
  raw_upstream silent("", true);
  front f(silent.url(), {.timeout = std::chrono::milliseconds(300)});
  client c(f.server.port());
  const auto started = std::chrono::steady_clock::now();
  auto r = get(c, "/api/slow");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, status::gateway_timeout);
  EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(250));
  EXPECT_EQ(settled(f.proxy).gateway_timeout, 1u);
  ASSERT_EQ(silent.heads().size(), 1u);
  EXPECT_EQ(silent.heads()[0].rfind("GET /api/slow HTTP/1.1\r\n", 0), 0u) << silent.heads()[0];
}

// `timeout` bounds each wait, not the exchange: an event stream whose pieces come 100 ms apart
// for a second goes through a proxy with a 300 ms timeout, and one that stops is cut after it.
TEST(HttpReverseProxy, AStreamOutlivesTheTimeoutWhileItsBytesKeepComing) {
  running_http upstream(local_http(), [](exchange& ex) {
    weft::http::response head;
    head.headers.add("Content-Type", "text/event-stream");
    auto writer = ex.start_response(std::move(head));
    for (int i = 0; i < 10; ++i) {
      weft::sleep_for(std::chrono::milliseconds(100));
      writer.write("data: " + std::to_string(i) + "\n\n");
    }
    if (ex.request().raw_path() == "/v1/stall") {
      weft::sleep_for(std::chrono::seconds(30));  // until the server stops
    }
    writer.finish();
  });
  front f(url(upstream.port(), "/v1"),
          {.strip_prefix = "/api", .timeout = std::chrono::milliseconds(300)});
  client c(f.server.port());
  auto r = get(c, "/api/events");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, status::ok);
  EXPECT_EQ(r->body.size(), 10 * std::string("data: 0\n\n").size());
  EXPECT_EQ(r->body.substr(r->body.size() - 9), "data: 9\n\n");
  // The stalled one: its ten pieces, then the connection aborted (no last chunk) once the
  // upstream is silent for 300 ms.
  client d(f.server.port());
  d.send("GET /api/stall HTTP/1.1\r\nHost: front.example\r\n\r\n");
  EXPECT_FALSE(d.response(weft::http::method::get, true, std::chrono::milliseconds(10000)));
  const auto stats = settled(f.proxy);
  EXPECT_EQ(stats.responses, 1u);
  EXPECT_EQ(stats.aborted, 1u);
}

TEST(HttpReverseProxy, AMalformedResponseIsABadGateway) {
  raw_upstream broken("HTTP/1.1 200 OK\r\nContent-Length: 1x\r\n\r\nx");
  const std::string line = bad_gateway_through(broken.url());
  EXPECT_NE(line.find("malformed response"), std::string::npos) << line;
}

TEST(HttpReverseProxy, AnUpstreamCutMidBodyAbortsTheClientsConnection) {
  // Past 64 KiB the body streams: the head is out when the upstream stops.
  raw_upstream cut("HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n0123456789");
  front f(cut.url());
  client c(f.server.port());
  c.send("GET /api/x HTTP/1.1\r\nHost: front.example\r\n\r\n");
  const std::string got = c.rest();
  EXPECT_NE(got.find("Content-Length: 1000000\r\n"), std::string::npos) << got;
  EXPECT_EQ(got.substr(got.find("\r\n\r\n") + 4), "0123456789");
  EXPECT_TRUE(eventually([&] { return f.proxy.stats().aborted == 1; }));
  EXPECT_EQ(settled(f.proxy).responses, 0u);
}

TEST(HttpReverseProxy, ASmallBodyIsSentWholeOrNotAtAll) {
  // Up to 64 KiB the body is held until whole: cut short, it is a 502, and the client's
  // connection stays usable.
  raw_upstream cut("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n0123456789");
  bad_gateway_through(cut.url());

  // Whole, it leaves in one write with its head (the front's net counters: one message out).
  running_http upstream(local_http(), upstream_handler);
  front g(url(upstream.port(), "/v1"), {.strip_prefix = "/api"});
  client d(g.server.port());
  auto r = get(d, "/api/one");
  ASSERT_TRUE(r);
  EXPECT_EQ(request_line(r->body), "GET /v1/one");
  EXPECT_EQ(r->headers.get("Content-Length"), std::to_string(r->body.size()));
  ASSERT_TRUE(eventually([&] { return g.server.server().stats().total.net.messages_out >= 1; }));
  EXPECT_EQ(g.server.server().stats().total.net.messages_out, 1u);
}

TEST(HttpReverseProxy, AHandlerWithoutAttachAnswers500) {
  reverse_proxy proxy("http://127.0.0.1:9");
  weft::http::router routes;
  routes.any("/api/*rest", proxy.handler());
  running_http server(local_http(), std::move(routes));
  client c(server.port());
  auto r = get(c, "/api/x");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, status::internal_server_error);
}

TEST(HttpReverseProxy, BadUpstreamsAndOptionsAreRefusedByName) {
  const auto refused = [](std::string_view upstream, proxy_options options, std::string_view says) {
    try {
      reverse_proxy proxy(upstream, std::move(options));
      ADD_FAILURE() << upstream << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  refused("ftp://h/", {}, "'ftp://h/' is not an http or https URL");
  refused("http://h/a?b=1", {}, "has a query or a fragment");
  refused("http://h/a#top", {}, "has a query or a fragment");
  refused("http://h", {.strip_prefix = "api"}, "strip_prefix 'api' does not start with '/'");
  refused("http://h", {.max_connections = 0}, "max_connections");
  refused("http://h", {.timeout = std::chrono::milliseconds(0)}, "timeout");

  reverse_proxy once("http://h");
  weft::http::server_options first;
  weft::http::server_options second;
  once.attach(first);
  EXPECT_THROW(once.attach(second), std::logic_error);
}

TEST(HttpReverseProxy, CurlUploadsChunkedAndReusesItsConnection) {
  running_http upstream(local_http(), upstream_handler);
  front f(url(upstream.port(), "/v1"), {.strip_prefix = "/api"});
  const std::string front_url = url(f.server.port(), "/api/up");
  const std::string out = run_command(
      "sh -c \"printf 'chunked body' | curl -sS -H 'Transfer-Encoding: chunked' --data-binary @- "
      "'" +
      front_url + "' && curl -sS -v '" + front_url + "?a' '" + front_url + "?b'\"");
  EXPECT_NE(out.find("POST /v1/up\n"), std::string::npos) << out;
  EXPECT_NE(out.find("Content-Length: 12\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("Transfer-Encoding"), std::string::npos) << out;
  EXPECT_NE(out.find("\n\nchunked body"), std::string::npos) << out;
  EXPECT_NE(out.find("GET /v1/up?a\n"), std::string::npos) << out;
  EXPECT_NE(out.find("GET /v1/up?b\n"), std::string::npos) << out;
  EXPECT_NE(out.find("Re-using existing connection"), std::string::npos) << out;
  EXPECT_EQ(settled(f.proxy).responses, 3u);
}

// --- Request bodies past request_buffer stream upstream ---

// The byte at `at` of an upload, and an order-sensitive sum over a run of them.
char upload_byte(std::uint64_t at) { return static_cast<char>('a' + (at * 7 + at / 251) % 26); }
std::uint64_t upload_sum(std::uint64_t sum, std::string_view bytes) {
  for (const char c : bytes) {
    sum = sum * 31 + static_cast<unsigned char>(c);
  }
  return sum;
}

TEST(HttpReverseProxy, ALargeUploadStreamsToTheUpstreamWhileTheClientSendsIt) {
  // 64 MiB: more than every socket buffer on the way can hold (a few MiB each), so an
  // upstream that sees its first byte before the client gave the last one was streamed to.
  constexpr std::uint64_t total = 64u << 20;
  std::atomic<std::uint64_t> given{0};
  std::atomic<std::uint64_t> given_at_first{0};
  weft::http::server_options upstream_options = local_http();
  upstream_options.limits.max_body_size = total;
  running_http upstream(upstream_options, [&](exchange& ex) {
    std::uint64_t bytes = 0;
    std::uint64_t sum = 0;
    while (const auto piece = ex.read_body_chunk()) {
      if (bytes == 0) {
        given_at_first = given.load();
      }
      bytes += piece->size();
      sum = upload_sum(sum, *piece);
    }
    const auto length = ex.request().headers.get("Content-Length");
    const std::string framing =
        length ? "length " + std::string(*length)
               : std::string(ex.request().headers.get("Transfer-Encoding").value_or("none"));
    ex.respond(status::ok, std::to_string(bytes) + " " + std::to_string(sum) + " " + framing);
  });
  reverse_proxy proxy(url(upstream.port(), "/v1"), {.strip_prefix = "/api"});
  weft::http::server_options front_options = attached(proxy);
  front_options.limits.max_body_size = total;
  running_http front_server(front_options, proxy_routes(proxy));
  weft_test::run_clean([&] {
    weft::http::client web;
    for (const bool sized : {true, false}) {
      given = 0;
      given_at_first = 0;
      std::uint64_t sum = 0;
      std::string piece;
      const weft::http::body_source source = [&]() -> std::optional<std::string_view> {
        const std::uint64_t at = given.load();
        if (at == total) {
          return std::nullopt;
        }
        piece.resize(64 << 10);
        for (std::size_t i = 0; i < piece.size(); ++i) {
          piece[i] = upload_byte(at + i);
        }
        sum = upload_sum(sum, piece);
        given = at + piece.size();
        return std::string_view(piece);
      };
      weft::http::request up;
      up.method = weft::http::method::post;
      if (sized) {
        up.headers.add("Content-Length", std::to_string(total));
      }
      const weft::http::response r =
          web.request(up, url(front_server.port(), "/api/upload"), source);
      EXPECT_EQ(r.status, status::ok);
      EXPECT_EQ(r.body, std::to_string(total) + " " + std::to_string(sum) + " " +
                            (sized ? "length " + std::to_string(total) : "chunked"));
      EXPECT_GT(given_at_first.load(), 0u);
      EXPECT_LT(given_at_first.load(), total) << (sized ? "sized" : "chunked");
    }
    web.close();
  });
  const auto stats = settled(proxy);
  EXPECT_EQ(stats.streamed_bodies, 2u);
  EXPECT_EQ(stats.responses, 2u);
}

TEST(HttpReverseProxy, AnUpstreamsEarlyAnswerToAStreamedUploadIsPassedOn) {
  // The upstream's limit is 1 MiB: it answers 413 at the head and closes while the body still
  // streams to it. The proxy passes that answer on instead of a 502 for the failed write.
  constexpr std::uint64_t total = 8u << 20;
  running_http upstream(local_http(), upstream_handler);
  reverse_proxy proxy(url(upstream.port(), "/v1"), {.strip_prefix = "/api"});
  weft::http::server_options front_options = attached(proxy);
  front_options.limits.max_body_size = total;
  running_http front_server(front_options, proxy_routes(proxy));
  weft_test::run_clean([&] {
    weft::http::client web;
    const std::string piece(64 << 10, 'p');
    std::uint64_t given = 0;
    const weft::http::body_source source = repeated_piece(piece, total, given);
    weft::http::request up;
    up.method = weft::http::method::put;
    up.headers.add("Content-Length", std::to_string(total));
    const weft::http::response r = web.request(up, url(front_server.port(), "/api/x"), source);
    EXPECT_EQ(r.status, status::content_too_large);
    EXPECT_NE(r.body.find("larger than the limit 1048576"), std::string::npos) << r.body;
    web.close();
  });
  const auto stats = settled(proxy);
  EXPECT_EQ(stats.bad_gateway, 0u);
  EXPECT_EQ(stats.responses, 1u);
  EXPECT_EQ(stats.streamed_bodies, 1u);
}

TEST(HttpReverseProxy, AClientsExpectContinueWaitsForTheUpstreamsAnswer) {
  running_http upstream(local_http(), upstream_handler);
  front through(url(upstream.port(), "/v1"), {.strip_prefix = "/api"});
  const std::string body = pattern(200000);  // past request_buffer: streamed
  const std::string head =
      " HTTP/1.1\r\nHost: front.example\r\nExpect: 100-continue\r\n"
      "Content-Length: 200000\r\n\r\n";
  // Refused by the upstream at the head: the client hears the 401 and no 100 Continue, and the
  // connection, whose body was never read, is closed after it.
  client refused(through.server.port());
  refused.send("PUT /api/refuse" + head);
  const auto answer = refused.response(weft::http::method::put);
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, status::unauthorized);
  EXPECT_EQ(answer->body, "who are you\n");
  EXPECT_TRUE(refused.closes());
  // Accepted: the upstream's 100 Continue is what lets the proxy read the body, and so what
  // sends the client its own 100; the upstream saw the expectation and got the whole body.
  client accepted(through.server.port());
  accepted.send("PUT /api/echo" + head);
  const auto go_on = accepted.response(weft::http::method::put);
  ASSERT_TRUE(go_on);
  EXPECT_EQ(go_on->status, status::continue_);
  accepted.send(body);
  const auto echo = accepted.response(weft::http::method::put);
  ASSERT_TRUE(echo);
  EXPECT_EQ(request_line(echo->body), "PUT /v1/echo");
  EXPECT_EQ(echoed(echo->body, "Expect"), "100-continue");
  EXPECT_EQ(echoed_body(echo->body), body);
  const auto stats = settled(through.proxy);
  EXPECT_EQ(stats.streamed_bodies, 2u);
  EXPECT_EQ(stats.responses, 2u);
}

// --- Upgrades through the proxy: a tunnel to the upstream ---

// A raw socket client of a tunnel: the request, the 101's head, then bytes both ways.
class tunnel_client {
 public:
  explicit tunnel_client(std::uint16_t port) : fd_(net_test::connect_to(port)) {}
  ~tunnel_client() { ::close(fd_); }
  tunnel_client(const tunnel_client&) = delete;
  tunnel_client& operator=(const tunnel_client&) = delete;
  void send(std::string_view bytes) { net_test::send_all(fd_, bytes); }
  // Reads until `text` is among what came (true), or the end or 10 s (false).
  bool wait_for(std::string_view text) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (got_.find(text) == std::string::npos) {
      if (!read_some(deadline)) {
        return false;
      }
    }
    return true;
  }
  // Whether the proxy ends the stream within 10 s (what came meanwhile is kept).
  bool ends() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (read_some(deadline)) {
    }
    return ended_;
  }
  void shutdown_write() { ::shutdown(fd_, SHUT_WR); }
  const std::string& got() const { return got_; }

 private:
  bool read_some(std::chrono::steady_clock::time_point deadline) {
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || ended_) {
        return false;
      }
      pollfd wait{.fd = fd_, .events = POLLIN, .revents = 0};
      if (::poll(&wait, 1, static_cast<int>(left.count())) <= 0) {
        continue;
      }
      char chunk[65536];
      const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n <= 0) {
        ended_ = true;
        return false;
      }
      got_.append(chunk, static_cast<std::size_t>(n));
      return true;
    }
  }
  int fd_;
  std::string got_;
  bool ended_ = false;
};

// An upstream whose /v1/hang never answers and whose /v1/drip sends its head and one piece, then
// nothing: each under a 20 ms hangup_watch of its own, which counts the proxy's closing of the
// upstream connection. Anything else: "up".
struct abandoned_upstream {
  std::atomic<int> cancelled{0};
  running_http server{local_http(), [this](exchange& ex) {
                        const std::string_view path = ex.request().raw_path();
                        if (path != "/v1/hang" && path != "/v1/drip") {
                          ex.respond(status::ok, "up\n");
                          return;
                        }
                        weft::http::hangup_watch watch(ex, std::chrono::milliseconds(20));
                        try {
                          if (path == "/v1/drip") {
                            auto writer = ex.start_response(weft::http::response{});
                            writer.write("first piece\n");
                          }
                          weft::sleep_for(std::chrono::hours(1));
                        } catch (const weft::cancelled_error&) {
                          ++cancelled;
                          throw;
                        }
                      }};
};

TEST(HttpReverseProxy, AClientThatLeavesHasItsUpstreamRequestAbandoned) {
  abandoned_upstream upstream;
  // One upstream connection: a request the proxy went on waiting for would hold it.
  front f(url(upstream.server.port(), "/v1"), {.strip_prefix = "/api",
                                               .max_connections = 1,
                                               .client_check = std::chrono::milliseconds(20)});
  {
    client c(f.server.port());
    c.send("GET /api/hang HTTP/1.1\r\nHost: front.example\r\n\r\n");
    ASSERT_TRUE(wait_in_flight(f.proxy, 1));
  }  // the client closes while the proxy waits for the head
  ASSERT_TRUE(eventually([&] { return upstream.cancelled == 1; }));
  {
    tunnel_client d(f.server.port());
    d.send("GET /api/drip HTTP/1.1\r\nHost: front.example\r\n\r\n");
    ASSERT_TRUE(d.wait_for("first piece\n"));
  }  // the client closes with the head and a piece of the body passed on
  ASSERT_TRUE(eventually([&] { return upstream.cancelled == 2; }));
  const auto stats = settled(f.proxy);
  EXPECT_EQ(stats.client_aborts, 2u);
  EXPECT_EQ(stats.aborted, 0u);
  EXPECT_EQ(stats.responses, 0u);
  EXPECT_EQ(f.server.server().stats().total.net.closed_by(weft::net::close_reason::peer), 2u);
  const std::vector<std::string> lines = f.log();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[0].find("/v1/hang: the client closed the connection -> abandoned"),
            std::string::npos)
      << lines[0];
  EXPECT_NE(lines[1].find("/v1/drip: the client closed the connection -> abandoned"),
            std::string::npos)
      << lines[1];
  // The one upstream connection is free again.
  client c(f.server.port());
  EXPECT_EQ(body_of(get(c, "/api/x")), "up\n");
}

std::string upgrade_head(std::string_view target, std::string_view protocol = "echo/1") {
  return "GET " + std::string(target) +
         " HTTP/1.1\r\nHost: front.example\r\nConnection: keep-alive, Upgrade\r\nUpgrade: " +
         std::string(protocol) + "\r\n\r\n";
}

// The upstream of the tunnel tests. /ws/echo: a WebSocket echo (permessage-deflate agreed when
// offered). /v1/echo: "echo/1", switched with the fields it was asked with in X-Seen; it echoes
// every byte until the client's direction ends, then counts it in `ended`. /v1/bye: "echo/1"
// that writes "bye" and ends its direction first. /v1/ticks: twelve "tick" 150 ms apart, then
// waits for the client's end. /v1/flood: 64 MiB in 64 KiB sends, counted as they are accepted,
// then its end. Anything else: 426 naming echo/1.
struct tunnel_upstream {
  std::atomic<int> ended{0};
  std::atomic<std::uint64_t> flooded{0};
  static constexpr std::uint64_t flood_size = std::uint64_t{64} << 20;

  weft::http::router routes() {
    weft::http::router r;
    weft::net::websocket_options ws;
    ws.deflate.enabled = true;
    r.get("/ws/echo", [protocol = std::make_shared<weft::net::websocket>(ws)](exchange& ex) {
      weft::net::connection& c = ex.upgrade(protocol);
      weft::net::message m;
      while (c.receive(m)) {
        c.send(m.data, m.kind);
      }
    });
    r.get("/v1/*what", [this](exchange& ex) { serve(ex); });
    return r;
  }

  void serve(exchange& ex) {
    const weft::http::request& r = ex.request();
    const std::string_view path = r.raw_path();
    if (r.headers.get("Upgrade") != "echo/1") {
      weft::http::response refusal;
      refusal.status = status::upgrade_required;
      refusal.headers.add("Upgrade", "echo/1");
      refusal.body = "speak echo/1\n";
      ex.respond(std::move(refusal));
      return;
    }
    weft::http::response head;
    head.headers.add("Upgrade", "echo/1");
    head.headers.add("Keep-Alive", "timeout=5");  // hop-by-hop: the proxy drops it
    head.headers.add("X-Seen", std::string(r.headers.get("Connection").value_or("")) + " | " +
                                   std::string(r.headers.get("X-Forwarded-For").value_or("")));
    weft::net::connection& c = ex.switch_protocols(head);
    weft::net::message m;
    if (path == "/v1/count") {
      // Answers once the client ended its direction: the count of what it sent.
      c.set_half_close(true);
      std::uint64_t got = 0;
      while (c.receive(m)) {
        got += m.data.size();
      }
      c.send("counted " + std::to_string(got));
      return;
    }
    if (path == "/v1/bye") {
      c.send("bye");
      return;
    }
    if (path == "/v1/ticks") {
      for (int i = 0; i < 12; ++i) {
        weft::sleep_for(std::chrono::milliseconds(150));
        c.send("tick");
      }
    } else if (path == "/v1/flood") {
      const std::string piece(64 << 10, 'f');
      while (flooded.load() < flood_size) {
        c.send(piece);
        flooded.fetch_add(piece.size());
      }
      return;
    }
    while (c.receive(m)) {
      c.send(m.data);
    }
    ended.fetch_add(1);
  }
};

void expect_ws_session(const std::string& output) {
  EXPECT_EQ(output,
            "ok handshake\nok text\nok binary\nok empty\nok fragmented\nok 1MiB\nok ping\nok "
            "close\n");
}

TEST(HttpReverseProxyTunnel, NodeWsSessionsPassThroughWithAndWithoutCompression) {
  ASSERT_EQ(::access("/usr/share/nodejs/ws/package.json", R_OK), 0)
      << "Node's ws package is missing: install node-ws (scripts/install-deps)";
  tunnel_upstream behind;
  running_http upstream(local_http(), behind.routes());
  front f(url(upstream.port(), ""), {.strip_prefix = "/api"});
  const std::string script = std::string(WEFT_TEST_SOURCE_DIR) + "/net/clients/ws_client.js";
  const std::string ws_url = "ws://127.0.0.1:" + std::to_string(f.server.port()) + "/api/ws/echo";
  expect_ws_session(run_command("env NODE_PATH=/usr/share/nodejs node " + script + " " + ws_url));
  // Sec-WebSocket-Extensions goes end to end: the upstream agrees permessage-deflate with Node.
  EXPECT_EQ(run_command("env NODE_PATH=/usr/share/nodejs node " + script + " --deflate " + ws_url),
            "ok handshake\nok deflate\nok text\nok binary\nok empty\nok fragmented\nok 1MiB\nok "
            "ping\nok close\n");
  EXPECT_TRUE(eventually([&] { return f.proxy.stats().tunnels_open == 0; }));
  const auto stats = settled(f.proxy);
  EXPECT_EQ(stats.upgrades, 2u);
  EXPECT_EQ(stats.bad_gateway, 0u);
  // The 1 MiB message went both ways in the uncompressed session.
  EXPECT_GT(stats.tunnel_bytes_up, std::uint64_t{1} << 20);
  EXPECT_GT(stats.tunnel_bytes_down, std::uint64_t{1} << 20);
}

TEST(HttpReverseProxyTunnel, GorillaWebsocketSessionPassesThrough) {
  ASSERT_EQ(::access(WEFT_TEST_WS_CLIENT_GO, X_OK), 0)
      << "the gorilla/websocket client " << WEFT_TEST_WS_CLIENT_GO
      << " was not built: install golang-go and golang-github-gorilla-websocket-dev "
         "(scripts/install-deps), then re-run cmake";
  tunnel_upstream behind;
  running_http upstream(local_http(), behind.routes());
  front f(url(upstream.port(), ""), {.strip_prefix = "/api"});
  EXPECT_EQ(run_command(std::string(WEFT_TEST_WS_CLIENT_GO) +
                        " ws://127.0.0.1:" + std::to_string(f.server.port()) + "/api/ws/echo"),
            "ok handshake\nok text\nok binary\nok empty\nok fragmented\nok 1MiB\nok "
            "after-ping\nok ping\nok close\n");
  EXPECT_TRUE(eventually([&] { return f.proxy.stats().tunnels_open == 0; }));
  EXPECT_EQ(settled(f.proxy).upgrades, 1u);
}

TEST(HttpReverseProxyTunnel, EitherSidesEndEndsTheTunnel) {
  tunnel_upstream behind;
  running_http upstream(local_http(), behind.routes());
  front f(url(upstream.port(), "/v1"), {.strip_prefix = "/api"});
  {
    // The client ends first: the upstream's receive ends, its handler returns, and the
    // client reads the end after its echo.
    tunnel_client c(f.server.port());
    c.send(upgrade_head("/api/echo") + "early bytes");
    ASSERT_TRUE(c.wait_for("early bytes")) << c.got();
    EXPECT_EQ(c.got().rfind("HTTP/1.1 101 Switching Protocols\r\n", 0), 0u) << c.got();
    const std::string head = c.got().substr(0, c.got().find("\r\n\r\n") + 4);
    EXPECT_NE(head.find("\r\nUpgrade: echo/1\r\n"), std::string::npos) << head;
    EXPECT_NE(head.find("\r\nConnection: Upgrade\r\n"), std::string::npos) << head;
    EXPECT_EQ(head.find("Keep-Alive"), std::string::npos) << head;
    // The upstream was asked with "Connection: Upgrade" only, and the client's address.
    EXPECT_NE(head.find("\r\nX-Seen: Upgrade | 127.0.0.1\r\n"), std::string::npos) << head;
    c.send("more");
    ASSERT_TRUE(c.wait_for("early bytesmore")) << c.got();
    c.shutdown_write();
    EXPECT_TRUE(c.ends());
    EXPECT_TRUE(eventually([&] { return behind.ended.load() == 1; }));
  }
  {
    // The upstream ends first: its last bytes arrive, then the end.
    tunnel_client c(f.server.port());
    c.send(upgrade_head("/api/bye"));
    EXPECT_TRUE(c.ends());
    EXPECT_EQ(c.got().substr(c.got().find("\r\n\r\n") + 4), "bye");
  }
  {
    // The client half-closes: its FIN reaches the upstream, whose answer after it still comes
    // back whole, then the end.
    tunnel_client c(f.server.port());
    c.send(upgrade_head("/api/count") + "12345");
    ASSERT_TRUE(c.wait_for("\r\n\r\n")) << c.got();
    c.send("678");
    c.shutdown_write();
    EXPECT_TRUE(c.ends());
    EXPECT_EQ(c.got().substr(c.got().find("\r\n\r\n") + 4), "counted 8");
  }
  EXPECT_TRUE(eventually([&] { return f.proxy.stats().tunnels_open == 0; }));
  const auto stats = settled(f.proxy);
  EXPECT_EQ(stats.upgrades, 3u);
  EXPECT_EQ(stats.tunnel_bytes_up, std::string("early bytesmore12345678").size());
  EXPECT_EQ(stats.tunnel_bytes_down, std::string("early bytesmorebyecounted 8").size());
}

TEST(HttpReverseProxyTunnel, ARefusalOrAFailureIsAnOrdinaryAnswer) {
  tunnel_upstream behind;
  running_http upstream(local_http(), behind.routes());
  front f(url(upstream.port(), "/v1"), {.strip_prefix = "/api"});
  client c(f.server.port());
  c.send(upgrade_head("/api/echo", "chat/2"));
  auto r = c.response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, status::upgrade_required);
  EXPECT_EQ(r->body, "speak echo/1\n");
  EXPECT_EQ(r->headers.get("Upgrade"), "echo/1");
  // The connection goes on as HTTP.
  r = get(c, "/local");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "served here\n");

  const weft_test::refusing_port nothing;
  front unreachable(url(nothing.port(), ""));
  client d(unreachable.server.port());
  d.send(upgrade_head("/api/echo"));
  r = d.response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, status::bad_gateway);
  EXPECT_EQ(settled(unreachable.proxy).bad_gateway, 1u);
  EXPECT_EQ(settled(unreachable.proxy).upgrades, 0u);
  EXPECT_EQ(settled(f.proxy).upgrades, 0u);
}

TEST(HttpReverseProxyTunnel, WithUpgradesOffTheUpstreamSeesAPlainRequest) {
  running_http upstream(local_http(), upstream_handler);
  front f(url(upstream.port(), "/v1"), {.strip_prefix = "/api", .upgrades = false});
  client c(f.server.port());
  c.send(upgrade_head("/api/echo"));
  auto r = c.response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, status::ok);
  EXPECT_EQ(echoed(r->body, "Upgrade"), "");
  EXPECT_EQ(echoed(r->body, "Connection"), "");
  EXPECT_EQ(settled(f.proxy).upgrades, 0u);
}

TEST(HttpReverseProxyTunnel, AnIdleTunnelIsClosedAndEitherDirectionKeepsItOpen) {
  tunnel_upstream behind;
  running_http upstream(local_http(), behind.routes());
  front f(url(upstream.port(), "/v1"),
          {.strip_prefix = "/api", .tunnel_idle_timeout = std::chrono::milliseconds(1000)});
  // Twelve ticks 150 ms apart from the upstream alone keep the tunnel open past 1 s...
  tunnel_client c(f.server.port());
  const auto opened = std::chrono::steady_clock::now();
  c.send(upgrade_head("/api/ticks"));
  std::string ticks;
  for (int i = 0; i < 12; ++i) {
    ticks += "tick";
  }
  ASSERT_TRUE(c.wait_for(ticks)) << c.got();
  EXPECT_GE(std::chrono::steady_clock::now() - opened, std::chrono::milliseconds(1500));
  // ...and once nothing moves for a second it is closed at both ends.
  EXPECT_TRUE(c.ends());
  EXPECT_TRUE(eventually([&] { return behind.ended.load() == 1; }));
  EXPECT_TRUE(eventually([&] { return f.proxy.stats().tunnels_open == 0; }));
}

TEST(HttpReverseProxyTunnel, AClientThatDoesNotReadHoldsTheUpstreamBack) {
  tunnel_upstream behind;
  running_http upstream(local_http(), behind.routes());
  front f(url(upstream.port(), "/v1"), {.strip_prefix = "/api"});
  tunnel_client c(f.server.port());
  c.send(upgrade_head("/api/flood"));
  ASSERT_TRUE(c.wait_for("\r\n\r\n"));
  // The client reads nothing more: the upstream's sends stop once the buffers on the way (the
  // kernel's, and each connection's 1 MiB send buffer) are full.
  std::uint64_t before = 0;
  EXPECT_TRUE(eventually([&] {
    const std::uint64_t now = behind.flooded.load();
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    before = now;
    return now > 0 && behind.flooded.load() == now;
  }));
  EXPECT_LT(before, tunnel_upstream::flood_size * 3 / 4);
  // Reading it all lets the rest through, every byte.
  EXPECT_TRUE(c.ends());
  const std::size_t body = c.got().size() - (c.got().find("\r\n\r\n") + 4);
  EXPECT_EQ(body, tunnel_upstream::flood_size);
  EXPECT_EQ(c.got().find_first_not_of('f', c.got().find("\r\n\r\n") + 4), std::string::npos);
}

// --- Several upstreams: round robin, the next one after a failed connect, down for a while ---

weft::http::router named(std::string name) {
  weft::http::router r;
  r.any("/*any", [name](exchange& ex) { ex.respond(status::ok, name + " " + ex.read_body()); });
  return r;
}

std::string body_through(client& c, std::string_view target) {
  return body_of(get(c, std::string(target)));
}

// The bodies of n GETs of target, one after another, joined.
std::string bodies_through(client& c, std::string_view target, int n) {
  std::string seen;
  for (int i = 0; i < n; ++i) {
    seen += body_through(c, target);
  }
  return seen;
}

TEST(HttpReverseProxyUpstreams, RequestsGoToEachInTurn) {
  running_http a(local_http(), named("a"));
  running_http b(local_http(), named("b"));
  front f({url(a.port(), ""), url(b.port(), "")});
  client c(f.server.port());
  const std::string seen = bodies_through(c, "/api/x", 4);
  EXPECT_EQ(seen, "a b a b ");
  const auto stats = settled(f.proxy);
  ASSERT_EQ(stats.upstreams.size(), 2u);
  EXPECT_EQ(stats.upstreams[0].url, url(a.port(), ""));
  EXPECT_EQ(stats.upstreams[0].requests, 2u);
  EXPECT_EQ(stats.upstreams[1].requests, 2u);
  EXPECT_EQ(stats.retries, 0u);
}

TEST(HttpReverseProxyUpstreams, AFailedConnectGoesToTheNextWhichServesWhileTheFirstIsDown) {
  running_http a(local_http(), named("a"));
  const weft_test::refusing_port refusing;
  const std::uint16_t dead = refusing.port();
  front f({url(dead, ""), url(a.port(), "")}, {.fail_timeout = std::chrono::seconds(60)});
  client c(f.server.port());
  // A POST too: nothing was sent to the dead one, so any method goes on to the next.
  c.send("POST /api/x HTTP/1.1\r\nHost: front.example\r\nContent-Length: 4\r\n\r\nbody");
  EXPECT_EQ(body_of(c.response()), "a body");
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(body_through(c, "/api/x"), "a ");
  }
  const auto stats = settled(f.proxy);
  EXPECT_EQ(stats.retries, 1u);
  EXPECT_EQ(stats.bad_gateway, 0u);
  EXPECT_EQ(stats.responses, 4u);
  EXPECT_EQ(stats.upstreams[0].requests, 1u);  // down for a minute after its failure
  EXPECT_EQ(stats.upstreams[0].connect_failures, 1u);
  EXPECT_EQ(stats.upstreams[0].marked_down, 1u);
  EXPECT_EQ(stats.upstreams[1].requests, 4u);
  const auto lines = f.log();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[0].find(url(dead, "") + " is down for 60000 ms on worker 0 after 1 failed"),
            std::string::npos)
      << lines[0];
  EXPECT_NE(lines[1].find("Connection refused -> the next upstream"), std::string::npos)
      << lines[1];
}

TEST(HttpReverseProxyUpstreams, ADownUpstreamIsTriedAgainAfterFailTimeout) {
  running_http a(local_http(), named("a"));
  const weft_test::refusing_port refusing;
  const std::uint16_t dead = refusing.port();
  front f({url(dead, ""), url(a.port(), "")}, {.fail_timeout = std::chrono::milliseconds(200)});
  client c(f.server.port());
  // Every answer comes from a; the dead one is tried again once its 200 ms are over.
  bool again = false;
  for (int i = 0; i < 200 && !again; ++i) {
    EXPECT_EQ(body_through(c, "/api/x"), "a ");
    again = f.proxy.stats().upstreams[0].requests >= 2;
    if (!again) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // time has to pass
    }
  }
  EXPECT_TRUE(again);
  EXPECT_GE(settled(f.proxy).upstreams[0].marked_down, 2u);
}

TEST(HttpReverseProxyUpstreams, WhenEveryOneFailsEachIsTriedOnceAndTheAnswerIs502) {
  const weft_test::refusing_port refusing_a;
  const weft_test::refusing_port refusing_b;
  const std::uint16_t dead_a = refusing_a.port();
  const std::uint16_t dead_b = refusing_b.port();
  front f({url(dead_a, ""), url(dead_b, "")}, {.max_fails = 2});
  client c(f.server.port());
  for (int i = 0; i < 3; ++i) {
    auto r = get(c, "/api/x");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, status::bad_gateway);
  }
  const auto stats = settled(f.proxy);
  EXPECT_EQ(stats.bad_gateway, 3u);
  EXPECT_EQ(stats.retries, 3u);
  // Both down after their second failure, and tried all the same.
  EXPECT_EQ(stats.upstreams[0].requests, 3u);
  EXPECT_EQ(stats.upstreams[1].requests, 3u);
  EXPECT_EQ(stats.upstreams[0].marked_down, 1u);
  EXPECT_EQ(stats.upstreams[1].marked_down, 1u);
  EXPECT_THROW(reverse_proxy(std::vector<std::string>{}), std::invalid_argument);
  try {
    reverse_proxy bad(std::vector<std::string>{url(dead_a, ""), "ftp://h/"});
    ADD_FAILURE() << "a bad upstream among several was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'ftp://h/'"), std::string::npos) << e.what();
  }
}

TEST(HttpReverseProxyUpstreams, SeventyUpstreamsAreEachTriedOnceBeforeTheOneThatServes) {
  // More upstreams than a request's tried set holds in place (64): the ones past it count too.
  running_http a(local_http(), named("a"));
  const weft_test::refusing_port refusing;
  std::vector<std::string> urls;
  for (int i = 0; i < 69; ++i) {
    urls.push_back(url(refusing.port(), "/dead" + std::to_string(i)));
  }
  urls.push_back(url(a.port(), ""));
  front f(urls, {.fail_timeout = std::chrono::seconds(60)});
  client c(f.server.port());
  EXPECT_EQ(body_through(c, "/api/x"), "a ");
  auto stats = settled(f.proxy);
  EXPECT_EQ(stats.retries, 69u);
  ASSERT_EQ(stats.upstreams.size(), 70u);
  for (std::size_t i = 0; i < 70; ++i) {
    EXPECT_EQ(stats.upstreams[i].requests, 1u) << "upstream " << i;
  }
  // The 69 are down for a minute now: the next request goes straight to the one that serves.
  EXPECT_EQ(body_through(c, "/api/x"), "a ");
  stats = settled(f.proxy);
  EXPECT_EQ(stats.retries, 69u);
  EXPECT_EQ(stats.upstreams[69].requests, 2u);
  EXPECT_EQ(stats.bad_gateway, 0u);
}

TEST(HttpReverseProxyUpstreams, WeightsShareTheRequestsSmoothly) {
  running_http a(local_http(), named("a"));
  running_http b(local_http(), named("b"));
  running_http c(local_http(), named("c"));
  front f({url(a.port(), ""), url(b.port(), ""), url(c.port(), "")}, {.weights = {5, 1, 1}});
  client k(f.server.port());
  const std::string seen = bodies_through(k, "/api/x", 14);
  // nginx's smooth weighted round robin: five of seven to a, never five in a row.
  EXPECT_EQ(seen, "a a b a c a a a a b a c a a ");
  const auto stats = settled(f.proxy);
  EXPECT_EQ(stats.upstreams[0].requests, 10u);
  EXPECT_EQ(stats.upstreams[0].weight, 5u);
  EXPECT_EQ(stats.upstreams[1].requests, 2u);
  EXPECT_EQ(stats.upstreams[2].weight, 1u);
  EXPECT_EQ(stats.upstreams[2].in_flight, 0u);
  for (const std::vector<unsigned>& bad :
       {std::vector<unsigned>{1}, std::vector<unsigned>{1, 0}, std::vector<unsigned>{1, 1001}}) {
    try {
      reverse_proxy refused(std::vector<std::string>{url(a.port(), ""), url(b.port(), "")},
                            {.weights = bad});
      ADD_FAILURE() << "weights of " << bad.size() << " taken";
    } catch (const std::invalid_argument& e) {
      const std::string why = e.what();
      EXPECT_TRUE(why.find("weights for 2 upstreams") != std::string::npos ||
                  why.find("is not from 1 to 1000") != std::string::npos)
          << why;
    }
  }
}

// Two upstreams whose /slow waits until the test writes a byte into a pipe; any other path is
// answered at once with the upstream's name.
struct held_upstreams {
  held_upstreams() { EXPECT_EQ(::pipe2(release, O_NONBLOCK | O_CLOEXEC), 0); }
  ~held_upstreams() {
    ::close(release[0]);
    ::close(release[1]);
  }
  weft::http::router routes(std::string name) {
    weft::http::router r;
    const int fd = release[0];
    r.get("/slow", [name, fd](exchange& ex) {
      char byte = 0;
      while (::read(fd, &byte, 1) != 1) {
        weft::wait_readable(fd);
      }
      ex.respond(status::ok, name + " slow");
    });
    r.any("/*any", [name](exchange& ex) { ex.respond(status::ok, name + " "); });
    return r;
  }
  int release[2] = {-1, -1};
};

TEST(HttpReverseProxyUpstreams, LeastConnectionsSendsAroundARequestInFlight) {
  for (const proxy_balance balance :
       {proxy_balance::least_connections, proxy_balance::round_robin}) {
    held_upstreams held;
    running_http a(local_http(), held.routes("a"));
    running_http b(local_http(), held.routes("b"));
    front f({url(a.port(), ""), url(b.port(), "")}, {.balance = balance});
    client slow(f.server.port());
    slow.send("GET /api/slow HTTP/1.1\r\nHost: front.example\r\n\r\n");
    ASSERT_TRUE(wait_in_flight(f.proxy, 1));
    const auto during = f.proxy.stats();
    const std::size_t busy = during.upstreams[0].in_flight == 1 ? 0 : 1;
    const std::string busy_name = busy == 0 ? "a " : "b ";
    client quick(f.server.port());
    const std::string seen = bodies_through(quick, "/api/x", 4);
    if (balance == proxy_balance::least_connections) {
      // Every quick request goes to the one with nothing in flight.
      EXPECT_EQ(seen.find(busy_name), std::string::npos) << seen;
    } else {
      // In turn, whatever is in flight: two of four to the busy one.
      EXPECT_NE(seen.find(busy_name), std::string::npos) << seen;
    }
    EXPECT_EQ(f.proxy.stats().upstreams[busy].in_flight, 1u);
    ASSERT_EQ(::write(held.release[1], "x", 1), 1);
    EXPECT_EQ(body_of(slow.response()), std::string(busy == 0 ? "a" : "b") + " slow");
    EXPECT_TRUE(wait_in_flight(f.proxy, 0));
  }
}

TEST(HttpReverseProxyUpstreams, AnIdempotentRequestAnUpstreamDroppedOrLeftUnansweredGoesOn) {
  running_http a(local_http(), named("a"));
  {
    // Reads the head, then closes without a byte: GET goes on to a.
    raw_upstream dropping("");
    front f({dropping.url(), url(a.port(), "")}, {.fail_timeout = std::chrono::seconds(60)});
    client c(f.server.port());
    EXPECT_EQ(body_through(c, "/api/x"), "a ");
    const auto stats = settled(f.proxy);
    EXPECT_EQ(stats.retries, 1u);
    EXPECT_EQ(stats.bad_gateway, 0u);
    EXPECT_EQ(stats.upstreams[0].requests, 1u);
    EXPECT_EQ(stats.upstreams[0].response_failures, 1u);
    EXPECT_EQ(stats.upstreams[0].connect_failures, 0u);
    EXPECT_EQ(stats.upstreams[0].marked_down, 1u);  // a failed try counts toward max_fails
    EXPECT_EQ(dropping.heads().size(), 1u);
    const auto lines = f.log();
    ASSERT_EQ(lines.size(), 2u);
    EXPECT_NE(lines[0].find("after 1 failed try"), std::string::npos) << lines[0];
    EXPECT_NE(lines[1].find("GET " + dropping.url("/x")), std::string::npos) << lines[1];
    EXPECT_NE(lines[1].find("-> the next upstream"), std::string::npos) << lines[1];
  }
  {
    // Reads the head and never answers: after `timeout`, GET goes on to a.
    raw_upstream silent("", true);
    front f({silent.url(), url(a.port(), "")}, {.timeout = std::chrono::milliseconds(200)});
    client c(f.server.port());
    const auto started = std::chrono::steady_clock::now();
    EXPECT_EQ(body_through(c, "/api/x"), "a ");
    EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(150));
    const auto stats = settled(f.proxy);
    EXPECT_EQ(stats.retries, 1u);
    EXPECT_EQ(stats.gateway_timeout, 0u);
    EXPECT_EQ(stats.upstreams[0].response_failures, 1u);
  }
}

TEST(HttpReverseProxyUpstreams, AStreamedBodyGoesToTheNextUpstreamOnlyBeforeItWasRead) {
  const std::string body = pattern(200 << 10);  // past the 64 KiB request_buffer
  const std::string length = "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  running_http a(local_http(), named("a"));
  {
    // The first refuses the connect: no byte of the body was read, so it goes on whole.
    const weft_test::refusing_port refusing;
    front f({url(refusing.port(), ""), url(a.port(), "")});
    client c(f.server.port());
    c.send("POST /api/x HTTP/1.1\r\nHost: front.example\r\n" + length + body);
    const auto r = c.response();
    ASSERT_TRUE(r);
    EXPECT_TRUE(r->body == "a " + body) << r->body.size();
    const auto stats = settled(f.proxy);
    EXPECT_EQ(stats.streamed_bodies, 1u);
    EXPECT_EQ(stats.retries, 1u);
    EXPECT_EQ(stats.upstreams[1].requests, 1u);
  }
  {
    // The first takes the head and drops the connection once the body streams to it: a PUT
    // may be repeated, but the body that went to it is gone, so the answer is 502.
    raw_upstream dropping("");
    front f({dropping.url(), url(a.port(), "")}, {.max_fails = 0});
    client c(f.server.port());
    c.send("PUT /api/x HTTP/1.1\r\nHost: front.example\r\n" + length + body);
    const auto r = c.response();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, status::bad_gateway);
    const auto stats = settled(f.proxy);
    EXPECT_EQ(stats.retries, 0u);
    EXPECT_EQ(stats.bad_gateway, 1u);
    EXPECT_EQ(stats.upstreams[0].requests, 1u);
    EXPECT_EQ(stats.upstreams[1].requests, 0u);
    EXPECT_EQ(dropping.heads().size(), 1u);
  }
}

TEST(HttpReverseProxyUpstreams, ARequestThatMayNotBeRepeatedIsNotSentTwice) {
  raw_upstream first("");
  raw_upstream second("");
  front f({first.url(), second.url()}, {.max_fails = 0});
  client c(f.server.port());
  // The upstream that dropped the POST may have acted on it: 502, and no second upstream.
  c.send("POST /api/order HTTP/1.1\r\nHost: front.example\r\nContent-Length: 4\r\n\r\nbody");
  auto r = c.response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, status::bad_gateway);
  auto stats = settled(f.proxy);
  EXPECT_EQ(stats.retries, 0u);
  EXPECT_EQ(stats.bad_gateway, 1u);
  EXPECT_EQ(stats.upstreams[0].requests + stats.upstreams[1].requests, 1u);
  EXPECT_EQ(stats.upstreams[0].response_failures + stats.upstreams[1].response_failures, 1u);
  EXPECT_EQ(first.heads().size() + second.heads().size(), 1u);
  // A GET may be repeated: both are tried, once each, and the last failure is the answer.
  auto gone = get(c, "/api/x");
  ASSERT_TRUE(gone);
  EXPECT_EQ(gone->status, status::bad_gateway);
  stats = settled(f.proxy);
  EXPECT_EQ(stats.retries, 1u);
  EXPECT_EQ(stats.bad_gateway, 2u);
  EXPECT_EQ(first.heads().size() + second.heads().size(), 3u);
  EXPECT_EQ(stats.upstreams[0].response_failures + stats.upstreams[1].response_failures, 3u);
  EXPECT_EQ(stats.upstreams[0].marked_down + stats.upstreams[1].marked_down, 0u);
}

// A listener that never accepts, its queue full (backlog 0, filled by two connections): the
// kernel drops further SYNs, so a connect to it hangs until its own limit.
class full_listener {
 public:
  full_listener() {
    std::tie(listener_, port_) = loopback_listener(0, "full_listener");
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(port_);
    for (int i = 0; i < 2; ++i) {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      static_cast<void>(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address));
      fillers_.push_back(fd);
    }
  }
  ~full_listener() {
    for (int fd : fillers_) {
      ::close(fd);
    }
    ::close(listener_);
  }
  std::uint16_t port() const { return port_; }

 private:
  int listener_ = -1;
  std::uint16_t port_ = 0;
  std::vector<int> fillers_;
};

TEST(HttpReverseProxyUpstreams, AConnectThatTimesOutGoesToTheNext) {
  running_http a(local_http(), named("a"));
  full_listener silent;
  front f({url(silent.port(), ""), url(a.port(), "")},
          {.connect_timeout = std::chrono::milliseconds(200)});
  client c(f.server.port());
  EXPECT_EQ(body_through(c, "/api/x"), "a ");
  const auto stats = settled(f.proxy);
  EXPECT_EQ(stats.retries, 1u);
  EXPECT_EQ(stats.gateway_timeout, 0u);
  EXPECT_EQ(stats.upstreams[0].connect_failures, 1u);
  const auto lines = f.log();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[1].find("timed out connecting"), std::string::npos) << lines[1];
  // With it alone, the same timeout is a 504.
  front alone(url(silent.port(), ""),
              {.strip_prefix = "/api", .connect_timeout = std::chrono::milliseconds(200)});
  client d(alone.server.port());
  auto r = get(d, "/api/x");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, status::gateway_timeout);
}

}  // namespace

// weft::http::client: its options, origins and counters, and the request calls (client.hpp);
// the exchanges themselves are in client_exchange.cpp.
#include "weft/http/client.hpp"

#include <stdexcept>
#include <string>
#include <utility>

#include "http/client_call.hpp"
#include "http/client_proxy.hpp"
#include "http/client_url.hpp"
#include "net/keepalive.hpp"

namespace weft::http {

client::client(client_options options) : options_(std::move(options)) {
  if (options_.max_connections_per_host == 0) {
    throw std::invalid_argument(
        "weft::http::client: max_connections_per_host is 0; it must be at least 1");
  }
  if (options_.max_redirects < 0) {
    throw std::invalid_argument("weft::http::client: max_redirects is " +
                                std::to_string(options_.max_redirects) +
                                "; it must be 0 (do not follow) or more");
  }
  if (const std::string problem = net::detail::keepalive_problem(options_.keepalive);
      !problem.empty()) {
    throw std::invalid_argument("weft::http::client: " + problem);
  }
  if (options_.tls != nullptr && options_.tls->is_server()) {
    throw std::invalid_argument(
        "weft::http::client: tls is a server's context; a client needs net::tls_context::client");
  }
  if (options_.connect_timeout.count() <= 0 || options_.request_timeout.count() <= 0 ||
      options_.idle_timeout.count() < 0 || options_.io_timeout.count() < 0) {
    throw std::invalid_argument(
        "weft::http::client: connect_timeout and request_timeout must be positive, and "
        "idle_timeout and io_timeout zero (none) or positive");
  }
  proxies_ = detail::parse_proxies(options_.proxy);
}

client::~client() { close(); }

response client::get(std::string_view url, const headers& fields) {
  http::request r;
  r.method = method::get;
  r.headers = fields;
  return request(std::move(r), url);
}

response client::head(std::string_view url, const headers& fields) {
  http::request r;
  r.method = method::head;
  r.headers = fields;
  return request(std::move(r), url);
}

response client::post(std::string_view url, std::string body, std::string_view content_type,
                      const headers& fields) {
  http::request r;
  r.method = method::post;
  r.headers = fields;
  if (!content_type.empty()) {
    r.headers.set("Content-Type", content_type);
  }
  r.body = std::move(body);
  return request(std::move(r), url);
}

namespace {

void refuse_closed(std::string_view url) {
  throw std::logic_error("weft::http::client: a request to " + std::string(url) +
                         " after close(); make a new client");
}

// The request as upgrade() sends it: std::invalid_argument without an Upgrade field, and
// "Connection: Upgrade" added unless a Connection field lists the token already.
void prepare_upgrade(http::request& request, std::string_view url) {
  const auto offered = request.headers.get("Upgrade");
  if (!offered || offered->find_first_not_of(" \t,") == std::string_view::npos) {
    throw std::invalid_argument("weft::http::client::upgrade " + std::string(url) +
                                ": the request has no Upgrade field naming a protocol");
  }
  if (!request.headers.has_token("Connection", "upgrade")) {
    request.headers.add("Connection", "Upgrade");
  }
}

}  // namespace

response client::request(http::request request, std::string_view url) {
  return buffered_call(std::move(request), url, nullptr);
}

response client::request(http::request request, std::string_view url, const body_source& body) {
  return buffered_call(std::move(request), url, &body);
}

response client::buffered_call(http::request request, std::string_view url,
                               const body_source* body) {
  if (closed_) {
    refuse_closed(url);
  }
  response result;
  detail::client_call call{*this, std::move(request), detail::parse_client_url(url)};
  call.result = &result;
  call.source = body;
  call.run();
  return result;
}

void client::request_streaming(http::request request, std::string_view url,
                               const std::function<void(const response& head)>& on_head,
                               const std::function<void(std::string_view piece)>& on_body) {
  stream_call(std::move(request), url, on_head, on_body, nullptr);
}

void client::request_streaming(http::request request, std::string_view url, const body_source& body,
                               const std::function<void(const response& head)>& on_head,
                               const std::function<void(std::string_view piece)>& on_body) {
  stream_call(std::move(request), url, on_head, on_body, nullptr, &body);
}

void client::stream_call(http::request request, std::string_view url,
                         const std::function<void(const response& head)>& on_head,
                         const std::function<void(std::string_view piece)>& on_body,
                         std::unique_ptr<upgraded_connection>* upgrade_into,
                         const body_source* body) {
  const char* name = upgrade_into != nullptr ? "upgrade_streaming" : "request_streaming";
  if (closed_) {
    refuse_closed(url);
  }
  if (!on_head || !on_body) {
    throw std::invalid_argument(std::string("weft::http::client::") + name +
                                ": on_head and on_body must both be set");
  }
  if (upgrade_into != nullptr) {
    prepare_upgrade(request, url);
  }
  detail::client_call call{*this, std::move(request), detail::parse_client_url(url)};
  call.on_head = &on_head;
  call.on_body = &on_body;
  call.upgrade_into = upgrade_into;
  call.source = body;
  call.run();
}

upgrade_result client::upgrade(http::request request, std::string_view url) {
  if (closed_) {
    refuse_closed(url);
  }
  prepare_upgrade(request, url);
  upgrade_result result;
  detail::client_call call{*this, std::move(request), detail::parse_client_url(url)};
  call.result = &result.response;
  call.upgrade_into = &result.connection;
  call.run();
  return result;
}

std::unique_ptr<upgraded_connection> client::upgrade_streaming(
    http::request request, std::string_view url,
    const std::function<void(const response& head)>& on_head,
    const std::function<void(std::string_view piece)>& on_body) {
  std::unique_ptr<upgraded_connection> connection;
  stream_call(std::move(request), url, on_head, on_body, &connection);
  return connection;
}

detail::client_origin& client::origin_for(const detail::client_url& url,
                                          const detail::client_proxy* via, bool tunnel) {
  if (closed_) {
    refuse_closed(url.text);
  }
  const bool forward = via != nullptr && !tunnel;  // (https always tunnels: client_call::run)
  std::string key =
      via == nullptr ? url.origin
      : forward      ? via->where
                     : via->where + " tunnel " + (url.secure ? url.origin : "http://" + url.origin);
  auto found = origins_.find(key);
  if (found != origins_.end()) {
    return *found->second;
  }
  if (url.secure && tls_ == nullptr) {
    tls_ = options_.tls != nullptr ? options_.tls : net::tls_context::client();
  }
  pool_options<detail::client_connection> settings;
  settings.max = options_.max_connections_per_host;
  settings.name = "http " + key;  // "http proxy 127.0.0.1:3128 tunnel https://a.example:443"
  // A slot only: the caller connects it, bounded by its own deadline (client_connection.hpp).
  settings.factory = [limits = options_.limits] { return detail::client_connection(limits); };
  std::uint64_t* closed_count = &counters_.connections_closed;
  settings.destructor = [closed_count](detail::client_connection& connection) {
    if (connection.connected()) {
      ++*closed_count;
      connection.close();
    }
  };
  const std::chrono::milliseconds idle = options_.idle_timeout;
  settings.before_acquire = [idle](detail::client_connection& connection) {
    return connection.reusable(idle);
  };
  if (idle.count() > 0) {
    // Idle connections past idle_timeout are closed within half of it more, not only when a
    // request next takes them (a client that went quiet must not keep sockets open).
    settings.healthcheck_interval = std::max(idle / 2, std::chrono::milliseconds(1));
    settings.healthcheck = [idle](detail::client_connection& connection) {
      return connection.reusable(idle);
    };
  }
  auto made = std::make_unique<detail::client_origin>(
      detail::client_origin{forward ? via->host : url.host, forward ? via->port : url.port,
                            weft::pool<detail::client_connection>(std::move(settings)),
                            url.secure ? tls_ : nullptr, via, via != nullptr && tunnel});
  detail::client_origin& origin = *made;
  origins_.emplace(std::move(key), std::move(made));
  ++counters_.origins;
  return origin;
}

client_stats client::stats() const {
  client_stats now = counters_;
  now.idle_connections = 0;
  now.active_connections = 0;
  now.waiting_requests = 0;
  for (const auto& [key, origin] : origins_) {
    const pool_stats pool = origin->connections.stats();
    now.idle_connections += pool.idle;
    now.active_connections += pool.active;
    now.waiting_requests += pool.waiters;
  }
  return now;
}

void client::close() noexcept {
  if (closed_) {
    return;
  }
  closed_ = true;
  for (auto& [key, origin] : origins_) {
    try {
      origin->connections.close();
    } catch (...) {
      // The destructor hook closes a socket and cannot throw; nothing else can fail here.
    }
  }
}

}  // namespace weft::http

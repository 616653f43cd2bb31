// weft-httpd's routes and the numbers they show. The server (main.cpp) owns one site; its
// workers share it: everything here that more than one worker touches is atomic or guarded.
#pragma once
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "weft/http/proxy.hpp"
#include "weft/http/router.hpp"
#include "weft/http/server.hpp"
#include "weft/pg/pool.hpp"

namespace weft_httpd {

struct settings {
  std::string host = "127.0.0.1";
  std::uint16_t port = 8080;
  unsigned workers = 0;  // 0: one per core
  std::string root;
  std::string pg;  // conninfo; empty: no /pg routes
  std::string driver;
  bool log = false;
  // PEM files: with both, the server speaks HTTPS only (weft::net TLS).
  std::string tls_cert;
  std::string tls_key;
  // Every connection starts with a PROXY protocol header (behind HAProxy, an AWS NLB).
  bool proxy_protocol = false;
  std::vector<std::string> proxy_protocol_from;  // --proxy-protocol-from
  // --proxy PREFIX=URL[,URL...]: requests under PREFIX go to the upstream URLs in turn, PREFIX
  // taken off.
  struct proxy_route {
    std::string prefix;
    std::vector<std::string> upstreams;  // taken in turn
    std::vector<unsigned> weights;       // each upstream's share (" weight=N"), 1 by default
  };
  std::vector<proxy_route> proxies;
  // --proxy-balance least-conn: each route's least-loaded upstream, not the next in turn.
  bool proxy_least_conn = false;
};

// What one worker publishes about its scheduler for /stats and the page, refreshed by a
// background coroutine of that worker (another worker's scheduler may only be read on its own
// thread). Relaxed atomics: each number is a snapshot on its own, shown to people.
struct worker_slot {
  std::atomic<std::uint64_t> live_coroutines{0};
  std::atomic<std::uint64_t> max_live_coroutines{0};
  std::atomic<std::uint64_t> switches{0};
  std::atomic<std::uint64_t> stacks_pooled{0};
  std::atomic<bool> running{false};
};

// A worker's own resources, made by on_worker_start on its thread.
struct worker_local {
  std::unique_ptr<weft::pg::pool> db;
};

class site {
 public:
  explicit site(settings config);

  const settings& config() const noexcept { return config_; }
  unsigned worker_count() const noexcept { return static_cast<unsigned>(slots_.size()); }
  void set_server(weft::http::server* server) noexcept { server_ = server; }

  // The router with every route; the handlers refer to this site.
  weft::http::router make_router();
  // The per-worker hooks of the --proxy routes' upstream clients, after those options has.
  void attach_proxies(weft::http::server_options& options);

  // The per-worker hooks (server_options::on_worker_start / on_worker_stop).
  void start_worker(unsigned worker);
  void stop_worker(unsigned worker);

  // Snapshots for the page and /stats.
  struct snapshot {
    std::string driver;
    unsigned workers = 0;
    double uptime_s = 0;
    std::uint64_t rss_bytes = 0;
    std::uint64_t live_coroutines = 0;
    std::uint64_t max_live_coroutines = 0;
    std::uint64_t switches = 0;
    std::uint64_t sleepers = 0;
    std::uint64_t max_sleepers = 0;
    std::uint64_t requests = 0;
    std::uint64_t connections = 0;
    struct worker {
      std::uint64_t requests = 0;
      std::uint64_t connections = 0;
      std::uint64_t accepted = 0;
      std::uint64_t live_coroutines = 0;
      std::uint64_t switches = 0;
    };
    std::vector<worker> per_worker;
    bool pg = false;
    weft::pool_stats pool{};  // this worker's pool (pools are per worker)
    // Each --proxy: its prefix and its counters (every worker's).
    std::vector<std::pair<std::string, weft::http::proxy_stats>> proxies;
  };
  snapshot take_snapshot(unsigned asking_worker);

 private:
  void publish(unsigned worker);
  void sleep_route(weft::http::exchange& ex);
  static void upload_route(weft::http::exchange& ex);
  void pg_now(weft::http::exchange& ex);
  void pg_query(weft::http::exchange& ex);

  settings config_;
  std::chrono::steady_clock::time_point started_;
  std::vector<std::unique_ptr<worker_slot>> slots_;
  weft::http::server* server_ = nullptr;
  // One per --proxy, made (and its URL checked) by the constructor.
  std::vector<std::unique_ptr<weft::http::reverse_proxy>> proxies_;
  std::atomic<std::uint64_t> sleepers_{0};
  std::atomic<std::uint64_t> max_sleepers_{0};
};

// The HTML page at "/", with the snapshot's numbers in it (the page's script refreshes them
// from /stats every second); authority ("127.0.0.1:8080") is where the examples point.
// secure: the page was asked for over HTTPS (its examples say https://).
std::string render_page(const site::snapshot& numbers, std::string_view authority, bool secure);
// The JSON of /stats.
std::string render_stats_json(const site::snapshot& numbers);
// A JSON string literal (quotes included) for text.
std::string json_string(std::string_view text);

// A --log line on stderr ("weft-httpd: " and the line): the server's and the proxies' log.
void log_line(std::string_view line);

// This thread's worker resources.
worker_local& local();

}  // namespace weft_httpd

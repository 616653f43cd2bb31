// weft-httpd's routes: the page, /hello, /sleep, /stats, static files, the WebSocket echo.
// The /pg routes are in pg_routes.cpp.
#include "site.hpp"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <utility>

#include <zlib.h>

#include "weft/http/forms.hpp"
#include "weft/net/websocket.hpp"
#include "weft/sched/scheduler.hpp"
#include "weft/sched/task.hpp"
#include "weft/sched/this_coroutine.hpp"

namespace weft_httpd {

namespace http = weft::http;

namespace {

thread_local worker_local this_worker;

std::uint64_t resident_bytes() {
  // /proc/self/statm: size resident shared text lib data dt, in pages.
  std::ifstream statm("/proc/self/statm");
  std::uint64_t size = 0;
  std::uint64_t resident = 0;
  statm >> size >> resident;
  return resident * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

// The value of an integer query parameter within [low, high]: a 400 naming the parameter is
// answered (and nullopt returned) when it is missing, not a number or out of range.
std::optional<long> integer_parameter(http::exchange& ex, std::string_view name, long low,
                                      long high, std::optional<long> fallback = std::nullopt) {
  std::optional<std::string> text = ex.request().query(name);
  if (!text) {
    if (fallback) {
      return fallback;
    }
    ex.respond(http::status::bad_request, "missing query parameter " + std::string(name) +
                                              " (an integer from " + std::to_string(low) + " to " +
                                              std::to_string(high) + ")\n");
    return std::nullopt;
  }
  long value = 0;
  auto [end, failure] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (failure != std::errc() || end != text->data() + text->size() || value < low || value > high) {
    ex.respond(http::status::bad_request, "query parameter " + std::string(name) + "=" + *text +
                                              " is not an integer from " + std::to_string(low) +
                                              " to " + std::to_string(high) + "\n");
    return std::nullopt;
  }
  return value;
}

}  // namespace

worker_local& local() { return this_worker; }

site::site(settings config)
    : config_(std::move(config)), started_(std::chrono::steady_clock::now()) {
  const unsigned workers =
      config_.workers != 0 ? config_.workers : std::max(1u, std::thread::hardware_concurrency());
  for (unsigned index = 0; index < workers; ++index) {
    slots_.push_back(std::make_unique<worker_slot>());
  }
  for (const settings::proxy_route& route : config_.proxies) {
    http::proxy_options options;
    options.strip_prefix = route.prefix;
    options.weights = route.weights;
    if (config_.proxy_least_conn) {
      options.balance = http::proxy_balance::least_connections;
    }
    if (config_.log) {
      options.log = log_line;
    }
    proxies_.push_back(std::make_unique<http::reverse_proxy>(route.upstreams, std::move(options)));
  }
}

void log_line(std::string_view line) {
  std::fprintf(stderr, "weft-httpd: %.*s\n", static_cast<int>(line.size()), line.data());
}

void site::attach_proxies(http::server_options& options) {
  for (auto& proxy : proxies_) {
    proxy->attach(options);
  }
}

void site::publish(unsigned worker) {
  const weft::scheduler_stats& stats = weft::current_scheduler().stats();
  worker_slot& slot = *slots_[worker];
  slot.live_coroutines.store(stats.live_coroutines, std::memory_order_relaxed);
  slot.max_live_coroutines.store(stats.max_live_coroutines, std::memory_order_relaxed);
  slot.switches.store(stats.switches, std::memory_order_relaxed);
  slot.stacks_pooled.store(stats.stacks_pooled, std::memory_order_relaxed);
}

void site::start_worker(unsigned worker) {
  slots_[worker]->running.store(true, std::memory_order_relaxed);
  publish(worker);
  // Refreshes this worker's numbers four times a second while it runs; a background coroutine
  // does not keep the worker's scheduler alive, and ends with it.
  weft::spawn(
      [this, worker] {
        for (;;) {
          weft::sleep_for(std::chrono::milliseconds(250));
          publish(worker);
        }
      },
      weft::spawn_options{.name = "weft-httpd stats", .background = true});
  if (!config_.pg.empty()) {
    // One pool per worker: a pg::pool belongs to one scheduler. Connections open on demand.
    this_worker.db = std::make_unique<weft::pg::pool>(
        weft::pg::pool_options{.conninfo = config_.pg,
                               .max = 8,
                               .acquire_timeout = std::chrono::milliseconds(2000),
                               .connect_timeout = std::chrono::milliseconds(2000),
                               .name = "weft-httpd worker " + std::to_string(worker)});
  }
}

void site::stop_worker(unsigned worker) {
  if (this_worker.db) {
    this_worker.db->close();
    this_worker.db.reset();
  }
  slots_[worker]->running.store(false, std::memory_order_relaxed);
}

site::snapshot site::take_snapshot(unsigned asking_worker) {
  publish(asking_worker);  // this worker's numbers are fresh; the others' at most 250 ms old
  snapshot result;
  result.driver = std::string(weft::current_driver());
  result.workers = worker_count();
  result.uptime_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  result.rss_bytes = resident_bytes();
  result.sleepers = sleepers_.load(std::memory_order_relaxed);
  result.max_sleepers = max_sleepers_.load(std::memory_order_relaxed);
  http::server_stats server_stats = server_->stats();
  for (unsigned index = 0; index < worker_count(); ++index) {
    const worker_slot& slot = *slots_[index];
    snapshot::worker one;
    one.live_coroutines = slot.live_coroutines.load(std::memory_order_relaxed);
    one.switches = slot.switches.load(std::memory_order_relaxed);
    if (index < server_stats.workers.size()) {
      one.requests = server_stats.workers[index].requests;
      one.connections = server_stats.workers[index].net.connections;
      one.accepted = server_stats.workers[index].net.accepted;
    }
    result.live_coroutines += one.live_coroutines;
    result.max_live_coroutines += slot.max_live_coroutines.load(std::memory_order_relaxed);
    result.switches += one.switches;
    result.requests += one.requests;
    result.connections += one.connections;
    result.per_worker.push_back(one);
  }
  if (this_worker.db) {
    result.pg = true;
    result.pool = this_worker.db->stats();
  }
  for (const auto& proxy : proxies_) {
    result.proxies.emplace_back(proxy->options().strip_prefix + "/", proxy->stats());
  }
  return result;
}

void site::sleep_route(http::exchange& ex) {
  std::optional<long> ms = integer_parameter(ex, "ms", 0, 600000, 1000);
  if (!ms) {
    return;
  }
  const std::uint64_t now = sleepers_.fetch_add(1, std::memory_order_relaxed) + 1;
  std::uint64_t seen = max_sleepers_.load(std::memory_order_relaxed);
  while (seen < now && !max_sleepers_.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
  }
  struct leave {
    std::atomic<std::uint64_t>& count;
    ~leave() { count.fetch_sub(1, std::memory_order_relaxed); }
  } left{sleepers_};
  // A client that leaves ends its sleep (the watch cancels it, within a second), as does the
  // server stopping at its deadline: the cancellation throws out of here and the count still
  // goes down.
  const http::hangup_watch watch(ex);
  weft::sleep_for(std::chrono::milliseconds(*ms));
  ex.respond(http::status::ok, "slept " + std::to_string(*ms) + " ms\n");
}

// POST /upload: a multipart/form-data form (curl -F, a browser's form or FormData), read part
// by part as it arrives and never stored: each part's name, file name, type, size and CRC-32,
// a line each. A file of any size up to the body limit passes through a buffer of a few
// dozen KiB; a body that is not a form is 415 or 400 (the escaping form_error).
void site::upload_route(http::exchange& ex) {
  http::multipart_reader form(ex);
  std::string report;
  while (std::optional<http::form_part> part = form.next_part()) {
    std::uint64_t size = 0;
    uLong crc = crc32(0, nullptr, 0);
    while (std::optional<std::string_view> piece = form.read()) {
      size += piece->size();
      crc = crc32_z(crc, reinterpret_cast<const Bytef*>(piece->data()), piece->size());
    }
    char hex[9];
    std::snprintf(hex, sizeof hex, "%08lx", static_cast<unsigned long>(crc));
    report += part->name + " " + (part->filename ? "\"" + *part->filename + "\"" : "-") + " " +
              part->content_type + " " + std::to_string(size) + " bytes crc32 " + hex + "\n";
  }
  ex.respond(http::status::ok, report);
}

http::router site::make_router() {
  http::router routes;
  routes.get("/", [this](http::exchange& ex) {
    http::response page;
    page.headers.set("Content-Type", "text/html; charset=utf-8");
    page.headers.set("Cache-Control", "no-store");
    std::string authority(ex.request().host());
    if (authority.empty()) {
      const std::uint16_t port = server_ != nullptr ? server_->port() : config_.port;
      authority = config_.host + ":" + std::to_string(port);
    }
    page.body = render_page(take_snapshot(ex.worker()), authority, ex.connection().secure());
    ex.respond(std::move(page));
  });
  routes.get("/hello", [](http::exchange& ex) { ex.respond(http::status::ok, "hello\n"); });
  routes.get("/sleep", [this](http::exchange& ex) { sleep_route(ex); });
  routes.post("/upload", [](http::exchange& ex) { upload_route(ex); });
  routes.get("/stats", [this](http::exchange& ex) {
    http::response json;
    json.headers.set("Content-Type", "application/json");
    json.headers.set("Cache-Control", "no-store");
    json.body = render_stats_json(take_snapshot(ex.worker()));
    ex.respond(std::move(json));
  });
  // NAME.gz beside a file goes to a client that takes gzip, as nginx's "gzip_static on" (files
  // too big for the cache are never gzipped on the fly).
  routes.files("/static", http::static_options{.root = config_.root, .precompressed = true});
  // permessage-deflate on, as browsers offer it; without context takeover (the default) a
  // connection holds no zlib state between messages. A ping after 30 s of quiet keeps a NAT's
  // flow alive and finds a client that vanished without a FIN (closed 30 s after it, unanswered).
  weft::net::websocket_options ws;
  ws.deflate.enabled = true;
  ws.ping_interval = std::chrono::seconds(30);
  auto echo = std::make_shared<weft::net::websocket>(ws);
  routes.get("/ws/echo", [echo](http::exchange& ex) {
    weft::net::connection& socket = ex.upgrade(echo);
    weft::net::message message;
    while (socket.receive(message)) {
      socket.send(message.data, message.kind);
    }
  });
  if (!config_.pg.empty()) {
    routes.get("/pg/now", [this](http::exchange& ex) { pg_now(ex); });
    routes.get("/pg/query", [this](http::exchange& ex) { pg_query(ex); });
  }
  // Last, so that a proxy of "/" takes only what no route above serves (nginx's location /).
  for (const auto& proxy : proxies_) {
    const std::string& prefix = proxy->options().strip_prefix;
    if (!prefix.empty()) {
      routes.any(prefix, proxy->handler());
    }
    routes.any(prefix + "/*rest", proxy->handler());
  }
  return routes;
}

}  // namespace weft_httpd

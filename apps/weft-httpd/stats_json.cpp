// /stats: the site's numbers as JSON (hand-written: a dozen fields need no library).
#include <cstdio>
#include <string>

#include "site.hpp"

namespace weft_httpd {

std::string json_string(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out += '"';
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escape[8];
          std::snprintf(escape, sizeof escape, "\\u%04x", static_cast<unsigned>(c));
          out += escape;
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

std::string render_stats_json(const site::snapshot& n) {
  auto number = [](std::uint64_t value) { return std::to_string(value); };
  std::string json = "{";
  json += "\"driver\":" + json_string(n.driver);
  json += ",\"workers\":" + number(n.workers);
  char uptime[32];
  std::snprintf(uptime, sizeof uptime, "%.3f", n.uptime_s);
  json += std::string(",\"uptime_s\":") + uptime;
  json += ",\"rss_bytes\":" + number(n.rss_bytes);
  json += ",\"coroutines_alive\":" + number(n.live_coroutines);
  json += ",\"coroutines_max\":" + number(n.max_live_coroutines);
  json += ",\"switches\":" + number(n.switches);
  json += ",\"sleepers\":" + number(n.sleepers);
  json += ",\"sleepers_max\":" + number(n.max_sleepers);
  json += ",\"requests\":" + number(n.requests);
  json += ",\"connections\":" + number(n.connections);
  json += ",\"per_worker\":[";
  for (std::size_t index = 0; index < n.per_worker.size(); ++index) {
    const auto& w = n.per_worker[index];
    json += index == 0 ? "{" : ",{";
    json += "\"worker\":" + number(index);
    json += ",\"requests\":" + number(w.requests);
    json += ",\"connections\":" + number(w.connections);
    json += ",\"accepted\":" + number(w.accepted);
    json += ",\"coroutines_alive\":" + number(w.live_coroutines);
    json += ",\"switches\":" + number(w.switches);
    json += "}";
  }
  json += "]";
  if (n.pg) {
    json += ",\"pool\":{";
    json += "\"idle\":" + number(n.pool.idle);
    json += ",\"active\":" + number(n.pool.active);
    json += ",\"max\":" + number(n.pool.max);
    json += ",\"waiters\":" + number(n.pool.waiters);
    json += ",\"created\":" + number(n.pool.created);
    json += ",\"timeouts\":" + number(n.pool.timeouts);
    json += ",\"create_failures\":" + number(n.pool.create_failures);
    json += "}";
  } else {
    json += ",\"pool\":null";
  }
  json += ",\"proxies\":[";
  for (std::size_t index = 0; index < n.proxies.size(); ++index) {
    const auto& [prefix, p] = n.proxies[index];
    json += index == 0 ? "{" : ",{";
    json += "\"prefix\":" + json_string(prefix);
    json += ",\"requests\":" + number(p.requests);
    json += ",\"responses\":" + number(p.responses);
    json += ",\"bad_gateway\":" + number(p.bad_gateway);
    json += ",\"gateway_timeout\":" + number(p.gateway_timeout);
    json += ",\"aborted\":" + number(p.aborted);
    json += ",\"retries\":" + number(p.retries);
    json += ",\"streamed_bodies\":" + number(p.streamed_bodies);
    json += ",\"upgrades\":" + number(p.upgrades);
    json += ",\"tunnels_open\":" + number(p.tunnels_open);
    json += ",\"upstreams\":[";
    for (std::size_t at = 0; at < p.upstreams.size(); ++at) {
      const auto& u = p.upstreams[at];
      json += at == 0 ? "{" : ",{";
      json += "\"url\":" + json_string(u.url);
      json += ",\"requests\":" + number(u.requests);
      json += ",\"connect_failures\":" + number(u.connect_failures);
      json += ",\"marked_down\":" + number(u.marked_down);
      json += ",\"response_failures\":" + number(u.response_failures);
      json += ",\"weight\":" + number(u.weight);
      json += ",\"in_flight\":" + number(u.in_flight);
      json += "}";
    }
    json += "]}";
  }
  json += "]";
  json += "}\n";
  return json;
}

}  // namespace weft_httpd

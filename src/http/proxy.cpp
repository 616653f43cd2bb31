// reverse_proxy: a request rewritten for the upstream, sent through the worker's own
// http::client, and its response streamed back through the exchange (proxy.hpp has the
// contract).
#include "weft/http/proxy.hpp"

#include <chrono>
#include <functional>
#include <limits>
#include <optional>
#include <stdexcept>
#include <utility>

#include "http/chars.hpp"
#include "http/client_url.hpp"
#include "http/dot_segments.hpp"
#include "net/address.hpp"
#include "weft/net/connection.hpp"
#include "weft/sync/scope.hpp"

namespace weft::http {

namespace {

// RFC 9110 7.6.1's hop-by-hop fields, with Proxy-Connection (sent by old clients) and the proxy
// authentication pair, which are meant for the proxy they reach, as Go's ReverseProxy drops them.
// By length first: most names a proxy passes on have a length no hop-by-hop name has.
bool hop_by_hop(std::string_view name) noexcept {
  using detail::iequals;
  switch (name.size()) {
    case 2:
      return iequals(name, "TE");
    case 7:
      return iequals(name, "Trailer") || iequals(name, "Upgrade");
    case 10:
      return iequals(name, "Connection") || iequals(name, "Keep-Alive");
    case 16:
      return iequals(name, "Proxy-Connection");
    case 17:
      return iequals(name, "Transfer-Encoding");
    case 18:
      return iequals(name, "Proxy-Authenticate");
    case 19:
      return iequals(name, "Proxy-Authorization");
    default:
      return false;
  }
}

// Which fields of one message go no further than this hop: a hop-by-hop name, or a name its
// Connection field lists. Whether there is a Connection field is looked up once per message,
// not once per field.
class hop_filter {
 public:
  explicit hop_filter(const headers& fields)
      : fields_(fields), listed_(fields.contains("Connection")) {}
  bool stays(std::string_view name) const noexcept {
    return hop_by_hop(name) || (listed_ && fields_.has_token("Connection", name));
  }

 private:
  const headers& fields_;
  bool listed_;
};

// The bytes of a message's names and values: what a copy of its fields needs (headers::reserve).
std::size_t field_bytes(const headers& fields) noexcept {
  std::size_t bytes = 0;
  for (const auto field : fields) {
    bytes += field.name.size() + field.value.size();
  }
  return bytes;
}

// A response body of a declared size up to this is held until it is whole and answered with
// respond(): one write with its head, batched with the connection's other responses, where a
// streamed one costs a write for the head and another per piece. Larger ones, and those without
// a Content-Length (chunked: an event stream may send its first piece long before its last),
// stream as they come.
constexpr std::uint64_t whole_body_limit = 64 * 1024;

// An HTTP/1.1 request asking to switch protocols: an Upgrade field that its Connection field
// lists (RFC 9110 7.8: without the listing the field is ignored, and HTTP/1.0 cannot upgrade).
bool asks_upgrade(const request& r) noexcept {
  return r.version_minor == 1 && r.method != method::connect && r.headers.contains("Upgrade") &&
         r.headers.has_token("Connection", "upgrade");
}

// Statuses whose response has no body whatever its fields say (RFC 9110 6.4.1).
bool bodiless(status s) noexcept {
  return is_informational(s) || code_of(s) == 204 || code_of(s) == 304;
}

// A request's body as the proxy forwards it (see the file comment): read whole when it has at
// most `hold` bytes, else streamed by next(), which gives what was read first and then the
// rest as it arrives.
class forwarded_body {
 public:
  forwarded_body(exchange& ex, std::size_t hold) : ex_(ex) {
    if (const auto length = ex.request().headers.get("Content-Length")) {
      const std::uint64_t n = detail::decimal_value(*length).value_or(0);  // parser-checked
      if (n <= hold) {
        held_ = ex.read_body();
      } else {
        streamed_ = true;
        declared_ = n;
      }
    } else if (ex.request().headers.contains("Transfer-Encoding")) {
      while (const auto piece = ex.read_body_chunk()) {
        held_.append(*piece);
        if (held_.size() > hold) {
          streamed_ = true;
          break;
        }
      }
    }
  }
  // Whether it streams (next()), or was read whole (held()).
  bool streamed() const noexcept { return streamed_; }
  // A streamed body's Content-Length; none: chunked.
  std::optional<std::uint64_t> declared() const noexcept { return declared_; }
  std::string& held() noexcept { return held_; }
  // Whether next() was called: a try that took some of the body cannot be repeated.
  bool taken() const noexcept { return taken_; }
  // The next piece of a streamed body (body_source): nullopt at its end. The request's own empty
  // pieces are skipped, since an empty piece ends a body_source.
  std::optional<std::string_view> next() {
    taken_ = true;
    if (!held_given_) {
      held_given_ = true;
      if (!held_.empty()) {
        return std::string_view(held_);
      }
    }
    auto piece = ex_.read_body_chunk();
    while (piece && piece->empty()) {
      piece = ex_.read_body_chunk();
    }
    return piece;
  }

 private:
  exchange& ex_;
  std::string held_;
  std::optional<std::uint64_t> declared_;
  bool streamed_ = false;
  bool held_given_ = false;
  bool taken_ = false;
};

}  // namespace

reverse_proxy::reverse_proxy(std::string_view upstream, proxy_options options)
    : reverse_proxy(std::vector<std::string>{std::string(upstream)}, std::move(options)) {}

reverse_proxy::reverse_proxy(const std::vector<std::string>& upstreams, proxy_options options)
    : options_(std::move(options)) {
  if (upstreams.empty()) {
    throw std::invalid_argument("weft::http::reverse_proxy: no upstream given");
  }
  for (const std::string& upstream : upstreams) {
    detail::client_url url;
    try {
      url = detail::parse_client_url(upstream);
    } catch (const error& e) {
      throw std::invalid_argument("weft::http::reverse_proxy: the upstream '" + upstream +
                                  "' is not an http or https URL (" + e.what() + ")");
    }
    if (url.target.find('?') != std::string::npos || url.text.size() != upstream.size()) {
      throw std::invalid_argument("weft::http::reverse_proxy: the upstream '" + upstream +
                                  "' has a query or a fragment; give scheme, host, port and path");
    }
    auto made = std::make_unique<target>();
    made->url = upstream;
    made->origin = std::string(url.scheme()) + "://" + url.authority;
    made->base_path = url.target;
    while (!made->base_path.empty() && made->base_path.back() == '/') {
      made->base_path.pop_back();
    }
    upstreams_.push_back(std::move(made));
  }
  if (!options_.weights.empty()) {
    if (options_.weights.size() != upstreams_.size()) {
      throw std::invalid_argument(
          "weft::http::reverse_proxy: " + std::to_string(options_.weights.size()) +
          " weights for " + std::to_string(upstreams_.size()) +
          " upstreams; give one per upstream, or none");
    }
    for (std::size_t i = 0; i < upstreams_.size(); ++i) {
      const unsigned weight = options_.weights[i];
      if (weight < 1 || weight > 1000) {
        throw std::invalid_argument("weft::http::reverse_proxy: the weight " +
                                    std::to_string(weight) + " of upstream '" + upstreams_[i]->url +
                                    "' is not from 1 to 1000");
      }
      upstreams_[i]->weight = weight;
    }
  }
  if (options_.balance != proxy_balance::round_robin &&
      options_.balance != proxy_balance::least_connections) {
    throw std::invalid_argument("weft::http::reverse_proxy: balance " +
                                std::to_string(static_cast<int>(options_.balance)) +
                                " is neither round_robin nor least_connections");
  }
  if (options_.max_connections == 0) {
    throw std::invalid_argument("weft::http::reverse_proxy: max_connections must be at least 1");
  }
  if (options_.timeout.count() <= 0 || options_.connect_timeout.count() <= 0) {
    throw std::invalid_argument(
        "weft::http::reverse_proxy: timeout and connect_timeout must be positive");
  }
  if (options_.idle_timeout.count() < 0 || options_.tunnel_idle_timeout.count() < 0 ||
      options_.fail_timeout.count() < 0) {
    throw std::invalid_argument(
        "weft::http::reverse_proxy: idle_timeout, tunnel_idle_timeout and fail_timeout may not "
        "be negative");
  }
  if (!options_.strip_prefix.empty() && options_.strip_prefix.front() != '/') {
    throw std::invalid_argument("weft::http::reverse_proxy: strip_prefix '" +
                                options_.strip_prefix + "' does not start with '/'");
  }
  while (!options_.strip_prefix.empty() && options_.strip_prefix.back() == '/') {
    options_.strip_prefix.pop_back();
  }
}

reverse_proxy::~reverse_proxy() = default;

void reverse_proxy::attach(server_options& options) {
  if (attached_.exchange(true)) {
    throw std::logic_error("weft::http::reverse_proxy::attach: the proxy for " + upstream() +
                           " is attached already; its clients are per worker of one server");
  }
  options.on_worker_start = [this, before = std::move(options.on_worker_start)](unsigned worker) {
    if (before) {
      before(worker);
    }
    start_worker(worker);
  };
  options.on_worker_stop = [this, before = std::move(options.on_worker_stop)](unsigned worker) {
    if (before) {
      before(worker);
    }
    stop_worker(worker);
  };
}

http::handler reverse_proxy::handler() {
  return [this](exchange& ex) { forward(ex); };
}

void reverse_proxy::start_worker(unsigned worker) {
  client_options settings;
  settings.max_connections_per_host = options_.max_connections;
  settings.connect_timeout = options_.connect_timeout;
  // Each wait bounded, not the exchange: a response that keeps streaming (a download, an event
  // stream) lasts as long as its bytes keep coming, as behind nginx's proxy_read_timeout.
  settings.request_timeout = std::chrono::milliseconds::max();
  settings.io_timeout = options_.timeout;
  settings.idle_timeout = options_.idle_timeout;
  settings.max_redirects = 0;
  settings.limits.max_header_size = options_.max_response_header_size;
  settings.limits.max_body_size = std::numeric_limits<std::uint64_t>::max();
  settings.user_agent.clear();
  settings.decompress = false;
  settings.tls = options_.tls;
  auto made = std::make_unique<worker_slot>();
  made->upstream_client = std::make_unique<client>(std::move(settings));
  made->upstreams.resize(upstreams_.size());
  // Workers start their turns at different upstreams, so that the first requests of each do
  // not all go to the first one: worker w starts where w picks would have left it.
  std::uint64_t weights = 0;
  for (const auto& to : upstreams_) {
    weights += to->weight;
  }
  for (std::uint64_t i = 0; i < worker % weights; ++i) {
    pick(*made, std::chrono::steady_clock::time_point{}, tried_set(upstreams_.size()));
  }
  std::lock_guard lock(mutex_);
  if (workers_.size() <= worker) {
    workers_.resize(worker + 1);
  }
  workers_[worker] = std::move(made);
}

void reverse_proxy::stop_worker(unsigned worker) {
  std::unique_ptr<worker_slot> done;
  {
    std::lock_guard lock(mutex_);
    if (worker < workers_.size()) {
      done = std::move(workers_[worker]);
    }
  }
  if (done != nullptr) {
    done->upstream_client->close();
  }
}

reverse_proxy::worker_slot* reverse_proxy::slot_of(unsigned worker) {
  std::lock_guard lock(mutex_);
  return worker < workers_.size() ? workers_[worker].get() : nullptr;
}

std::size_t reverse_proxy::pick(worker_slot& slot, std::chrono::steady_clock::time_point now,
                                const tried_set& tried) const {
  const std::size_t count = upstreams_.size();
  if (count == 1) {
    return 0;
  }
  constexpr std::size_t none = static_cast<std::size_t>(-1);
  // Whether upstream a carries less of this worker's load than b for its weight:
  // active_a / weight_a < active_b / weight_b, multiplied out.
  const auto lighter = [&](std::size_t a, std::size_t b) {
    return slot.upstreams[a].active * upstreams_[b]->weight <
           slot.upstreams[b].active * upstreams_[a]->weight;
  };
  // Those not down first; when every untried one is down, any untried one all the same (a
  // request answered 502 at once helps nobody when one of them may be back).
  for (const bool skip_down : {true, false}) {
    const auto may_take = [&](std::size_t i) {
      return !tried.contains(i) && (!skip_down || slot.upstreams[i].down_until <= now);
    };
    // least_connections: only those as lightly loaded as the lightest take part in the turn.
    std::size_t lightest = none;
    if (options_.balance == proxy_balance::least_connections) {
      for (std::size_t i = 0; i < count; ++i) {
        if (may_take(i) && (lightest == none || lighter(i, lightest))) {
          lightest = i;
        }
      }
    }
    // Smooth weighted round robin, as nginx's: each candidate's running weight grows by its
    // weight, the one ahead takes the request and falls back by the candidates' total. Equal
    // weights give plain turns (a, b, c, a, ...); weights 5, 1, 1 give a a b a c a a, never
    // five in a row.
    std::size_t chosen = none;
    std::int64_t total = 0;
    for (std::size_t i = 0; i < count; ++i) {
      if (!may_take(i) || (lightest != none && lighter(lightest, i))) {
        continue;
      }
      health& h = slot.upstreams[i];
      h.current += upstreams_[i]->weight;
      total += upstreams_[i]->weight;
      if (chosen == none || h.current > slot.upstreams[chosen].current) {
        chosen = i;
      }
    }
    if (chosen != none) {
      slot.upstreams[chosen].current -= total;
      return chosen;
    }
  }
  return 0;  // not reached: forward() stops once every upstream was tried
}

void reverse_proxy::note_failure(worker_slot& slot, unsigned worker, std::size_t index,
                                 bool connect) {
  target& failed = *upstreams_[index];
  (connect ? failed.connect_failures : failed.response_failures)
      .fetch_add(1, std::memory_order_relaxed);
  if (options_.max_fails == 0 || upstreams_.size() == 1) {
    return;  // one upstream is tried whatever its health
  }
  health& h = slot.upstreams[index];
  const auto now = std::chrono::steady_clock::now();
  if (h.fails == 0 || now - h.first_fail >= options_.fail_timeout) {
    h.fails = 0;
    h.first_fail = now;
  }
  if (++h.fails >= options_.max_fails) {
    h.fails = 0;
    h.down_until = now + options_.fail_timeout;
    failed.marked_down.fetch_add(1, std::memory_order_relaxed);
    if (options_.log) {
      options_.log("reverse_proxy: upstream " + failed.url + " is down for " +
                   std::to_string(options_.fail_timeout.count()) + " ms on worker " +
                   std::to_string(worker) + " after " + std::to_string(options_.max_fails) +
                   " failed tr" + (options_.max_fails == 1 ? "y" : "ies"));
    }
  }
}

std::string reverse_proxy::url_for(const request& r, const target& to) const {
  std::string_view path = r.raw_path();
  const std::string_view prefix = options_.strip_prefix;
  if (!prefix.empty() && path.substr(0, prefix.size()) == prefix &&
      (path.size() == prefix.size() || path[prefix.size()] == '/')) {
    path.remove_prefix(prefix.size());
  }
  std::string url = to.origin;
  url += to.base_path;
  url += path;
  if (path.empty() && to.base_path.empty()) {
    url += '/';
  }
  if (const std::string_view query = r.raw_query(); !query.empty()) {
    url += '?';
    url += query;
  }
  return url;
}

request reverse_proxy::upstream_request(exchange& ex, bool upgrade) const {
  request& r = ex.request();
  request up;
  up.method = r.method;
  up.version_minor = 1;
  std::string forwarded_for;
  // Room for the fields passed on and the four this adds, each at most as long as the Host.
  up.headers.reserve(r.headers.size() + 4, field_bytes(r.headers) + 64 + 2 * r.host().size());
  const hop_filter hop(r.headers);
  for (std::size_t i = 0; i < r.headers.size(); ++i) {
    const auto field = r.headers[i];
    const std::string_view name = field.name;
    if (hop.stays(name) || detail::iequals(name, "Expect") ||
        detail::iequals(name, "Content-Length") || detail::iequals(name, "Host")) {
      continue;
    }
    if (options_.forwarded_headers) {
      if (detail::iequals(name, "X-Forwarded-For")) {
        if (!forwarded_for.empty()) {
          forwarded_for += ", ";
        }
        forwarded_for += detail::trim_ows(field.value);
        continue;
      }
      if (detail::iequals(name, "X-Forwarded-Proto") || detail::iequals(name, "X-Forwarded-Host")) {
        continue;
      }
    }
    up.headers.add(r.headers, i);
  }
  if (options_.preserve_host && !r.host().empty()) {
    up.headers.add("Host", r.host());
  }
  if (options_.forwarded_headers) {
    const std::string_view client = net::detail::address_part(ex.connection().peer_address());
    if (!client.empty()) {
      if (!forwarded_for.empty()) {
        forwarded_for += ", ";
      }
      forwarded_for += client;
    }
    if (!forwarded_for.empty()) {
      up.headers.add("X-Forwarded-For", forwarded_for);
    }
    up.headers.add("X-Forwarded-Proto", ex.connection().secure() ? "https" : "http");
    if (!r.host().empty()) {
      up.headers.add("X-Forwarded-Host", r.host());
    }
  }
  if (upgrade) {
    // Hop-by-hop, dropped above with Connection; client::upgrade adds "Connection: Upgrade".
    for (std::size_t i = 0; i < r.headers.size(); ++i) {
      if (detail::iequals(r.headers[i].name, "Upgrade")) {
        up.headers.add(r.headers, i);
      }
    }
  }
  return up;
}

void reverse_proxy::forward(exchange& ex) {
  counters_.requests.fetch_add(1, std::memory_order_relaxed);
  worker_slot* slot = slot_of(ex.worker());
  if (slot == nullptr) {
    throw std::logic_error("weft::http::reverse_proxy: worker " + std::to_string(ex.worker()) +
                           " has no upstream client for " + upstream() +
                           "; call attach() on the server's options before making the server");
  }
  client* upstream = slot->upstream_client.get();
  if (const std::string_view path = ex.request().raw_path(); path.empty() || path.front() != '/') {
    // CONNECT's authority, OPTIONS "*": nothing for url_for to append to an upstream's path.
    ex.respond(status::bad_request, "the request target is not a path this proxy forwards\n");
    return;
  } else if (detail::has_dot_segment(path)) {
    // Passed on, "/api/../admin" would leave the upstream's base path (a router refuses it
    // before it gets here; this proxy may be the server's only handler).
    ex.respond(status::bad_request, std::string(detail::dot_segment_refusal));
    return;
  }
  const bool head = ex.request().method == method::head;
  const bool upgrade = options_.upgrades && asks_upgrade(ex.request());
  // The first try's request; a later try builds its own (no copy for a try that may fail).
  request up = upstream_request(ex, upgrade);
  // An upgrade's body (rare, and small) is held: client::upgrade takes it whole.
  forwarded_body body(ex,
                      upgrade ? std::numeric_limits<std::size_t>::max() : options_.request_buffer);
  std::optional<body_source> body_stream;
  // Whether a streamed body waits for 100 Continue (an HTTP/1.0 client gets none: server.hpp).
  const bool expects_continue = ex.request().version_minor >= 1 && ex.request().expects_continue();
  if (body.streamed()) {
    counters_.streamed_bodies.fetch_add(1, std::memory_order_relaxed);
    body_stream.emplace([&body] { return body.next(); });
  }
  // A 101's head, passed on by switch_protocols once the upstream's connection is handed over.
  std::optional<response> switched;
  std::unique_ptr<upgraded_connection> tunnelled;
  // The response either streams through a writer, or, when its Content-Length is at most
  // whole_body_limit, is held with its body until that has come and then made whole.
  std::optional<exchange::body_writer> writer;
  std::optional<response> held;
  bool head_seen = false;  // the current try's upstream sent a response head
  const auto on_head = [&](const response& answer) {
    head_seen = true;
    if (answer.status == status::switching_protocols) {
      response back;
      back.reason = answer.reason;
      const hop_filter hop(answer.headers);
      for (std::size_t i = 0; i < answer.headers.size(); ++i) {
        const std::string_view name = answer.headers[i].name;
        if (!hop.stays(name) || detail::iequals(name, "Upgrade")) {
          back.headers.add(answer.headers, i);
        }
      }
      switched = std::move(back);
      return;
    }
    response back;
    back.status = answer.status;
    back.reason = answer.reason;
    std::optional<std::uint64_t> length;
    // A 426's Upgrade names the protocols the upstream would switch to: with upgrades on, this
    // proxy can carry that switch, so the client may take the offer (Go's ReverseProxy drops it).
    const bool offer = options_.upgrades && code_of(answer.status) == 426;
    back.headers.reserve(answer.headers.size(), field_bytes(answer.headers));
    const hop_filter hop(answer.headers);
    for (std::size_t i = 0; i < answer.headers.size(); ++i) {
      const auto field = answer.headers[i];
      if (hop.stays(field.name) && !(offer && detail::iequals(field.name, "Upgrade"))) {
        continue;
      }
      if (detail::iequals(field.name, "Content-Length")) {
        // 204 and 304 go without it; a body held whole gets it from the body.
        length = detail::decimal_value(field.value);  // the client's parser checked it
        if (bodiless(answer.status) || (!head && length && *length <= whole_body_limit)) {
          continue;
        }
      }
      back.headers.add(answer.headers, i);
    }
    // Without a body to stream: respond() (its serialiser keeps a HEAD's Content-Length as the
    // size GET's body has). A HEAD answered without one (GET's would be chunked) takes the
    // streaming path, which writes the head alone.
    if (bodiless(answer.status) || (head && length)) {
      ex.respond(std::move(back));
    } else if (!head && length && *length <= whole_body_limit) {
      back.body.reserve(static_cast<std::size_t>(*length));
      held = std::move(back);
    } else {
      writer.emplace(ex.start_response(std::move(back)));
    }
  };
  const auto on_body = [&](std::string_view piece) {
    if (writer) {
      writer->write(piece);
    } else if (held) {
      held->body.append(piece);
    }
  };
  // By reference: the lambdas capture more than std::function holds without allocating.
  const std::function<void(const response&)> head_callback = std::ref(on_head);
  const std::function<void(std::string_view)> body_callback = std::ref(on_body);
  std::string url;  // the current try's
  tried_set tried(upstreams_.size());
  in_flight_guard in_flight;  // the current try's, held through a tunnel
  // A client that leaves while its upstream is slow (a long poll) has the upstream request
  // abandoned, as nginx does, instead of holding an upstream connection until the answer.
  std::optional<hangup_watch> watch;
  if (options_.client_check.count() > 0) {
    watch.emplace(ex, options_.client_check);
  }
  for (std::size_t tries = 1;; ++tries) {
    const std::size_t index = pick(*slot, std::chrono::steady_clock::now(), tried);
    tried.add(index);
    target& to = *upstreams_[index];
    in_flight.hold(slot->upstreams[index], to);
    url = url_for(ex.request(), to);
    to.requests.fetch_add(1, std::memory_order_relaxed);
    try {
      request sent = tries == 1 ? std::move(up) : upstream_request(ex, upgrade);
      head_seen = false;
      if (body_stream) {
        if (const auto length = body.declared()) {
          sent.headers.add("Content-Length", std::to_string(*length));
          // The client's Expect: 100-continue goes on to the upstream, whose answer it awaits:
          // its 100 Continue makes the proxy read the body, which sends the client's own, and a
          // refusal (a 413, a 401) comes back before the client sent a byte of the body.
          if (expects_continue) {
            sent.headers.add("Expect", "100-continue");
          }
        }
        upstream->request_streaming(std::move(sent), url, *body_stream, head_callback,
                                    body_callback);
      } else {
        // The body: a copy while another upstream may still be tried after this one.
        sent.body = tries < upstreams_.size() ? body.held() : std::move(body.held());
        if (upgrade) {
          tunnelled =
              upstream->upgrade_streaming(std::move(sent), url, head_callback, body_callback);
        } else {
          upstream->request_streaming(std::move(sent), url, head_callback, body_callback);
        }
      }
      slot->upstreams[index].fails = 0;  // it answered
      if (tunnelled) {
        try {
          ex.switch_protocols(*switched);
        } catch (const std::invalid_argument& refused) {
          // client::upgrade checked the 101 against the offer; what else the head may break
          // (a Content-Length) makes it no 101 to pass on.
          fail(ex, status::bad_gateway, counters_.bad_gateway, url, refused);
          return;
        }
      } else if (writer) {
        writer->finish();
      } else if (held) {
        ex.respond(std::move(*held));
      }
      break;
    } catch (const body_error&) {
      // The client's streamed body failed (too large, malformed, too slow, gone): the server
      // answered it and closes the connection; the upstream's connection was discarded.
      throw;
    } catch (const weft::error& e) {  // not http::error, which `error` names here
      if (watch && watch->fired()) {
        // The cancellation the watch raised: the client's connection is destroyed, the
        // upstream's too (a cancelled client call never pools its connection).
        counters_.client_aborts.fetch_add(1, std::memory_order_relaxed);
        if (options_.log) {
          options_.log("reverse_proxy: upstream " + std::string(method_name(ex.request().method)) +
                       " " + url + ": the client closed the connection -> abandoned");
        }
        throw;
      }
      if (ex.responded()) {
        // The head is out (or the client went away while the body streamed): no status can be
        // given any more, and the connection must not end as if the body were whole. The
        // server aborts it and logs this.
        counters_.aborted.fetch_add(1, std::memory_order_relaxed);
        throw;
      }
      if (dynamic_cast<const cancelled_error*>(&e) != nullptr) {
        throw;
      }
      const auto* io = dynamic_cast<const io_error*>(&e);
      const bool timed_out = dynamic_cast<const timeout_error*>(&e) != nullptr;
      // A connect that failed: nothing was sent, so the next upstream may take any method.
      const bool connect_failed =
          dynamic_cast<const connect_timeout_error*>(&e) != nullptr ||
          (io != nullptr && (io->operation() == "connect" || io->operation() == "getaddrinfo"));
      // Connected, then the request's send or the wait for a response head failed or timed
      // out (nginx's proxy_next_upstream error timeout): a failed try all the same, but the
      // upstream may have acted on the request, so only one that may be repeated goes on.
      const bool head_failed = !connect_failed && !head_seen && (io != nullptr || timed_out);
      if (connect_failed || head_failed) {
        note_failure(*slot, ex.worker(), index, connect_failed);
        // A streamed body, once read, is gone: only a try that read none of it goes on.
        if (tries < upstreams_.size() && !body.taken() &&
            (connect_failed || is_idempotent(ex.request().method))) {
          counters_.retries.fetch_add(1, std::memory_order_relaxed);
          if (options_.log) {
            options_.log("reverse_proxy: upstream " +
                         std::string(method_name(ex.request().method)) + " " + url + ": " +
                         e.what() + " -> the next upstream");
          }
          continue;
        }
      }
      if (timed_out) {
        fail(ex, status::gateway_timeout, counters_.gateway_timeout, url, e);
      } else if (dynamic_cast<const pool_closed_error*>(&e) != nullptr) {
        fail(ex, status::service_unavailable, counters_.unavailable, url, e);
      } else {
        // io_error (connect, send, read), net::tls_error, http::error (a malformed response).
        fail(ex, status::bad_gateway, counters_.bad_gateway, url, e);
      }
      return;
    } catch (...) {
      if (ex.responded()) {
        counters_.aborted.fetch_add(1, std::memory_order_relaxed);
      }
      throw;
    }
  }
  watch.reset();  // a tunnel watches both ends itself
  counters_.responses.fetch_add(1, std::memory_order_relaxed);
  if (tunnelled) {
    counters_.upgrades.fetch_add(1, std::memory_order_relaxed);
    tunnel(ex, *tunnelled);
  }
}

void reverse_proxy::tunnel(exchange& ex, upgraded_connection& upstream) {
  using steady = std::chrono::steady_clock;
  struct closed_count {
    std::atomic<std::uint64_t>& closed;
    // Release: the worker counted the tunnel in `upgrades` before it closed it, and stats()
    // reading this count with acquire then sees that increment too (see there).
    ~closed_count() { closed.fetch_add(1, std::memory_order_release); }
  } count{counters_.tunnels_closed};
  net::connection& client = ex.connection();
  const std::chrono::milliseconds idle = options_.tunnel_idle_timeout;
  // When a byte last went either way; both directions wait until it is idle long ago, and on
  // waking early look at it again (the other direction may have moved meanwhile).
  steady::time_point last = steady::now();
  const auto wait_limit = [&] {
    return idle.count() > 0 ? timeout::at(last + idle) : timeout::never();
  };
  const auto idle_over = [&] { return idle.count() > 0 && steady::now() - last >= idle; };
  // Half-closed tunnels: either side's FIN ends only its own direction, passed on to the other
  // side as a FIN (a client that sends its last bytes and shuts down its writing still gets the
  // whole answer), and the tunnel ends when both directions have.
  client.set_half_close(true);
  weft::scope pumps;
  // The upstream's direction, in a coroutine of its own: its end passes a FIN on to the client
  // (after what it read was flushed); its failure, or the idle timeout, closes the client's
  // connection gracefully, which ends the client's direction too.
  pumps.spawn([&] {
    bool ended = false;  // by the upstream's FIN
    for (;;) {
      std::optional<std::string_view> piece;
      try {
        piece = upstream.read(wait_limit());
      } catch (const timeout_error&) {
        if (idle_over()) {
          break;
        }
        continue;
      } catch (const cancelled_error&) {
        throw;
      } catch (const weft::error&) {
        break;  // the upstream reset or broke its TLS: the tunnel ends as at its end
      }
      if (!piece) {
        ended = true;
        break;
      }
      last = steady::now();
      try {
        client.send(*piece);  // waits for room: a client that does not read slows this read
      } catch (const cancelled_error&) {
        throw;
      } catch (const weft::error&) {
        break;  // closed, or the send timeout passed (the connection closed itself)
      }
      counters_.tunnel_bytes_down.fetch_add(piece->size(), std::memory_order_relaxed);
    }
    if (ended) {
      client.shutdown_write();  // the client's own end closes it (or has: then this closes it)
    } else {
      client.close();
    }
  });
  // The client's direction, here. Its FIN goes on to the upstream, and the upstream's direction
  // runs to its own end; any other end of it closes the upstream's connection once the other
  // coroutine is stopped (the scope's end cancels it, and it leaves the socket alone).
  net::message received;
  for (;;) {
    try {
      if (!client.receive(received, wait_limit())) {
        break;  // the client ended, or the upstream's direction closed its connection
      }
    } catch (const timeout_error&) {
      if (idle_over()) {
        client.close();
        break;
      }
      continue;
    }
    last = steady::now();
    try {
      upstream.write(received.data, timeout(options_.timeout));
    } catch (const cancelled_error&) {
      throw;
    } catch (const weft::error&) {
      client.close();  // the upstream went away, or read nothing for `timeout`
      break;
    }
    counters_.tunnel_bytes_up.fetch_add(received.data.size(), std::memory_order_relaxed);
  }
  if (client.is_open() && client.input_ended()) {
    try {
      upstream.shutdown_write(timeout(options_.timeout));
      pumps.join();  // the upstream's direction, to its end (or the idle timeout)
    } catch (const cancelled_error&) {
      throw;
    } catch (const weft::error&) {
      client.close();  // the upstream went away
    }
  }
  pumps.cancel("the tunnel ended");
  pumps.join();
  upstream.close();
}

void reverse_proxy::fail(exchange& ex, status answer, std::atomic<std::uint64_t>& counter,
                         const std::string& url, const std::exception& e) {
  counter.fetch_add(1, std::memory_order_relaxed);
  if (options_.log) {
    options_.log("reverse_proxy: upstream " + std::string(method_name(ex.request().method)) + " " +
                 url + ": " + e.what() + " -> " + std::to_string(code_of(answer)));
  }
  // The reason goes to the log only: the upstream's addresses are not the client's business.
  ex.respond(answer, std::string(reason_phrase(answer)) + " (upstream)\n");
}

proxy_stats reverse_proxy::stats() const {
  proxy_stats s;
  s.requests = counters_.requests.load(std::memory_order_relaxed);
  s.responses = counters_.responses.load(std::memory_order_relaxed);
  s.client_aborts = counters_.client_aborts.load(std::memory_order_relaxed);
  s.bad_gateway = counters_.bad_gateway.load(std::memory_order_relaxed);
  s.gateway_timeout = counters_.gateway_timeout.load(std::memory_order_relaxed);
  s.unavailable = counters_.unavailable.load(std::memory_order_relaxed);
  s.aborted = counters_.aborted.load(std::memory_order_relaxed);
  s.retries = counters_.retries.load(std::memory_order_relaxed);
  s.streamed_bodies = counters_.streamed_bodies.load(std::memory_order_relaxed);
  // Closed first, with acquire: each tunnel counted closed was counted in `upgrades` before
  // (sequenced on its worker, then the release above), so the upgrades read after it include
  // it, and open never goes below zero. Read the other way, a tunnel opened and closed between
  // the two loads would be subtracted without having been added.
  const std::uint64_t closed = counters_.tunnels_closed.load(std::memory_order_acquire);
  s.upgrades = counters_.upgrades.load(std::memory_order_relaxed);
  s.tunnels_open = s.upgrades - closed;
  s.tunnel_bytes_up = counters_.tunnel_bytes_up.load(std::memory_order_relaxed);
  s.tunnel_bytes_down = counters_.tunnel_bytes_down.load(std::memory_order_relaxed);
  for (const auto& to : upstreams_) {
    s.upstreams.push_back({to->url, to->requests.load(std::memory_order_relaxed),
                           to->connect_failures.load(std::memory_order_relaxed),
                           to->marked_down.load(std::memory_order_relaxed),
                           to->response_failures.load(std::memory_order_relaxed), to->weight,
                           to->in_flight.load(std::memory_order_relaxed)});
  }
  return s;
}

}  // namespace weft::http

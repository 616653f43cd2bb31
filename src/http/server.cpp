// http::server: the server object over net::tcp_server, its options and its statistics. Each
// connection is served in the coroutine tcp_server gives it, by a connection_state on that
// coroutine's stack (server_connection.cpp); a connection hibernating between requests gets a new
// coroutine and a new connection_state when its next request comes.
#include "weft/http/server.hpp"

#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "http/compression.hpp"
#include "http/server_state.hpp"
#include "weft/http/router.hpp"

namespace weft::http {

namespace detail {

// A server's context, given the 400 a plaintext request to the HTTPS port gets (as nginx and Go
// answer it) unless it has a reply of its own.
std::shared_ptr<const net::tls_context> with_http_reply(
    const std::shared_ptr<const net::tls_context>& tls) {
  if (tls == nullptr || !tls->is_server() || !tls->plaintext_reply().empty()) {
    return tls;
  }
  static constexpr std::string_view body = "a plain HTTP request was sent to an HTTPS port\n";
  return tls->with_plaintext_reply(
      "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: " +
      std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + std::string(body));
}

namespace {

// A negative duration would switch its timeout off unseen (each is compared with zero); refused
// here, with the name the user set, before tcp_server's own check sees the ones passed on.
void check_durations(const server_options& o) {
  for (auto [name, value] :
       {std::pair{"header_timeout", o.header_timeout},
        std::pair{"keep_alive_timeout", o.keep_alive_timeout},
        std::pair{"body_timeout", o.body_timeout}, std::pair{"send_timeout", o.send_timeout},
        std::pair{"linger_time", o.linger_time}, std::pair{"stop_grace", o.stop_grace}}) {
    if (value.count() < 0) {
      throw std::invalid_argument("weft::http::server_options: " + std::string(name) +
                                  " must not be negative, got " + std::to_string(value.count()) +
                                  " ms");
    }
  }
}

net::tcp_server_options tcp_options_of(const server_options& o) {
  check_durations(o);
  net::tcp_server_options t;
  t.host = o.host;
  t.port = o.port;
  t.workers = o.workers;
  t.driver = o.driver;
  t.stacks = o.stacks;
  t.protocol = nullptr;  // the server parses requests in place in the connection's buffer
  t.max_connections = o.max_connections;
  t.send_buffer_limit = o.send_buffer_limit;
  // HTTP's own timeouts (header, keep-alive, body) are applied by the server, per phase.
  t.idle_timeout = std::chrono::milliseconds(0);
  t.handshake_timeout = std::chrono::milliseconds(0);
  t.message_timeout = std::chrono::milliseconds(0);
  t.send_timeout = o.send_timeout;
  t.stop_timeout = o.stop_grace;
  t.linger_time = o.linger_time;
  t.keepalive = o.keepalive;
  t.handle_signals = o.handle_signals;
  t.log = o.log;
  t.on_worker_start = o.on_worker_start;
  t.on_worker_stop = o.on_worker_stop;
  t.tls = with_http_reply(o.tls);
  t.tls_handshake_timeout = o.header_timeout;
  t.proxy_protocol = o.proxy_protocol;
  t.proxy_protocol_from = o.proxy_protocol_from;
  t.proxy_protocol_timeout = o.header_timeout;
  return t;
}

unsigned worker_count(unsigned asked) {
  if (asked != 0) {
    return asked;
  }
  const unsigned cores = std::thread::hardware_concurrency();
  return cores == 0 ? 1 : cores;
}

}  // namespace

server_state::server_state(server_options o, handler h)
    : options(std::move(o)),
      serve_request(std::move(h)),
      tcp(tcp_options_of(options)),
      workers(worker_count(options.workers)),
      counters(std::make_unique<worker_counters[]>(workers)),
      spaces(std::make_unique<request_spaces[]>(workers)),
      sweepers(std::make_unique<hangup_sweeper[]>(workers)) {
  if (!serve_request) {
    throw std::invalid_argument("weft::http::server: the handler is empty");
  }
  if (options.compression.enabled) {
    check_compression_options(options.compression);
  }
  for (unsigned char c : options.server_name) {
    if (c < 0x20 || c == 0x7F) {
      throw std::invalid_argument(
          "weft::http::server: server_name has a control character (it becomes the Server "
          "field)");
    }
  }
}

}  // namespace detail

server::server(server_options options, handler h)
    : state_(std::make_unique<detail::server_state>(std::move(options), std::move(h))) {}

server::server(server_options options, router r)
    : server(std::move(options), [routes = std::make_shared<const router>(std::move(r))](
                                     exchange& ex) { routes->dispatch(ex); }) {}

server::~server() = default;

void server::listen() { state_->tcp.listen(); }

std::uint16_t server::port() const noexcept { return state_->tcp.port(); }

void server::serve() {
  detail::server_state& state = *state_;
  state.tcp.serve([&state](net::connection& c) {
    detail::connection_state connection(state, c);
    connection.run();
  });
}

void server::stop(std::chrono::milliseconds grace) noexcept { state_->tcp.stop(grace); }

void server::set_tls(std::shared_ptr<const net::tls_context> context) {
  state_->tcp.set_tls(detail::with_http_reply(context));
}

const server_options& server::options() const noexcept { return state_->options; }

server_stats server::stats() const {
  net::server_stats net = state_->tcp.stats();
  server_stats out;
  out.workers.resize(state_->workers);
  for (unsigned i = 0; i < state_->workers; ++i) {
    worker_stats& w = out.workers[i];
    w.requests = state_->counters[i].requests.get();
    for (std::size_t k = 0; k < w.responses.size(); ++k) {
      w.responses[k] = state_->counters[i].responses[k].get();
    }
    if (i < net.workers.size()) {
      w.net = net.workers[i];
    }
    out.total.requests += w.requests;
    for (std::size_t k = 0; k < w.responses.size(); ++k) {
      out.total.responses[k] += w.responses[k];
    }
  }
  out.total.net = net.total;
  return out;
}

}  // namespace weft::http

// tcp_server: options, listening sockets, starting and joining the workers, stop and stats.
#include "weft/net/tcp_server.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "net/address.hpp"
#include "net/keepalive.hpp"
#include "net/server_state.hpp"
#include "weft/reactor/trigger.hpp"
#include "weft/sched/scheduler.hpp"
#include "weft/sched/task.hpp"
#include "weft/sched/this_coroutine.hpp"

namespace weft::net {

void log_to_stderr(std::string_view line) {
  std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
}

namespace detail {

void request_stop(server_state& server, std::chrono::milliseconds grace) noexcept {
  std::lock_guard<std::mutex> lock(server.mutex);
  if (server.stops.load(std::memory_order_relaxed) == 0) {
    server.grace_ms.store(grace.count(), std::memory_order_relaxed);
  }
  // Release: a worker that reads the new count (acquire) also sees the grace period.
  server.stops.fetch_add(1, std::memory_order_release);
  for (trigger* control : server.controls) {
    if (control != nullptr) {
      control->notify();
    }
  }
}

}  // namespace detail

namespace {

[[noreturn]] void throw_errno(int error_number, const char* operation, const std::string& where) {
  throw io_error(-error_number, operation, where, std::strerror(error_number));
}

void check_options(const tcp_server_options& options) {
  auto fail = [](const std::string& what) {
    throw std::invalid_argument("weft::net::tcp_server_options: " + what);
  };
  if (options.backlog <= 0) {
    fail("backlog must be positive, got " + std::to_string(options.backlog));
  }
  if (options.max_message_size == 0) {
    fail("max_message_size must be at least 1 byte");
  }
  if (options.send_buffer_limit == 0) {
    fail("send_buffer_limit must be at least 1 byte");
  }
  if (const std::string problem = detail::keepalive_problem(options.keepalive); !problem.empty()) {
    fail(problem);
  }
  for (auto [name, value] : {std::pair{"idle_timeout", options.idle_timeout},
                             std::pair{"handshake_timeout", options.handshake_timeout},
                             std::pair{"message_timeout", options.message_timeout},
                             std::pair{"close_timeout", options.close_timeout},
                             std::pair{"send_timeout", options.send_timeout},
                             std::pair{"linger_time", options.linger_time},
                             std::pair{"stop_timeout", options.stop_timeout},
                             std::pair{"tls_handshake_timeout", options.tls_handshake_timeout},
                             std::pair{"proxy_protocol_timeout", options.proxy_protocol_timeout}}) {
    if (value.count() < 0) {
      fail(std::string(name) + " must not be negative");
    }
  }
  for (const std::string& source : options.proxy_protocol_from) {
    detail::address_block block;
    if (!detail::parse_address_block(source, block)) {
      fail("proxy_protocol_from: '" + source +
           "' is not an address or a CIDR block (10.0.0.0/8, 127.0.0.1, 2001:db8::/32)");
    }
  }
  if (!options.proxy_protocol_from.empty() && !options.proxy_protocol) {
    fail("proxy_protocol_from is set but proxy_protocol is off");
  }
  if (options.reactor_poll_interval.count() < 0) {
    fail("reactor_poll_interval must not be negative");
  }
  if (options.accept_retry_delay.count() <= 0 ||
      options.accept_retry_max_delay < options.accept_retry_delay) {
    fail("accept_retry_delay must be positive and at most accept_retry_max_delay");
  }
  if (options.tls != nullptr && !options.tls->is_server()) {
    fail("tls is a client's context (tls_context::client); a server needs tls_context::server");
  }
  sockaddr_storage storage{};
  socklen_t length = 0;
  if (!detail::parse_numeric(options.host, options.port, storage, length)) {
    fail("host must be a numeric IPv4 or IPv6 address, got '" + options.host + "'");
  }
}

}  // namespace

tcp_server::tcp_server(tcp_server_options options)
    : state_(std::make_unique<detail::server_state>()) {
  check_options(options);
  if (options.workers == 0) {
    options.workers = std::max(1u, std::thread::hardware_concurrency());
  }
  auto& state = *state_;
  state.options = std::move(options);
  const tcp_server_options& o = state.options;
  for (const std::string& source : o.proxy_protocol_from) {
    // check_options refused anything that does not parse.
    detail::parse_address_block(source, state.proxy_sources.emplace_back());
  }
  // What each accepted connection gets: every worker keeps its own copy, whose TLS context
  // set_tls replaces (server_state::tls).
  const connection_options accepted{
      .protocol = o.protocol,
      .max_message_size = o.max_message_size,
      .send_buffer_limit = o.send_buffer_limit,
      .idle_timeout = o.idle_timeout,
      .handshake_timeout = o.handshake_timeout,
      .message_timeout = o.message_timeout,
      .close_timeout = o.close_timeout,
      .send_timeout = o.send_timeout,
      .tls_handshake_timeout = o.tls_handshake_timeout,
      .no_delay = o.no_delay,
      .keepalive = o.keepalive,
      .half_close = o.half_close,
      .tls = o.tls,
      .linger_time = o.linger_time,
  };
  for (unsigned index = 0; index < o.workers; ++index) {
    auto worker = std::make_unique<detail::worker_state>();
    worker->index = index;
    worker->events = &state.events;
    worker->log = &state.options.log;
    worker->stride = o.workers;
    worker->server = &state;
    worker->accepted_options = accepted;
    state.workers.push_back(std::move(worker));
  }
  state.tls = o.tls;
  state.listeners.assign(o.workers, -1);
  state.controls.assign(o.workers, nullptr);
}

tcp_server::~tcp_server() {
  for (int& fd : state_->listeners) {
    if (fd >= 0) {
      ::close(fd);
      fd = -1;
    }
  }
}

const tcp_server_options& tcp_server::options() const noexcept { return state_->options; }

void tcp_server::set_tls(std::shared_ptr<const tls_context> context) {
  detail::server_state& state = *state_;
  if (context == nullptr || !context->is_server()) {
    throw std::invalid_argument(
        std::string("weft::net::tcp_server::set_tls: ") +
        (context == nullptr ? "the context is null"
                            : "the context is a client's (tls_context::client); a server needs "
                              "tls_context::server"));
  }
  if (state.options.tls == nullptr) {
    throw std::logic_error(
        "weft::net::tcp_server::set_tls: the server was made without tls; a plain port does not "
        "turn into a TLS one under its clients");
  }
  std::lock_guard lock(state.mutex);
  state.tls = std::move(context);
  state.tls_generation.fetch_add(1, std::memory_order_release);
}

std::shared_ptr<const tls_context> tcp_server::tls() const {
  std::lock_guard lock(state_->mutex);
  return state_->tls;
}

bool tcp_server::listening() const noexcept {
  return state_->listening.load(std::memory_order_acquire);
}

std::uint16_t tcp_server::port() const noexcept {
  return state_->port.load(std::memory_order_acquire);
}

void tcp_server::listen() {
  auto& state = *state_;
  if (state.listening.load(std::memory_order_acquire)) {
    return;
  }
  const tcp_server_options& o = state.options;
  std::uint16_t port = o.port;
  std::vector<int> made;
  try {
    for (unsigned index = 0; index < o.workers; ++index) {
      sockaddr_storage address{};
      socklen_t length = 0;
      detail::parse_numeric(o.host, port, address, length);
      const std::string where = o.host + ":" + std::to_string(port);
      int fd = ::socket(address.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (fd < 0) {
        throw_errno(errno, "socket", where);
      }
      made.push_back(fd);
      int on = 1;
      // SO_REUSEPORT: every worker binds its own socket to the same port and the kernel spreads
      // new connections over them; SO_REUSEADDR: a restart binds despite TIME_WAIT leftovers.
      if (::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0 ||
          ::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof on) != 0) {
        throw_errno(errno, "setsockopt SO_REUSEPORT", where);
      }
      if (::bind(fd, reinterpret_cast<sockaddr*>(&address), length) != 0) {
        throw_errno(errno, "bind", where);
      }
      if (::listen(fd, o.backlog) != 0) {
        throw_errno(errno, "listen", where);
      }
      if (port == 0) {
        sockaddr_storage bound{};
        socklen_t bound_length = sizeof bound;
        if (::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &bound_length) != 0) {
          throw_errno(errno, "getsockname", where);
        }
        port =
            ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                              : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
      }
    }
  } catch (...) {
    for (int fd : made) {
      ::close(fd);
    }
    throw;
  }
  for (unsigned index = 0; index < o.workers; ++index) {
    state.listeners[index] = made[index];
  }
  state.port.store(port, std::memory_order_release);
  state.listening.store(true, std::memory_order_release);
}

void tcp_server::serve(connection_events events) {
  if (!events.on_message) {
    throw std::invalid_argument(
        "weft::net::tcp_server::serve: the callback style needs on_message (or pass a handler "
        "for the coroutine style)");
  }
  serve(nullptr, std::move(events));
}

void tcp_server::serve(std::function<void(connection&)> handler, connection_events events) {
  auto& state = *state_;
  if (state.served.exchange(true)) {
    throw std::logic_error(
        "weft::net::tcp_server::serve: this server has already served; make "
        "a new tcp_server to serve again");
  }
  if (handler) {
    events.on_message = nullptr;
    events.on_end = nullptr;
  }
  state.handler = std::move(handler);
  state.events = std::move(events);
  listen();

  const unsigned count = state.options.workers;
  const bool from_coroutine = current_scheduler_or_null() != nullptr;
  run_options run{};
  run.driver = state.options.driver;
  run.reactor_poll_interval = state.options.reactor_poll_interval;
  run.stacks = state.options.stacks;
  if (run.driver.empty() && from_coroutine) {
    run.driver = std::string(current_driver());
  }
  std::vector<std::exception_ptr> errors(count);
  std::atomic<unsigned> finished{0};
  std::unique_ptr<trigger> all_done;
  if (from_coroutine) {
    all_done = std::make_unique<trigger>();
  }
  auto body = [&](unsigned index) {
    try {
      weft::run([&] { detail::run_worker(state, index); }, run);
    } catch (...) {
      errors[index] = std::current_exception();
      detail::request_stop(state, std::chrono::milliseconds(0));  // one worker failed: all stop
    }
    // Release: serve() reads errors[index] after an acquire load that sees this increment.
    finished.fetch_add(1, std::memory_order_acq_rel);
    if (all_done != nullptr) {
      all_done->notify();
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(count);
  const unsigned first_thread = from_coroutine ? 0 : 1;
  for (unsigned index = first_thread; index < count; ++index) {
    threads.emplace_back(body, index);
  }
  if (!from_coroutine) {
    body(0);
  } else {
    // Suspend (not block) this coroutine's scheduler; a cancel must not abandon the threads,
    // which reference this frame.
    protect([&] {
      while (finished.load(std::memory_order_acquire) < count) {
        all_done->wait();
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  for (const std::exception_ptr& error : errors) {
    if (error) {
      std::rethrow_exception(error);
    }
  }
}

void tcp_server::stop(std::chrono::milliseconds grace) noexcept {
  detail::request_stop(*state_, grace);
}

server_stats tcp_server::stats() const {
  server_stats result;
  for (const auto& worker : state_->workers) {
    const detail::worker_counters& c = worker->counters;
    worker_stats one;
    one.connections = c.connections.get();
    one.accepted = c.accepted.get();
    for (std::size_t reason = 0; reason < close_reason_count; ++reason) {
      one.closed[reason] = c.closed[reason].get();
    }
    one.bytes_in = c.bytes_in.get();
    one.bytes_out = c.bytes_out.get();
    one.messages_in = c.messages_in.get();
    one.messages_out = c.messages_out.get();
    one.send_buffer_high = c.send_buffer_high.get();
    one.accept_retries = c.accept_retries.get();
    one.sends_refused = c.sends_refused.get();

    worker_stats& total = result.total;
    total.connections += one.connections;
    total.accepted += one.accepted;
    for (std::size_t reason = 0; reason < close_reason_count; ++reason) {
      total.closed[reason] += one.closed[reason];
    }
    total.bytes_in += one.bytes_in;
    total.bytes_out += one.bytes_out;
    total.messages_in += one.messages_in;
    total.messages_out += one.messages_out;
    total.send_buffer_high = std::max(total.send_buffer_high, one.send_buffer_high);
    total.accept_retries += one.accept_retries;
    total.sends_refused += one.sends_refused;
    result.workers.push_back(one);
  }
  return result;
}

}  // namespace weft::net

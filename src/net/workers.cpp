// The body of one worker: its acceptor, its connections' coroutines, the stop sequence and, on
// worker 0, the signal watcher. Everything here runs on the worker's own scheduler thread.
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>

#include "net/address.hpp"
#include "net/server_state.hpp"
#include "weft/reactor/fd.hpp"
#include "weft/reactor/signals.hpp"
#include "weft/reactor/trigger.hpp"
#include "weft/sched/scheduler.hpp"
#include "weft/sched/task.hpp"
#include "weft/sched/this_coroutine.hpp"

namespace weft::net::detail {

void notify_if_drained(worker_state& worker) {
  if (worker.stopping && worker.live == 0 && worker.starting == 0 && worker.control != nullptr) {
    worker.control->notify();
  }
}

namespace {

void log_line(const worker_state& worker, const std::string& line) {
  if (worker.log != nullptr && *worker.log) {
    try {
      (*worker.log)("weft.net worker " + std::to_string(worker.index) + ": " + line);
    } catch (...) {
      // A logger that throws cannot be told about it; the stats still count the event.
    }
  }
}

// A message of the worker's spares, given back when it goes out of scope (its storage warm for
// the next connection's read loop).
struct spare_message {
  explicit spare_message(worker_state& owner) : worker(owner) {
    if (std::optional<message> spare = worker.spare_messages.take()) {
      value = std::move(*spare);
    }
  }
  spare_message(const spare_message&) = delete;
  spare_message& operator=(const spare_message&) = delete;
  ~spare_message() {
    if (value.data.capacity() <= 64 * 1024) {
      worker.spare_messages.give(std::move(value));
    }
  }
  worker_state& worker;
  message value;
};

// Runs the handler (or the callback style's read loop) for c and ends the connection, unless the
// handler let it hibernate (connection::hibernate): then this coroutine ends, the connection waits
// with none, and resume_hibernated() serves it again in a new one. on_connect runs first when
// `accepted` (a new connection, not a resumed one).
[[gnu::hot]] void serve(server_state& server, worker_state& worker,
                        std::shared_ptr<connection> made, bool accepted, bool proxy_header) {
  connection& c = *made;
  try {
    // A PROXY header or TLS handshake that failed, timed out or met a stop has closed the
    // connection (logged); it is never handed to on_connect or the handler.
    const bool established =
        !accepted || ((!proxy_header || connection_access::read_proxy_header(
                                            c, server.options.proxy_protocol_timeout)) &&
                      connection_access::establish_tls(c));
    if (established && accepted && server.events.on_connect) {
      server.events.on_connect(c);
    }
    if (!established) {
    } else if (server.handler) {
      for (;;) {
        server.handler(c);
        if (!connection_access::take_hibernate_request(c)) {
          break;
        }
        if (connection_access::enter_hibernation(c, made)) {
          return;  // made moved into the hibernation
        }
        if (!c.is_open() || c.stopping()) {
          break;  // closing or stopping: a hibernation does nothing (connection.hpp)
        }
        // The fd could not be watched without a coroutine: go on in this one, as if resumed.
      }
    } else {
      // Lent by the worker for as long as this coroutine serves the connection, so that its
      // capacity is reused message after message, hibernation or not.
      spare_message received(worker);
      while (c.receive(received.value)) {
        server.events.on_message(c, received.value);
        if (worker.live > server.options.hibernate_above &&
            connection_access::enter_hibernation(c, made)) {
          return;  // made moved into the hibernation; received goes back to the worker
        }
      }
      if (c.is_open() && c.input_ended() && server.events.on_end) {
        server.events.on_end(c);  // half_close: the application closes it (connection.hpp)
        c.wait_closed();
      }
    }
    c.close();
  } catch (const wait_cancelled_error& failure) {
    connection_access::report(c, failure);
    connection_access::close(c, close_reason::error);
  } catch (const cancelled_error&) {
    // The server's deadline (or the scheduler shutting down) cancelled the handler.
    connection_access::destroy(c, close_reason::server_stop);
  } catch (const std::exception& failure) {
    connection_access::log(c, std::string("handler failed: ") + failure.what());
    connection_access::report(c, failure);
    connection_access::close(c, close_reason::error);
  } catch (...) {
    connection_access::log(c, "handler failed with a non-std exception");
    connection_access::close(c, close_reason::error);
  }
  // A handler that threw after hibernate() does not hibernate.
  connection_access::take_hibernate_request(c);
  if (connection_access::hand_over_release(c)) {
    // The flusher writes what is queued, or lingers, on its own stack and unlinks c at the
    // release: this coroutine and its stack are free now, not after up to linger_time.
    connection_access::serving(c) = nullptr;
    return;
  }
  connection_access::wait_released(c);
  connection_access::serving(c) = nullptr;
  unlink_connection(worker, c);
  notify_if_drained(worker);
}

void serve_connection(server_state& server, worker_state& worker, int fd, std::string peer,
                      bool proxy_header) {
  --worker.starting;
  std::shared_ptr<connection> made;
  const std::uint64_t id = worker.index + 1 + std::uint64_t{worker.stride} * worker.next_id++;
  try {
    if (server.tls_generation.load(std::memory_order_acquire) != worker.tls_generation) {
      std::lock_guard lock(server.mutex);  // server_state::tls
      worker.accepted_options.tls = server.tls;
      worker.tls_generation = server.tls_generation.load(std::memory_order_relaxed);
    }
    made = connection_access::make(fd, worker.accepted_options, id, &worker, std::move(peer));
  } catch (const std::exception& failure) {
    ::close(fd);
    worker.counters.closed[static_cast<std::size_t>(close_reason::error)].add(1);
    log_line(worker, std::string("connection ") + std::to_string(id) +
                         " could not be set up: " + failure.what());
    notify_if_drained(worker);
    return;
  }
  connection& c = *made;
  worker.counters.connections.add(1);
  connection_access::set_server_events(c, &server.events);
  connection_access::serving(c) = weft::detail::running_coroutine(current_scheduler());
  link_connection(worker, c);
  if (worker.forced) {
    connection_access::destroy(c, close_reason::server_stop);
  } else if (worker.stopping) {
    connection_access::stop(c);
  }
  serve(server, worker, std::move(made), true, proxy_header);
}

}  // namespace

[[gnu::hot]] void resume_hibernated(worker_state& worker, connection& c) {
  server_state& server = *worker.server;
  // A name short enough for std::string's inline buffer: no allocation per resume. The
  // hibernation holds the connection until the coroutine leaves it (hibernation.hpp).
  task<void> resumed = weft::spawn(
      [&server, &worker, resumed = &c] {
        connection_access::serving(*resumed) = weft::detail::running_coroutine(current_scheduler());
        std::shared_ptr<connection> self = connection_access::leave_hibernation(*resumed);
        if (worker.forced) {
          connection_access::destroy(*resumed, close_reason::server_stop);
        }
        serve(server, worker, std::move(self), false, false);
      },
      spawn_options{.name = "weft.net resume", .stack_at_spawn = true});
  // The connection's lines that serving a message touches (connection.hpp, its members' first
  // group) are cold by the time a thousand others have run: fetched while the one before runs.
  resumed.control_block()->set_prefetch_hint(&c);
}

namespace {

bool out_of_resources(int error_number) {
  return error_number == EMFILE || error_number == ENFILE || error_number == ENOBUFS ||
         error_number == ENOMEM;
}

void accept_loop(server_state& server, worker_state& worker, int listener) {
  fd_registration registration(listener);
  const tcp_server_options& o = server.options;
  std::chrono::milliseconds delay = o.accept_retry_delay;
  unsigned burst = 0;
  for (;;) {
    sockaddr_storage address{};
    socklen_t length = sizeof address;
    int fd = ::accept4(listener, reinterpret_cast<sockaddr*>(&address), &length,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd >= 0) {
      delay = o.accept_retry_delay;
      worker.counters.accepted.add(1);
      if (o.max_connections > 0 && worker.live >= o.max_connections) {
        ::close(fd);
        worker.counters.closed[static_cast<std::size_t>(close_reason::max_connections)].add(1);
        log_line(worker,
                 "refused " + format_address(reinterpret_cast<sockaddr*>(&address), length) +
                     ": max_connections (" + std::to_string(o.max_connections) + ") reached");
        continue;
      }
      std::string peer = format_address(reinterpret_cast<sockaddr*>(&address), length);
      bool proxy_header = o.proxy_protocol;
      if (proxy_header && !server.proxy_sources.empty()) {
        proxy_header = false;
        for (const address_block& block : server.proxy_sources) {
          if (in_block(block, reinterpret_cast<const sockaddr*>(&address))) {
            proxy_header = true;
            break;
          }
        }
      }
      ++worker.starting;
      try {
        weft::spawn(
            [&server, &worker, fd, peer = std::move(peer), proxy_header]() mutable {
              serve_connection(server, worker, fd, std::move(peer), proxy_header);
            },
            spawn_options{.name = "weft.net connection", .stack_at_spawn = true});
      } catch (const std::exception& failure) {
        --worker.starting;
        ::close(fd);
        worker.counters.closed[static_cast<std::size_t>(close_reason::error)].add(1);
        log_line(worker,
                 std::string("could not start a connection's coroutine: ") + failure.what());
      }
      // Let the new connections (and the others) run now and then during an accept storm.
      if (++burst == 64) {
        burst = 0;
        weft::yield();
      }
      continue;
    }
    const int error_number = errno;
    if (error_number == EINTR || error_number == ECONNABORTED || error_number == EPROTO ||
        error_number == EPERM) {
      continue;  // that one connection is gone; the listener is fine
    }
    if (error_number == EAGAIN || error_number == EWOULDBLOCK) {
      burst = 0;
      wait_readable(listener);
      continue;
    }
    if (error_number == EBADF || error_number == EINVAL || error_number == ENOTSOCK) {
      log_line(worker, std::string("accept failed for good: ") + std::strerror(error_number));
      return;
    }
    // Out of descriptors or memory: the pending connection stays in the backlog, so the
    // listener stays readable; waiting for readability would spin. Back off instead.
    worker.counters.accept_retries.add(1);
    log_line(worker, std::string("accept: ") + std::strerror(error_number) + " (" +
                         (out_of_resources(error_number) ? "out of resources" : "unexpected") +
                         "); retrying in " + std::to_string(delay.count()) + " ms");
    weft::sleep_for(delay);
    delay = std::min(delay * 2, o.accept_retry_max_delay);
  }
}

}  // namespace

void connection_access::report(connection& c, const std::exception& failure) noexcept {
  c.report(failure);
}

void connection_access::log(const connection& c, const std::string& line) noexcept { c.log(line); }

void run_worker(server_state& server, unsigned index) {
  worker_state& worker = *server.workers[index];
  trigger control;
  {
    std::lock_guard<std::mutex> lock(server.mutex);
    server.controls[index] = &control;
  }
  worker.control = &control;
  struct unregister {
    server_state& server;
    worker_state& worker;
    unsigned index;
    ~unregister() {
      std::lock_guard<std::mutex> lock(server.mutex);
      server.controls[index] = nullptr;
      worker.control = nullptr;
    }
  } registered{server, worker, index};

  // The signal watcher first, run up to its first wait (spawn is lazy; the yield lets it go
  // first), so that SIGINT and SIGTERM are the server's before any on_worker_start, and before
  // an application's "ready" line from one: a Ctrl-C right after it stops the server
  // gracefully instead of killing the process by the default action.
  task<void> signal_watcher;
  struct cancel_watcher {
    task<void>& watcher;
    ~cancel_watcher() {
      if (watcher.valid()) {
        watcher.cancel("weft.net: the server stopped");
      }
    }
  } watcher_guard{signal_watcher};
  if (index == 0 && server.options.handle_signals) {
    signal_watcher = weft::spawn(
        [&] {
          for (;;) {
            int number = signals::wait({SIGINT, SIGTERM});
            log_line(worker, std::string("caught ") + (number == SIGINT ? "SIGINT" : "SIGTERM") +
                                 (server.stops.load(std::memory_order_acquire) == 0
                                      ? ": stopping gracefully"
                                      : ": stopping now"));
            request_stop(server, server.options.stop_timeout);
          }
        },
        spawn_options{.name = "weft.net signals", .background = true});
    weft::yield();
  }

  // A failed on_worker_start still gets its on_worker_stop (to undo a partial start); the
  // start's exception is the one serve() reports.
  const tcp_server_options& options = server.options;
  if (options.on_worker_start) {
    try {
      options.on_worker_start(index);
    } catch (...) {
      if (options.on_worker_stop) {
        try {
          options.on_worker_stop(index);
        } catch (...) {
        }
      }
      throw;
    }
  }

  const int listener = server.listeners[index];
  task<void> acceptor = weft::spawn([&] { accept_loop(server, worker, listener); },
                                    spawn_options{.name = "weft.net acceptor"});
  // Acquire: pairs with request_stop's release, so grace_ms is the first stop's.
  while (server.stops.load(std::memory_order_acquire) == 0) {
    control.wait();
  }
  const auto grace = std::chrono::milliseconds(server.grace_ms.load(std::memory_order_relaxed));
  const auto deadline = std::chrono::steady_clock::now() + grace;

  // 1. Stop accepting: the acceptor ends, then its socket closes (connections still in the
  //    backlog are reset by the kernel, as for any server that stops listening).
  acceptor.cancel("weft.net: the server is stopping");
  try {
    acceptor.await();
  } catch (const cancelled_error&) {
  }
  if (listener >= 0) {
    ::close(listener);
    server.listeners[index] = -1;
  }
  // 2. Idle connections end now; busy ones at their next message boundary.
  worker.stopping = true;
  for (connection* c = worker.first; c != nullptr; c = connection_access::next(*c)) {
    connection_access::stop(*c);
  }
  // 3. Wait for them until the deadline or a second stop.
  while (worker.live + worker.starting > 0 && server.stops.load(std::memory_order_acquire) < 2) {
    try {
      control.wait(timeout::at(deadline));
    } catch (const timeout_error&) {
      break;
    }
  }
  // 4. Destroy what remains and cancel its handlers (one that starts later sees `stopping` and
  //    ends at once, its peer having sent nothing it could serve in time).
  worker.forced = true;
  if (worker.live + worker.starting > 0) {
    log_line(worker, std::to_string(worker.live) +
                         " connection(s) still open at the end of the "
                         "stop's grace period: destroyed");
    for (connection* c = worker.first; c != nullptr; c = connection_access::next(*c)) {
      connection_access::destroy(*c, close_reason::server_stop);
      if (weft::detail::coroutine* serving = connection_access::serving(*c)) {
        weft::detail::cancel_coroutine(current_scheduler(), *serving,
                                       "weft.net: the server's stop deadline passed");
      }
    }
    while (worker.live + worker.starting > 0) {
      control.wait();
    }
  }
  if (signal_watcher.valid()) {
    signal_watcher.cancel("weft.net: the server stopped");
  }
  if (options.on_worker_stop) {
    options.on_worker_stop(index);
  }
}

}  // namespace weft::net::detail

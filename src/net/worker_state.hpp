// The per-worker state the connections of one worker share with their acceptor and the server:
// counters (read from any thread by tcp_server::stats), the list of live connections, the
// stopping flag, the callbacks and the log. Everything but the counters is touched only on the
// worker's thread.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "net/spare_list.hpp"
#include "weft/net/connection.hpp"
#include "weft/reactor/trigger.hpp"

namespace weft::net::detail {

// A statistic written by one thread (the worker's) and read by any. A relaxed load and store,
// not a read-modify-write: only the owner writes, so no update can be lost, and a reader on
// another thread needs no ordering with anything else (each value is a separate snapshot; the
// atomic only makes the concurrent read defined). This keeps the hot path free of locked
// instructions.
class counter {
 public:
  void add(std::uint64_t amount) noexcept {
    value_.store(value_.load(std::memory_order_relaxed) + amount, std::memory_order_relaxed);
  }
  void subtract(std::uint64_t amount) noexcept {
    value_.store(value_.load(std::memory_order_relaxed) - amount, std::memory_order_relaxed);
  }
  void raise_to(std::uint64_t candidate) noexcept {
    if (candidate > value_.load(std::memory_order_relaxed)) {
      value_.store(candidate, std::memory_order_relaxed);
    }
  }
  std::uint64_t get() const noexcept { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> value_{0};
};

struct worker_counters {
  counter connections;  // open right now
  counter accepted;
  std::array<counter, close_reason_count> closed;
  counter bytes_in;
  counter bytes_out;
  counter messages_in;
  counter messages_out;
  counter send_buffer_high;
  counter accept_retries;
  counter sends_refused;
};

struct server_state;

struct worker_state {
  server_state* server = nullptr;  // null for net::connect's connections (they have no worker)
  unsigned index = 0;
  unsigned stride = 1;        // connection ids: index + 1 + stride * n, unique in the server
  std::uint64_t next_id = 0;  // n
  worker_counters counters;
  // What each connection accepted here gets: the server's, with the TLS context of
  // tls_generation (server_state::tls says how it is refreshed).
  connection_options accepted_options;
  std::uint64_t tls_generation = 0;
  const connection_events* events = nullptr;
  const std::function<void(std::string_view)>* log = nullptr;
  // The worker's live connections (intrusive, through connection::prev_/next_).
  connection* first = nullptr;
  std::size_t live = 0;
  // Connections accepted whose coroutine has not started yet (spawn is lazy): a stop waits for
  // them too, or one could start after the stop sequence ended and outlive its deadline.
  std::size_t starting = 0;
  // Messages the callback style's read loops give back (see workers.cpp).
  spare_list<message> spare_messages;
  bool stopping = false;
  bool forced = false;  // the stop's deadline passed: connections starting now are destroyed
  // The worker's control coroutine waits on it while stopping; the last connection to go
  // notifies it (same thread: no ordering needed).
  trigger* control = nullptr;
};

// What the server's internals need of a connection's private state.
struct connection_access {
  static connection*& next(connection& c) noexcept { return c.next_; }
  static connection*& prev(connection& c) noexcept { return c.prev_; }
  static std::shared_ptr<connection> make(int fd, const connection_options& options,
                                          std::uint64_t id, worker_state* worker,
                                          std::string peer_address) {
    return std::make_shared<connection>(connection::private_tag{}, fd, options, id,
                                        worker != nullptr ? worker->index : 0, worker,
                                        std::move(peer_address));
  }
  static weft::detail::coroutine*& serving(connection& c) noexcept { return c.serving_; }
  // connection::hibernate (src/net/hibernate.cpp): whether the handler asked for one (the request
  // is taken), entering the hibernation (false: it could not be entered, self untouched), and
  // leaving it in the coroutine that resumes the handler (the hibernation's reference to the
  // connection).
  static bool take_hibernate_request(connection& c) noexcept {
    return std::exchange(c.hibernate_requested_, false);
  }
  static bool enter_hibernation(connection& c, std::shared_ptr<connection>& self) {
    return c.enter_hibernation(self);
  }
  static std::shared_ptr<connection> leave_hibernation(connection& c) noexcept {
    return c.leave_hibernation();
  }
  // A TLS connection's handshake, before its handler (connection::establish_tls); true at once
  // for a plain one.
  static bool establish_tls(connection& c) {
    return c.tls_ == nullptr || c.establish_tls(timeout::never());
  }
  // The PROXY protocol header of a new connection (connection::read_proxy_header).
  static bool read_proxy_header(connection& c, std::chrono::milliseconds within) {
    return c.read_proxy_header(within);
  }
  // net::connect's handshake as the client of host: returns once complete; tls_error naming
  // why the server was refused, or how the connection ended during it; timeout_error past limit.
  static void connect_tls(connection& c, std::string_view host, const timeout& limit);
  static void set_server_events(connection& c, const connection_events* events) noexcept {
    c.server_events_ = events;
  }
  // The server is stopping: an idle reader returns nullopt (server_stop).
  static void stop(connection& c) noexcept;
  // Destroys with a reason (the server's deadline, max_connections).
  static void destroy(connection& c, close_reason reason) noexcept;
  // Closes gracefully with a reason (the handler ended with an error).
  static void close(connection& c, close_reason reason) noexcept;
  // Waits (cancellation deferred) until the socket is closed and no coroutine is inside.
  static void wait_released(connection& c);
  // Where the flusher still runs (a closing flush, a lingering close, a WebSocket's closing
  // handshake) and will release c: leaves c's release to it, which then takes c off the worker's
  // list (link_connection) as the serving coroutine would have. True when it did; the coroutine
  // may then end at once instead of holding its stack for up to linger_time.
  static bool hand_over_release(connection& c) noexcept;
  static bool released(const connection& c) noexcept;
  static void report(connection& c, const std::exception& failure) noexcept;
  static void log(const connection& c, const std::string& line) noexcept;
};

// Starts a coroutine that serves the hibernating connection c again (src/net/workers.cpp); throws
// what spawn throws. c's hibernation keeps it alive until that coroutine leaves it.
void resume_hibernated(worker_state& worker, connection& c);

void link_connection(worker_state& worker, connection& c) noexcept;
void unlink_connection(worker_state& worker, connection& c) noexcept;
// The last connection of a stopping worker wakes its control coroutine (src/net/workers.cpp).
void notify_if_drained(worker_state& worker);

}  // namespace weft::net::detail

// The state of one tcp_server, shared by the thread that runs serve(), the workers' threads and
// any thread calling stop() or stats().
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "net/worker_state.hpp"
#include "weft/net/tcp_server.hpp"
#include "weft/reactor/trigger.hpp"

namespace weft::net::detail {

struct server_state {
  tcp_server_options options;
  connection_options connection;  // what each accepted connection gets
  // One per worker, made with the server and never resized: stats() reads them from any thread.
  std::vector<std::unique_ptr<worker_state>> workers;
  // Listening sockets, one per worker (-1 once that worker stopped accepting). Written by
  // listen() before the workers start and by each worker for its own slot.
  std::vector<int> listeners;
  std::atomic<std::uint16_t> port{0};
  std::atomic<bool> listening{false};
  std::atomic<bool> served{false};

  std::function<void(weft::net::connection&)> handler;
  connection_events events;

  // Stop requests. stop() increments `stops` and notifies every registered control trigger,
  // both under `mutex`; a worker registers its trigger under `mutex` and then reads `stops`, so a
  // stop either sees the trigger or is seen by the worker (no lost wakeup), and a trigger is
  // never notified after its worker unregistered it (it is destroyed after that).
  std::mutex mutex;
  std::vector<weft::trigger*> controls;
  std::atomic<int> stops{0};
  std::atomic<std::int64_t> grace_ms{10000};
};

// The body of worker `index`'s scheduler (src/net/workers.cpp).
void run_worker(server_state& server, unsigned index);
// stop() for the server's own use (signals, a failing worker).
void request_stop(server_state& server, std::chrono::milliseconds grace) noexcept;

}  // namespace weft::net::detail

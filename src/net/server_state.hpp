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

#include "net/address.hpp"
#include "net/worker_state.hpp"
#include "weft/net/tcp_server.hpp"
#include "weft/reactor/trigger.hpp"

namespace weft::net::detail {

struct server_state {
  tcp_server_options options;
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
  // options.proxy_protocol_from, parsed: the peers that must send a PROXY header (empty: all).
  std::vector<address_block> proxy_sources;

  // Stop requests. stop() increments `stops` and notifies every registered control trigger,
  // both under `mutex`; a worker registers its trigger under `mutex` and then reads `stops`, so a
  // stop either sees the trigger or is seen by the worker (no lost wakeup), and a trigger is
  // never notified after its worker unregistered it (it is destroyed after that).
  std::mutex mutex;
  std::vector<weft::trigger*> controls;
  std::atomic<int> stops{0};
  std::atomic<std::int64_t> grace_ms{10000};

  // tcp_server::set_tls: the context for new connections, written and read under `mutex`, and
  // its generation, incremented (release) under `mutex` after it. A worker compares the
  // generation (acquire) with the one its own copy of the options was taken at, once per
  // accepted connection; only when they differ does it take `mutex` and copy the context, so
  // the accept path of a server whose context never changes takes no lock. A worker that
  // reads the old generation just after a set_tls gives that one connection the old context
  // (it is valid: contexts are immutable and shared).
  std::shared_ptr<const tls_context> tls;
  std::atomic<std::uint64_t> tls_generation{0};
};

// The body of worker `index`'s scheduler (src/net/workers.cpp).
void run_worker(server_state& server, unsigned index);
// stop() for the server's own use (signals, a failing worker).
void request_stop(server_state& server, std::chrono::milliseconds grace) noexcept;

}  // namespace weft::net::detail

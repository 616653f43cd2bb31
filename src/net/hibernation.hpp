// What a hibernating connection waits with (connection::hibernate, src/net/hibernate.cpp): a
// callback watch of its fd and a deadline in the scheduler's timer heap, instead of a coroutine
// suspended on them. Made at a connection's first hibernation and kept for the next ones; the
// subscription too stays registered from the first hibernation to the socket's release, dormant
// (events 0) while the connection is served by a coroutine.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "reactor/fd_subscription.hpp"
#include "weft/detail/timer_entry.hpp"
#include "weft/net/connection.hpp"

namespace weft::net::detail {

struct worker_state;

// Aligned to a cache line, with what a wake reads right after the subscription's own fields: at a
// thousand connections the wake (inside the driver's poll, on_hibernation_ready) then touches one
// line of it and nothing of the connection, and the resumed coroutine leaves the hibernation in
// that same line (callgrind, /hello at 1000 connections, a 1 MiB last level: 20.5 -> 14.4 read
// misses per request with the shared_ptr copy at the wake gone too).
struct alignas(64) hibernation : weft::detail::fd_subscription {
  // The deadline of a hibernating wait. Lazy, as the reactor's fd deadlines: it stays in the heap
  // when the wait ends before it, and a later hibernation with a later deadline leaves it there;
  // when it fires early it moves itself to the current deadline (or leaves the heap if nothing is
  // hibernating). With a thousand keep-alive connections each request would otherwise pay a heap
  // insertion and a removal, each touching log2(1000) cold entries.
  struct deadline_timer : weft::detail::timer_entry {
    hibernation* owner_state = nullptr;
  };

  // --- what a wake reads (and the coroutine it spawns, leaving the hibernation) ---
  worker_state* worker = nullptr;  // the connection's worker
  // The connection holds itself while hibernating: no coroutine holds it then. The coroutine a
  // wake spawns takes it over when it leaves the hibernation (until then nothing can release the
  // connection: reader_waiting_ stays set), so the wake itself copies no shared_ptr.
  std::shared_ptr<connection> self;
  bool hibernating = false;
  bool waking = false;  // the coroutine that resumes the handler is spawned, not yet run
  // Reports of the fd while waking (a poll came before that coroutine read): see
  // on_hibernation_ready in src/net/hibernate.cpp.
  std::uint8_t repeats = 0;
  // (The subscription's fields, these five and padding: the first 64 bytes.)

  // --- the rest: entering, the deadline ---
  weft::detail::scheduler_core* core = nullptr;  // the connection's scheduler
  deadline_timer timer;
  // When the hibernating wait ends by time (max: never): the hibernation's limit or the
  // connection's own timeouts, whichever comes first.
  std::chrono::steady_clock::time_point until = std::chrono::steady_clock::time_point::max();
};
static_assert(sizeof(weft::detail::fd_subscription) + sizeof(worker_state*) +
                      sizeof(std::shared_ptr<connection>) + 2 * sizeof(bool) +
                      sizeof(std::uint8_t) <=
                  64,
              "what a wake reads no longer fits the hibernation's first cache line");

}  // namespace weft::net::detail

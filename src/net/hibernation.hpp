// What a hibernating connection waits with (connection::hibernate, src/net/hibernate.cpp): a
// callback watch of its fd and a deadline in the scheduler's timer heap, instead of a coroutine
// suspended on them. Made at a connection's first hibernation and kept for the next ones; the
// subscription too stays registered from the first hibernation to the socket's release, dormant
// (events 0) while the connection is served by a coroutine.
#pragma once

#include <chrono>
#include <memory>

#include "reactor/fd_subscription.hpp"
#include "weft/detail/timer_entry.hpp"
#include "weft/net/connection.hpp"

namespace weft::net::detail {

struct hibernation : weft::detail::fd_subscription {
  // The deadline of a hibernating wait. Lazy, as the reactor's fd deadlines: it stays in the heap
  // when the wait ends before it, and a later hibernation with a later deadline leaves it there;
  // when it fires early it moves itself to the current deadline (or leaves the heap if nothing is
  // hibernating). With a thousand keep-alive connections each request would otherwise pay a heap
  // insertion and a removal, each touching log2(1000) cold entries.
  struct deadline_timer : weft::detail::timer_entry {
    hibernation* owner_state = nullptr;
  };

  connection* owner = nullptr;
  weft::detail::scheduler_core* core = nullptr;  // the connection's scheduler
  deadline_timer timer;
  // When the hibernating wait ends by time (max: never): the hibernation's limit or the
  // connection's own timeouts, whichever comes first.
  std::chrono::steady_clock::time_point until = std::chrono::steady_clock::time_point::max();
  // The connection holds itself while hibernating: no coroutine holds it then.
  std::shared_ptr<connection> self;
  bool hibernating = false;
  bool waking = false;  // the coroutine that resumes the handler is spawned, not yet run
};

}  // namespace weft::net::detail

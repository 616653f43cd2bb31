// weft::event: a flag coroutines wait for (manual reset, like Python's asyncio.Event).
// Not weft::procs::event, which is an occurrence a process's step reads (procs/process.hpp).
//
// Contract:
//   - Only coroutines of one scheduler use a given event, on that scheduler's thread;
//     set/clear/is_set may also be called from a microtask or reactor callback there.
//   - Manual reset: set() keeps the event set, releasing every current waiter and letting
//     later waits through at once, until clear(). Chosen over auto-reset because "it happened"
//     (started, shut down, loaded) is what coroutines usually wait for, and every waiter must
//     see it; hand a permit to exactly one waiter with a weft::semaphore instead.
//   - A set() is delivered to the coroutines waiting at that moment even if clear() follows
//     before they run: no waiter misses a set that happened while it waited.
//   - wait() returns at once on a set event; one that has to suspend is a cancellation point
//     (cancelled_error) and takes an optional time limit (timeout_error).
//   - The event must outlive every wait on it.
#pragma once

#include <cstddef>
#include <string>

#include "weft/sched/timeout.hpp"
#include "weft/sync/detail/waiter_queue.hpp"

namespace weft {

class event {
 public:
  // An event, set or not.
  explicit event(bool initially_set = false) noexcept;
  event(const event&) = delete;
  event& operator=(const event&) = delete;

  // Sets the event and releases every waiter. Never suspends; idempotent.
  void set() noexcept;
  // Makes later waits wait again. Never suspends.
  void clear() noexcept { set_ = false; }
  bool is_set() const noexcept { return set_; }  // whether it is set
  // Waits until the event is set.
  void wait(const timeout& limit = timeout::never());

  std::size_t waiting() const noexcept { return waiters_.size(); }  // coroutines waiting now

 private:
  static void describe(const void* self, std::string& out);

  bool set_;
  detail::waiter_queue waiters_;
};

}  // namespace weft

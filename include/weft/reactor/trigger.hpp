// weft::trigger: a cross-thread wakeup for coroutines.
//
// Made by a coroutine, bound to its scheduler. notify() may be called from any thread (or a
// signal-unsafe context of another library's thread) at any time; wait() is for coroutines of
// the trigger's own scheduler. A notify wakes every coroutine waiting at that moment; when
// nobody waits it is kept (notifications coalesce into one) and the next wait returns at once.
// Anything a thread wrote before notify() is visible to the coroutines it wakes.
//
// Lifetime: the trigger must outlive every notify() call (as with a condition variable).
// While no coroutine waits on it, the trigger does not keep run() alive; while one waits it
// does (another thread may notify), so deadlock detection does not fire on such a wait.
#pragma once

#include "weft/sched/timeout.hpp"

namespace weft {

namespace detail {
struct trigger_state;
}

class trigger {
 public:
  trigger();
  ~trigger();
  trigger(const trigger&) = delete;
  trigger& operator=(const trigger&) = delete;

  // Thread-safe, lock-free, never blocks.
  void notify() noexcept;
  // Suspends until notified (returns at once if a notification is pending). Throws
  // timeout_error when limit passes first, cancelled_error when the coroutine is cancelled.
  void wait(const timeout& limit = timeout::never());

 private:
  detail::trigger_state* state_;
};

}  // namespace weft

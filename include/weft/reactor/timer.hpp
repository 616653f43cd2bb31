// weft::timer: a callback timer on the running scheduler, for work that needs no coroutine of
// its own (a timeout flag, a periodic flush, ten million connection deadlines).
//
// Made inside weft::run, bound to that scheduler and used only on its thread. start() arms it;
// the callback runs on the scheduler's thread from the reactor tick, once, or every `repeat`
// when that is non-zero. The callback must not suspend (spawn a coroutine for that); an
// exception from it is uncaught (the run shuts down and rethrows it). Timers live in weft's own
// deadline heap (one libuv timer for all), so starting and stopping one never touches libuv.
// An armed timer keeps the reactor alive (it counts against deadlock detection, like a sleep),
// but does not keep run() going once every coroutine has ended: run() then ends and the timer
// is disarmed. A timer must not move while armed (it is neither copyable nor movable).
#pragma once

#include <chrono>
#include <functional>

#include "weft/detail/timer_entry.hpp"
#include "weft/detail/unique_function.hpp"

namespace weft {

namespace detail {
class scheduler_core;
}

class timer {
 public:
  using clock = std::chrono::steady_clock;  // the clock durations are measured with

  timer();
  ~timer();
  timer(const timer&) = delete;
  timer& operator=(const timer&) = delete;

  // Arms the timer (re-arms it if armed) to call fn after `after`, then every `repeat` if that
  // is positive.
  void start(clock::duration after, unique_function<void()> fn,
             clock::duration repeat = clock::duration::zero());
  // Disarms it; the callback will not run (no-op when not armed).
  void stop() noexcept;
  bool armed() const noexcept;

 private:
  struct entry : detail::timer_entry {
    timer* owner = nullptr;
  };
  static void fire(detail::timer_entry& fired);

  detail::scheduler_core* core_;
  entry entry_{};
  detail::unique_function<void()> callback_;
  clock::duration repeat_{};
};

}  // namespace weft

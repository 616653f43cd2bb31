// What every driver does with its libuv loop (the uv driver's own, the others' embedded one),
// and the arithmetic of arming a native timer. From the scheduler's thread.
#pragma once

#include <uv.h>

#include <algorithm>
#include <chrono>

#include "weft/detail/timer_entry.hpp"
#include "weft/sched/timeout.hpp"

namespace weft::detail {

// std::runtime_error "weft: libuv OPERATION failed: ..." for a negative libuv status.
void check_uv(int status, const char* operation);

// uv_loop_close, once every handle has been closed and their close callbacks have run. A
// handle still open is a std::logic_error naming the handle types ("tcp, timer (closing)").
void close_libuv_loop(uv_loop_t& loop);

// How long a native timer must wait for deadline, from now: the remaining time rounded *up* to
// the timer's resolution Unit, so that it never fires before the deadline; zero once the
// deadline has passed; at most cap (a deadline years away, or time_point::max(), saturates
// instead of overflowing: the timer then fires early, finds nothing due and is armed again).
template <class Unit>
Unit wait_until(timer_clock::time_point deadline, timer_clock::time_point now, Unit cap) noexcept {
  timer_clock::duration remaining = saturating_remaining(deadline, now);
  if (remaining <= timer_clock::duration::zero()) {
    return Unit::zero();
  }
  if (remaining >= std::chrono::duration_cast<timer_clock::duration>(cap)) {
    return cap;
  }
  return std::min(std::chrono::ceil<Unit>(remaining), cap);
}

}  // namespace weft::detail

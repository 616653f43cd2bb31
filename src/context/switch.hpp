// The context switch: Boost.Context's fcontext, wrapped so that ASan, TSan and valgrind see
// every switch between stacks.
//
// Protocol: every jump passes, as its data, the address where the resumed side must store the
// context it came from (the suspending coroutine's saved-context slot), or null when the side
// that jumps will never be resumed (a finished coroutine leaving its stack for good). The
// resumed side calls land() first thing, which stores that context and completes the
// sanitizer bookkeeping.
//
// ASan: __sanitizer_start_switch_fiber before the jump (with the target's stack bounds, and a
// null fake-stack slot when the current stack is being abandoned so ASan frees its fake
// frames), __sanitizer_finish_switch_fiber right after landing. TSan: switch to the target
// stack's fiber before jumping. valgrind: stacks are registered when mapped (stack_pool).
#pragma once

#include <boost/context/detail/fcontext.hpp>
#include <cstddef>

#include "weft/sched/coroutine.hpp"

#if defined(WEFT_SANITIZE_ADDRESS)
#include <sanitizer/common_interface_defs.h>
#endif
#if defined(WEFT_SANITIZE_THREAD)
#include <sanitizer/tsan_interface.h>
#endif

namespace weft::detail {

using fcontext_t = boost::context::detail::fcontext_t;
using transfer_t = boost::context::detail::transfer_t;

// Jumps from the running context (from, or null when abandoning it) to target. Returns in from
// when somebody jumps back.
inline void jump(execution_context* from, execution_context& target) {
#if defined(WEFT_SANITIZE_ADDRESS)
  __sanitizer_start_switch_fiber(from != nullptr ? &from->fake_stack : nullptr, target.stack_bottom,
                                 target.stack_size);
#endif
#if defined(WEFT_SANITIZE_THREAD)
  __tsan_switch_to_fiber(target.tsan_fiber, 0);
#endif
  transfer_t back = boost::context::detail::jump_fcontext(
      target.saved, from != nullptr ? static_cast<void*>(&from->saved) : nullptr);
  // Resumed: store the context we came from (see land()).
  if (back.data != nullptr) {
    *static_cast<void**>(back.data) = back.fctx;
  }
#if defined(WEFT_SANITIZE_ADDRESS)
  if (from != nullptr) {
    __sanitizer_finish_switch_fiber(from->fake_stack, nullptr, nullptr);
  }
#endif
}

// First thing on a fresh stack: store the context that jumped here and finish the sanitizer
// switch. Reports the bounds of the stack we came from (used once, to learn the thread stack).
inline void land(transfer_t arrival, const void** from_bottom = nullptr,
                 std::size_t* from_size = nullptr) {
  if (arrival.data != nullptr) {
    *static_cast<void**>(arrival.data) = arrival.fctx;
  }
#if defined(WEFT_SANITIZE_ADDRESS)
  __sanitizer_finish_switch_fiber(nullptr, from_bottom, from_size);
#else
  (void)from_bottom;
  (void)from_size;
#endif
}

inline fcontext_t make_context(void* stack_top, std::size_t size, void (*entry)(transfer_t)) {
  return boost::context::detail::make_fcontext(stack_top, size, entry);
}

}  // namespace weft::detail

// The context switch, wrapped so that ASan, TSan and valgrind see every switch between stacks.
//
// Two implementations sit side by side, chosen at build time (CMake WEFT_CONTEXT_SWITCH):
//   native   (default on x86-64) src/context/switch_x86_64.S: registers saved into the
//            execution_context with plain moves; ~3.5x faster than fcontext on AMD Zen.
//   fcontext Boost.Context's jump_fcontext/make_fcontext: portable, and what the asan preset
//            builds, so both stay tested.
// Protocol for both: jump(from, target) saves the running context into *from (or abandons it
// when from is null: a finished coroutine leaving its stack for good) and resumes target. A
// fresh context starts in its entry function, which must call land() first.
//
// ASan: __sanitizer_start_switch_fiber before the jump (with the target's stack bounds, and a
// null fake-stack slot when the current stack is abandoned so ASan frees its fake frames),
// __sanitizer_finish_switch_fiber right after landing. TSan: switch to the target stack's fiber
// before jumping. valgrind: stacks are registered when mapped (stack_pool).
#pragma once

#include <cstddef>
#include <cstdint>

#include "weft/context/detail/execution_context.hpp"

#if defined(WEFT_SANITIZE_ADDRESS)
#include <sanitizer/common_interface_defs.h>
#endif
#if defined(WEFT_SANITIZE_THREAD)
#include <sanitizer/tsan_interface.h>
#include <signal.h>
#endif

#if defined(WEFT_NATIVE_SWITCH)
extern "C" void weft_switch_context(void** from_block, void** to_block);
extern "C" [[noreturn]] void weft_resume_context(void** to_block);
// Runs, on the resumed coroutine, what weft::yield would do after its switch (defined by the
// scheduler); entered from the switch with the resume address as its return address.
extern "C" void weft_resume_hook();
#if !defined(WEFT_SANITIZE_ADDRESS)
// weft::yield ends in a tail call to the switch (ASan needs code after every switch instead).
#define WEFT_TAIL_SWITCH 1
#endif
#else
#include <boost/context/detail/fcontext.hpp>
#endif

namespace weft::detail {

using entry_function = void (*)();

inline void before_jump([[maybe_unused]] execution_context* from,
                        [[maybe_unused]] execution_context& target) {
#if defined(WEFT_SANITIZE_ADDRESS)
  __sanitizer_start_switch_fiber(from != nullptr ? &from->fake_stack : nullptr, target.stack_bottom,
                                 target.stack_size);
#endif
#if defined(WEFT_SANITIZE_THREAD)
  // TSan defers an asynchronous signal that arrives while instrumented code runs and delivers it
  // when that fiber next leaves an intercepted call. Its fibers are separate thread states, so a
  // signal deferred on this fiber would wait until this coroutine runs again, which may be never
  // (a SIGCHLD that libuv needs to wake the very coroutine waiting for the child). Any
  // intercepted call delivers it; reading the signal mask is the cheapest one.
  sigset_t unchanged;
  pthread_sigmask(SIG_BLOCK, nullptr, &unchanged);
  __tsan_switch_to_fiber(target.tsan_fiber, 0);
#endif
}

inline void after_jump([[maybe_unused]] execution_context* from) {
#if defined(WEFT_SANITIZE_ADDRESS)
  __sanitizer_finish_switch_fiber(from->fake_stack, nullptr, nullptr);
#endif
}

#if defined(WEFT_NATIVE_SWITCH)

__attribute__((always_inline)) inline void jump(execution_context* from,
                                                execution_context& target) {
  before_jump(from, target);
  if (from == nullptr) {
    weft_resume_context(target.registers);
  }
  weft_switch_context(from->registers, target.registers);
  after_jump(from);
}

// Prepares context to start entry on the stack [bottom, top): entry runs as if called from a
// frame whose return address is 0, so debuggers' backtraces end there.
template <entry_function entry>
inline void prepare(execution_context& context, void* top, std::size_t) {
  auto aligned = reinterpret_cast<std::uintptr_t>(top) & ~std::uintptr_t{15};
  auto* return_slot = reinterpret_cast<void**>(aligned - 8);
  *return_slot = nullptr;
  context.registers[0] = return_slot;  // at entry (rsp + 8) is 16-byte aligned, as after a call
  context.registers[7] = reinterpret_cast<void*>(entry);
}

inline void land() {
#if defined(WEFT_SANITIZE_ADDRESS)
  __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
#endif
}

#else  // fcontext

namespace fcontext = boost::context::detail;

inline void jump(execution_context* from, execution_context& target) {
  before_jump(from, target);
  fcontext::transfer_t back =
      fcontext::jump_fcontext(target.registers[0], from != nullptr ? from->registers : nullptr);
  // Resumed: whoever jumped here passed the slot for its own context.
  if (back.data != nullptr) {
    *static_cast<void**>(back.data) = back.fctx;
  }
  after_jump(from);
}

template <entry_function entry>
void fcontext_trampoline(fcontext::transfer_t arrival) {
  if (arrival.data != nullptr) {
    *static_cast<void**>(arrival.data) = arrival.fctx;
  }
  entry();
}

template <entry_function entry>
inline void prepare(execution_context& context, void* top, std::size_t size) {
  context.registers[0] = fcontext::make_fcontext(top, size, &fcontext_trampoline<entry>);
}

inline void land() {
#if defined(WEFT_SANITIZE_ADDRESS)
  __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
#endif
}

#endif

}  // namespace weft::detail

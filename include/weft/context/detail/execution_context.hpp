// The saved state of an execution context (a coroutine, or the thread's own stack a scheduler
// started on): what the context switch (src/context/switch.hpp) reads and writes. Internal: the
// scheduler embeds one in every coroutine control block, which is why it is installed.
#pragma once

#include <cstddef>

namespace weft::detail {

struct execution_context {
  // Saved registers while it is not running (native switch: rsp, rbx, rbp, r12-r15, rip, and
  // the resume hook; fcontext: registers[0] is the fcontext).
  // Not zeroed on construction: prepare() fills what a fresh start needs and every switch to
  // the context sets the hook slot.
  void* registers[9];
  // It suspended in weft::yield's tail-called switch: on resume, whatever yield would have done
  // after the switch must run as the resume hook (see switch_x86_64.S).
  bool resumes_through_hook = false;
  const void* stack_bottom = nullptr;  // lowest address of its stack (for ASan)
  std::size_t stack_size = 0;
  void* fake_stack = nullptr;  // ASan's fake-stack handle while switched out
  void* tsan_fiber = nullptr;  // TSan's fiber for its stack
};

}  // namespace weft::detail

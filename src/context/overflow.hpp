// Stack overflow reporting. A coroutine that runs off its stack hits the guard page below it;
// the SIGSEGV handler (on an alternate signal stack, since the faulting stack is unusable)
// recognises the address as the current coroutine's guard page and reports
//   "weft: coroutine N (name) overflowed its S-byte stack"
// before aborting, instead of a bare segmentation fault. Faults anywhere else go to the
// previously installed handler (or the default action).
#pragma once

#include <cstddef>
#include <cstdint>

#include "weft/context/stack.hpp"

namespace weft::detail {

// What the fault handler needs to know about the code running on this thread when a fault
// comes: its stack, and how to name it. The context layer cannot know what runs on a stack, so
// the layer that runs coroutines (the scheduler) tells it, through a function it registers.
struct running_on_stack {
  const stack* on = nullptr;  // null: not on a guarded coroutine stack
  std::uint64_t id = 0;
  const char* name = "";
};
// Called from the signal handler (on the alternate stack): must be async-signal-safe, reading
// only what owner already holds (no allocation, no locks).
using running_on_stack_function = running_on_stack (*)(const void* owner) noexcept;

// Installs the process-wide handler (once) and gives this thread an alternate signal stack for
// as long as the guard lives (run() holds one). running(owner) says what runs on this thread
// when a fault comes.
class overflow_guard {
 public:
  overflow_guard(const void* owner, running_on_stack_function running);
  ~overflow_guard();
  overflow_guard(const overflow_guard&) = delete;
  overflow_guard& operator=(const overflow_guard&) = delete;

 private:
  const void* previous_owner_;
  running_on_stack_function previous_function_;
  void* alternate_stack_ = nullptr;
  std::size_t alternate_size_ = 0;
  bool installed_ = false;
};

}  // namespace weft::detail

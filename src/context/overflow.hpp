// Stack overflow reporting. A coroutine that runs off its stack hits the guard page below it;
// the SIGSEGV handler (on an alternate signal stack, since the faulting stack is unusable)
// recognises the address as the current coroutine's guard page and reports
//   "weft: coroutine N (name) overflowed its S-byte stack"
// before aborting, instead of a bare segmentation fault. Faults anywhere else go to the
// previously installed handler (or the default action).
#pragma once

#include <cstddef>

namespace weft::detail {

// Installs the process-wide handler (once) and gives this thread an alternate signal stack for
// as long as the guard lives (run() holds one).
class overflow_guard {
 public:
  overflow_guard();
  ~overflow_guard();
  overflow_guard(const overflow_guard&) = delete;
  overflow_guard& operator=(const overflow_guard&) = delete;

 private:
  void* alternate_stack_ = nullptr;
  std::size_t alternate_size_ = 0;
  bool installed_ = false;
};

}  // namespace weft::detail

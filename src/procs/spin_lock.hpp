// weft::procs' spin lock, for critical sections of a few dozen nanoseconds to a few
// microseconds held by the workers (an inbox's push or swap, the global queue's splice): with
// as many workers as cores, spinning (then yielding) beats a futex sleep and wake. With
// std::mutex on the global queue, futex sleeps and wakes took about a tenth of the samples of a
// burst of 100k spawns on two workers (perf), and the burst ran 20-30% slower.
#pragma once

#include <atomic>
#include <thread>

namespace weft::procs::detail {

// A test-and-test-and-set lock. Acquire on lock, release on unlock: everything written under
// it is visible to the next holder. After 64 spins it yields the thread between looks, so a
// holder preempted by the kernel (more threads than cores) gets its core back.
class spin_lock {
 public:
  void lock() noexcept {
    for (unsigned spins = 0;; ++spins) {
      if (!held_.exchange(true, std::memory_order_acquire)) {
        return;
      }
      while (held_.load(std::memory_order_relaxed)) {
        if (++spins > 64) {
          std::this_thread::yield();
        }
      }
    }
  }
  void unlock() noexcept { held_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> held_{false};
};

}  // namespace weft::procs::detail

// weft::wait_group: wait for a counted set of jobs to finish (Go's sync.WaitGroup).
// For coroutines; weft::procs::wait_group is the same idea for procs processes, which never block.
//
// Contract:
//   - Only coroutines of one scheduler use a given wait group, on that scheduler's thread;
//     add/done may also be called from a microtask or reactor callback there.
//   - add(n) before starting n jobs, done() as each ends; wait() suspends until the counter is
//     zero. A wait that has to suspend is a cancellation point (cancelled_error) and takes an
//     optional time limit (timeout_error); on a zero counter it returns at once.
//   - When the counter reaches zero every current waiter is released, whatever happens next:
//     an add() before they run starts a new round and does not hold them back.
//   - Taking the counter below zero is std::logic_error (a done() without its add()); the
//     counter is left unchanged.
//   - The wait group must outlive every wait on it.
#pragma once

#include <cstddef>
#include <string>

#include "weft/sched/timeout.hpp"
#include "weft/sync/detail/waiter_queue.hpp"

namespace weft {

class wait_group {
 public:
  wait_group() noexcept;
  wait_group(const wait_group&) = delete;
  wait_group& operator=(const wait_group&) = delete;

  // Adds delta (negative to subtract) to the counter; reaching zero releases every waiter.
  void add(std::ptrdiff_t delta = 1);
  void done() { add(-1); }  // add(-1)
  // Waits until the counter is zero.
  void wait(const timeout& limit = timeout::never());

  // count(): the counter now; waiting(): coroutines waiting now.
  std::ptrdiff_t count() const noexcept { return count_; }
  std::size_t waiting() const noexcept { return waiters_.size(); }

 private:
  static void describe(const void* self, std::string& out);

  std::ptrdiff_t count_ = 0;
  detail::waiter_queue waiters_;
};

}  // namespace weft

// A scheduler's pool of coroutine stacks (see include/weft/context/stack.hpp for the policy).
//
// Single-threaded: a pool belongs to one scheduler. Guarded stacks are one mapping each (guard
// page + stack); unguarded stacks are carved from slabs of many stacks, so that beyond the guard
// budget a stack costs no mapping of its own. The process-wide guard budget is shared by every
// scheduler through an atomic counter.
#pragma once

#include <cstddef>
#include <deque>
#include <vector>

#include "weft/context/stack.hpp"

namespace weft::detail {

class stack_pool {
 public:
  explicit stack_pool(const stack_options& options);
  ~stack_pool();
  stack_pool(const stack_pool&) = delete;
  stack_pool& operator=(const stack_pool&) = delete;

  // A stack ready to run on: from the pool, else freshly mapped. Throws std::system_error when
  // the kernel refuses memory or mappings, or max_stacks are in use (reservations included).
  stack acquire();
  // Promises a stack to a coroutine that has not started (spawn_options::stack_at_spawn): a
  // free one is set aside, mapped now if need be, so that acquire_reserved() cannot fail. The
  // same errors as acquire(). A promise costs a count, not a trip through the pool: the
  // coroutine often starts on the stack of one that just ended (unreserve()).
  void reserve() {
    if (limit_ == 0 && warm_.size() > reserved_) [[likely]] {
      ++reserved_;  // a free stack is there to promise
      return;
    }
    reserve_slow();
  }
  // Takes a promised stack (never fails).
  stack acquire_reserved() noexcept {
    --reserved_;
    ++outstanding_;
    stack promised = warm_.back();
    warm_.pop_back();
    return promised;
  }
  // Drops a promise without taking its stack.
  void unreserve() noexcept { --reserved_; }
  // Returns a stack to the pool. Safe to call while still executing on that stack: the memory
  // stays mapped; once the pool holds more than the cap, a batch of the oldest stacks is given
  // back to the kernel.
  void release(stack released) noexcept;

  // Free stacks holding memory (decommitted ones are kept as address space only).
  std::size_t pooled() const noexcept { return warm_.size(); }
  std::size_t allocated() const noexcept { return allocated_; }
  std::size_t guarded() const noexcept { return guarded_; }
  std::size_t stack_size() const noexcept { return size_; }
  static std::size_t page_size() noexcept;

 private:
  static constexpr std::size_t trim_batch = 256;

  struct slab {
    void* base;
    std::size_t bytes;
  };

  void reserve_slow();
  void refuse_past_limit() const;
  stack map_new();
  void forget(stack& unused) noexcept;
  stack map_guarded();
  stack carve_unguarded();
  void unmap(stack& victim) noexcept;
  void trim_oldest() noexcept;
  // Sorts stacks by address and calls release(start, bytes) once per run of neighbours (each
  // stack's region starting guard bytes below its base), then each(stack) for its stacks.
  template <class Release, class Each>
  static void for_each_run(std::vector<stack>& stacks, std::size_t guard, Release release,
                           Each each);
  static void register_for_tools(stack& fresh) noexcept;
  static void deregister_for_tools(stack& old) noexcept;

  std::size_t size_;
  guard_policy guards_;
  std::size_t guard_budget_;
  std::size_t cap_;
  std::size_t floor_;
  std::size_t limit_;        // stack_options::max_stacks (0: none)
  std::deque<stack> warm_;   // released stacks, most recent at the back (reused first)
  std::vector<stack> cold_;  // slab stacks decommitted by trimming, reused after warm ones
  std::vector<slab> slabs_;
  char* slab_cursor_ = nullptr;  // next uncarved stack in the newest slab
  char* slab_end_ = nullptr;
  std::size_t allocated_ = 0;
  std::size_t guarded_ = 0;
  std::size_t outstanding_ = 0;
  std::size_t reserved_ = 0;  // free stacks promised (reserve()): warm_ never holds fewer
};

}  // namespace weft::detail

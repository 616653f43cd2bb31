// A min-heap of deadlines driven by one driver timer.
//
// Entries are intrusive (they live in the sleeping coroutine's frame), so adding a timer never
// allocates beyond the heap's vector, and removal (a cancelled sleep) is O(log n) through the
// index each entry keeps. Equal deadlines fire in insertion order.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "weft/detail/timer_entry.hpp"

namespace weft::detail {

class timer_queue {
 public:
  void push(timer_entry& entry);
  void remove(timer_entry& entry) noexcept;
  timer_entry* top() const noexcept { return heap_.empty() ? nullptr : heap_.front(); }
  bool empty() const noexcept { return heap_.empty(); }
  std::size_t size() const noexcept { return heap_.size(); }
  // Entries that keep the reactor alive.
  std::size_t foreground() const noexcept { return foreground_; }

  // Forgets every entry (the reactor is closing): entries read as not queued afterwards, so a
  // timer destroyed after its run ended does not touch the queue.
  void clear() noexcept {
    for (timer_entry* entry : heap_) {
      entry->heap_index = timer_entry::not_queued;
    }
    heap_.clear();
    foreground_ = 0;
  }

  // Fires every entry due at now that was queued before this call (an entry a callback adds is
  // left for the next round, so a zero-delay repeat cannot spin here). Returns how many fired.
  std::size_t fire_due(timer_clock::time_point now);

 private:
  static bool earlier(const timer_entry* a, const timer_entry* b) noexcept {
    return a->deadline < b->deadline || (a->deadline == b->deadline && a->sequence < b->sequence);
  }
  void sift_up(std::size_t index) noexcept;
  void sift_down(std::size_t index) noexcept;
  void place(std::size_t index, timer_entry* entry) noexcept {
    heap_[index] = entry;
    entry->heap_index = index;
  }

  std::vector<timer_entry*> heap_;
  std::uint64_t next_sequence_ = 0;
  std::size_t foreground_ = 0;
};

}  // namespace weft::detail

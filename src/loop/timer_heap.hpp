// The event loop's own timer heap: a 4-ary min-heap of small value nodes (deadline, sequence,
// slot), ordered by deadline and then by the sequence the timer was armed with, so equal
// deadlines fire in the order they were set.
//
// Why its own heap rather than one weft timer_entry per timer: the nodes are values in one
// array, so a comparison never chases a pointer into a watcher, and four children share a
// cache line and a half; with millions of timers that is what a pop costs. The driver sees one
// timer_entry for the earliest node (src/loop/loop_core.hpp).
//
// Removal is lazy: a cancelled timer leaves its node behind (the watcher's armed sequence no
// longer matches it) and the loop drops such stale nodes when they reach the top, or all at once
// with retain() when they outnumber the live ones. Cancelling is then O(1), and a heap full of
// cancelled timeouts costs one linear rebuild per doubling, not a sift per cancel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace weft::loop::detail {

struct timer_node {
  std::int64_t deadline;   // steady_clock nanoseconds; INT64_MAX: never
  std::uint64_t sequence;  // when it was armed (unique, increasing)
  std::uint32_t slot;      // the watcher's slot
};

class timer_heap {
 public:
  bool empty() const noexcept { return nodes_.empty(); }
  std::size_t size() const noexcept { return nodes_.size(); }
  const timer_node& top() const noexcept { return nodes_.front(); }
  const std::vector<timer_node>& nodes() const noexcept { return nodes_; }

  void push(const timer_node& node);
  void pop() noexcept;
  void clear() noexcept { nodes_.clear(); }

  // Keeps the nodes for which keep(node) is true and restores the heap order: O(n).
  template <class Keep>
  void retain(Keep&& keep) {
    std::size_t kept = 0;
    for (const timer_node& node : nodes_) {
      if (keep(node)) {
        nodes_[kept++] = node;
      }
    }
    nodes_.resize(kept);
    heapify();
  }

 private:
  static constexpr std::size_t arity = 4;
  static bool earlier(const timer_node& a, const timer_node& b) noexcept {
    return a.deadline < b.deadline || (a.deadline == b.deadline && a.sequence < b.sequence);
  }
  void sift_down(std::size_t index) noexcept;
  void heapify() noexcept;

  std::vector<timer_node> nodes_;
};

}  // namespace weft::loop::detail

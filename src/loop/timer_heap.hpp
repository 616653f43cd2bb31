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
#include <cstdlib>
#include <span>
#include <type_traits>
#include <utility>

namespace weft::loop::detail {

struct timer_node {
  std::int64_t deadline;   // steady_clock nanoseconds; INT64_MAX: never
  std::uint64_t sequence;  // when it was armed (unique, increasing)
  std::uint32_t slot;      // the watcher's slot
};
static_assert(std::is_trivially_copyable_v<timer_node>);

class timer_heap {
 public:
  timer_heap() = default;
  timer_heap(const timer_heap&) = delete;
  timer_heap& operator=(const timer_heap&) = delete;
  ~timer_heap() { std::free(nodes_); }

  bool empty() const noexcept { return size_ == 0; }
  std::size_t size() const noexcept { return size_; }
  const timer_node& top() const noexcept { return nodes_[0]; }
  std::span<const timer_node> nodes() const noexcept { return {nodes_, size_}; }

  void push(const timer_node& node);
  void pop() noexcept;
  void clear() noexcept { size_ = 0; }

  // Keeps the nodes for which keep(node) is true and restores the heap order: O(n).
  template <class Keep>
  void retain(Keep&& keep) {
    std::size_t kept = 0;
    for (std::size_t index = 0; index < size_; ++index) {
      if (keep(nodes_[index])) {
        nodes_[kept++] = nodes_[index];
      }
    }
    size_ = kept;
    heapify();
  }

 private:
  static constexpr std::size_t arity = 4;
  // (deadline, sequence) as one 128-bit number: a compare without a data-dependent branch
  // (cmp and sbb), where the two-field form mispredicts on runs of equal deadlines. Deadlines
  // are never negative (nanoseconds of the steady clock, saturated at INT64_MAX).
  static bool earlier(const timer_node& a, const timer_node& b) noexcept { return key(a) < key(b); }
  __extension__ using wide_key = unsigned __int128;  // a GCC and Clang extension
  static wide_key key(const timer_node& node) noexcept {
    return (static_cast<wide_key>(static_cast<std::uint64_t>(node.deadline)) << 64) | node.sequence;
  }
  void sift_down(std::size_t index) noexcept;
  void heapify() noexcept;
  void grow();

  // Plain malloc'd storage grown with realloc (nodes are trivially copyable): a large heap then
  // grows by remapping its pages instead of copying them into a fresh buffer.
  timer_node* nodes_ = nullptr;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

}  // namespace weft::loop::detail

// The event loop's own timer queue: a 4-ary min-heap of small value nodes (deadline, sequence,
// slot), ordered by deadline and then by the sequence the timer was armed with, so equal
// deadlines fire in the order they were set; and beside it up to max_runs FIFO runs, one per
// interval, that keep timers of a common interval out of the heap.
//
// Why its own heap rather than one weft timer_entry per timer: the nodes are values in one
// array, so a comparison never chases a pointer into a watcher, and four children share a
// cache line and a half. The driver sees one timer_entry for the earliest node
// (src/loop/loop_core.hpp).
//
// Why runs: a heap pop costs a walk from the root to a leaf, a cache miss per level once the
// heap outgrows the cache (ten million timers: about twelve levels, the whole cost of
// timers_10m). But timers of the same interval armed one after another have non-decreasing
// deadlines (now + interval, with now read from a monotonic clock), so a FIFO of them is
// already sorted: appending and taking the front cost O(1) and touch memory in order. Server
// code arms timers of few distinct intervals (an idle timeout, a retry delay, a repeat), so
// most timers land in a run. Each non-empty run stands in the heap as one representative node
// carrying its front's (deadline, sequence), so the heap's top is still the earliest timer of
// all, ties included; taking a run's front moves its representative down the heap
// (a sift-down, no dearer than a pop). The same design as Node.js's per-duration timer lists,
// kept to a fixed table: an interval maps to one of max_runs runs by a hash (Fibonacci
// hashing of the nanoseconds), and a timer whose run is taken by another interval, or would
// come before its run's back (a deadline from an earlier clock reading), goes to the heap
// instead. So arming stays O(1) plus at most one heap push, whatever the intervals are.
//
// Removal is lazy: a cancelled timer leaves its node behind (the watcher's armed sequence no
// longer matches it) and the loop drops such stale nodes when they reach the top, or all at once
// with retain() when they outnumber the live ones. Cancelling is then O(1), and a queue full of
// cancelled timeouts costs one linear rebuild per doubling, not a sift per cancel.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <type_traits>
#include <utility>

namespace weft::loop::detail {

struct timer_node {
  std::int64_t deadline;   // steady_clock nanoseconds; INT64_MAX: never
  std::uint64_t sequence;  // when it was armed (unique, increasing)
  std::uint32_t slot;      // the watcher's slot (below run_flag: a watcher table never gets there)
};
static_assert(std::is_trivially_copyable_v<timer_node>);

class timer_heap {
 public:
  // Slots at or above this mark a run's representative in the heap (the rest is its index).
  static constexpr std::uint32_t run_flag = std::uint32_t{1} << 31;
  static constexpr std::size_t max_runs = 64;

  timer_heap() = default;
  timer_heap(const timer_heap&) = delete;
  timer_heap& operator=(const timer_heap&) = delete;
  ~timer_heap();

  bool empty() const noexcept { return size_ == 0; }
  // Timers queued (the runs' representatives are not counted).
  std::size_t size() const noexcept { return size_; }
  // The earliest timer. Not empty().
  const timer_node& top() const noexcept {
    const timer_node& first = nodes_[0];
    return first.slot >= run_flag ? runs_[first.slot - run_flag].front() : first;
  }

  // Queues node, a timer armed for now + interval (interval picks its run).
  void push(const timer_node& node, std::int64_t interval);
  // Removes top(). Not empty().
  void pop() noexcept;
  void clear() noexcept;

  // Calls visit(node) for every timer queued, in no particular order.
  template <class Visit>
  void for_each(Visit&& visit) const {
    for (std::size_t index = 0; index < heap_size_; ++index) {
      if (nodes_[index].slot < run_flag) {
        visit(nodes_[index]);
      }
    }
    for (const run& r : runs_) {
      for (std::size_t index = 0; index < r.count; ++index) {
        visit(r.at(index));
      }
    }
  }

  // Keeps the timers for which keep(node) is true, in order: O(n).
  template <class Keep>
  void retain(Keep&& keep) {
    for (run& r : runs_) {
      std::size_t kept = 0;
      for (std::size_t index = 0; index < r.count; ++index) {
        const timer_node node = r.at(index);
        if (keep(node)) {
          r.at(kept++) = node;
        }
      }
      size_ -= r.count - kept;
      r.count = kept;
    }
    std::size_t kept = 0;
    for (std::size_t index = 0; index < heap_size_; ++index) {
      const timer_node node = nodes_[index];
      if (node.slot >= run_flag) {
        std::size_t index = node.slot - run_flag;
        if (runs_[index].count == 0) {
          release(runs_[index]);
          continue;
        }
        nodes_[kept++] = stand_in(index);  // its front may have changed
      } else if (keep(node)) {
        nodes_[kept++] = node;
      } else {
        --size_;
      }
    }
    heap_size_ = kept;
    heapify();
  }

 private:
  static constexpr std::size_t arity = 4;
  // A run's ring keeps its buffer when it empties up to this many nodes (12 KiB): a steady
  // load reuses it; a burst's large buffer is freed.
  static constexpr std::size_t kept_capacity = 512;

  // A FIFO of nodes with non-decreasing keys: a ring buffer of a power-of-two capacity.
  struct run {
    timer_node* nodes = nullptr;
    std::size_t capacity = 0;
    std::size_t head = 0;
    std::size_t count = 0;
    std::int64_t interval = -1;  // whose run it is while count > 0

    timer_node& at(std::size_t index) noexcept { return nodes[(head + index) & (capacity - 1)]; }
    const timer_node& at(std::size_t index) const noexcept {
      return nodes[(head + index) & (capacity - 1)];
    }
    const timer_node& front() const noexcept { return nodes[head]; }
    const timer_node& back() const noexcept { return at(count - 1); }
  };

  // (deadline, sequence) as one 128-bit number: a compare without a data-dependent branch
  // (cmp and sbb), where the two-field form mispredicts on runs of equal deadlines. Deadlines
  // are never negative (nanoseconds of the steady clock, saturated at INT64_MAX).
  static bool earlier(const timer_node& a, const timer_node& b) noexcept { return key(a) < key(b); }
  __extension__ using wide_key = unsigned __int128;  // a GCC and Clang extension
  static wide_key key(const timer_node& node) noexcept {
    return (static_cast<wide_key>(static_cast<std::uint64_t>(node.deadline)) << 64) | node.sequence;
  }
  static std::size_t run_index(std::int64_t interval) noexcept {
    // Fibonacci hashing: intervals are often round numbers of nanoseconds (whole ms), which
    // the multiply spreads over the top bits.
    return static_cast<std::size_t>(
        (static_cast<std::uint64_t>(interval) * 0x9E3779B97F4A7C15ull) >> 58);
  }
  static_assert(max_runs == 64, "run_index keeps the top 6 bits");
  // Run index's node in the heap: its front's key, and the run's mark as the slot. Not empty.
  timer_node stand_in(std::size_t index) const noexcept {
    const timer_node& front = runs_[index].front();
    return timer_node{front.deadline, front.sequence, run_flag | static_cast<std::uint32_t>(index)};
  }

  void heap_push(const timer_node& node);
  void heap_pop() noexcept;
  void sift_down(std::size_t index) noexcept;
  void heapify() noexcept;
  void grow();
  static void append(run& r, const timer_node& node);
  static void release(run& r) noexcept;

  // Plain malloc'd storage grown with realloc (nodes are trivially copyable): a large heap then
  // grows by remapping its pages instead of copying them into a fresh buffer.
  timer_node* nodes_ = nullptr;
  std::size_t heap_size_ = 0;  // nodes in the heap, representatives included
  std::size_t capacity_ = 0;
  std::size_t size_ = 0;  // timers, in the heap and in the runs
  std::array<run, max_runs> runs_{};
};

}  // namespace weft::loop::detail

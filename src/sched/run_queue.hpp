// The run queue: ready coroutines in two ring buffers, one per priority. High-priority
// coroutines always run before normal ones (they go to the head of the line); within a
// priority the order is FIFO, or a seeded random pick in chaos order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "weft/sched/detail/coroutine.hpp"

namespace weft::detail {

// Growable power-of-two ring of pointers. head_/tail_ are free-running counters.
template <class T>
class pointer_ring {
 public:
  pointer_ring() : slots_(std::make_unique<T*[]>(initial_capacity)), mask_(initial_capacity - 1) {}

  bool empty() const noexcept { return head_ == tail_; }
  std::size_t size() const noexcept { return tail_ - head_; }

  void push_back(T* item) {
    if (size() == mask_ + 1) [[unlikely]] {
      grow();
    }
    slots_[tail_++ & mask_] = item;
  }
  T* pop_front() noexcept { return slots_[head_++ & mask_]; }
  T* front() const noexcept { return slots_[head_ & mask_]; }
  // The item offset places behind the head, or null past the tail.
  T* peek(std::size_t offset) const noexcept {
    return offset < size() ? slots_[(head_ + offset) & mask_] : nullptr;
  }
  // Pops the head and pushes item in one go (no growth needed: the size does not change).
  void rotate(T* item) noexcept {
    ++head_;
    slots_[tail_++ & mask_] = item;
  }
  // Removes the item at position offset from the head, moving the head item into its place.
  T* take_at(std::size_t offset) noexcept {
    T*& slot = slots_[(head_ + offset) & mask_];
    T* taken = slot;
    slot = slots_[head_ & mask_];
    ++head_;
    return taken;
  }

  // How many items were ever pushed and popped (free-running; growth keeps them counting): the
  // item pushed when pushed() read n has been popped once popped() passes n.
  std::size_t pushed() const noexcept { return tail_; }
  std::size_t popped() const noexcept { return head_; }

 private:
  static constexpr std::size_t initial_capacity = 256;

  // Out of line: a wake (push_back) then needs no callee-saved register. Items keep their
  // counters (only the mask changes), so pushed() and popped() go on counting.
  __attribute__((noinline)) void grow() {
    std::size_t capacity = (mask_ + 1) * 2;
    auto bigger = std::make_unique<T*[]>(capacity);
    for (std::size_t count = head_; count != tail_; ++count) {
      bigger[count & (capacity - 1)] = slots_[count & mask_];
    }
    slots_ = std::move(bigger);
    mask_ = capacity - 1;
  }

  std::unique_ptr<T*[]> slots_;
  std::size_t mask_;
  std::size_t head_ = 0;
  std::size_t tail_ = 0;
};

class run_queue {
 public:
  bool empty() const noexcept { return high_.empty() && normal_.empty(); }
  std::size_t size() const noexcept { return high_.size() + normal_.size(); }

  void push(coroutine* ready, weft::priority priority) {
    (priority == weft::priority::high ? high_ : normal_).push_back(ready);
  }
  coroutine* pop() noexcept {
    if (!high_.empty()) {
      return high_.pop_front();
    }
    return normal_.empty() ? nullptr : normal_.pop_front();
  }
  bool high_empty() const noexcept { return high_.empty(); }
  // What pop() would return after offset more pops, if nothing is pushed meanwhile (a guess
  // for prefetching, nothing more: a high-priority wake or chaos order changes it).
  coroutine* peek(std::size_t offset) const noexcept {
    if (offset < high_.size()) {
      return high_.peek(offset);
    }
    return normal_.peek(offset - high_.size());
  }
  pointer_ring<coroutine>& normal() noexcept { return normal_; }

  // Chaos order: a uniformly random ready coroutine of the highest non-empty priority.
  coroutine* pop_random(std::uint64_t random) noexcept {
    pointer_ring<coroutine>& ring = high_.empty() ? normal_ : high_;
    if (ring.empty()) {
      return nullptr;
    }
    return ring.take_at(static_cast<std::size_t>(random % ring.size()));
  }

 private:
  pointer_ring<coroutine> high_;
  pointer_ring<coroutine> normal_;
};

}  // namespace weft::detail

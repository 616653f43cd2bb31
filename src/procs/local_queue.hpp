// A worker's local run queue in the procs work-stealing runtime: a bounded lock-free ring
// of pointers that its owner fills and empties FIFO and that other workers steal from, half
// of it at a time.
//
// Contract: ONE thread, the owner, calls push_back, pop and push_overflow (and is the only
// thread that may be the `destination` of a steal or of global_queue::pop_batch). ANY thread
// calls steal_into (on another worker's queue, passing its own as destination), size_hint and
// empty_hint. Nothing blocks; the CAS loops retry only when another thread made progress
// (or on a spurious CAS failure). The queue stores T* and never owns the items: a pointer
// handed out by pop/steal belongs to the caller. Capacity is a power of two >= 2, fixed at
// construction (default 256). T needs the `T* next_ready` member that global_queue links through
// (push_overflow uses it).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "chaos.hpp"
#include "global_queue.hpp"

namespace weft::procs::detail {

// Why it is correct (the memory-ordering argument).
//
// State: head_ and tail_ are free-running 64-bit position counters (they never wrap in
// practice, so a position is never reused and a CAS on head_ has no ABA problem); position p
// lives in slot p & mask. tail_ is stored only by the owner. head_ is changed only by CAS
// (owner's pop, owner's push_overflow, thieves' steal_into), each moving it from h to h + n
// and thereby claiming positions h .. h+n-1. Invariant: head_ <= tail_ and
// tail_ - head_ <= capacity.
//
// (1) A slot value read before a successful CAS of head_ from h is the item pushed at that
//     position. Position q goes to slot q mod capacity, last used by position q - capacity,
//     and the owner writes it only after an acquire load of head_ returned a value
//     > q - capacity (the fullness check of push_back/push_overflow, the free-space bound
//     of steal_into/pop_batch filling the owner's own ring). Say a thief read position p's
//     slot and then its CAS found head_ == h <= p. Every write of head_ is an RMW that adds,
//     so values grow along head_'s modification order and none > p was stored before that
//     CAS. The owner's overwrite (position p + capacity) thus follows an acquire load that
//     read the CAS's value or a later RMW in its release sequence: it synchronises with the
//     acq_rel CAS, so the thief's read happens-before the overwrite and cannot observe it.
//     Conversely, a read that did observe an overwrite means head_ had passed p >= h, and
//     the CAS fails, discarding it. A stale h (older than the tail_ the thief then loaded)
//     can make tail - h exceed the capacity; then too head_ has moved and the CAS fails.
//     The slots are atomics, so these speculative reads are not data races either.
// (2) The thief sees the item the owner published. The owner stores the slot, then tail_
//     with release; the thief loads tail_ with acquire and reads only positions below the
//     value it got, whose slot writes are sequenced before that tail_ store. (The same holds
//     for the item's own fields: the owner's writes to the object before pushing it
//     happen-before the thief's use of it.)
// (3) Every item is consumed exactly once. pop, steal_into and push_overflow all claim by a
//     CAS on the same word; a successful CAS reads the latest value h and writes h + n, so
//     the claimed ranges [h, h+n) are disjoint and, since claims never pass tail_ (the
//     claimer read tail_ >= h + n), cover every pushed position once. By (1)-(2) the value
//     returned for a position is the item pushed there.
// (4) A thief may fill its own ring before its CAS. Only the destination's owner (the thief
//     itself) writes its slots and its tail_; it writes positions at or above its tail_,
//     which no other thief reads until the release store of tail_ that follows the
//     successful CAS. Those slots' previous occupants (positions below its head_, by the
//     free-space bound taken from an acquire load of its head_) were claimed already, with
//     (1)'s happens-before edge. If the CAS fails, the values are simply overwritten on the
//     retry and never published.
// push_overflow claims with the same CAS as a steal (so it cannot hand an item to the global
// queue that a thief took too) and reads its slots only AFTER the claim: a claimed range is
// never rewritten by anyone but the owner, who is the reader. A thief must read before its
// CAS, because once head_ has moved the owner may reuse those slots.
template <ready_linkable T>
class local_queue {
 public:
  static constexpr std::size_t default_capacity = 256;

  explicit local_queue(std::size_t capacity = default_capacity)
      : slots_(make_slots(capacity)), mask_(capacity - 1) {}
  local_queue(const local_queue&) = delete;
  local_queue& operator=(const local_queue&) = delete;

  std::size_t capacity() const noexcept { return mask_ + 1; }

  // Owner only. Appends item; returns false, changing nothing, when the ring is full (the
  // caller then uses push_overflow).
  bool push_back(T* item) {
    require_item(item, "push_back");
    const std::uint64_t tail = tail_.load(std::memory_order_relaxed);
    const std::uint64_t head = head_.load(std::memory_order_acquire);
    chaos_point();
    if (tail - head >= capacity()) {
      return false;
    }
    slot(tail).store(item, std::memory_order_relaxed);
    chaos_point();
    tail_.store(tail + 1, std::memory_order_release);
    return true;
  }

  // Owner only. The oldest item, or nullptr when the ring is empty. Competes with thieves
  // through the CAS on head_, hence the loop.
  T* pop() noexcept {
    const std::uint64_t tail = tail_.load(std::memory_order_relaxed);
    std::uint64_t head = head_.load(std::memory_order_acquire);
    while (head < tail) {
      chaos_point();
      T* item = slot(head).load(std::memory_order_relaxed);
      chaos_point();
      if (head_.compare_exchange_weak(head, head + 1, std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
        return item;
      }
    }
    return nullptr;
  }

  // Owner only; for when push_back returned false. Moves the oldest half of the ring plus
  // item, in that order, onto the global queue in one batch (one lock). If thieves freed
  // room in the meantime, item is simply appended here instead.
  void push_overflow(T* item, global_queue<T>& global) {
    require_item(item, "push_overflow");
    const std::uint64_t tail = tail_.load(std::memory_order_relaxed);
    std::uint64_t head = head_.load(std::memory_order_acquire);
    const std::uint64_t half = capacity() / 2;
    for (;;) {
      if (tail - head < capacity()) {
        slot(tail).store(item, std::memory_order_relaxed);
        chaos_point();
        tail_.store(tail + 1, std::memory_order_release);
        return;
      }
      chaos_point();
      if (head_.compare_exchange_weak(head, head + half, std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
        break;
      }
    }
    // Positions head .. head+half-1 are ours now; only we rewrite their slots (see (4) above
    // and push_overflow's note), so reading them after the claim is safe.
    T* first = slot(head).load(std::memory_order_relaxed);
    T* last = first;
    for (std::uint64_t offset = 1; offset < half; ++offset) {
      T* next = slot(head + offset).load(std::memory_order_relaxed);
      last->next_ready = next;
      last = next;
    }
    last->next_ready = item;
    global.push_batch(first, item, half + 1);
  }

  // Called by the owner of `destination` (whose ring should be empty) on another worker's
  // queue. Claims half of this queue's items, rounded up, in one CAS; moves all but the last
  // claimed item, in order, onto destination and returns the last (to run at once). Returns
  // nullptr when there is nothing to steal. The count is capped so that the moved items fit
  // in destination's free slots.
  T* steal_into(local_queue& destination) {
    if (&destination == this) {
      throw std::logic_error(
          "weft::procs local_queue::steal_into: a queue cannot steal from itself; the owner "
          "uses pop(), thieves pass their own queue as destination");
    }
    const std::uint64_t destination_tail = destination.tail_.load(std::memory_order_relaxed);
    const std::uint64_t room = destination.free_slots_for_owner();
    std::uint64_t head = head_.load(std::memory_order_acquire);
    for (;;) {
      chaos_point();
      const std::uint64_t tail = tail_.load(std::memory_order_acquire);
      if (tail <= head) {
        return nullptr;
      }
      const std::uint64_t count = std::min((tail - head + 1) / 2, room + 1);
      for (std::uint64_t offset = 0; offset + 1 < count; ++offset) {
        destination.slot(destination_tail + offset)
            .store(slot(head + offset).load(std::memory_order_relaxed), std::memory_order_relaxed);
      }
      T* last = slot(head + count - 1).load(std::memory_order_relaxed);
      chaos_point();
      if (head_.compare_exchange_weak(head, head + count, std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
        if (count > 1) {
          chaos_point();
          destination.tail_.store(destination_tail + count - 1, std::memory_order_release);
        }
        return last;
      }
    }
  }

  // Racy reads for the idle logic: exact when nothing runs concurrently, otherwise a value
  // the length had at some recent moment, clamped to [0, capacity].
  std::size_t size_hint() const noexcept {
    const std::uint64_t head = head_.load(std::memory_order_acquire);
    const std::uint64_t tail = tail_.load(std::memory_order_acquire);
    return tail > head ? static_cast<std::size_t>(std::min<std::uint64_t>(tail - head, capacity()))
                       : 0;
  }
  bool empty_hint() const noexcept { return size_hint() == 0; }

 private:
  friend class global_queue<T>;

  static std::unique_ptr<std::atomic<T*>[]> make_slots(std::size_t capacity) {
    if (capacity < 2 || (capacity & (capacity - 1)) != 0) {
      throw std::logic_error("weft::procs local_queue: capacity " + std::to_string(capacity) +
                             " is not a power of two >= 2; round it up to one");
    }
    auto slots = std::make_unique<std::atomic<T*>[]>(capacity);
    for (std::size_t index = 0; index < capacity; ++index) {
      slots[index].store(nullptr, std::memory_order_relaxed);
    }
    return slots;
  }

  static void require_item(T* item, const char* operation) {
    if (item == nullptr) {
      throw std::logic_error(std::string("weft::procs local_queue::") + operation +
                             ": the item is null (null means \"empty\" to pop); push a pointer "
                             "to a live item");
    }
  }

  std::atomic<T*>& slot(std::uint64_t position) const noexcept { return slots_[position & mask_]; }

  // Owner only. The acquire load of head_ gives the happens-before edge of (4): the slots
  // counted as free may be rewritten right away.
  std::size_t free_slots_for_owner() const noexcept {
    const std::uint64_t tail = tail_.load(std::memory_order_relaxed);
    const std::uint64_t head = head_.load(std::memory_order_acquire);
    return static_cast<std::size_t>(capacity() - (tail - head));
  }

  // Owner only, for global_queue::pop_batch: appends the chain starting at first (linked
  // through next_ready, count items, count <= free_slots_for_owner()) and publishes it with
  // one release store.
  void append_chain_for_owner(T* first, std::size_t count) noexcept {
    const std::uint64_t tail = tail_.load(std::memory_order_relaxed);
    T* item = first;
    for (std::size_t offset = 0; offset < count; ++offset) {
      slot(tail + offset).store(item, std::memory_order_relaxed);
      item = item->next_ready;
    }
    chaos_point();
    tail_.store(tail + count, std::memory_order_release);
  }

  const std::unique_ptr<std::atomic<T*>[]> slots_;
  const std::uint64_t mask_;
  // head_ is hammered by thieves; keeping it off tail_'s cache line spares the owner's
  // pushes the false sharing.
  alignas(64) std::atomic<std::uint64_t> head_{0};
  alignas(64) std::atomic<std::uint64_t> tail_{0};
};

}  // namespace weft::procs::detail

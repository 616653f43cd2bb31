// The global run queue of the procs runtime: where work goes when a worker's local queue
// overflows, and where work submitted from outside the workers waits for one to take it.
//
// Contract: any thread may call any member; push, push_batch, pop and pop_batch take a lock
// for a short, bounded time (pop_batch walks at most `max` links under it) and never block
// otherwise. pop_batch must be called by the owner of the destination local queue (the one
// thread that pushes to it). The queue never owns its items: it links them through their
// `next_ready` member and hands back the same pointers; whoever pushes an item gives up using
// that item (and its next_ready) until someone pops it again.
//
// Requirement on T: a public data member `T* next_ready` that nothing else touches while the
// item sits in this queue (the queue overwrites it freely).
#pragma once

#include <algorithm>
#include <atomic>
#include <concepts>
#include <cstddef>
#include <mutex>
#include <stdexcept>
#include <type_traits>

#include "spin_lock.hpp"

namespace weft::procs::detail {

template <class T>
concept ready_linkable = std::is_object_v<T> && requires(T& item) {
  { item.next_ready } -> std::same_as<T*&>;
};

template <ready_linkable T>
class local_queue;

template <ready_linkable T>
class global_queue {
 public:
  global_queue() = default;
  global_queue(const global_queue&) = delete;
  global_queue& operator=(const global_queue&) = delete;

  void push(T* item) {
    if (item == nullptr) {
      throw std::logic_error(
          "weft::procs global_queue::push: the item is null; push a pointer to a live item");
    }
    item->next_ready = nullptr;
    std::lock_guard guard(lock_);
    append_locked(item, item, 1);
  }

  // Appends the chain first -> ... -> last (linked through next_ready; last->next_ready is
  // ignored and overwritten) of exactly `count` items, in order, under one lock.
  void push_batch(T* first, T* last, std::size_t count) {
    if (first == nullptr || last == nullptr || count == 0) {
      throw std::logic_error(
          "weft::procs global_queue::push_batch: the batch is empty or has a null end; pass "
          "the first and last item of a chain linked through next_ready and its length");
    }
    last->next_ready = nullptr;
    std::lock_guard guard(lock_);
    append_locked(first, last, count);
  }

  // The oldest item, or nullptr when the queue is empty. An item whose push happened before
  // this call is always seen (the lock-free emptiness check reads length_ with acquire, and
  // the push wrote it with release), so only concurrent pushes can be missed.
  T* pop() {
    if (empty_hint()) {
      return nullptr;
    }
    std::lock_guard guard(lock_);
    const std::size_t length = length_.load(std::memory_order_relaxed);
    if (length == 0) {
      return nullptr;
    }
    T* item = head_;
    head_ = item->next_ready;
    if (head_ == nullptr) {
      tail_ = nullptr;
    }
    length_.store(length - 1, std::memory_order_release);
    return item;
  }

  // Takes up to `max` of the oldest items in one lock: returns the first (to run at once) and
  // pushes the others, in order, onto `destination`, which the caller must own. The count is
  // also capped so that the others fit in destination's free slots (the returned item needs
  // none). Returns nullptr, leaving destination untouched, when the queue is empty.
  T* pop_batch(local_queue<T>& destination, std::size_t max) {
    if (max == 0) {
      throw std::logic_error(
          "weft::procs global_queue::pop_batch: max is 0; ask for at least one item");
    }
    if (empty_hint()) {
      return nullptr;
    }
    // Destination's free space only grows behind our back (thieves take from it, and only
    // its owner, the caller, adds), so this snapshot is a safe bound.
    const std::size_t limit = std::min(max, destination.free_slots_for_owner() + 1);
    T* first = nullptr;
    std::size_t taken = 0;
    {
      std::lock_guard guard(lock_);
      const std::size_t length = length_.load(std::memory_order_relaxed);
      if (length == 0) {
        return nullptr;
      }
      taken = std::min(limit, length);
      first = head_;
      T* last = first;
      for (std::size_t index = 1; index < taken; ++index) {
        last = last->next_ready;
      }
      head_ = last->next_ready;
      if (head_ == nullptr) {
        tail_ = nullptr;
      }
      length_.store(length - taken, std::memory_order_release);
    }
    // The chain is ours alone now, so it can be moved into destination outside the lock.
    if (taken > 1) {
      destination.append_chain_for_owner(first->next_ready, taken - 1);
    }
    return first;
  }

  // Racy reads for the idle logic ("is there any work?"): exact when nothing runs
  // concurrently, otherwise a value the length had at some recent moment.
  std::size_t size_hint() const noexcept { return length_.load(std::memory_order_acquire); }
  bool empty_hint() const noexcept { return size_hint() == 0; }

 private:
  void append_locked(T* first, T* last, std::size_t count) noexcept {
    if (tail_ == nullptr) {
      head_ = first;
    } else {
      tail_->next_ready = first;
    }
    tail_ = last;
    length_.store(length_.load(std::memory_order_relaxed) + count, std::memory_order_release);
  }

  spin_lock lock_;     // held for a splice or a walk of at most `max` links
  T* head_ = nullptr;  // guarded by lock_
  T* tail_ = nullptr;  // guarded by lock_
  // Written only under lock_ (release); read anywhere (acquire) without the lock.
  std::atomic<std::size_t> length_{0};
};

}  // namespace weft::procs::detail

// local_queue's push_overflow needs global_queue and pop_batch needs local_queue; including it
// here (after global_queue is complete) lets either header be included first.
#include "local_queue.hpp"

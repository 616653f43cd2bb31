// The FIFO hand-off queue every coordination primitive is built on (mutex, semaphore, channel,
// task_group backpressure, pool). Not user-facing API; public because templates use it.
//
// The discipline (docs/architecture.md: waiters are served FIFO with hand-off): whoever frees
// capacity calls grant_front(), which takes the oldest waiter out of the queue, marks it granted
// and makes it ready. The capacity now belongs to that waiter; the freeing coroutine cannot take it
// back, even if it loops and tries again before the waiter has run, because the primitive's own
// state already records the transfer (a mutex's owner, a value placed in the waiter's slot).
//
// Leaving: a waiter whose wait ends by timeout is simply unlinked; if a grant reached it in the
// window between the deadline firing and the waiter running, the grant wins and wait() returns
// normally (the capacity is not lost). A waiter cancelled after being granted must pass the grant
// on; wait() calls the primitive's pass_on callback before rethrowing cancelled_error, so a
// reservation is never stranded.
//
// Threads: a queue belongs to one scheduler's thread; every call is made from a coroutine of that
// scheduler (grant_front may also be called from a microtask or reactor callback there).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "weft/sched/detail/coroutine.hpp"
#include "weft/sched/timeout.hpp"

namespace weft::detail {

class waiter_queue;

// One coroutine waiting in a waiter_queue. Lives on the waiting coroutine's stack for the
// duration of waiter_queue::wait(). slot and value are for the granter to fill before the waiter
// runs (a pointer to where a channel value goes, how many permits were asked for, ...).
class queued_waiter final : public wait_source {
 public:
  explicit queued_waiter(waiter_queue& queue, void* slot = nullptr,
                         std::uintptr_t value = 0) noexcept
      : slot(slot), value(value), queue_(queue) {}
  queued_waiter(const queued_waiter&) = delete;
  queued_waiter& operator=(const queued_waiter&) = delete;
  // A wait that ends by an exception (a cancel raised while parked) may leave it queued.
  ~queued_waiter() {
    if (link_.linked()) [[unlikely]] {
      disarm();
    }
  }

  bool granted() const noexcept { return granted_; }
  // Set by the granter together with the grant: how the wait ended for the primitive (for
  // example "closed" for a channel waiter woken by close()).
  std::uint8_t outcome = 0;
  void* slot;
  std::uintptr_t value;

  bool arm(coroutine& waiter) override;
  void disarm() noexcept override;
  void describe(std::string& out) const override;

 private:
  friend class waiter_queue;
  struct link_node : list_node {
    queued_waiter* owner = nullptr;
  };
  waiter_queue& queue_;
  coroutine* coroutine_ = nullptr;
  link_node link_{};
  bool granted_ = false;
};

class waiter_queue {
 public:
  // describe appends what the waiters wait on to a deadlock report line, e.g.
  // "mutex 0x55d0 (held by task 3, 2 waiting)"; owner is passed back to it.
  using describe_function = void (*)(const void* owner, std::string& out);
  waiter_queue(const void* owner, describe_function describe) noexcept
      : owner_(owner), describe_(describe) {}
  waiter_queue(const waiter_queue&) = delete;
  waiter_queue& operator=(const waiter_queue&) = delete;
  // Destroying a queue with waiters is a bug in the primitive that owns it (they would wake into
  // freed memory); it aborts with a message rather than corrupt memory.
  ~waiter_queue();

  bool empty() const noexcept { return size_ == 0; }
  std::size_t size() const noexcept { return size_; }
  // The oldest waiter, still queued (to look at its slot/value before granting), or null.
  queued_waiter* front() const noexcept {
    list_node* node = waiters_.front();
    return node == nullptr ? nullptr : static_cast<queued_waiter::link_node*>(node)->owner;
  }

  // Hands capacity to the oldest waiter: unlinks it, marks it granted with outcome, wakes it.
  // Returns it (the caller may still fill its slot: it has not run yet), or null if none waits.
  queued_waiter* grant_front(std::uint8_t outcome = 0) noexcept;
  // grant_front(outcome) for every waiter (close); returns how many were woken.
  std::size_t grant_all(std::uint8_t outcome) noexcept;

  // Suspends the calling coroutine in the queue until it is granted. Returns normally once
  // granted (also when the grant and the deadline raced). Throws timeout_error
  // ("weft: <describe> timed out after N ms") when limit passes first, and cancelled_error when
  // the coroutine is cancelled; if the cancel came after the grant, pass_on(waiter) runs first so
  // the primitive hands the capacity to the next waiter. std::logic_error outside a coroutine.
  template <class PassOn>
  void wait(queued_waiter& waiter, const timeout& limit, PassOn&& pass_on) {
    try {
      wait_until_granted(waiter, limit);
    } catch (...) {
      if (waiter.granted()) {
        pass_on(waiter);
      }
      throw;
    }
  }
  // For waits whose grant needs no passing on (the waiter consumed nothing yet).
  void wait(queued_waiter& waiter, const timeout& limit) { wait_until_granted(waiter, limit); }

  void describe(std::string& out) const { describe_(owner_, out); }

 private:
  friend class queued_waiter;
  void wait_until_granted(queued_waiter& waiter, const timeout& limit);
  void link(queued_waiter& waiter) noexcept {
    waiter.link_.owner = &waiter;
    waiters_.push_back(waiter.link_);
    ++size_;
  }
  void unlink(queued_waiter& waiter) noexcept {
    intrusive_list::remove(waiter.link_);
    --size_;
  }

  intrusive_list waiters_;
  std::size_t size_ = 0;
  const void* owner_;
  describe_function describe_;
};

}  // namespace weft::detail

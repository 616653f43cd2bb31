// weft::mutex: mutual exclusion between the coroutines of one scheduler.
//
// Contract:
//   - Only coroutines of one scheduler use a given mutex, on that scheduler's thread (it is not
//     a thread lock: it never blocks the thread, and another thread must not touch it).
//   - lock() suspends the calling coroutine while another coroutine holds the mutex. A lock that
//     has to wait is a cancellation point (cancelled_error) and takes an optional time limit
//     (timeout_error); a lock that can be taken at once never suspends.
//   - FIFO with hand-off: unlock() gives the mutex straight to the oldest waiter, which owns it
//     from that moment, before it even runs. The unlocking coroutine cannot take it back by
//     looping (a lock() while others wait queues behind them even if the mutex looks free), so
//     no waiter is ever starved. A waiter granted the mutex and then cancelled before it runs
//     passes it on to the next waiter.
//   - The mutex records its owner (a coroutine): unlock by any other coroutine, unlock of an
//     unlocked mutex and lock() by the owner (which would wait forever) are std::logic_error
//     naming the coroutines involved. A deadlock report shows who holds it and how many wait.
//   - Usable with std::unique_lock, std::lock_guard and std::scoped_lock (try_lock_for and
//     try_lock_until make unique_lock's timed constructors work). To take several at once, use
//     weft::lock_all or weft::scoped_lock_all (below), not std::lock / std::scoped_lock of
//     several: std::lock's back-off (lock one, try the others, release and retry) assumes a
//     released mutex can be retaken, but hand-off gives it to its oldest waiter, so coroutines
//     taking the same mutexes in opposite orders can keep handing them round.
//   - The mutex must outlive every wait on it. Destroying it while locked is allowed (the owner
//     record is dropped); destroying it while coroutines wait on it aborts.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "weft/sched/detail/coroutine.hpp"
#include "weft/sched/timeout.hpp"
#include "weft/sync/detail/waiter_queue.hpp"

namespace weft {

namespace detail {

// A timeout from a std::chrono duration of any representation, for the std-style timed calls
// (try_lock_for, condition_variable::wait_for). Rounds up, so a wait never ends early; a
// duration too long to represent as a deadline (hours::max()) means no limit.
template <class Rep, class Period>
timeout timeout_after(const std::chrono::duration<Rep, Period>& length) {
  // About 290 years fit in steady_clock's nanoseconds; anything beyond a century is "never".
  constexpr double century_seconds = 100.0 * 365 * 24 * 3600;
  if (std::chrono::duration<double>(length).count() > century_seconds) {
    return timeout::never();
  }
  if (length <= length.zero()) {
    return timeout(timeout::clock::duration::zero());
  }
  return timeout(std::chrono::ceil<timeout::clock::duration>(length));
}

// Same for an absolute time on any clock (measured against that clock now).
template <class Clock, class Duration>
timeout timeout_at(const std::chrono::time_point<Clock, Duration>& deadline) {
  if (deadline == std::chrono::time_point<Clock, Duration>::max()) {
    return timeout::never();
  }
  return timeout_after(deadline - Clock::now());
}

// "task 3 'writer'", "task 0 (main)": how messages and deadlock reports name a coroutine.
std::string describe_coroutine(const coroutine& who);

}  // namespace detail

class mutex {
 public:
  mutex() noexcept;
  ~mutex();
  mutex(const mutex&) = delete;
  mutex& operator=(const mutex&) = delete;

  // Takes the mutex, waiting (FIFO) while another coroutine holds it. std::logic_error when the
  // caller already holds it or is not a coroutine.
  //
  // Inline, and so is the wait: the waiter lives in the caller's frame and the out-of-line part
  // ends in the switch, so a coroutine handed the mutex resumes straight in the caller, with no
  // frame of ours to return through (measured: each such return after a switch costs more than
  // the rest of the hand-off, most likely a mispredicted return).
  void lock() { lock(timeout::never()); }
  // Same, giving up with timeout_error ("weft: waiting on mutex 0x.. held by task 3 'writer', 1
  // waiting timed out after 50 ms") when limit passes first; the mutex is then not held.
  void lock(const timeout& limit) {
    if (detail::coroutine* self = take_now_or_caller()) {
      detail::queued_waiter me(waiters_, self);  // slot: the coroutine hand_on() makes owner
      waiters_.wait(me, limit, [this](detail::queued_waiter&) { pass_on(); });
    }
  }
  // Takes the mutex only if it is free and nobody waits for it; never suspends.
  bool try_lock();
  // lock(limit) that reports the timeout as false (std's timed-mutex interface).
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& length) {
    return try_lock_within(detail::timeout_after(length));
  }
  template <class Clock, class Duration>
  bool try_lock_until(const std::chrono::time_point<Clock, Duration>& deadline) {
    return try_lock_within(detail::timeout_at(deadline));
  }
  // Releases the mutex, handing it to the oldest waiter if any. Never suspends. std::logic_error
  // unless the calling coroutine holds it.
  void unlock();

  bool locked() const noexcept { return owner_ != nullptr; }  // whether a coroutine holds it
  // The id of the coroutine holding it (task::id()), if any.
  std::optional<std::uint64_t> owner_id() const noexcept;
  // How many coroutines wait for it.
  std::size_t waiting() const noexcept { return waiters_.size(); }

 private:
  // Takes the mutex at once when it is free and nobody queues (null), or returns the calling
  // coroutine, which must then wait in the queue.
  detail::coroutine* take_now_or_caller();
  // A waiter granted the mutex but leaving by cancellation: the next waiter gets it.
  void pass_on() noexcept;
  [[noreturn]] void throw_relock(const detail::coroutine& self) const;
  bool try_lock_within(const timeout& limit);
  // Passes ownership to the oldest waiter, or leaves the mutex free if none waits.
  void hand_on() noexcept;
  void set_owner(detail::coroutine* owner) noexcept;
  static void describe(const void* self, std::string& out);

  // Referenced (add_ref) while it holds the mutex, so a report can still name an owner that
  // ended without unlocking.
  detail::coroutine* owner_ = nullptr;
  detail::waiter_queue waiters_;
};

// Takes every mutex in `mutexes`, in one order shared by every caller (by address), so
// coroutines that take the same mutexes through lock_all never deadlock nor hand them round,
// whatever order each names them in. Waits like mutex::lock, sharing one `limit` across all of
// them; when it throws (timeout_error, cancelled_error, a misuse) the mutexes it had taken are
// released first, so it holds all or none. The same mutex twice, or a null, is
// std::logic_error.
void lock_all(std::span<mutex* const> mutexes, const timeout& limit = timeout::never());
// Releases every mutex in `mutexes` (in reverse address order).
void unlock_all(std::span<mutex* const> mutexes);

// lock_all for the scope: `weft::scoped_lock_all guard(accounts, ledger);`
template <class... Mutexes>
class scoped_lock_all {
  static_assert(sizeof...(Mutexes) > 0, "scoped_lock_all: name at least one mutex");

 public:
  // Locks every mutex, waiting at most limit when given (timeout_error, none held then).
  explicit scoped_lock_all(Mutexes&... mutexes) : held_{&mutexes...} { lock_all(held_); }
  scoped_lock_all(const timeout& limit, Mutexes&... mutexes) : held_{&mutexes...} {
    lock_all(held_, limit);
  }
  scoped_lock_all(const scoped_lock_all&) = delete;
  scoped_lock_all& operator=(const scoped_lock_all&) = delete;
  ~scoped_lock_all() { unlock_all(held_); }

 private:
  std::array<mutex*, sizeof...(Mutexes)> held_;
};

}  // namespace weft

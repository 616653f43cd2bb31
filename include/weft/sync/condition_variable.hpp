// weft::condition_variable: wait for a condition on state guarded by a weft::mutex.
//
// Contract:
//   - Only coroutines of one scheduler use a given condition variable, on that scheduler's
//     thread. notify_one/notify_all may also be called from a microtask or reactor callback
//     there; wait only from a coroutine holding the mutex through the std::unique_lock it
//     passes (else std::logic_error).
//   - wait() releases the mutex and suspends until notified; it is a cancellation point
//     (cancelled_error) and the timed forms end by timeout (std::cv_status::timeout / false from
//     wait_for and wait_until, timeout_error from wait(lock, timeout)). However a wait ends,
//     the mutex is held again when it returns or throws, so the caller's RAII stays right: a
//     cancelled waiter re-acquires the mutex (with cancellation deferred) before the
//     exception leaves wait. The one exception is a deadlock cancellation that arrives while
//     re-acquiring, which means the mutex can never be had again: then the unique_lock is
//     released (owns_lock() false) before cancelled_error leaves wait.
//   - FIFO with hand-off: notify_one wakes exactly the oldest waiter; the wake is its own even
//     if it was about to time out, and a waiter woken and then cancelled before it runs passes
//     the wake on to the next waiter, so a notify_one is never lost while someone waits.
//     Re-acquiring the mutex after the wake queues in the mutex's own FIFO like any lock().
//   - There are no spurious wake-ups, but a notified waiter may find the condition already
//     changed by a coroutine that ran first: use the predicate forms.
//   - The condition variable must outlive every wait on it.
#pragma once

#include <chrono>
#include <concepts>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string>

#include "weft/sched/timeout.hpp"
#include "weft/sync/detail/waiter_queue.hpp"
#include "weft/sync/mutex.hpp"

namespace weft {

class condition_variable {
 public:
  condition_variable() noexcept;
  condition_variable(const condition_variable&) = delete;
  condition_variable& operator=(const condition_variable&) = delete;

  // Releases lock's mutex, waits for a notify, re-acquires it.
  void wait(std::unique_lock<mutex>& lock) { wait(lock, timeout::never()); }
  // Same, but timeout_error (after re-acquiring the mutex) when limit passes first.
  void wait(std::unique_lock<mutex>& lock, const timeout& limit);

  // Waits until predicate() holds (checked with the mutex held, first before any wait).
  template <std::predicate Predicate>
  void wait(std::unique_lock<mutex>& lock, Predicate predicate) {
    while (!predicate()) {
      wait(lock);
    }
  }
  // Same, with one limit for the whole wait: timeout_error if the predicate still fails then.
  template <std::predicate Predicate>
  void wait(std::unique_lock<mutex>& lock, const timeout& limit, Predicate predicate) {
    while (!predicate()) {
      wait(lock, limit);
    }
  }

  // std::condition_variable's timed forms.
  template <class Rep, class Period>
  std::cv_status wait_for(std::unique_lock<mutex>& lock,
                          const std::chrono::duration<Rep, Period>& length) {
    return wait_within(lock, detail::timeout_after(length));
  }
  template <class Clock, class Duration>
  std::cv_status wait_until(std::unique_lock<mutex>& lock,
                            const std::chrono::time_point<Clock, Duration>& deadline) {
    return wait_within(lock, detail::timeout_at(deadline));
  }
  // With a predicate: its final value (false: the time ran out with the predicate false).
  template <class Rep, class Period, std::predicate Predicate>
  bool wait_for(std::unique_lock<mutex>& lock, const std::chrono::duration<Rep, Period>& length,
                Predicate predicate) {
    return wait_within(lock, detail::timeout_after(length), predicate);
  }
  template <class Clock, class Duration, std::predicate Predicate>
  bool wait_until(std::unique_lock<mutex>& lock,
                  const std::chrono::time_point<Clock, Duration>& deadline, Predicate predicate) {
    return wait_within(lock, detail::timeout_at(deadline), predicate);
  }

  // Wakes the oldest waiter, if any. Never suspends.
  void notify_one() noexcept;
  // Wakes every current waiter (they re-acquire the mutex one after another, in order).
  void notify_all() noexcept;

  std::size_t waiting() const noexcept { return waiters_.size(); }  // coroutines waiting now

 private:
  std::cv_status wait_within(std::unique_lock<mutex>& lock, const timeout& limit);
  template <class Predicate>
  bool wait_within(std::unique_lock<mutex>& lock, const timeout& limit, Predicate& predicate) {
    while (!predicate()) {
      if (wait_within(lock, limit) == std::cv_status::timeout) {
        return predicate();
      }
    }
    return true;
  }
  static void describe(const void* self, std::string& out);

  detail::waiter_queue waiters_;
};

}  // namespace weft

// weft::semaphore: a counted set of permits shared by the coroutines of one scheduler.
//
// Contract:
//   - Only coroutines of one scheduler use a given semaphore, on that scheduler's thread.
//     release() and the queries may also be called from a microtask or reactor callback there.
//   - acquire(n) suspends the calling coroutine until n permits are free. An acquire that has to
//     wait is a cancellation point (cancelled_error) and takes an optional time limit
//     (timeout_error); one that can be served at once never suspends.
//   - Strict FIFO with hand-off, whatever each request's size: release() hands permits to the
//     oldest waiter as soon as there are enough for its whole request, and nobody behind it is
//     served first, so a large request is never starved by a stream of small ones. Permits
//     handed to a waiter are its own before it runs; a waiter granted and then cancelled gives
//     them back (to the next waiter), and a waiter that leaves unserved lets the ones behind it
//     be served.
//   - Permits are not owned: any coroutine may release. The count may never exceed max()
//     (given at construction; a release past it is std::logic_error, the sign of a release
//     without a matching acquire). Requests of 0 permits or more than max() are
//     std::invalid_argument: they could never be meaningful or never be served.
//   - The semaphore must outlive every wait on it; destroying it while coroutines wait aborts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "weft/sched/timeout.hpp"
#include "weft/sync/detail/waiter_queue.hpp"

namespace weft {

class semaphore {
 public:
  // The default max: no practical bound.
  static constexpr std::size_t default_max =
      static_cast<std::size_t>(std::numeric_limits<std::ptrdiff_t>::max());

  // initial free permits, at most max (else std::invalid_argument).
  explicit semaphore(std::size_t initial, std::size_t max = default_max);
  semaphore(const semaphore&) = delete;
  semaphore& operator=(const semaphore&) = delete;

  // Takes permits, waiting (FIFO) until enough are free. timeout_error when limit passes first
  // (nothing is taken then).
  // Inline with its wait, like mutex::lock: a waiter handed its permits resumes straight in
  // the caller.
  void acquire(std::size_t permits = 1, const timeout& limit = timeout::never()) {
    if (permits == 0 || permits > max_) [[unlikely]] {
      refuse_request(permits, "acquire");
    }
    if (waiters_.empty() && count_ >= permits) {
      count_ -= permits;
      return;
    }
    detail::queued_waiter me(waiters_, nullptr, permits);
    try {
      waiters_.wait(me, limit, [this](detail::queued_waiter& leaving) {
        // Granted but cancelled before it ran: the permits go to whoever is next.
        count_ += leaving.value;
        grant_waiters();
      });
    } catch (...) {
      // A request that leaves unserved from the head of the queue was holding back smaller
      // ones behind it that the free count may already cover.
      grant_waiters();
      throw;
    }
  }
  void acquire(const timeout& limit) { acquire(1, limit); }
  // Takes permits only if enough are free and nobody waits; never suspends.
  bool try_acquire(std::size_t permits = 1);
  // Gives permits back, serving waiters in order. Never suspends.
  void release(std::size_t permits = 1);

  // Free permits (those handed to waiters are no longer counted).
  std::size_t count() const noexcept { return count_; }
  // max(): the most permits it may hold; waiting(): coroutines waiting now.
  std::size_t max() const noexcept { return max_; }
  std::size_t waiting() const noexcept { return waiters_.size(); }

 private:
  // std::invalid_argument for a request of 0 permits or more than max.
  [[noreturn]] void refuse_request(std::size_t permits, const char* operation) const;
  // Serves waiters from the front while the free count covers the oldest one's request.
  void grant_waiters() noexcept;
  static void describe(const void* self, std::string& out);

  std::size_t count_;
  std::size_t max_;
  detail::waiter_queue waiters_;
};

}  // namespace weft

// weft::condition_variable: see include/weft/sync/condition_variable.hpp.
//
// A wait is: unlock the mutex, queue in waiters_ (both before any switch, so no notify can
// fall between them on this single-threaded scheduler), then re-lock through the mutex's
// ordinary FIFO lock(), inside weft::protect so that a cancel arriving meanwhile cannot leave
// the caller without the mutex its unique_lock claims to hold.
#include "weft/sync/condition_variable.hpp"

#include <exception>
#include <stdexcept>
#include <string>

#include "sync/describe.hpp"
#include "weft/error.hpp"
#include "weft/sched/this_coroutine.hpp"

namespace weft {
namespace {

mutex& held_mutex(const condition_variable& target, std::unique_lock<mutex>& lock) {
  if (lock.mutex() == nullptr || !lock.owns_lock()) {
    throw std::logic_error("weft::condition_variable " + detail::address_text(&target) +
                           ": wait needs a std::unique_lock that holds its weft::mutex (lock it "
                           "before waiting)");
  }
  return *lock.mutex();
}

void relock(std::unique_lock<mutex>& lock) {
  try {
    weft::protect([&] { lock.mutex()->lock(); });
  } catch (...) {
    // Only a deadlock cancellation gets through protect: the mutex can never be had again.
    // The unique_lock must then not claim it, or its destructor would unlock a mutex this
    // coroutine does not hold.
    lock.release();
    throw;
  }
}

}  // namespace

condition_variable::condition_variable() noexcept : waiters_(this, &condition_variable::describe) {}

void condition_variable::describe(const void* self, std::string& out) {
  const condition_variable& target = *static_cast<const condition_variable*>(self);
  out += "condition_variable " + detail::address_text(self);
  out += " (" + std::to_string(target.waiters_.size()) + " waiting for a notify)";
}

void condition_variable::wait(std::unique_lock<mutex>& lock, const timeout& limit) {
  mutex& guarded = held_mutex(*this, lock);
  detail::queued_waiter me(waiters_);
  guarded.unlock();  // std::logic_error here (before waiting) if another coroutine holds it
  std::exception_ptr ended_by;
  try {
    waiters_.wait(me, limit, [this](detail::queued_waiter&) {
      // Notified, then cancelled before running: the notify belongs to the next waiter.
      waiters_.grant_front();
    });
  } catch (...) {
    ended_by = std::current_exception();
  }
  relock(lock);
  if (ended_by) {
    std::rethrow_exception(ended_by);
  }
}

std::cv_status condition_variable::wait_within(std::unique_lock<mutex>& lock,
                                               const timeout& limit) {
  try {
    wait(lock, limit);
    return std::cv_status::no_timeout;
  } catch (const timeout_error&) {
    return std::cv_status::timeout;
  }
}

void condition_variable::notify_one() noexcept { waiters_.grant_front(); }

void condition_variable::notify_all() noexcept { waiters_.grant_all(0); }

}  // namespace weft

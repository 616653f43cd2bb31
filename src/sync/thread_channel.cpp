// How a thread_channel caller blocks: a coroutine on a trigger of its own scheduler, a plain
// thread on a condition variable. The locking argument is in include/weft/sync/thread_channel.hpp
// (thread_channel_waiter).
#include "weft/sync/thread_channel.hpp"

#include <stdexcept>
#include <string>

#include "weft/sched/scheduler.hpp"

namespace weft::detail {

thread_channel_waiter::thread_channel_waiter(void* slot, const char* operation,
                                             describe_function describe, const void* owner)
    : slot(slot), operation_(operation), describe_(describe), owner_(owner) {
  scheduler* here = current_scheduler_or_null();
  if (here == nullptr) {
    return;  // a plain thread: blocks on thread_wake_
  }
  if (detail::running_coroutine(*here) == nullptr) {
    std::string what;
    describe_(owner_, what);
    throw std::logic_error("weft: blocking " + std::string(operation_) + " on " + what +
                           " on a scheduler's thread outside a coroutine would stall every "
                           "coroutine there; call it from a coroutine, or use try_send/try_recv");
  }
  coroutine_wake_.emplace();
}

// Out of line so that the trigger (when there is one) is destroyed here, on the waiter's own
// scheduler thread, after the waiter left the channel's lists.
thread_channel_waiter::~thread_channel_waiter() = default;

void thread_channel_waiter::complete(std::uint8_t how) noexcept {
  outcome = how;
  if (coroutine_wake_) {
    coroutine_wake_->notify();
  } else {
    thread_wake_.notify_one();
  }
}

void thread_channel_waiter::throw_timed_out(const timeout& limit) {
  std::string message = "weft: waiting on ";
  describe_(owner_, message);  // under the lock: it reads the channel's counts
  message += " ";
  message += timed_out_after(limit);
  throw timeout_error(message);
}

void thread_channel_waiter::park(std::unique_lock<std::mutex>& lock, const timeout& limit) {
  if (!coroutine_wake_) {
    if (detail::cancel_token_of(limit) != nullptr) {
      list_->remove(*this);
      std::string message = "weft: waiting on ";
      describe_(owner_, message);
      throw std::logic_error(message +
                             " from a plain thread with a cancel token; tokens are tasks and "
                             "futures of one scheduler, so only its coroutines can wait on them");
    }
    const auto done = [this] { return outcome != 0; };
    if (!limit.bounded()) {
      thread_wake_.wait(lock, done);
    } else if (!thread_wake_.wait_until(lock, limit.deadline(), done)) {
      list_->remove(*this);
      throw_timed_out(limit);
    }
    return;
  }
  while (outcome == 0) {
    lock.unlock();
    try {
      // A notification that came before this wait is kept by the trigger, so the wait returns at
      // once; one left over from an earlier round only makes the loop look again.
      coroutine_wake_->wait(limit);
    } catch (const timeout_error&) {
      lock.lock();
      if (outcome != 0) {
        return;  // completed as the deadline passed: the completion wins
      }
      list_->remove(*this);
      throw_timed_out(limit);
    } catch (const wait_cancelled_error&) {
      lock.lock();
      if (outcome != 0) {
        return;  // completed as the cancel token fired: the completion wins, as for a deadline
      }
      list_->remove(*this);
      throw;
    } catch (...) {
      lock.lock();
      if (outcome != 0) {
        interrupted = std::current_exception();
        return;
      }
      list_->remove(*this);
      throw;
    }
    lock.lock();
  }
}

void defer_interrupted_cancellation(const std::exception_ptr& interrupted) {
  try {
    std::rethrow_exception(interrupted);
  } catch (const cancelled_error& cancelled) {
    defer_cancellation(cancelled);
  }
}

}  // namespace weft::detail

// Awaiting one asynchronous libuv operation from a coroutine, safely.
//
// The operation's state (the uv request, its result) lives on the heap, never in the waiting
// coroutine's frame, because libuv keeps a pointer to it until its callback runs, and a
// waiter may leave first (cancelled, timed out). Exactly one side frees it:
//   - the waiter, once the operation completed: it reads the result, then deletes it;
//   - the operation itself, in complete(), when the waiter left first: abandon() has asked
//     libuv to finish early (uv_cancel, uv_close, ...), and libuv's callback still ends in
//     complete(), which then deletes the state.
// A callback must call complete() last: the state may be gone after it.
//
// Thread: the scheduler's thread only (libuv callbacks run there).
#pragma once

#include <memory>
#include <string>

#include "weft/sched/timeout.hpp"

typedef struct uv_loop_s uv_loop_t;

namespace weft::detail {

class coroutine;
class scheduler_core;
class wait_source;

class pending_operation {
 public:
  pending_operation() = default;
  pending_operation(const pending_operation&) = delete;
  pending_operation& operator=(const pending_operation&) = delete;
  virtual ~pending_operation() = default;

  // From the libuv callback: the operation is over. Wakes the waiter, or frees this if the
  // waiter has left.
  void complete() noexcept;
  bool completed() const noexcept { return completed_; }

  // What the operation is, for errors and deadlock reports ("getaddrinfo example.com:80").
  virtual void describe(std::string& out) const = 0;

 protected:
  // The waiter left before completion: make libuv end the operation soon. The callback must
  // still end in complete().
  virtual void abandon() noexcept = 0;

 private:
  friend void abandon(std::unique_ptr<pending_operation>&, scheduler_core&) noexcept;
  friend class operation_wait;

  scheduler_core* core_ = nullptr;
  coroutine* waiter_ = nullptr;
  wait_source* source_ = nullptr;
  bool completed_ = false;
  bool abandoned_ = false;
};

// Gives the operation up: it frees itself when libuv completes it.
void abandon(std::unique_ptr<pending_operation>& operation, scheduler_core& core) noexcept;

// Suspends the calling coroutine until *operation completes and returns with the operation
// still owned by the caller. If the wait ends early (cancelled_error, or timeout_error when
// limit passes first) the operation is abandoned, operation is released, and the exception
// propagates.
void await_operation(std::unique_ptr<pending_operation>& operation, const timeout& limit);

// The running scheduler's libuv loop; std::logic_error (naming operation) outside a coroutine.
uv_loop_t& current_uv_loop(const char* operation);

// Raises weft::io_error for a libuv status code: "operation subject: message".
[[noreturn]] void throw_uv_error(int status, const std::string& operation,
                                 const std::string& subject);

}  // namespace weft::detail

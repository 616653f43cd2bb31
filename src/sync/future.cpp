// The shared state of promises and futures: see include/weft/sync/future.hpp.
#include "weft/sync/future.hpp"

#include <cstdio>
#include <exception>
#include <stdexcept>

#include "weft/sched/scheduler.hpp"

namespace weft::detail {

namespace {

std::string site(const std::source_location& where) {
  return std::string(where.file_name()) + ":" + std::to_string(where.line());
}

void describe_waiters(const void* owner, std::string& out) {
  static_cast<const future_state_base*>(owner)->describe(out);
}

}  // namespace

future_state_base::future_state_base(const std::source_location& created_at) noexcept
    : awaiters_(this, &describe_waiters), created_at_(created_at) {}

// Waiters keep the state alive through their future, so none can be left here; the continuations
// not yet run (only possible when the state never settled) go with it.
future_state_base::~future_state_base() = default;

void future_state_base::describe(std::string& out) const {
  out += "future of the promise created at " + site(created_at_);
}

bool future_state_base::may_settle(const char* operation, const std::source_location& where) const {
  if (status_ == status::pending) {
    return true;
  }
  if (status_ == status::cancelled) {
    return false;  // cancelled by a holder: the result has nobody to go to
  }
  throw std::logic_error("weft: " + std::string(operation) + " at " + site(where) +
                         " on the promise created at " + site(created_at_) +
                         ", which was already settled by " + settled_by_ + " at " +
                         site(settled_at_) + "; a promise settles its future exactly once");
}

void future_state_base::settle_with_value(const std::source_location& where) {
  settle(status::value, "set_value", where);
}

void future_state_base::settle_with_error(std::exception_ptr error, const char* operation,
                                          const std::source_location& where) {
  error_ = std::move(error);
  settle(status::error, operation, where);
}

bool future_state_base::cancel(std::string reason, const std::source_location& where) {
  if (settled()) {
    return false;
  }
  error_ = std::make_exception_ptr(cancelled_error(std::move(reason)));
  settle(status::cancelled, "cancel", where);
  return true;
}

void future_state_base::promise_dropped() noexcept {
  if (settled()) {
    return;
  }
  try {
    error_ = std::make_exception_ptr(
        broken_promise_error("weft: broken promise: the promise created at " + site(created_at_) +
                             " was destroyed without settling its future"));
    settle(status::error, "the promise's destructor", std::source_location::current());
  } catch (...) {
    // Out of memory while building the message: no awaiter may hang, so this cannot go on.
    std::fputs("weft: cannot settle the future of a destroyed promise\n", stderr);
    std::terminate();
  }
}

void future_state_base::settle(status how, const char* operation,
                               const std::source_location& where) {
  status_ = how;
  settled_by_ = operation;
  settled_at_ = where;
  // A continuation or a woken awaiter may drop the last handle; keep the state until we are done.
  add_ref();
  awaiters_.grant_all(0);
  std::vector<unique_function<void(future_state_base&)>> attached = std::move(continuations_);
  continuations_.clear();
  for (auto& continuation : attached) {
    dispatch(std::move(continuation));
  }
  release();
}

void future_state_base::await_settled(const timeout& limit) {
  if (settled()) {
    return;
  }
  queued_waiter waiter(awaiters_);
  awaiters_.wait(waiter, limit);
}

void future_state_base::add_continuation(unique_function<void(future_state_base&)> continuation) {
  if (settled()) {
    dispatch(std::move(continuation));
  } else {
    continuations_.push_back(std::move(continuation));
  }
}

void future_state_base::dispatch(unique_function<void(future_state_base&)> continuation) {
  scheduler* owner = current_scheduler_or_null();
  if (owner == nullptr) {
    // Settled after the scheduler stopped (a promise outliving weft::run): no coroutine can be
    // waiting any more, so there is no order to keep; run it here rather than lose it.
    continuation(*this);
    return;
  }
  // The microtask holds a reference, released by its cleanup (also if the run ends first).
  add_ref();
  owner->add_microtask(
      [this, continuation = std::move(continuation)]() mutable { continuation(*this); },
      [this] { release(); });
}

[[noreturn]] void throw_invalid_future(const char* operation, const char* handle) {
  throw std::logic_error(std::string("weft: ") + operation + " on an empty " + handle +
                         " (default-constructed or moved from)");
}

[[noreturn]] void throw_null_exception(const std::source_location& where) {
  throw std::invalid_argument("weft: set_exception at " + site(where) +
                              " got a null exception_ptr; pass the error to settle with");
}

}  // namespace weft::detail

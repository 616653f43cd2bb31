// Promises and futures: a result produced once, by whoever holds the promise, and awaited by any
// number of coroutines through futures.
//
// Contract:
// - Threads: a promise and its futures belong to the scheduler thread that created the promise.
//   Settle, await, copy and drop them only there (reference counts are not atomic). To hand a
//   result to another thread use a trigger or a channel.
// - promise<T> (move-only) settles its future once, with set_value() or set_exception(). A second
//   settle is a std::logic_error naming where the first one happened. A promise destroyed without
//   settling settles its future with broken_promise_error, so no awaiter hangs.
// - future<T> is a copyable handle; every copy (and every get_future()) shares the one result.
//   Any number of coroutines may await it; one settle wakes them all, oldest first. Awaiting a
//   settled future never suspends. await(timeout) gives up with timeout_error and leaves the
//   future pending (it can be awaited again). Awaiting a pending future outside a coroutine is a
//   std::logic_error.
// - cancel(reason) settles a pending future with cancelled_error, for every holder. The producer
//   learns it through promise.cancelled(); its later set_value/set_exception are no-ops (the result
//   has nobody left to go to), not errors.
// - Continuations (then/map/catch_error/finally) run as scheduler microtasks, never inside
//   set_value: after the settle, in the order they were attached, before the next context switch
//   (attached to a settled future: queued at once). They must not suspend, since they run inside
//   the scheduler's tick; spawn a coroutine for work that waits. Each returns a new future,
//   settled with what the continuation produced, or failed with what it threw. Cancelling a
//   derived future does not cancel its source.
// - Values: await() on an lvalue returns a reference into the shared result, valid while this
//   future lives; await() on a temporary moves the value out (like task::await), so other copies
//   then see a moved-from value. Continuations get the value as an lvalue reference; catch_error
//   and finally pass a value on by copy (by move for move-only types).
// - An error nobody awaits is dropped with the last handle: unlike a task's, it is not reported.
#pragma once

#include <concepts>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <source_location>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "weft/detail/unique_function.hpp"
#include "weft/error.hpp"
#include "weft/sched/timeout.hpp"
#include "weft/sync/detail/waiter_queue.hpp"

namespace weft {

// The error a future settles with when its promise is destroyed without settling it.
class broken_promise_error : public error {
 public:
  using error::error;
};

// The writing end of a future (see below).
template <class T>
class promise;
// The result of an operation that settles later (see above).
template <class T>
class future;

namespace detail {

// Where a settled value lives: in place for T, as a pointer for T&, nowhere for void.
template <class T>
class value_slot {
 public:
  T& get() noexcept { return *value_; }
  const T& get() const noexcept { return *value_; }
  template <class... Args>
  void emplace(Args&&... args) {
    value_.emplace(std::forward<Args>(args)...);
  }

 private:
  std::optional<T> value_;
};

template <class T>
class value_slot<T&> {
 public:
  T& get() const noexcept { return *value_; }
  void emplace(T& value) noexcept { value_ = &value; }

 private:
  T* value_ = nullptr;
};

template <>
class value_slot<void> {
 public:
  void get() const noexcept {}
  void emplace() noexcept {}
};

// The shared state of a promise and its futures, minus the value (future_state<T> adds it).
class future_state_base {
 public:
  explicit future_state_base(const std::source_location& created_at) noexcept;
  future_state_base(const future_state_base&) = delete;
  future_state_base& operator=(const future_state_base&) = delete;

  void add_ref() noexcept { ++refs_; }
  void release() noexcept {
    if (--refs_ == 0) {
      destroy();
    }
  }

  bool settled() const noexcept { return status_ != status::pending; }
  bool cancelled() const noexcept { return status_ == status::cancelled; }
  // The error it settled with (cancelled_error after cancel()), or null.
  const std::exception_ptr& error() const noexcept { return error_; }
  const std::source_location& created_at() const noexcept { return created_at_; }

  // Before a producer stores a value: true while pending, false when the future was cancelled
  // (the settle is then a no-op); std::logic_error naming the first settle when already settled.
  bool may_settle(const char* operation, const std::source_location& where) const;
  // After the value was stored.
  void settle_with_value(const std::source_location& where);
  void settle_with_error(std::exception_ptr error, const char* operation,
                         const std::source_location& where);
  // Settles a pending future with cancelled_error(reason); false when it was already settled.
  bool cancel(std::string reason, const std::source_location& where);
  // The promise went away: a pending future settles with broken_promise_error.
  void promise_dropped() noexcept;

  // Suspends the calling coroutine until settled (no suspension when it already is).
  void await_settled(const timeout& limit);
  // Runs continuation(*this) as a microtask once settled (see the file comment for the order).
  void add_continuation(unique_function<void(future_state_base&)> continuation);

  // The coroutines waiting for the settle; the await combinators add theirs here too.
  waiter_queue& awaiters() noexcept { return awaiters_; }
  // "future of the promise created at file.cpp:12": for messages and deadlock reports.
  void describe(std::string& out) const;

 protected:
  virtual ~future_state_base();
  virtual void destroy() noexcept = 0;

 private:
  enum class status : std::uint8_t { pending, value, error, cancelled };
  void settle(status how, const char* operation, const std::source_location& where);
  void dispatch(unique_function<void(future_state_base&)> continuation);

  waiter_queue awaiters_;
  std::vector<unique_function<void(future_state_base&)>> continuations_;
  std::exception_ptr error_;
  std::source_location created_at_;
  std::source_location settled_at_{};
  const char* settled_by_ = nullptr;
  std::uint32_t refs_ = 1;
  status status_ = status::pending;
};

template <class T>
class future_state final : public future_state_base {
 public:
  explicit future_state(const std::source_location& created_at) noexcept
      : future_state_base(created_at) {}
  value_slot<T>& slot() noexcept { return slot_; }

 private:
  ~future_state() override = default;
  void destroy() noexcept override { delete this; }

  value_slot<T> slot_;
};

// For the await combinators, which wait on a future's state directly.
struct future_access {
  template <class T>
  static future_state<T>* state(const future<T>& handle) noexcept {
    return handle.state_;
  }
};

[[noreturn]] void throw_invalid_future(const char* operation, const char* handle);
[[noreturn]] void throw_null_exception(const std::source_location& where);

template <class T>
struct is_future : std::false_type {};
template <class T>
struct is_future<future<T>> : std::true_type {};

// What a continuation given the value of a future<T> returns.
template <class T, class Function>
struct continuation_result {
  using type = std::invoke_result_t<Function&, T&>;
};
template <class Function>
struct continuation_result<void, Function> {
  using type = std::invoke_result_t<Function&>;
};

template <class T, class Function>
decltype(auto) invoke_with_value(Function& function, future_state<T>& source) {
  if constexpr (std::is_void_v<T>) {
    return std::invoke(function);
  } else {
    return std::invoke(function, source.slot().get());
  }
}

// Settles target with source's value: a copy (the source may have other holders), or a move
// for move-only types.
template <class T>
void pass_value_on(future_state<T>& source, promise<T>& target, const std::source_location& where) {
  if constexpr (std::is_void_v<T>) {
    target.set_value(where);
  } else if constexpr (std::is_reference_v<T> || std::is_copy_constructible_v<T>) {
    target.set_value(source.slot().get(), where);
  } else {
    target.set_value(std::move(source.slot().get()), where);
  }
}

// A new cancel token (one reference, the caller's) that completes when state settles.
const cancel_token* make_future_cancel_token(future_state_base& state);

}  // namespace detail

// The writing end: settles its future once (see above).
template <class T>
class promise {
 public:
  // A promise with a pending future (created_at: for the messages of misuse).
  explicit promise(std::source_location created_at = std::source_location::current())
      : state_(new detail::future_state<T>(created_at)) {}
  promise(promise&& other) noexcept : state_(std::exchange(other.state_, nullptr)) {}
  promise& operator=(promise&& other) noexcept {
    if (this != &other) {
      abandon();
      state_ = std::exchange(other.state_, nullptr);
    }
    return *this;
  }
  promise(const promise&) = delete;
  promise& operator=(const promise&) = delete;
  ~promise() { abandon(); }

  // A future for the result. May be called any number of times: all share the one result.
  future<T> get_future() const {
    valid_or_throw("get_future");
    state_->add_ref();
    return future<T>(state_);
  }

  // Settles the future with a value (a reference for promise<T&>; nothing for promise<void>) and
  // wakes its awaiters. No-op when the future was cancelled; std::logic_error when settled.
  template <class U = T>
  requires(
      !std::is_void_v<T> &&
      (std::is_reference_v<T>
           ? std::is_convertible_v<U&&, T>
           : std::is_constructible_v<T, U&&>)) void set_value(U&& value,
                                                              std::source_location where =
                                                                  std::source_location::current()) {
    valid_or_throw("set_value");
    if (state_->may_settle("set_value", where)) {
      state_->slot().emplace(std::forward<U>(value));
      state_->settle_with_value(where);
    }
  }
  // Settles a future<void> (same rules as the other set_value).
  void set_value(
      std::source_location where = std::source_location::current()) requires std::is_void_v<T> {
    valid_or_throw("set_value");
    if (state_->may_settle("set_value", where)) {
      state_->settle_with_value(where);
    }
  }

  // Settles the future with an error; same rules as set_value. A null error is a logic error.
  void set_exception(std::exception_ptr error,
                     std::source_location where = std::source_location::current()) {
    valid_or_throw("set_exception");
    if (!error) {
      detail::throw_null_exception(where);
    }
    if (state_->may_settle("set_exception", where)) {
      state_->settle_with_error(std::move(error), "set_exception", where);
    }
  }
  template <class Exception>
  requires std::derived_from<std::decay_t<Exception>, std::exception>
  void set_exception(Exception&& error,
                     std::source_location where = std::source_location::current()) {
    set_exception(std::make_exception_ptr(std::forward<Exception>(error)), where);
  }

  bool valid() const noexcept { return state_ != nullptr; }  // false once moved from
  // True once the future was settled, by this promise or by a cancel.
  bool settled() const {
    valid_or_throw("settled");
    return state_->settled();
  }
  // True when a holder of the future cancelled it: the result is no longer wanted, stop working
  // on it. exception() then holds the cancelled_error with the reason.
  bool cancelled() const {
    valid_or_throw("cancelled");
    return state_->cancelled();
  }
  std::exception_ptr exception() const {
    valid_or_throw("exception");
    return state_->error();
  }

 private:
  void valid_or_throw(const char* operation) const {
    if (state_ == nullptr) {
      detail::throw_invalid_future(operation, "promise");
    }
  }
  void abandon() noexcept {
    if (state_ != nullptr) {
      state_->promise_dropped();
      std::exchange(state_, nullptr)->release();
    }
  }

  detail::future_state<T>* state_;
};

// The result of an operation that settles later (see above).
template <class T>
class future {
 public:
  using value_type = T;  // T

  future() noexcept = default;
  future(const future& other) noexcept : state_(other.state_) {
    if (state_ != nullptr) {
      state_->add_ref();
    }
  }
  future(future&& other) noexcept : state_(std::exchange(other.state_, nullptr)) {}
  future& operator=(future other) noexcept {
    std::swap(state_, other.state_);
    return *this;
  }
  ~future() {
    if (state_ != nullptr) {
      state_->release();
    }
  }

  // Waits until settled; returns the value (a reference into the shared result, valid while
  // this handle lives) or rethrows the error.
  decltype(auto) await() & {
    state_or_throw("await").await_settled(timeout::never());
    return result();
  }
  // Same, giving up with timeout_error when limit passes first; the future stays pending.
  decltype(auto) await(const timeout& limit) & {
    state_or_throw("await").await_settled(limit);
    return result();
  }
  // On a temporary (p.get_future().await()) the value is moved out.
  T await() && { return std::move(*this).await(timeout::never()); }
  T await(const timeout& limit) && {
    state_or_throw("await").await_settled(limit);
    result();  // rethrows the error, if any
    if constexpr (std::is_reference_v<T>) {
      return state_->slot().get();
    } else if constexpr (!std::is_void_v<T>) {
      return std::move(state_->slot().get());
    }
  }

  bool valid() const noexcept { return state_ != nullptr; }  // false for an empty handle
  // True once settled (with a value, an error, or by cancel).
  bool done() const { return state_or_throw("done").settled(); }
  // Whether it was settled by cancel().
  bool cancelled() const { return state_or_throw("cancelled").cancelled(); }
  // The error it settled with (null while pending or after a value).
  std::exception_ptr exception() const { return state_or_throw("exception").error(); }

  // Settles a pending future with cancelled_error(reason) for every holder, and tells the
  // producer (promise.cancelled()). Returns false, doing nothing, when it was already settled.
  bool cancel(std::string reason = "cancelled",
              std::source_location where = std::source_location::current()) {
    return state_or_throw("cancel").cancel(std::move(reason), where);
  }

  // fn(value) (fn() for future<void>) once this future has a value; the result is a future of
  // what fn returns. Skipped when this future fails: the error passes on. map never unwraps;
  // then also accepts an fn returning a future<U> and gives the future<U> it settles with.
  template <class Function>
  auto map(Function&& fn, std::source_location where = std::source_location::current()) {
    using result_type = typename detail::continuation_result<T, std::decay_t<Function>>::type;
    return chain<result_type>(where,
                              [fn = std::decay_t<Function>(std::forward<Function>(fn))](
                                  detail::future_state<T>& source, promise<result_type>& next,
                                  const std::source_location& site) mutable {
                                if (source.error()) {
                                  next.set_exception(source.error(), site);
                                } else if constexpr (std::is_void_v<result_type>) {
                                  detail::invoke_with_value(fn, source);
                                  next.set_value(site);
                                } else {
                                  next.set_value(detail::invoke_with_value(fn, source), site);
                                }
                              });
  }
  template <class Function>
  auto then(Function&& fn, std::source_location where = std::source_location::current()) {
    using result_type = typename detail::continuation_result<T, std::decay_t<Function>>::type;
    if constexpr (detail::is_future<std::remove_cvref_t<result_type>>::value) {
      using inner_type = typename std::remove_cvref_t<result_type>::value_type;
      return chain<inner_type>(where,
                               [fn = std::decay_t<Function>(std::forward<Function>(fn))](
                                   detail::future_state<T>& source, promise<inner_type>& next,
                                   const std::source_location& site) mutable {
                                 if (source.error()) {
                                   next.set_exception(source.error(), site);
                                   return;
                                 }
                                 future<inner_type> inner = detail::invoke_with_value(fn, source);
                                 inner.pipe_into(std::move(next), site);
                               });
    } else {
      return map(std::forward<Function>(fn), where);
    }
  }

  // fn(std::exception_ptr) when this future fails, its return value (converted to T) becoming the
  // new future's value; a value passes on untouched. Rethrow inside fn to pass an error on.
  template <class Function>
  requires std::invocable < std::decay_t<Function>
  &, std::exception_ptr >
         future<T> catch_error(Function&& fn,
                               std::source_location where = std::source_location::current()) {
    return chain<T>(where, [fn = std::decay_t<Function>(std::forward<Function>(fn))](
                               detail::future_state<T>& source, promise<T>& next,
                               const std::source_location& site) mutable {
      if (!source.error()) {
        detail::pass_value_on(source, next, site);
      } else if constexpr (std::is_void_v<T>) {
        std::invoke(fn, source.error());
        next.set_value(site);
      } else {
        next.set_value(std::invoke(fn, source.error()), site);
      }
    });
  }

  // fn() once this future settles, either way; the new future settles like this one, or with
  // fn's exception if fn throws.
  template <class Function>
  requires std::invocable < std::decay_t<Function>
  & > future<T> finally(Function&& fn,
                        std::source_location where = std::source_location::current()) {
    return chain<T>(where, [fn = std::decay_t<Function>(std::forward<Function>(fn))](
                               detail::future_state<T>& source, promise<T>& next,
                               const std::source_location& site) mutable {
      std::invoke(fn);
      if (source.error()) {
        next.set_exception(source.error(), site);
      } else {
        detail::pass_value_on(source, next, site);
      }
    });
  }

  // A future is a cancel token: weft::cancel_on(future) ends a wait when it settles (see
  // timeout.hpp). Found by argument-dependent lookup only.
  friend const detail::cancel_token* make_cancel_token(const future& token) {
    return detail::make_future_cancel_token(token.state_or_throw("weft::cancel_on"));
  }

 private:
  friend class promise<T>;
  template <class>
  friend class future;
  friend struct detail::future_access;

  explicit future(detail::future_state<T>* state) noexcept : state_(state) {}

  detail::future_state<T>& state_or_throw(const char* operation) const {
    if (state_ == nullptr) {
      detail::throw_invalid_future(operation, "future");
    }
    return *state_;
  }

  decltype(auto) result() const {
    if (state_->error()) {
      std::rethrow_exception(state_->error());
    }
    if constexpr (std::is_void_v<T>) {
      return;
    } else {
      return static_cast<std::add_lvalue_reference_t<T>>(state_->slot().get());
    }
  }

  // Attaches body(source, next, where) as a continuation settling a new future<R>; an exception
  // from body fails that future.
  template <class R, class Body>
  future<R> chain(const std::source_location& where, Body&& body) {
    detail::future_state<T>& source = state_or_throw("attaching a continuation");
    promise<R> next(where);
    future<R> result = next.get_future();
    source.add_continuation([next = std::move(next), body = std::forward<Body>(body),
                             where](detail::future_state_base& settled) mutable {
      try {
        body(static_cast<detail::future_state<T>&>(settled), next, where);
      } catch (...) {
        if (!next.settled()) {
          next.set_exception(std::current_exception(), where);
        }
      }
    });
    return result;
  }

  // Settles target like this future once this one settles (then() unwrapping a future).
  void pipe_into(promise<T>&& target, const std::source_location& where) {
    state_or_throw("then (the future returned by the continuation)")
        .add_continuation(
            [target = std::move(target), where](detail::future_state_base& settled) mutable {
              auto& source = static_cast<detail::future_state<T>&>(settled);
              try {
                if (source.error()) {
                  target.set_exception(source.error(), where);
                } else {
                  detail::pass_value_on(source, target, where);
                }
              } catch (...) {
                if (!target.settled()) {
                  target.set_exception(std::current_exception(), where);
                }
              }
            });
  }

  detail::future_state<T>* state_ = nullptr;
};

// A future already settled with value.
template <class T>
future<std::decay_t<T>> make_ready_future(
    T&& value, std::source_location where = std::source_location::current()) {
  promise<std::decay_t<T>> settled(where);
  settled.set_value(std::forward<T>(value), where);
  return settled.get_future();
}
inline future<void> make_ready_future(
    std::source_location where = std::source_location::current()) {
  promise<void> settled(where);
  settled.set_value(where);
  return settled.get_future();
}
// A future already failed with error.
template <class T>
future<T> make_exception_future(std::exception_ptr error,
                                std::source_location where = std::source_location::current()) {
  promise<T> settled(where);
  settled.set_exception(std::move(error), where);
  return settled.get_future();
}

}  // namespace weft

// The limits of a wait: a time limit, weft::timeout(5s) (relative to when it is made),
// timeout::at(t) or timeout::never(), and optionally a cancel token. Every wait of a coroutine
// takes one (task and future awaits, the combinators, channel send/recv, locks, semaphores,
// condition variables, pool acquire, all I/O). Waits throw weft::timeout_error when the deadline
// passes first; what they waited for is left alone (an awaited task keeps running) unless the
// wait says otherwise.
//
// Cancel tokens: weft::cancel_on(token), or timeout(5s).cancel_on(token), also ends the wait
// when token completes, with weft::cancelled_error. A token is any weft::task<T> or
// weft::future<T> of the waiting coroutine's scheduler; it completes when the task ends (value,
// error or cancel) or the future settles. The error's reason() says what cancelled the wait: the
// token's own cancel reason or error message when it ended that way, or "<token> completed". The
// guarantees are those of a timeout: a wait that the token ends has taken nothing (a channel
// value, a lock, a pool slot and an I/O result that raced the token are kept by the wait, which
// then returns normally), and what the wait was for keeps running. A token already complete
// when the wait starts ends it at once unless what it waits for is ready. The timeout holds a
// reference to the token's task or future state, so the token may be dropped meanwhile. Tokens
// belong to one scheduler's thread, as tasks and futures do: a wait on another thread (or a
// plain thread blocking on a thread_channel) given one is a std::logic_error.
//
// Extreme values are safe: a limit so long that now + limit would overflow the clock means
// "never" (bounded() is false), and a zero or negative limit, or a deadline already past
// (timeout::at(time_point::min()) included), means "already expired": the wait gives up at once
// unless what it waits for is ready, and the message says the deadline had passed.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <ratio>
#include <string>
#include <type_traits>
#include <utility>

namespace weft {

namespace detail {
class wait_source;

// What a cancel token is to the waits (tasks and futures implement it in their layers). Counted
// references, all on the token's scheduler thread: no atomics.
class cancel_token {
 public:
  // The room watch() may use, and its alignment.
  static constexpr std::size_t watch_storage = 128;

  cancel_token() = default;
  cancel_token(const cancel_token&) = delete;
  cancel_token& operator=(const cancel_token&) = delete;

  void add_ref() const noexcept { ++refs_; }
  void release() const noexcept {
    if (--refs_ == 0) {
      delete this;
    }
  }

  // Builds, in storage (watch_storage bytes, aligned to std::max_align_t), a wait source that
  // fires when the token completes (arm() returns false when it already has). Throws
  // std::logic_error when the calling thread may not wait on this token.
  virtual wait_source* watch(void* storage) const = 0;
  // Destroys what watch() built (after its wait disarmed it).
  virtual void unwatch(wait_source* source) const noexcept = 0;
  // The reason of the cancelled_error that ends a wait: the token's cancel reason or error
  // message when it ended that way, otherwise "<what the token is> completed".
  virtual std::string reason() const = 0;

 protected:
  virtual ~cancel_token() = default;

 private:
  mutable std::uint32_t refs_ = 1;
};

using steady_duration = std::chrono::steady_clock::duration;
using steady_time = std::chrono::steady_clock::time_point;

// A duration in the clock's ticks, saturated to the clock's range instead of overflowing
// (hours::max() in nanoseconds would; signed overflow is undefined and in practice wraps).
template <class Rep, class Period>
constexpr steady_duration saturating_ticks(std::chrono::duration<Rep, Period> value) noexcept {
  using per_tick = std::ratio_divide<Period, steady_duration::period>;
  if constexpr (std::ratio_less_equal_v<Period, steady_duration::period> &&
                !std::is_floating_point_v<Rep> && sizeof(Rep) <= sizeof(steady_duration::rep)) {
    return std::chrono::duration_cast<steady_duration>(value);  // always fits
  } else if constexpr (std::is_integral_v<Rep> && per_tick::den == 1 &&
                       (std::is_signed_v<Rep> ? sizeof(Rep) <= sizeof(steady_duration::rep)
                                              : sizeof(Rep) < sizeof(steady_duration::rep))) {
    // A whole number of ticks per unit (milliseconds, seconds, hours): one multiply that
    // reports its overflow, where the general path below goes through long double (forty
    // instructions for each timeout(ms) a server makes).
    steady_duration::rep ticks = 0;
    if (__builtin_mul_overflow(static_cast<steady_duration::rep>(value.count()),
                               static_cast<steady_duration::rep>(per_tick::num), &ticks)) {
      return value.count() > 0 ? steady_duration::max() : steady_duration::min();
    }
    return steady_duration(ticks);
  } else {
    using wide = std::chrono::duration<long double, std::nano>;
    const wide exact = std::chrono::duration_cast<wide>(value);
    if (exact >= wide(steady_duration::max())) {
      return steady_duration::max();
    }
    if (exact <= wide(steady_duration::min())) {
      return steady_duration::min();
    }
    return std::chrono::duration_cast<steady_duration>(value);
  }
}

// now + limit, saturated: time_point::max() when it would pass the clock's end (a deadline
// that never comes), time_point::min() when it would go before its start.
constexpr steady_time saturating_add(steady_time now, steady_duration limit) noexcept {
  steady_duration::rep sum = 0;
  if (__builtin_add_overflow(now.time_since_epoch().count(), limit.count(), &sum)) {
    return limit > steady_duration::zero() ? steady_time::max() : steady_time::min();
  }
  return steady_time(steady_duration(sum));
}

// deadline - now, saturated the same way (for "N ms left" and timeout messages).
constexpr steady_duration saturating_remaining(steady_time deadline, steady_time now) noexcept {
  steady_duration::rep difference = 0;
  if (__builtin_sub_overflow(deadline.time_since_epoch().count(), now.time_since_epoch().count(),
                             &difference)) {
    return deadline > now ? steady_duration::max() : steady_duration::min();
  }
  return steady_duration(difference);
}
}  // namespace detail

class timeout;
namespace detail {
// The cancel token of limit, or null (for the waits).
const cancel_token* cancel_token_of(const timeout& limit) noexcept;
}  // namespace detail

// The limits of a wait (see above).
class timeout {
 public:
  using clock = std::chrono::steady_clock;  // the clock deadlines are on

  constexpr timeout() noexcept = default;  // never
  constexpr timeout(const timeout& other) noexcept
      : deadline_(other.deadline_),
        limit_(other.limit_),
        token_(other.token_),
        bounded_(other.bounded_) {
    if (token_ != nullptr) {
      token_->add_ref();
    }
  }
  // Copies share the cancel token.
  constexpr timeout& operator=(const timeout& other) noexcept {
    timeout copy(other);
    swap(copy);
    return *this;
  }
  constexpr ~timeout() {
    if (token_ != nullptr) {
      token_->release();
    }
  }
  // A limit relative to now; duration::max() (or anything past the clock's end) means never.
  template <class Rep, class Period>
  explicit timeout(std::chrono::duration<Rep, Period> limit) noexcept
      : limit_(detail::saturating_ticks(limit)) {
    deadline_ = detail::saturating_add(clock::now(), limit_);
    bounded_ = deadline_ != clock::time_point::max();
  }
  // A limit counted from start rather than from now, reading no clock: deadline start + limit,
  // limit() as given. With weft::loop_time() (scheduler.hpp) as start it is the cheap form of
  // timeout(limit) for limits that may end early by the time since the thread's last reactor
  // poll (an idle or keep-alive timeout of seconds), as libuv's timers count from uv_now().
  template <class Rep, class Period>
  static timeout from(clock::time_point start, std::chrono::duration<Rep, Period> limit) noexcept {
    timeout result;
    result.limit_ = detail::saturating_ticks(limit);
    result.deadline_ = detail::saturating_add(start, result.limit_);
    result.bounded_ = result.deadline_ != clock::time_point::max();
    return result;
  }
  // A limit at an absolute deadline.
  static timeout at(clock::time_point deadline) noexcept {
    timeout result;
    result.deadline_ = deadline;
    result.limit_ = detail::saturating_remaining(deadline, clock::now());
    result.bounded_ = deadline != clock::time_point::max();
    return result;
  }
  // No limit: the one spelling (a default-constructed timeout is the same). A reference to one
  // constant, so that a default argument costs nothing on hot waits.
  static const timeout& never() noexcept {
    static constexpr timeout forever{};
    return forever;
  }

  // This limit, also ended by token (a task or a future; see the file comment). Replaces an
  // earlier token.
  template <class Token>
  requires requires(const Token& token) { make_cancel_token(token); }
  timeout cancel_on(const Token& token) const {
    timeout result(*this);
    const detail::cancel_token* made = make_cancel_token(token);  // found by ADL: a hidden friend
    if (result.token_ != nullptr) {
      result.token_->release();
    }
    result.token_ = made;
    return result;
  }

  // This limit, ending no later than at_most from now (the cap's deadline when it is the
  // earlier one, for a wait done in slices or bounded by a setting of its own); the token is
  // kept.
  template <class Rep, class Period>
  timeout capped(std::chrono::duration<Rep, Period> at_most) const {
    timeout cap(at_most);
    if (bounded_ && (!cap.bounded_ || deadline_ <= cap.deadline_)) {
      return *this;
    }
    timeout result(*this);
    result.deadline_ = cap.deadline_;
    result.limit_ = cap.limit_;
    result.bounded_ = cap.bounded_;
    return result;
  }

  // A deadline (false for never, and for a limit too long for the clock).
  bool bounded() const noexcept { return bounded_; }
  // Anything that can end the wait early: a deadline or a token. Waits take their fast path
  // when this is false.
  bool limited() const noexcept { return bounded_ || token_ != nullptr; }
  clock::time_point deadline() const noexcept { return deadline_; }
  // The limit as given (for messages: "timed out after 5000 ms"); for timeout::at, the time
  // that was left when it was made (zero or negative: the deadline had already passed).
  clock::duration limit() const noexcept { return limit_; }

 private:
  constexpr void swap(timeout& other) noexcept {
    std::swap(deadline_, other.deadline_);
    std::swap(limit_, other.limit_);
    std::swap(token_, other.token_);
    std::swap(bounded_, other.bounded_);
  }

  clock::time_point deadline_{};
  clock::duration limit_{};
  friend const detail::cancel_token* detail::cancel_token_of(const timeout& limit) noexcept;
  const detail::cancel_token* token_ = nullptr;
  bool bounded_ = false;
};

inline const detail::cancel_token* detail::cancel_token_of(const timeout& limit) noexcept {
  return limit.token_;
}

// A wait with no time limit that token ends (timeout::never().cancel_on(token)).
template <class Token>
requires requires(const Token& token) { make_cancel_token(token); }
timeout cancel_on(const Token& token) { return timeout::never().cancel_on(token); }

namespace detail {
// "timed out after 250 ms": the common tail of every timeout_error message ("timed out: its
// deadline had already passed N ms before the wait began" for a negative limit).
std::string timed_out_after(const timeout& limit);
}  // namespace detail

}  // namespace weft

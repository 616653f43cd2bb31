// A time limit for a wait: weft::timeout(5s) (relative to when it is made), timeout::at(t), or
// timeout::never(). Waits that take one throw weft::timeout_error when the deadline passes
// first; what they waited for is left alone (an awaited task keeps running) unless the wait
// says otherwise.
//
// Extreme values are safe: a limit so long that now + limit would overflow the clock means
// "never" (bounded() is false), and a zero or negative limit, or a deadline already past
// (timeout::at(time_point::min()) included), means "already expired": the wait gives up at once
// unless what it waits for is ready, and the message says the deadline had passed.
#pragma once

#include <chrono>
#include <ratio>
#include <string>
#include <type_traits>

namespace weft {

namespace detail {
using steady_duration = std::chrono::steady_clock::duration;
using steady_time = std::chrono::steady_clock::time_point;

// A duration in the clock's ticks, saturated to the clock's range instead of overflowing
// (hours::max() in nanoseconds would; signed overflow is undefined and in practice wraps).
template <class Rep, class Period>
constexpr steady_duration saturating_ticks(std::chrono::duration<Rep, Period> value) noexcept {
  if constexpr (std::ratio_less_equal_v<Period, steady_duration::period> &&
                !std::is_floating_point_v<Rep> && sizeof(Rep) <= sizeof(steady_duration::rep)) {
    return std::chrono::duration_cast<steady_duration>(value);  // always fits
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

class timeout {
 public:
  using clock = std::chrono::steady_clock;

  constexpr timeout() noexcept = default;  // never
  template <class Rep, class Period>
  explicit timeout(std::chrono::duration<Rep, Period> limit) noexcept
      : limit_(detail::saturating_ticks(limit)) {
    deadline_ = detail::saturating_add(clock::now(), limit_);
    bounded_ = deadline_ != clock::time_point::max();
  }
  static timeout at(clock::time_point deadline) noexcept {
    timeout result;
    result.deadline_ = deadline;
    result.limit_ = detail::saturating_remaining(deadline, clock::now());
    result.bounded_ = deadline != clock::time_point::max();
    return result;
  }
  static constexpr timeout never() noexcept { return timeout(); }

  bool bounded() const noexcept { return bounded_; }
  clock::time_point deadline() const noexcept { return deadline_; }
  // The limit as given (for messages: "timed out after 5000 ms"); for timeout::at, the time
  // that was left when it was made (zero or negative: the deadline had already passed).
  clock::duration limit() const noexcept { return limit_; }

 private:
  clock::time_point deadline_{};
  clock::duration limit_{};
  bool bounded_ = false;
};

namespace detail {
// timeout::never() as an object, for default arguments of hot waits: a reference to it costs
// nothing, where a temporary is built on every call.
inline constexpr timeout no_timeout{};

// "timed out after 250 ms": the common tail of every timeout_error message ("timed out: its
// deadline had already passed N ms before the wait began" for a limit of zero or less).
std::string timed_out_after(const timeout& limit);
}  // namespace detail

}  // namespace weft

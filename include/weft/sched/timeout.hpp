// A time limit for a wait: weft::timeout(5s) (relative to when it is made), timeout::at(t), or
// timeout::never(). Waits that take one throw weft::timeout_error when the deadline passes
// first; what they waited for is left alone (an awaited task keeps running) unless the wait
// says otherwise.
#pragma once

#include <chrono>
#include <string>

namespace weft {

class timeout {
 public:
  using clock = std::chrono::steady_clock;

  constexpr timeout() noexcept = default;  // never
  explicit timeout(clock::duration limit) noexcept
      : deadline_(clock::now() + limit), limit_(limit), bounded_(true) {}
  static timeout at(clock::time_point deadline) noexcept {
    timeout result;
    result.deadline_ = deadline;
    result.limit_ = deadline - clock::now();
    result.bounded_ = true;
    return result;
  }
  static constexpr timeout never() noexcept { return timeout(); }

  bool bounded() const noexcept { return bounded_; }
  clock::time_point deadline() const noexcept { return deadline_; }
  // The limit as given (for messages: "timed out after 5000 ms").
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

// "timed out after 250 ms": the common tail of every timeout_error message.
std::string timed_out_after(const timeout& limit);
}  // namespace detail

}  // namespace weft

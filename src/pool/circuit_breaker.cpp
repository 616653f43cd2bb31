// weft::circuit_breaker: see include/weft/pool/circuit_breaker.hpp.
#include "weft/pool/circuit_breaker.hpp"

#include <stdexcept>
#include <string>
#include <utility>

namespace weft {

const char* to_string(circuit_state state) noexcept {
  switch (state) {
    case circuit_state::closed:
      return "closed";
    case circuit_state::open:
      return "open";
    case circuit_state::half_open:
      return "half-open";
  }
  return "unknown";
}

consecutive_failures::consecutive_failures(std::size_t threshold,
                                           std::chrono::steady_clock::duration cool_down,
                                           std::nullptr_t)
    : threshold_(threshold), cool_down_(cool_down) {
  if (threshold == 0) {
    throw std::invalid_argument(
        "weft::consecutive_failures: a threshold of 0 failures would open the breaker before "
        "anything failed; use at least 1");
  }
  if (cool_down < cool_down.zero()) {
    throw std::invalid_argument("weft::consecutive_failures: the cool-down must not be negative");
  }
}

void consecutive_failures::on_success(circuit_breaker& breaker) {
  failures_in_a_row_ = 0;
  if (breaker.state() == circuit_state::half_open) {
    breaker.close();
  }
}

void consecutive_failures::on_failure(circuit_breaker& breaker, const std::exception_ptr&) {
  ++failures_in_a_row_;
  if (breaker.state() == circuit_state::half_open) {
    breaker.open();  // the probe failed: the backend is still down, start a new cool-down
  } else if (breaker.state() == circuit_state::closed && failures_in_a_row_ >= threshold_) {
    breaker.open();
  }
}

bool consecutive_failures::should_try_recovery(const circuit_breaker& breaker) {
  // Saturated: a cool-down of duration::max() is never over, whenever the breaker opened.
  return detail::saturating_remaining(circuit_breaker::clock::now(), breaker.opened_at()) >=
         cool_down_;
}

struct circuit_breaker::consulting {
  explicit consulting(circuit_breaker& breaker) noexcept : breaker(breaker) {
    breaker.consulting_ = true;
  }
  ~consulting() { breaker.consulting_ = false; }
  consulting(const consulting&) = delete;
  consulting& operator=(const consulting&) = delete;
  circuit_breaker& breaker;
};

circuit_breaker::circuit_breaker(std::shared_ptr<circuit_breaker_strategy> strategy) noexcept
    : strategy_(std::move(strategy)) {}

void circuit_breaker::set_strategy(std::shared_ptr<circuit_breaker_strategy> strategy) {
  if (consulting_) {
    throw std::logic_error(
        "weft::circuit_breaker::set_strategy: called from inside the strategy's own callback, "
        "which would destroy the strategy while its code runs; swap it from outside");
  }
  strategy_ = std::move(strategy);
  state_ = circuit_state::closed;
  probe_in_flight_ = false;  // a probe in flight is an ordinary request now
}

void circuit_breaker::open() noexcept {
  state_ = circuit_state::open;
  probe_in_flight_ = false;
  opened_at_ = clock::now();
  ++times_opened_;
}

void circuit_breaker::close() noexcept {
  state_ = circuit_state::closed;
  probe_in_flight_ = false;
}

void circuit_breaker::half_open() noexcept {
  state_ = circuit_state::half_open;
  probe_in_flight_ = false;
}

circuit_breaker::admission circuit_breaker::admit() {
  switch (state_) {
    case circuit_state::closed:
      return admission::allowed;
    case circuit_state::open:
      if (strategy_ == nullptr) {
        return admission::refused;
      }
      {
        consulting busy(*this);
        if (!strategy_->should_try_recovery(*this)) {
          return admission::refused;
        }
      }
      state_ = circuit_state::half_open;
      [[fallthrough]];
    case circuit_state::half_open:
      if (probe_in_flight_) {
        return admission::refused;
      }
      probe_in_flight_ = true;
      ++probe_id_;
      return admission::probe;
  }
  return admission::refused;
}

void circuit_breaker::record_success() {
  if (strategy_ != nullptr) {
    consulting busy(*this);
    strategy_->on_success(*this);
  }
  if (state_ == circuit_state::half_open) {
    probe_in_flight_ = false;  // no strategy verdict (manual half-open): let the next one probe
  }
}

void circuit_breaker::record_failure(const std::exception_ptr& error) {
  if (strategy_ != nullptr) {
    consulting busy(*this);
    strategy_->on_failure(*this, error);
  }
  if (state_ == circuit_state::half_open) {
    probe_in_flight_ = false;
  }
}

}  // namespace weft

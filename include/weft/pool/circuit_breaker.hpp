// weft::circuit_breaker: fail fast while a backend is down, probe it once it may be back.
//
// Contract:
//   - Three states. closed: requests go through. open: requests are refused at once (a pool's
//     acquire throws service_unavailable_error) without touching the backend. half_open: one
//     probe at a time is let through; the others are refused until its outcome is known.
//   - Manual control: open(), close() and half_open() set the state directly, whatever the
//     strategy says (an operator taking a backend out of rotation, a test).
//   - A strategy decides the automatic transitions. The breaker's user (weft::pool) reports
//     outcomes with record_success() / record_failure(error); they go to the strategy's
//     on_success / on_failure, which may call open() / close() / half_open() on the breaker.
//     should_try_recovery() is polled only while the breaker is open, each time a request is
//     refused-or-admitted (admit()): it is lazy, driven by demand, with no timer of its own, so
//     an idle program pays nothing. When it returns true the breaker goes half-open and that
//     request becomes the probe.
//   - Without a strategy the breaker only moves under manual control.
//   - Threads: a breaker belongs to the scheduler thread of the pool that uses it; it never
//     suspends and never blocks.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>

namespace weft {

enum class circuit_state : std::uint8_t { closed, open, half_open };

// "closed", "open", "half-open".
const char* to_string(circuit_state state) noexcept;

class circuit_breaker;

class circuit_breaker_strategy {
 public:
  virtual ~circuit_breaker_strategy() = default;
  // An operation on the backend succeeded (a resource was created, passed its healthcheck, or
  // a lease was returned healthy).
  virtual void on_success(circuit_breaker& breaker) = 0;
  // An operation on the backend failed with error (a factory threw, a healthcheck failed or
  // threw, a lease was discarded with an error). Cancellation is never reported.
  virtual void on_failure(circuit_breaker& breaker, const std::exception_ptr& error) = 0;
  // Polled while the breaker is open, on each request: true lets that request through as a
  // half-open probe.
  virtual bool should_try_recovery(const circuit_breaker& breaker) = 0;
};

// The built-in strategy: `threshold` consecutive failures open the breaker; once it has been
// open for `cool_down` the next request is a half-open probe; the probe's success closes the
// breaker, its failure reopens it (and the cool-down starts again). Any success resets the
// count of consecutive failures.
class consecutive_failures final : public circuit_breaker_strategy {
 public:
  consecutive_failures(std::size_t threshold, std::chrono::steady_clock::duration cool_down);
  void on_success(circuit_breaker& breaker) override;
  void on_failure(circuit_breaker& breaker, const std::exception_ptr& error) override;
  bool should_try_recovery(const circuit_breaker& breaker) override;

  std::size_t failures_in_a_row() const noexcept { return failures_in_a_row_; }

 private:
  std::size_t threshold_;
  std::chrono::steady_clock::duration cool_down_;
  std::size_t failures_in_a_row_ = 0;
};

class circuit_breaker {
 public:
  using clock = std::chrono::steady_clock;

  // Null strategy: manual control only.
  explicit circuit_breaker(std::shared_ptr<circuit_breaker_strategy> strategy = nullptr) noexcept;

  circuit_state state() const noexcept { return state_; }
  // When it last went open (the start of its cool-down); epoch if never.
  clock::time_point opened_at() const noexcept { return opened_at_; }
  // How many times it went open (manual or automatic), for metrics and tests.
  std::uint64_t times_opened() const noexcept { return times_opened_; }
  bool has_strategy() const noexcept { return strategy_ != nullptr; }

  // Manual control. open() restarts the cool-down; half_open() admits the next request as a
  // probe; close() lets everything through again.
  void open() noexcept;
  void close() noexcept;
  void half_open() noexcept;

  // --- for the breaker's user (weft::pool) ---
  enum class admission : std::uint8_t { allowed, probe, refused };
  // closed: allowed. open: polls should_try_recovery (true: half-open, probe). half-open: probe
  // if no probe is in flight, refused otherwise.
  admission admit();
  // The probe ended without an outcome worth reporting (cancelled, timed out, handed back
  // unused): another request may probe.
  void abandon_probe() noexcept { probe_in_flight_ = false; }
  bool probe_in_flight() const noexcept { return probe_in_flight_; }
  void record_success();
  void record_failure(const std::exception_ptr& error);

 private:
  std::shared_ptr<circuit_breaker_strategy> strategy_;
  circuit_state state_ = circuit_state::closed;
  bool probe_in_flight_ = false;
  clock::time_point opened_at_{};
  std::uint64_t times_opened_ = 0;
};

}  // namespace weft

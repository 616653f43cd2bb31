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
//   - The strategy can be replaced or removed at any time (set_strategy; weft::pool and
//     weft::pg::pool forward set_breaker_strategy to it). Replacing it resets the breaker: it
//     closes, and the new strategy decides from then on, starting from its own state (a fresh
//     consecutive_failures counts from zero; failures seen before the swap are not replayed).
//     A half-open probe in flight at the swap stops being the probe: its outcome, when it comes,
//     is reported to the new strategy like any request's, and its abandonment (cancelled, timed
//     out, handed back unused) no longer touches the probe slot, which a later probe may hold.
//     Null removes the strategy: the breaker then never opens or closes by itself, while
//     open() / close() / half_open() keep working. Calling set_strategy from inside a strategy's
//     own callback is a std::logic_error (it would destroy the object whose code is running).
//   - Threads: a breaker belongs to the scheduler thread of the pool that uses it; it never
//     suspends and never blocks.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>

#include "weft/sched/timeout.hpp"

namespace weft {

// closed: requests go through; open: they fail fast; half_open: one probe tests the backend.
enum class circuit_state : std::uint8_t { closed, open, half_open };

// "closed", "open", "half-open".
const char* to_string(circuit_state state) noexcept;

class circuit_breaker;

// Decides when a breaker opens and when it tries to recover (see above): implement it for a policy
// of your own, or use consecutive_failures.
class circuit_breaker_strategy {
 public:
  virtual ~circuit_breaker_strategy() = default;
  // An operation on the backend succeeded (a resource passed its healthcheck, a lease was
  // returned healthy, or the half-open probe created a resource; see weft/pool/pool.hpp).
  virtual void on_success(circuit_breaker& breaker) = 0;
  // An operation on the backend failed with error (a factory threw, a healthcheck or a
  // validation after idle failed or threw, before_release rejected a returned resource, a lease
  // was discarded with an error). Cancellation is never reported.
  virtual void on_failure(circuit_breaker& breaker, const std::exception_ptr& error) = 0;
  // Polled while the breaker is open, on each request: true lets that request through as a
  // half-open probe.
  virtual bool should_try_recovery(const circuit_breaker& breaker) = 0;
};

// The built-in strategy: `threshold` consecutive failures open the breaker; once it has been
// open for `cool_down` the next request is a half-open probe; the probe's success closes the
// breaker, its failure reopens it (and the cool-down starts again). Any success resets the
// count of consecutive failures. A cool-down too long for the clock (hours::max()) saturates: the
// breaker then stays open until closed by hand.
class consecutive_failures final : public circuit_breaker_strategy {
 public:
  // threshold: the failures in a row that open the breaker; cool_down: how long it stays open
  // before a probe.
  template <class Rep, class Period>
  consecutive_failures(std::size_t threshold, std::chrono::duration<Rep, Period> cool_down)
      : consecutive_failures(threshold, detail::saturating_ticks(cool_down), nullptr) {}
  void on_success(circuit_breaker& breaker) override;
  void on_failure(circuit_breaker& breaker, const std::exception_ptr& error) override;
  bool should_try_recovery(const circuit_breaker& breaker) override;

  // The current count of failures in a row.
  std::size_t failures_in_a_row() const noexcept { return failures_in_a_row_; }

 private:
  // The validating constructor behind the template (the tag keeps it out of overload resolution
  // for users' durations).
  consecutive_failures(std::size_t threshold, std::chrono::steady_clock::duration cool_down,
                       std::nullptr_t);
  std::size_t threshold_;
  std::chrono::steady_clock::duration cool_down_;
  std::size_t failures_in_a_row_ = 0;
};

class circuit_breaker {
 public:
  using clock = std::chrono::steady_clock;  // the clock of opened_at()

  // Null strategy: manual control only.
  explicit circuit_breaker(std::shared_ptr<circuit_breaker_strategy> strategy = nullptr) noexcept;

  circuit_state state() const noexcept { return state_; }  // closed, open or half_open
  // When it last went open (the start of its cool-down); epoch if never.
  clock::time_point opened_at() const noexcept { return opened_at_; }
  // How many times it went open (manual or automatic), for metrics and tests.
  std::uint64_t times_opened() const noexcept { return times_opened_; }
  // Whether a strategy drives it.
  bool has_strategy() const noexcept { return strategy_ != nullptr; }
  // The strategy that drives it (null: manual control only).
  const std::shared_ptr<circuit_breaker_strategy>& strategy() const noexcept { return strategy_; }
  // Replaces (or, with null, removes) the strategy and closes the breaker; see the contract above.
  void set_strategy(std::shared_ptr<circuit_breaker_strategy> strategy);

  // Manual control. open() restarts the cool-down; half_open() admits the next request as a
  // probe; close() lets everything through again.
  void open() noexcept;
  void close() noexcept;
  void half_open() noexcept;

  // --- for the breaker's user (weft::pool) ---
  // What admit() decides for one request.
  enum class admission : std::uint8_t { allowed, probe, refused };
  // closed: allowed. open: polls should_try_recovery (true: half-open, probe). half-open: probe
  // if no probe is in flight, refused otherwise. After a probe admission, probe_id() names it.
  admission admit();
  // The probe admitted last (each admission gets a new nonzero id).
  std::uint64_t probe_id() const noexcept { return probe_id_; }
  // The probe ended without an outcome worth reporting (cancelled, timed out, handed back
  // unused): another request may probe. The id form does so only while that probe still holds
  // the slot (not after a manual transition, a strategy swap or a verdict freed it, when a later
  // probe may hold it).
  void abandon_probe() noexcept { probe_in_flight_ = false; }
  void abandon_probe(std::uint64_t id) noexcept {
    if (probe_in_flight(id)) {
      probe_in_flight_ = false;
    }
  }
  // Whether a probe is in flight (the id form: that probe).
  bool probe_in_flight() const noexcept { return probe_in_flight_; }
  bool probe_in_flight(std::uint64_t id) const noexcept {
    return probe_in_flight_ && id == probe_id_;
  }
  // record_success and record_failure: the outcome of an admitted request, for the strategy.
  // The outcome of an admitted request, for the strategy (record_success and record_failure).
  void record_success();
  void record_failure(const std::exception_ptr& error);

 private:
  // Marks a strategy callback in progress (set_strategy must not destroy the strategy then).
  struct consulting;

  std::shared_ptr<circuit_breaker_strategy> strategy_;
  circuit_state state_ = circuit_state::closed;
  bool probe_in_flight_ = false;
  bool consulting_ = false;
  std::uint64_t probe_id_ = 0;
  clock::time_point opened_at_{};
  std::uint64_t times_opened_ = 0;
};

}  // namespace weft

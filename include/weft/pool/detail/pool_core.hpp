// The type-erased engine behind weft::pool<T>: accounting, the FIFO hand-off of resources, the
// circuit breaker, close and the background maintenance. Not user-facing API; public because
// pool<T> and lease<T> (templates) build on it. See pool.hpp for the contract.
//
// A resource is an opaque pointer made by hooks.create and freed by hooks.destroy; the core
// never looks inside. Accounting, which never suspends between its steps:
//   idle_     resources in the ring, free to take;
//   active_   resources out of the ring: leased, handed to a waiter that has not run yet, or
//             held by the pool itself for a moment (a healthcheck or before_acquire running);
//   reserved_ slots promised to a creation in flight (the factory runs after the reservation,
//             so concurrent creators can never push the count past max).
// Invariant at every instant: idle + active + reserved <= max.
//
// Ownership: reference counted, not atomically (one scheduler thread): the pool handle, each
// lease, each call in progress and the maintenance coroutine hold one reference, so a lease may
// outlive its pool (it is destroyed when released) and the maintenance coroutine may finish after
// the pool is gone.
#pragma once

#include <chrono>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "weft/error.hpp"
#include "weft/pool/circuit_breaker.hpp"
#include "weft/sched/task.hpp"
#include "weft/sched/timeout.hpp"
#include "weft/sync/detail/waiter_queue.hpp"

namespace weft {

// A duration option that saturates: any std::chrono::duration converts to it, and one too long
// for the steady clock's nanoseconds (hours::max()) becomes steady_clock::duration::max(), which
// every option taking it reads as "never", instead of wrapping around as the plain conversion
// does (signed overflow: undefined). Reads as a steady_clock::duration.
class saturating_duration {
 public:
  using duration = std::chrono::steady_clock::duration;

  constexpr saturating_duration() noexcept = default;
  template <class Rep, class Period>
  constexpr saturating_duration(std::chrono::duration<Rep, Period> value) noexcept  // NOLINT
      : value_(detail::saturating_ticks(value)) {}

  constexpr duration get() const noexcept { return value_; }
  constexpr operator duration() const noexcept { return value_; }  // NOLINT
  constexpr bool is_max() const noexcept { return value_ == duration::max(); }
  friend constexpr auto operator<=>(saturating_duration, saturating_duration) noexcept = default;

 private:
  duration value_{};
};

// The part of a pool's configuration that is not a callback (shared by pool_options and
// pool_c_options). Durations saturate (saturating_duration): duration::max() and the like mean
// never, and never overflow a deadline.
struct pool_settings {
  std::size_t min = 0;   // kept alive (pre-warmed, and refilled by the healthcheck)
  std::size_t max = 10;  // never more alive at once, idle and busy together
  // Zero: no periodic healthcheck (min is still pre-warmed once). duration::max(): never.
  saturating_duration healthcheck_interval{};
  // What acquire() without an argument waits at most; unset (or duration::max()): forever.
  std::optional<saturating_duration> acquire_timeout{};
  // Validation after idle (what HikariCP and pgbouncer call it): an idle resource that has sat
  // in the pool at least this long is checked with the validate hook before acquire() or
  // try_acquire() hands it out; one that fails (false, or throwing) is destroyed, reported to the
  // breaker as a failure, and the acquire goes on with the next idle one or a fresh one. Unset
  // (the default) or duration::max(): never; zero: every idle resource. Resources handed straight
  // from a release to a waiter were not idle and are not validated.
  std::optional<saturating_duration> validate_after_idle{};
  // Automatic circuit breaking; null: the breaker only moves under manual control.
  std::shared_ptr<circuit_breaker_strategy> breaker_strategy{};
  // For messages and the deadlock report.
  std::string name{};
};

struct pool_stats {
  std::size_t idle = 0;
  std::size_t active = 0;
  std::size_t reserved = 0;  // creations in flight
  std::size_t waiters = 0;
  std::size_t max = 0;
  std::uint64_t created = 0;
  std::uint64_t destroyed = 0;
  std::uint64_t timeouts = 0;              // acquires that gave up waiting
  std::uint64_t create_failures = 0;       // factory calls that threw (cancellation excluded)
  std::uint64_t destroy_failures = 0;      // destructor calls that threw
  std::uint64_t healthcheck_failures = 0;  // idle resources found unhealthy
  std::uint64_t validation_failures = 0;   // idle resources that failed validation on acquire
  std::uint64_t rejected_releases = 0;     // releases before_release turned down
  // Resources alive: idle + active (always <= max, together with reserved).
  std::size_t count() const noexcept { return idle + active; }
};

namespace detail {

// What the core calls on resources. context is passed back to every hook; drop_context frees it
// when the core goes away.
struct resource_hooks {
  void* context = nullptr;
  void* (*create)(void* context) = nullptr;  // may suspend, may throw
  // Frees the resource whatever happens; may throw (the resource is gone all the same).
  void (*destroy)(void* context, void* resource) = nullptr;
  bool (*healthcheck)(void* context, void* resource) = nullptr;     // optional
  bool (*before_acquire)(void* context, void* resource) = nullptr;  // optional
  bool (*before_release)(void* context, void* resource) = nullptr;  // optional
  // Validation after idle (pool_settings::validate_after_idle); limit is the acquire's deadline.
  bool (*validate)(void* context, void* resource, const timeout& limit) = nullptr;  // optional
  void (*drop_context)(void* context) noexcept = nullptr;
};

// An idle resource and when it went idle (only kept when validation after idle is on).
struct idle_entry {
  void* resource = nullptr;
  std::chrono::steady_clock::time_point since{};
};

// Idle resources: a growable power-of-two ring, O(1) push at the back and pop at the front
// (FIFO, so every idle resource gets used and healthchecked in turn).
class idle_ring {
 public:
  idle_ring() = default;
  idle_ring(const idle_ring&) = delete;
  idle_ring& operator=(const idle_ring&) = delete;
  ~idle_ring() { delete[] slots_; }

  bool empty() const noexcept { return size_ == 0; }
  std::size_t size() const noexcept { return size_; }
  void push_back(idle_entry entry) {
    if (size_ == capacity_) {
      grow();
    }
    slots_[(head_ + size_) & (capacity_ - 1)] = entry;
    ++size_;
  }
  idle_entry pop_front() noexcept {
    idle_entry entry = slots_[head_];
    head_ = (head_ + 1) & (capacity_ - 1);
    --size_;
    return entry;
  }
  void reserve(std::size_t wanted);

 private:
  void grow() { reserve(capacity_ == 0 ? 8 : capacity_ * 2); }

  idle_entry* slots_ = nullptr;
  std::size_t capacity_ = 0;
  std::size_t head_ = 0;
  std::size_t size_ = 0;
};

class pool_core {
 public:
  // Validates the settings (std::invalid_argument) and starts the background maintenance when
  // there is any (min > 0 or a healthcheck interval): that needs a running scheduler.
  static pool_core* create(resource_hooks hooks, pool_settings settings);
  pool_core(const pool_core&) = delete;
  pool_core& operator=(const pool_core&) = delete;

  void add_ref() noexcept { ++refs_; }
  void drop_ref() noexcept {
    if (--refs_ == 0) {
      delete this;
    }
  }

  // Returns a resource counted as active. probe: nonzero when the breaker admitted this acquire
  // as its half-open probe (the breaker's probe id; the lease reports its outcome). limit null:
  // the settings' default.
  void* acquire(const timeout* limit, std::uint64_t& probe);
  // Only an idle resource, only when nobody waits; null otherwise. Never calls the factory.
  void* try_acquire(std::uint64_t& probe);
  // Returns a healthy resource: to the oldest waiter, else to the idle ring.
  void release(void* resource, std::uint64_t probe) noexcept;
  // Destroys a resource instead of returning it; error (if any) counts against the breaker.
  void discard(void* resource, std::uint64_t probe, std::exception_ptr error) noexcept;
  void close();
  bool closed() const noexcept { return closed_; }
  pool_stats stats() const noexcept;
  circuit_breaker& breaker() noexcept { return breaker_; }
  // See circuit_breaker::set_strategy.
  void set_breaker_strategy(std::shared_ptr<circuit_breaker_strategy> strategy);
  const std::string& name() const noexcept { return settings_.name; }

 private:
  // What a grant handed a waiter (queued_waiter::outcome).
  enum grant : std::uint8_t { grant_resource = 1, grant_slot, grant_closed };

  pool_core(resource_hooks hooks, pool_settings settings);
  ~pool_core();

  std::size_t live() const noexcept { return idle_.size() + active_; }
  std::uint64_t admit_or_throw();
  // The deadline of an acquire: limit, else the settings' acquire_timeout (made into fallback).
  // Made only where a wait or a validation needs it: building a timeout reads the clock, and
  // the common acquire (an idle resource, nothing to validate) needs no deadline at all.
  const timeout& effective_limit(const timeout* limit, timeout& fallback) const;
  // limit: the caller's, or null for the settings' acquire_timeout.
  void* obtain(const timeout* limit, std::uint64_t probe);
  void* wait_for_grant(const timeout* limit, std::uint64_t probe);
  // Vets a resource about to be handed out (counted in active_): validation after idle when it
  // sat idle long enough (since: when it went idle; time_point::max() for one that did not),
  // then before_acquire. Rejected ones are replaced by the next idle one or a fresh one.
  void* vet(void* resource, std::chrono::steady_clock::time_point since, const timeout* limit,
            std::uint64_t probe);
  // Whether a resource idle since then is due for validation (inline: the common pool has no
  // validate_after_idle, and the check is on every acquire).
  bool stale(std::chrono::steady_clock::time_point since) const noexcept {
    return settings_.validate_after_idle.has_value() && stale_after_idle(since);
  }
  bool stale_after_idle(std::chrono::steady_clock::time_point since) const noexcept;
  void idle_push(void* resource);
  void* create_reserved();
  // A returned resource that before_release vetoed (vetoed: a failure for the breaker, with
  // failure as its error when the hook threw) or that cannot go back (a cancelled hook, a
  // closed pool): destroyed, and its slot freed for a waiter. Out of line: the cold path.
  void refuse_release(void* resource, std::uint64_t probe, bool vetoed,
                      std::exception_ptr failure) noexcept;
  void hand_back(void* resource) noexcept;
  void free_slots() noexcept;
  void pass_on(queued_waiter& leaving) noexcept;
  void destroy_resource(void* resource) noexcept;
  void record_success() noexcept;
  void record_failure(const std::exception_ptr& error) noexcept;
  [[noreturn]] void throw_closed(const char* operation) const;
  [[noreturn]] void throw_unavailable() const;
  std::string label() const;
  static void describe(const void* self, std::string& out);

  // Background maintenance (pool_maintenance.cpp).
  void start_maintenance();
  void maintain();
  void check_idle();
  void replenish();

  resource_hooks hooks_;
  pool_settings settings_;
  idle_ring idle_;
  std::size_t active_ = 0;
  std::size_t reserved_ = 0;
  std::uint32_t refs_ = 1;
  bool closed_ = false;
  circuit_breaker breaker_;
  waiter_queue waiters_;
  pool_stats counters_{};                           // only the cumulative counters are kept here
  std::vector<std::exception_ptr> destroy_errors_;  // not yet reported by close()
  task<void> maintenance_;
};

}  // namespace detail
}  // namespace weft

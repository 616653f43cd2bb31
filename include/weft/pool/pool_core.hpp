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
#include "weft/sync/waiter_queue.hpp"

namespace weft {

// The part of a pool's configuration that is not a callback (shared by pool_options and
// pool_c_options).
struct pool_settings {
  std::size_t min = 0;   // kept alive (pre-warmed, and refilled by the healthcheck)
  std::size_t max = 10;  // never more alive at once, idle and busy together
  // Zero: no periodic healthcheck (min is still pre-warmed once).
  std::chrono::steady_clock::duration healthcheck_interval{};
  // What acquire() without an argument waits at most; unset: forever.
  std::optional<std::chrono::steady_clock::duration> acquire_timeout{};
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
  void (*drop_context)(void* context) noexcept = nullptr;
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
  void push_back(void* resource) {
    if (size_ == capacity_) {
      grow();
    }
    slots_[(head_ + size_) & (capacity_ - 1)] = resource;
    ++size_;
  }
  void* pop_front() noexcept {
    void* resource = slots_[head_];
    head_ = (head_ + 1) & (capacity_ - 1);
    --size_;
    return resource;
  }
  void reserve(std::size_t wanted);

 private:
  void grow() { reserve(capacity_ == 0 ? 8 : capacity_ * 2); }

  void** slots_ = nullptr;
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

  // Returns a resource counted as active. probe: the breaker admitted this acquire as its
  // half-open probe (the lease reports its outcome). limit null: the settings' default.
  void* acquire(const timeout* limit, bool& probe);
  // Only an idle resource, only when nobody waits; null otherwise. Never calls the factory.
  void* try_acquire(bool& probe);
  // Returns a healthy resource: to the oldest waiter, else to the idle ring.
  void release(void* resource, bool probe) noexcept;
  // Destroys a resource instead of returning it; error (if any) counts against the breaker.
  void discard(void* resource, bool probe, std::exception_ptr error) noexcept;
  void close();
  bool closed() const noexcept { return closed_; }
  pool_stats stats() const noexcept;
  circuit_breaker& breaker() noexcept { return breaker_; }
  const std::string& name() const noexcept { return settings_.name; }

 private:
  // What a grant handed a waiter (queued_waiter::outcome).
  enum grant : std::uint8_t { grant_resource = 1, grant_slot, grant_closed };

  pool_core(resource_hooks hooks, pool_settings settings);
  ~pool_core();

  std::size_t live() const noexcept { return idle_.size() + active_; }
  bool admit_or_throw();
  void* obtain(const timeout* limit, bool probe);
  void* wait_for_grant(const timeout* limit, bool probe);
  void* vet(void* resource);
  void* create_reserved();
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

// The pool's background maintenance: pre-warming `min` resources and the periodic healthcheck.
//
// It runs as one background coroutine per pool (spawn_options.background): it does not keep
// run() going, and its sleeps do not hide a deadlock among the pool's users. It holds a reference
// to the core, so it may outlive the pool handle; close() cancels it. It only ever takes idle
// resources (busy ones are never touched), and while it checks one that resource counts as
// active, so the accounting stays exact even when the healthcheck suspends.
#include <chrono>
#include <stdexcept>
#include <string>
#include <utility>

#include "weft/pool/pool.hpp"
#include "weft/sched/scheduler.hpp"
#include "weft/sched/task.hpp"
#include "weft/sched/this_coroutine.hpp"

namespace weft::detail {

void pool_core::start_maintenance() {
  bool healthchecks =
      settings_.healthcheck_interval.get() > std::chrono::steady_clock::duration::zero();
  if (settings_.min == 0 && !healthchecks) {
    return;
  }
  scheduler* owner = current_scheduler_or_null();
  if (owner == nullptr || detail::running_coroutine(*owner) == nullptr) {
    throw std::logic_error(label() +
                           ": a pool with min > 0 or a healthcheck interval starts background "
                           "maintenance, so it must be made inside a coroutine (weft::run's "
                           "main or a spawned one)");
  }
  // The coroutine's reference lives in its function object, not in its body: a maintenance
  // coroutine cancelled before it ever ran (a pool closed right away) still gives it back, when
  // close() drops the task handle and the scheduler its own.
  struct core_reference {
    pool_core* core;
    explicit core_reference(pool_core* referenced) noexcept : core(referenced) { core->add_ref(); }
    core_reference(core_reference&& other) noexcept : core(std::exchange(other.core, nullptr)) {}
    core_reference(const core_reference&) = delete;
    core_reference& operator=(const core_reference&) = delete;
    ~core_reference() {
      if (core != nullptr) {
        core->drop_ref();
      }
    }
  };
  maintenance_ = spawn(
      [reference = core_reference(this)] {
        try {
          reference.core->maintain();
        } catch (const cancelled_error&) {
          // close(), or the end of the run: maintenance simply stops.
        }
      },
      {.name = label() + " maintenance", .background = true});
}

void pool_core::maintain() {
  replenish();
  if (settings_.healthcheck_interval.get() <= std::chrono::steady_clock::duration::zero()) {
    return;  // pre-warming only
  }
  while (!closed_) {
    sleep_for(settings_.healthcheck_interval.get());  // saturating: duration::max() is never
    if (closed_) {
      return;
    }
    if (hooks_.healthcheck != nullptr) {
      check_idle();
    }
    replenish();
  }
}

void pool_core::check_idle() {
  // Each resource idle at the start of the pass is checked once (a FIFO ring: checked ones go
  // to the back), unless acquirers take it first.
  for (std::size_t left = idle_.size(); left > 0 && !closed_ && !idle_.empty(); --left) {
    void* resource = idle_.pop_front().resource;
    ++active_;
    bool healthy = false;
    std::exception_ptr failure;
    try {
      healthy = hooks_.healthcheck(hooks_.context, resource);
    } catch (const cancelled_error&) {
      --active_;
      destroy_resource(resource);  // interrupted half-way: its state is unknown
      free_slots();
      throw;
    } catch (...) {
      failure = std::current_exception();
    }
    if (closed_) {
      --active_;
      destroy_resource(resource);
      continue;
    }
    if (healthy) {
      record_success();
      hand_back(resource);
      continue;
    }
    ++counters_.healthcheck_failures;
    if (!failure) {
      failure = std::make_exception_ptr(error(label() + ": healthcheck reported an idle resource "
                                                        "unhealthy; it was replaced"));
    }
    record_failure(failure);
    --active_;
    destroy_resource(resource);
    free_slots();  // a waiter (if any) creates the replacement; replenish() covers min
  }
}

void pool_core::replenish() {
  while (!closed_ && live() + reserved_ < settings_.min &&
         breaker_.state() == circuit_state::closed) {
    ++reserved_;
    void* resource = nullptr;
    try {
      resource = create_reserved();
    } catch (const cancelled_error&) {
      throw;
    } catch (...) {
      return;  // counted and reported to the breaker by create_reserved; retried next pass
    }
    hand_back(resource);
  }
}

}  // namespace weft::detail

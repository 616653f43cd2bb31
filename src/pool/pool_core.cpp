// The pool engine: see include/weft/pool/pool_core.hpp and pool.hpp.
//
// Every accounting change happens before anything that may suspend (a hook, a wait), so that
// another coroutine running meanwhile always sees idle + active + reserved <= max. A slot freed
// while coroutines wait (a resource destroyed, a creation failed) is reserved for the oldest
// waiter at once (free_slots), and a returned resource is handed to the oldest waiter before
// the releasing coroutine continues (hand_back): the releaser cannot take either back.
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "weft/pool/pool.hpp"
#include "weft/sched/scheduler.hpp"

namespace weft {

namespace detail {
namespace {

// A cancellation caught where it cannot propagate (a hook called from a noexcept path) is armed
// again on the calling coroutine, so its next suspension point raises it.
void cancel_again(const cancelled_error& cancellation) noexcept {
  scheduler* owner = current_scheduler_or_null();
  coroutine* self = owner == nullptr ? nullptr : running_coroutine(*owner);
  if (self != nullptr) {
    try {
      cancel_coroutine(*owner, *self, cancellation.reason());
    } catch (...) {  // allocation of the reason failed: nothing better to do
    }
  }
}

}  // namespace

void idle_ring::reserve(std::size_t wanted) {
  if (wanted <= capacity_) {
    return;
  }
  std::size_t capacity = capacity_ == 0 ? 8 : capacity_;
  while (capacity < wanted) {
    capacity *= 2;
  }
  auto* slots = new idle_entry[capacity];
  for (std::size_t index = 0; index < size_; ++index) {
    slots[index] = slots_[(head_ + index) & (capacity_ - 1)];
  }
  delete[] slots_;
  slots_ = slots;
  capacity_ = capacity;
  head_ = 0;
}

pool_core* pool_core::create(resource_hooks hooks, pool_settings settings) {
  auto drop_hooks = [&] {
    if (hooks.drop_context != nullptr) {
      hooks.drop_context(hooks.context);
    }
  };
  std::string name = settings.name.empty() ? "weft::pool" : "weft::pool '" + settings.name + "'";
  const char* problem = nullptr;
  if (hooks.create == nullptr || hooks.destroy == nullptr) {
    problem = ": no factory given; set options.factory to a function that makes a resource";
  } else if (settings.max == 0) {
    problem = ": max is 0, so no resource could ever be acquired; set max to at least 1";
  } else if (settings.min > settings.max) {
    problem = ": min is larger than max; min resources are kept alive, so it must be <= max";
  } else if (settings.healthcheck_interval.get() < std::chrono::steady_clock::duration::zero()) {
    problem = ": the healthcheck interval is negative; use zero for no healthcheck";
  } else if (settings.healthcheck_interval.get() > std::chrono::steady_clock::duration::zero() &&
             hooks.healthcheck == nullptr) {
    problem = ": a healthcheck interval is set but no healthcheck function";
  } else if (settings.validate_after_idle &&
             settings.validate_after_idle->get() < std::chrono::steady_clock::duration::zero()) {
    problem = ": validate_after_idle is negative; use zero to validate every idle resource";
  } else if (settings.validate_after_idle && hooks.validate == nullptr) {
    problem = ": validate_after_idle is set but no validate function";
  }
  if (problem != nullptr) {
    drop_hooks();
    throw std::invalid_argument(name + problem);
  }
  pool_core* core = nullptr;
  try {
    core = new pool_core(hooks, std::move(settings));
  } catch (...) {
    drop_hooks();
    throw;
  }
  try {
    core->start_maintenance();
  } catch (...) {
    core->drop_ref();
    throw;
  }
  return core;
}

pool_core::pool_core(resource_hooks hooks, pool_settings settings)
    : hooks_(hooks),
      settings_(std::move(settings)),
      breaker_(settings_.breaker_strategy),
      waiters_(this, &pool_core::describe) {
  idle_.reserve(settings_.max < 64 ? settings_.max : 64);
}

pool_core::~pool_core() {
  // The last reference is gone: no lease, waiter or call is left, only idle resources (a pool
  // closed by its handle has none; one whose handle never closed it cannot exist).
  while (!idle_.empty()) {
    destroy_resource(idle_.pop_front().resource);
  }
  if (hooks_.drop_context != nullptr) {
    hooks_.drop_context(hooks_.context);
  }
}

std::string pool_core::label() const {
  return settings_.name.empty() ? "weft::pool" : "weft::pool '" + settings_.name + "'";
}

void pool_core::describe(const void* self, std::string& out) {
  const pool_core& core = *static_cast<const pool_core*>(self);
  out += "pool(idle " + std::to_string(core.idle_.size()) + ", active " +
         std::to_string(core.active_) + ", reserved " + std::to_string(core.reserved_) + ", max " +
         std::to_string(core.settings_.max) + ")";
  if (!core.settings_.name.empty()) {
    out += " '" + core.settings_.name + "'";
  }
  out += ", " + std::to_string(core.waiters_.size()) + " waiting";
}

pool_stats pool_core::stats() const noexcept {
  pool_stats result = counters_;
  result.idle = idle_.size();
  result.active = active_;
  result.reserved = reserved_;
  result.waiters = waiters_.size();
  result.max = settings_.max;
  return result;
}

void pool_core::throw_closed(const char* operation) const {
  throw pool_closed_error(label() + ": " + operation +
                          " on a closed pool; the pool was closed (close() or its destructor) "
                          "and gives out no more resources");
}

void pool_core::throw_unavailable() const {
  throw service_unavailable_error(
      label() + ": circuit breaker is " + to_string(breaker_.state()) +
      "; the backend is considered down, so acquire fails fast: retry later");
}

std::uint64_t pool_core::admit_or_throw() {
  switch (breaker_.admit()) {
    case circuit_breaker::admission::allowed:
      return 0;
    case circuit_breaker::admission::probe:
      return breaker_.probe_id();
    case circuit_breaker::admission::refused:
      break;
  }
  throw_unavailable();
}

void pool_core::record_success() noexcept {
  if (breaker_.has_strategy() || breaker_.state() == circuit_state::half_open) {
    try {
      breaker_.record_success();
    } catch (...) {  // a strategy must not throw; its verdict is lost, the pool goes on
    }
  }
}

void pool_core::record_failure(const std::exception_ptr& error) noexcept {
  try {
    breaker_.record_failure(error);
  } catch (...) {
  }
}

const timeout& pool_core::effective_limit(const timeout* limit, timeout& fallback) const {
  if (limit != nullptr) {
    return *limit;
  }
  if (settings_.acquire_timeout) {
    fallback = timeout(settings_.acquire_timeout->get());
  }
  return fallback;
}

void pool_core::set_breaker_strategy(std::shared_ptr<circuit_breaker_strategy> strategy) {
  // Nobody waits on the breaker itself: acquires consult it as they come, so closing it is all.
  breaker_.set_strategy(std::move(strategy));
}

void* pool_core::acquire(const timeout* limit, std::uint64_t& probe) {
  add_ref();  // a close() and the pool's destruction may happen while this call waits
  struct keep_alive {
    pool_core& core;
    ~keep_alive() { core.drop_ref(); }
  } keep{*this};
  if (closed_) {
    throw_closed("acquire");
  }
  probe = admit_or_throw();
  try {
    void* resource = obtain(limit, probe);
    if (probe != 0 && !breaker_.probe_in_flight(probe)) {
      probe = 0;  // the verdict is in already (a fresh resource was made): nothing to report
    }
    return resource;
  } catch (...) {
    if (probe != 0) {
      breaker_.abandon_probe(probe);  // a no-op when a verdict already cleared it
      probe = 0;
    }
    throw;
  }
}

void* pool_core::try_acquire(std::uint64_t& probe) {
  if (closed_) {
    throw_closed("try_acquire");
  }
  probe = admit_or_throw();
  if (!waiters_.empty() || idle_.empty()) {
    if (probe != 0) {
      breaker_.abandon_probe(probe);
      probe = 0;
    }
    return nullptr;
  }
  add_ref();
  struct keep_alive {
    pool_core& core;
    ~keep_alive() { core.drop_ref(); }
  } keep{*this};
  try {
    idle_entry taken = idle_.pop_front();
    ++active_;
    void* resource = vet(taken.resource, taken.since, nullptr, probe);
    if (probe != 0 && !breaker_.probe_in_flight(probe)) {
      probe = 0;
    }
    return resource;
  } catch (...) {
    if (probe != 0) {
      breaker_.abandon_probe(probe);
      probe = 0;
    }
    throw;
  }
}

void* pool_core::obtain(const timeout* limit, std::uint64_t probe) {
  // Somebody already waits: queue behind them, even if capacity looks free (it is promised).
  if (waiters_.empty()) {
    if (!idle_.empty()) {
      idle_entry taken = idle_.pop_front();
      ++active_;
      return vet(taken.resource, taken.since, limit, probe);
    }
    if (live() + reserved_ < settings_.max) {
      ++reserved_;
      return create_reserved();
    }
  }
  return wait_for_grant(limit, probe);
}

void* pool_core::wait_for_grant(const timeout* requested, std::uint64_t probe) {
  timeout fallback;
  const timeout& limit = effective_limit(requested, fallback);
  queued_waiter me(waiters_);
  try {
    waiters_.wait(me, limit, [this](queued_waiter& leaving) { pass_on(leaving); });
  } catch (const timeout_error&) {
    ++counters_.timeouts;
    throw;
  }
  switch (me.outcome) {
    case grant_resource: {
      void* resource = me.slot;
      if (closed_) {  // granted, then the pool closed before this waiter ran
        --active_;
        destroy_resource(resource);
        throw_closed("acquire");
      }
      // Handed over by a release (or a passed healthcheck), not idle: no validation.
      return vet(resource, std::chrono::steady_clock::time_point::max(), &limit, probe);
    }
    case grant_slot:
      if (closed_) {
        --reserved_;
        throw_closed("acquire");
      }
      if (probe == 0 && breaker_.state() != circuit_state::closed) {
        // The breaker opened while this one waited: do not hammer the backend; the slot goes to
        // the next waiter, which fails fast the same way.
        --reserved_;
        free_slots();
        throw_unavailable();
      }
      return create_reserved();
    default:
      throw_closed("acquire");
  }
}

bool pool_core::stale_after_idle(std::chrono::steady_clock::time_point since) const noexcept {
  if (settings_.validate_after_idle->is_max() ||
      since == std::chrono::steady_clock::time_point::max()) {
    return false;
  }
  return saturating_remaining(std::chrono::steady_clock::now(), since) >=
         settings_.validate_after_idle->get();
}

void pool_core::idle_push(void* resource) {
  // The clock is read only when validation after idle needs it.
  idle_.push_back({resource, settings_.validate_after_idle
                                 ? std::chrono::steady_clock::now()
                                 : std::chrono::steady_clock::time_point{}});
}

void* pool_core::vet(void* resource, std::chrono::steady_clock::time_point since,
                     const timeout* requested, std::uint64_t probe) {
  // resource counts in active_. The deadline is made at the first validation and kept for the
  // ones after it (a rejected resource is replaced by the next idle one).
  std::optional<timeout> fallback;  // engaged only when a validation needs the default deadline
  const timeout* bound = requested;
  for (;;) {
    bool accepted = true;
    bool validation_failed = false;
    if (stale(since)) {
      if (bound == nullptr) {
        bound = &effective_limit(nullptr, fallback.emplace());
      }
      const timeout& limit = *bound;
      std::exception_ptr failure;
      try {
        accepted = hooks_.validate(hooks_.context, resource, limit);
      } catch (const cancelled_error&) {
        --active_;
        destroy_resource(resource);  // it may be half-way through the check: do not reuse it
        free_slots();
        throw;
      } catch (const timeout_error&) {
        if (limit.bounded() && std::chrono::steady_clock::now() >= limit.deadline()) {
          // The acquire's own deadline passed during the check: its state is unknown, and the
          // acquirer gets the timeout it asked for (not the backend's fault: no verdict).
          --active_;
          destroy_resource(resource);
          free_slots();
          ++counters_.timeouts;
          throw;
        }
        failure = std::current_exception();  // the hook's own, shorter bound: a failure
        accepted = false;
      } catch (...) {
        failure = std::current_exception();
        accepted = false;
      }
      if (!accepted && !closed_) {
        validation_failed = true;
        ++counters_.validation_failures;
        if (!failure) {
          failure = std::make_exception_ptr(
              error(label() + ": an idle resource failed its validation on acquire; it was "
                              "destroyed"));
        }
        record_failure(failure);
      }
    }
    if (accepted && hooks_.before_acquire != nullptr) {
      try {
        accepted = hooks_.before_acquire(hooks_.context, resource);
      } catch (const cancelled_error&) {
        --active_;
        destroy_resource(resource);  // it may be half-way through the check: do not reuse it
        free_slots();
        throw;
      } catch (...) {
        accepted = false;
      }
    }
    if (closed_) {
      --active_;
      destroy_resource(resource);
      throw_closed("acquire");
    }
    if (accepted) {
      return resource;
    }
    // Rejected: its slot becomes ours, as a reservation, before anything suspends.
    --active_;
    ++reserved_;
    destroy_resource(resource);
    if (closed_) {
      --reserved_;
      throw_closed("acquire");
    }
    if (validation_failed && breaker_.state() != circuit_state::closed &&
        !(probe != 0 && breaker_.probe_in_flight(probe))) {
      // That failure opened the breaker (or it opened meanwhile): fail fast like the others
      // instead of trying the backend again; the slot goes to the next waiter.
      --reserved_;
      free_slots();
      throw_unavailable();
    }
    if (idle_.empty()) {
      return create_reserved();
    }
    idle_entry next = idle_.pop_front();
    resource = next.resource;
    since = next.since;
    ++active_;
    --reserved_;
    free_slots();  // the reservation we no longer need goes to a waiter, if any
  }
}

void* pool_core::create_reserved() {
  void* resource = nullptr;
  try {
    resource = hooks_.create(hooks_.context);
  } catch (const cancelled_error&) {
    --reserved_;
    free_slots();
    throw;
  } catch (...) {
    --reserved_;
    ++counters_.create_failures;
    record_failure(std::current_exception());
    free_slots();  // the next waiter gets to try
    throw;
  }
  --reserved_;
  ++active_;
  ++counters_.created;
  if (closed_) {
    --active_;
    destroy_resource(resource);
    throw_closed("acquire");
  }
  // A creation is the half-open probe's verdict (the backend answers again). While the breaker
  // is closed it is not reported: a backend that accepts connections but breaks every session
  // would otherwise interleave creation successes with release or validation failures, and a
  // consecutive-failures strategy would never open. Resources prove the backend healthy when
  // they come back from use or pass a healthcheck.
  if (breaker_.state() != circuit_state::closed) {
    record_success();
  }
  return resource;
}

void pool_core::hand_back(void* resource) noexcept {
  // resource counts in active_; to the oldest waiter it stays active (it is that waiter's now).
  if (queued_waiter* oldest = waiters_.front(); oldest != nullptr) {
    oldest->slot = resource;
    waiters_.grant_front(grant_resource);
    return;
  }
  --active_;
  idle_push(resource);
}

void pool_core::free_slots() noexcept {
  while (!closed_ && !waiters_.empty() && live() + reserved_ < settings_.max) {
    ++reserved_;
    waiters_.grant_front(grant_slot);
  }
}

void pool_core::pass_on(queued_waiter& leaving) noexcept {
  // A waiter granted something and then cancelled before it ran hands it to the next one.
  switch (leaving.outcome) {
    case grant_resource:
      if (closed_) {
        --active_;
        destroy_resource(leaving.slot);
      } else {
        hand_back(leaving.slot);
      }
      break;
    case grant_slot:
      --reserved_;
      free_slots();
      break;
    default:
      break;
  }
}

void pool_core::refuse_release(void* resource, std::uint64_t probe, bool vetoed,
                               std::exception_ptr failure) noexcept {
  if (vetoed && !closed_) {
    // A veto is the backend's resource failing its check (a lost session, a reset that
    // failed): a failure for the breaker, reported before the slot goes to a waiter, so that a
    // breaker it opens makes that waiter fail fast instead of creating.
    ++counters_.rejected_releases;
    if (!failure) {
      try {
        failure = std::make_exception_ptr(
            error(label() + ": before_release rejected a returned resource; it was destroyed"));
      } catch (...) {  // out of memory: the count above still says it happened
      }
    }
    record_failure(failure);
  } else if (probe != 0) {
    breaker_.abandon_probe(probe);
  }
  --active_;
  destroy_resource(resource);
  free_slots();  // a waiter creates a fresh one: nobody is left hanging
}

void pool_core::release(void* resource, std::uint64_t probe) noexcept {
  if (closed_) {
    --active_;
    destroy_resource(resource);
    if (probe != 0) {
      breaker_.abandon_probe(probe);
    }
    return;
  }
  if (hooks_.before_release != nullptr) {
    bool accepted = false;
    try {
      accepted = hooks_.before_release(hooks_.context, resource);
    } catch (const cancelled_error& cancellation) {
      cancel_again(cancellation);
      refuse_release(resource, probe, false, nullptr);  // no verdict on the resource
      return;
    } catch (...) {
      refuse_release(resource, probe, true, std::current_exception());
      return;
    }
    if (!accepted || closed_) {
      refuse_release(resource, probe, !accepted, nullptr);
      return;
    }
  }
  record_success();
  hand_back(resource);
}

void pool_core::discard(void* resource, std::uint64_t probe, std::exception_ptr error) noexcept {
  if (error) {
    record_failure(error);
  } else if (probe != 0) {
    breaker_.abandon_probe(probe);
  }
  --active_;
  destroy_resource(resource);
  free_slots();
}

void pool_core::destroy_resource(void* resource) noexcept {
  ++counters_.destroyed;
  try {
    hooks_.destroy(hooks_.context, resource);
  } catch (const cancelled_error& cancellation) {
    cancel_again(cancellation);
  } catch (...) {
    ++counters_.destroy_failures;
    try {
      destroy_errors_.push_back(std::current_exception());
    } catch (...) {  // out of memory: the count above still says it happened
    }
  }
}

void pool_core::close() {
  add_ref();
  struct keep_alive {
    pool_core& core;
    ~keep_alive() { core.drop_ref(); }
  } keep{*this};
  if (!closed_) {
    closed_ = true;
    if (maintenance_.valid()) {
      if (!maintenance_.done()) {
        maintenance_.cancel("pool closed");
      }
      maintenance_ = task<void>();  // breaks the cycle: its function object holds a reference
    }
    waiters_.grant_all(grant_closed);
    while (!idle_.empty()) {
      destroy_resource(idle_.pop_front().resource);
    }
  }
  if (destroy_errors_.empty()) {
    return;
  }
  std::vector<std::exception_ptr> errors = std::move(destroy_errors_);
  destroy_errors_.clear();
  std::string message = label() + ": " + std::to_string(errors.size()) +
                        " resource destructor(s) threw (every resource was still destroyed); "
                        "the first: " +
                        what_of(errors.front());
  throw resource_destroy_error(message, std::move(errors));
}

}  // namespace detail
}  // namespace weft

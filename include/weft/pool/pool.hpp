// weft::pool<T>: a bounded pool of reusable resources (database connections, sessions) with
// FIFO hand-off, a periodic healthcheck and a circuit breaker.
//
// Contract:
//   - Threads: a pool belongs to the scheduler it was made on; make it, acquire from it and
//     release into it only from that scheduler's thread (coroutines, and for release/close also
//     microtasks and callbacks there). A pool with min > 0 or a healthcheck interval must be made
//     inside a coroutine (it spawns its maintenance coroutine); std::logic_error otherwise.
//   - What may suspend: acquire() (waiting for a resource, running the factory or
//     before_acquire), close() and releases only when a destructor / before_release hook
//     suspends. try_acquire() never waits and never calls the factory. The constructor never
//     suspends and never calls the factory itself.
//   - Pre-warming: the constructor starts one background coroutine (it does not keep run()
//     going) that creates `min` resources right after the constructing coroutine next suspends,
//     and, with a healthcheck interval, every interval checks the idle resources (only those:
//     a leased one is never touched), destroys the unhealthy or throwing ones and refills up to
//     `min`. Acquires do not wait for pre-warming; they create what they need under max.
//   - acquire(limit): closed pool: pool_closed_error. Breaker open: service_unavailable_error
//     at once. Otherwise an idle resource (each vetted by before_acquire: false or throwing
//     discards it and tries the next, then a fresh one; with validate_after_idle, one idle that
//     long is first checked by validate, bounded by the acquire's limit, and one that fails is
//     destroyed and counted as a backend failure: when that opens the breaker the acquire fails
//     fast with service_unavailable_error instead of going on), else, under max, a new one (its
//     slot is reserved before the factory runs; a throwing factory's error propagates and the next
//     waiter gets the slot to try), else a FIFO wait: timeout_error when limit passes (the pool
//     is busy, not broken). A waiter served later still goes through before_acquire.
//   - Hand-off: a released resource goes straight to the oldest waiter (the releasing coroutine
//     cannot take it back by acquiring again); a waiter cancelled after being served (handed a
//     resource or a creation slot, before it ran) passes it on to the next waiter, and a deadline
//     that races a grant loses (the waiter keeps what it got), so nothing is stranded. The limit
//     bounds the wait in the queue, not the factory: bound a slow connect inside it. Releases
//     rejected by before_release (false or throwing) destroy the resource and give the slot to
//     the oldest waiter, which creates a fresh one (failing fast instead if the rejection opened
//     the breaker).
//   - Accounting: stats() count == idle + active, and count + reserved <= max at every instant
//     (reserved: creations in flight; active: leased, handed to a waiter not yet run, or held
//     by the pool for a moment while a healthcheck or before_acquire runs on it).
//   - Circuit breaker (circuit_breaker.hpp), always present, manual via breaker(). Reported as
//     failures: a factory that throws, a healthcheck that fails or throws, a validation after idle
//     that fails or throws, a release that before_release rejects (false or throwing: a resource
//     that can no longer be used is the backend failing, so a backend whose every resource fails
//     its check opens the breaker), a lease discarded with an error. As successes: a healthcheck
//     passed, a lease released, and a resource created by the half-open probe (creations while
//     the breaker is closed are not reported: with them, a backend that accepts connections but
//     breaks every session would alternate successes and failures and never open the breaker).
//     Cancellation is neither, and neither is a release into a closed pool. The strategy can be
//     swapped or removed on a live pool (set_breaker_strategy). should_try_recovery() is polled by
//     acquire() and try_acquire() while the breaker is open; when it says yes that acquire is the
//     half-open probe, and its outcome (the factory's, or its lease's release / discard(error))
//     decides. While the breaker is open the maintenance does not refill, and waiters granted a
//     creation slot fail with service_unavailable_error (passing the slot on) instead of calling
//     the factory.
//   - close(): idempotent. Wakes every waiter with pool_closed_error (one already granted a
//     resource destroys it, exactly once), destroys the idle resources (continuing past throwing
//     destructors), stops the maintenance; busy resources are destroyed when their leases end.
//     It throws resource_destroy_error with every destructor error not yet reported (also those
//     from leases ended earlier, where nobody could be told). The pool's destructor closes it and
//     prints such errors to stderr.
//   - Hooks may suspend and may throw, as described; a hook returning false or throwing is the
//     same verdict, except that a cancellation is never swallowed. The deadlock report shows a
//     pool's waiters as "pool(idle I, active A, reserved R, max M)".
//   - Two ways to build one: pool_options<T> with callables (lambdas, any signature-compatible
//     object), or pool_c_options<T> with plain function pointers and a void* context (for C
//     callers and other libraries' bindings). Both reach a hook through the same two indirect
//     calls (the core's type-erased thunk, then std::function or the function pointer), and
//     allocate nothing per acquire (bench suite `pool`: acquire_release_uncontended vs _c).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "weft/error.hpp"

#include "weft/pool/circuit_breaker.hpp"
#include "weft/pool/detail/pool_core.hpp"
#include "weft/pool/lease.hpp"

namespace weft {

// How a pool makes, checks and destroys its resources (C++ callables), besides the pool's settings.
template <class T>
struct pool_options : pool_settings {
  // Makes a resource. May suspend (connect) and may throw (the error reaches the acquirer).
  std::function<T()> factory;
  // Runs on a resource before it is freed (close a connection). Optional; may throw.
  std::function<void(T&)> destructor;
  // Periodic check of idle resources; false or throwing: replaced. Needed with an interval.
  std::function<bool(T&)> healthcheck;
  // Vets a resource before handing it out; false (or throwing) discards it and tries again.
  std::function<bool(T&)> before_acquire;
  // Vets a resource given back; false (or throwing) destroys it instead of keeping it.
  std::function<bool(T&)> before_release;
  // Validation after idle (pool_settings::validate_after_idle): checks a resource that sat idle
  // that long before it is handed out; false or throwing: destroyed, a failure for the breaker.
  // limit is the acquire's deadline: bound the check by it (a timeout_error once it has passed
  // fails the acquire with it; one thrown earlier counts as a failed check).
  std::function<bool(T&, const timeout&)> validate;
};

// The C-compatible way: plain functions and one context pointer passed back to each. Unset
// optional hooks are null. The factory's result is moved into the pool's own storage.
template <class T>
struct pool_c_options : pool_settings {
  void* context = nullptr;                // passed back to every hook
  T (*factory)(void* context) = nullptr;  // makes a resource (pool_options::factory)
  void (*destructor)(void* context, T* resource) = nullptr;      // as pool_options::destructor
  bool (*healthcheck)(void* context, T* resource) = nullptr;     // as pool_options::healthcheck
  bool (*before_acquire)(void* context, T* resource) = nullptr;  // as pool_options::before_acquire
  bool (*before_release)(void* context, T* resource) = nullptr;  // as pool_options::before_release
  // As pool_options::validate.
  bool (*validate)(void* context, T* resource, const timeout& limit) = nullptr;
};

namespace detail {

// Adapters from either kind of options to the core's type-erased hooks. A resource is a T in its
// own heap cell (created once per resource, never per acquire).
template <class T>
struct callable_hooks {
  std::function<T()> factory;
  std::function<void(T&)> destructor;
  std::function<bool(T&)> healthcheck;
  std::function<bool(T&)> before_acquire;
  std::function<bool(T&)> before_release;
  std::function<bool(T&, const timeout&)> validate;

  static callable_hooks& of(void* context) { return *static_cast<callable_hooks*>(context); }
  static T& resource(void* cell) { return *static_cast<T*>(cell); }

  static resource_hooks make(pool_options<T>& options) {
    auto* self =
        new callable_hooks{std::move(options.factory),        std::move(options.destructor),
                           std::move(options.healthcheck),    std::move(options.before_acquire),
                           std::move(options.before_release), std::move(options.validate)};
    resource_hooks hooks;
    hooks.context = self;
    if (self->factory) {
      hooks.create = [](void* context) -> void* { return new T(of(context).factory()); };
      hooks.destroy = [](void* context, void* cell) {
        std::unique_ptr<T> owned(static_cast<T*>(cell));  // freed even if the destructor throws
        if (of(context).destructor) {
          of(context).destructor(*owned);
        }
      };
    }
    if (self->healthcheck) {
      hooks.healthcheck = [](void* context, void* cell) {
        return of(context).healthcheck(resource(cell));
      };
    }
    if (self->before_acquire) {
      hooks.before_acquire = [](void* context, void* cell) {
        return of(context).before_acquire(resource(cell));
      };
    }
    if (self->before_release) {
      hooks.before_release = [](void* context, void* cell) {
        return of(context).before_release(resource(cell));
      };
    }
    if (self->validate) {
      hooks.validate = [](void* context, void* cell, const timeout& limit) {
        return of(context).validate(resource(cell), limit);
      };
    }
    hooks.drop_context = [](void* context) noexcept {
      delete static_cast<callable_hooks*>(context);
    };
    return hooks;
  }
};

template <class T>
struct c_hooks {
  pool_c_options<T> options;

  static pool_c_options<T>& of(void* context) { return static_cast<c_hooks*>(context)->options; }

  static resource_hooks make(const pool_c_options<T>& options) {
    resource_hooks hooks;
    hooks.context = new c_hooks{options};
    if (options.factory != nullptr) {
      hooks.create = [](void* context) -> void* {
        return new T(of(context).factory(of(context).context));
      };
      hooks.destroy = [](void* context, void* cell) {
        std::unique_ptr<T> owned(static_cast<T*>(cell));
        if (of(context).destructor != nullptr) {
          of(context).destructor(of(context).context, owned.get());
        }
      };
    }
    if (options.healthcheck != nullptr) {
      hooks.healthcheck = [](void* context, void* cell) {
        return of(context).healthcheck(of(context).context, static_cast<T*>(cell));
      };
    }
    if (options.before_acquire != nullptr) {
      hooks.before_acquire = [](void* context, void* cell) {
        return of(context).before_acquire(of(context).context, static_cast<T*>(cell));
      };
    }
    if (options.before_release != nullptr) {
      hooks.before_release = [](void* context, void* cell) {
        return of(context).before_release(of(context).context, static_cast<T*>(cell));
      };
    }
    if (options.validate != nullptr) {
      hooks.validate = [](void* context, void* cell, const timeout& limit) {
        return of(context).validate(of(context).context, static_cast<T*>(cell), limit);
      };
    }
    hooks.drop_context = [](void* context) noexcept { delete static_cast<c_hooks*>(context); };
    return hooks;
  }
};

// std::logic_error for a lease given to a pool it does not come from.
[[noreturn]] void throw_foreign_lease(const std::string& pool_label);
[[noreturn]] void throw_moved_from_pool();
// The pool's destructor: close, and print destructor errors nobody else can see.
void close_on_destruction(pool_core& core) noexcept;

}  // namespace detail

template <class T>
class pool {
 public:
  using value_type = T;  // the pooled type

  // A pool whose resources options' hooks make and check (C++ callables, or C function pointers
  // with pool_c_options).
  explicit pool(pool_options<T> options)
      : core_(detail::pool_core::create(detail::callable_hooks<T>::make(options),
                                        std::move(static_cast<pool_settings&>(options)))) {}
  explicit pool(const pool_c_options<T>& options)
      : core_(detail::pool_core::create(detail::c_hooks<T>::make(options),
                                        static_cast<const pool_settings&>(options))) {}
  pool(pool&& other) noexcept : core_(std::exchange(other.core_, nullptr)) {}
  pool& operator=(pool&&) = delete;
  pool(const pool&) = delete;
  pool& operator=(const pool&) = delete;
  ~pool() {
    if (core_ != nullptr) {
      detail::close_on_destruction(*core_);
      core_->drop_ref();
    }
  }

  // Waits at most the options' acquire_timeout (forever when unset).
  lease<T> acquire() { return acquire_within(nullptr); }
  lease<T> acquire(const timeout& limit) { return acquire_within(&limit); }
  // An idle resource if one is free and nobody waits; nullopt otherwise. Never waits, never
  // creates. pool_closed_error / service_unavailable_error like acquire().
  std::optional<lease<T>> try_acquire() {
    std::uint64_t probe = 0;
    void* resource = core().try_acquire(probe);
    if (resource == nullptr) {
      return std::nullopt;
    }
    core_->add_ref();
    return lease<T>(core_, static_cast<T*>(resource), probe);
  }
  // lease.release(), checking that the lease comes from this pool (std::logic_error if not).
  void release(lease<T>& borrowed) {
    if (!borrowed.valid()) {
      detail::throw_empty_lease("release");
    }
    if (borrowed.core() != core_) {
      detail::throw_foreign_lease(core().name());
    }
    borrowed.release();
  }
  // Closes the pool (see above): closed() says whether it was; stats() counts resources and waits;
  // breaker() is the circuit breaker, for manual control.
  void close() { core().close(); }
  bool closed() const { return core().closed(); }
  pool_stats stats() const { return core().stats(); }
  circuit_breaker& breaker() { return core().breaker(); }
  // Replaces the breaker's strategy on the live pool, or removes it (null: the breaker never
  // opens by itself; breaker() still gives manual control). The breaker closes, so acquires go
  // through again; a half-open probe in flight becomes an ordinary request (see
  // circuit_breaker.hpp).
  void set_breaker_strategy(std::shared_ptr<circuit_breaker_strategy> strategy) {
    core().set_breaker_strategy(std::move(strategy));
  }

 private:
  detail::pool_core& core() const {
    if (core_ == nullptr) {
      detail::throw_moved_from_pool();
    }
    return *core_;
  }
  lease<T> acquire_within(const timeout* limit) {
    std::uint64_t probe = 0;
    void* resource = core().acquire(limit, probe);
    core_->add_ref();
    return lease<T>(core_, static_cast<T*>(resource), probe);
  }

  detail::pool_core* core_;
};

}  // namespace weft

// FIFO hand-off queue: see include/weft/sync/waiter_queue.hpp.
#include "weft/sync/detail/waiter_queue.hpp"

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "sched/deadline_wait.hpp"
#include "sched/scheduler_core.hpp"
#include "weft/error.hpp"

namespace weft::detail {

bool queued_waiter::arm(coroutine& waiter) {
  if (granted_) {
    return false;
  }
  coroutine_ = &waiter;
  queue_.link(*this);
  return true;
}

void queued_waiter::disarm() noexcept {
  if (link_.linked()) {
    queue_.unlink(*this);  // left by timeout or cancel before any grant reached it
  }
}

void queued_waiter::describe(std::string& out) const { queue_.describe(out); }

waiter_queue::~waiter_queue() {
  if (size_ != 0) {
    std::string what;
    describe(what);
    std::fprintf(stderr,
                 "weft: %s destroyed while %zu coroutines still wait on it; the object must "
                 "outlive every wait on it\n",
                 what.c_str(), size_);
    std::abort();
  }
}

queued_waiter* waiter_queue::grant_front(std::uint8_t outcome) noexcept {
  queued_waiter* waiter = front();
  if (waiter == nullptr) {
    return nullptr;
  }
  unlink(*waiter);
  waiter->granted_ = true;
  waiter->outcome = outcome;
  // The waiter may already be ready (its deadline fired, or it was cancelled, and it has not run
  // yet): then this wake is ignored and wait_until_granted() sees granted_ when it runs.
  // A queue belongs to one scheduler's thread, so the waiter's scheduler is this thread's (the
  // direct call saves two out-of-line hops on every hand-off).
  scheduler_core* core = current_core();
  if (core != nullptr) {
    core->wake(*waiter->coroutine_, waiter);
  } else {
    detail::wake_coroutine(waiter->coroutine_->owner(), *waiter->coroutine_, *waiter);
  }
  return waiter;
}

std::size_t waiter_queue::grant_all(std::uint8_t outcome) noexcept {
  std::size_t woken = 0;
  while (grant_front(outcome) != nullptr) {
    ++woken;
  }
  return woken;
}

void waiter_queue::wait_until_granted(queued_waiter& waiter, const timeout& limit) {
  scheduler_core* core = current_core();
  coroutine* self = core == nullptr ? nullptr : core->current();
  if (self == nullptr || self->state() != coroutine_state::running) [[unlikely]] {
    std::string what = "weft: waiting on ";
    describe(what);
    if (self != nullptr) {
      core->waiter_or_throw(what.c_str());  // a microtask, reactor callback or switch handler
    }
    throw std::logic_error(what +
                           " outside a coroutine; call it from weft::run's main or from a "
                           "coroutine started with weft::spawn");
  }
  if (!limit.limited()) {
    // The hand-off path: arm in place and park (a tail call: nothing runs here after the
    // switch). A cancel raised while parked leaves the waiter linked; ~queued_waiter unlinks it.
    core->check_cancel(*self);
    waiter.coroutine_ = self;
    link(waiter);
    return core->park(*self, waiter);
  }
  limit_wait limits(*core, *self, limit);
  wait_source& fired = limits.wait_with(waiter);
  // A grant that raced the limit wins: the capacity is ours, keep it.
  if (limits.fired(fired) && !waiter.granted()) {
    limits.raise(fired, [&] {
      std::string what = "waiting on ";
      describe(what);
      return what;
    });
  }
}

}  // namespace weft::detail

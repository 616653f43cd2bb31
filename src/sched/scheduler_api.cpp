// weft::scheduler, the public surface of the scheduler: run, spawning, waits and wakes for the
// layers above, cancel, graceful shutdown, current_scheduler (see
// include/weft/sched/scheduler.hpp).
#include <stdexcept>
#include <string>
#include <utility>

#include "context/overflow.hpp"
#include "sched/scheduler_core.hpp"
#include "weft/sched/scheduler.hpp"

namespace weft {

// =============================================================================================
// public surface

#if defined(WEFT_NATIVE_SWITCH)
extern "C" void weft_resume_hook() {
  detail::scheduler_core* core = detail::this_thread_core;
  core->after_resume(*core->current());
}
#endif

void microtask_handle::state::finish() noexcept {
  if (finished) {
    return;
  }
  finished = true;
  handler.reset();
  if (cleanup) {
    try {
      cleanup();
    } catch (...) {
      if (auto* core = detail::current_core()) {
        core->report_uncaught(std::current_exception());
      }
    }
    cleanup.reset();
  }
}

void microtask_handle::cancel() noexcept {
  if (state_) {
    state_->cancelled = true;
  }
}

scheduler::scheduler(run_options options) : options_(std::move(options)) {}

scheduler::~scheduler() = default;

const scheduler_stats& scheduler::stats() const noexcept {
  return core_ != nullptr ? core_->stats() : last_stats_;
}

void scheduler::run_main(detail::coroutine& main) {
  if (detail::this_thread_core != nullptr) {
    throw std::logic_error(
        "weft::run called while a weft scheduler is already running on this thread; use "
        "weft::spawn to start more work, or weft::spawn_thread for another scheduler");
  }
  core_ = std::make_unique<detail::scheduler_core>(*this, options_);
  detail::this_thread_core = core_.get();
  struct reset {
    scheduler& self;
    ~reset() {
      self.last_stats_ = self.core_->stats();
      detail::this_thread_core = nullptr;
      self.core_.reset();
    }
  } on_exit{*this};
  detail::overflow_guard guard(core_.get(), [](const void* owner) noexcept {
    const auto* core = static_cast<const detail::scheduler_core*>(owner);
    const detail::coroutine* running = core->current();
    if (running == nullptr) {
      return detail::running_on_stack{};
    }
    return detail::running_on_stack{&running->stack(), running->id(), running->name().c_str()};
  });
  main.is_main_ = true;
  main.add_ref();  // the scheduler's reference; the creation reference belongs to run()'s task
  core_->enqueue_new(main);
  core_->run_from_root();
  core_->close_and_report();
}

void detail::enqueue_coroutine(scheduler& owner, coroutine& spawned) {
  owner.core_->enqueue_new(spawned);
}

void detail::set_stack_aside(scheduler& owner, coroutine& spawned) {
  try {
    owner.core_->set_stack_aside(spawned);
  } catch (...) {
    spawned.release();  // the only reference: nobody saw it yet
    throw;
  }
}

void detail::drop_stack_set_aside(scheduler& owner, coroutine& spawned) noexcept {
  owner.core_->drop_stack_set_aside(spawned);
}

void detail::wake_coroutine(scheduler& owner, coroutine& waiter, wait_source& by) noexcept {
  owner.core_->wake(waiter, &by);
}

void scheduler::yield() { core_->yield(); }

void detail::cancel_coroutine(scheduler& owner, coroutine& coroutine, std::string reason) {
  auto& core = owner.core_;
  if (coroutine.done()) {
    return;
  }
  if (core == nullptr || detail::this_thread_core != core.get()) {
    throw std::logic_error("weft: task " + std::to_string(coroutine.id()) +
                           " cancelled from a thread that does not run its scheduler; cancel "
                           "it from a coroutine of the scheduler that spawned it");
  }
  core->cancel(coroutine, std::move(reason));
}

[[gnu::hot]] detail::coroutine* detail::running_coroutine(const scheduler& owner) noexcept {
  return owner.core_ != nullptr ? owner.core_->current() : nullptr;
}

void scheduler::report_uncaught(std::exception_ptr error) noexcept {
  if (core_ != nullptr) {
    core_->report_uncaught(std::move(error));
  }
}

microtask_handle scheduler::add_microtask(unique_function<void()> fn,
                                          unique_function<void()> cleanup) {
  if (core_ == nullptr || detail::this_thread_core != core_.get()) {
    throw std::logic_error(
        "weft: add_microtask called outside the scheduler's run; call it from a coroutine "
        "of a running scheduler");
  }
  return core_->add_microtask(std::move(fn), std::move(cleanup));
}

void scheduler::graceful_shutdown() {
  if (core_ == nullptr) {
    throw std::logic_error("weft: graceful_shutdown called on a scheduler that is not running");
  }
  core_->graceful_shutdown();
}

bool scheduler::shutting_down() const noexcept {
  return core_ != nullptr && core_->shutting_down();
}

scheduler& current_scheduler() {
  if (detail::this_thread_core == nullptr) {
    throw std::logic_error(
        "weft: no scheduler is running on this thread; this call must be made from inside "
        "weft::run (its main coroutine or a coroutine it spawned)");
  }
  return detail::this_thread_core->owner();
}

scheduler* current_scheduler_or_null() noexcept {
  return detail::this_thread_core != nullptr ? &detail::this_thread_core->owner() : nullptr;
}

std::string_view current_driver() {
  if (detail::this_thread_core == nullptr) {
    throw std::logic_error(
        "weft::current_driver called with no scheduler running on this thread; call it from "
        "inside weft::run (its main coroutine or a coroutine it spawned)");
  }
  return detail::this_thread_core->driver().name();
}

[[gnu::hot]] std::chrono::steady_clock::time_point loop_time() noexcept {
  const detail::scheduler_core* core = detail::this_thread_core;
  return core != nullptr ? core->last_poll() : std::chrono::steady_clock::now();
}

void graceful_shutdown() { current_scheduler().graceful_shutdown(); }

}  // namespace weft

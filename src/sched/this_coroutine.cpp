// The calls a coroutine makes about itself, and the coroutine control block's out-of-line
// members.
#include <chrono>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>

#include "sched/deadline_wait.hpp"
#include "sched/scheduler_core.hpp"
#include "weft/error.hpp"
#include "weft/sched/this_coroutine.hpp"
#include "weft/sched/timeout.hpp"

namespace weft {
namespace detail {
namespace {

scheduler_core& core_or_throw(const char* operation) {
  scheduler_core* core = current_core();
  if (core == nullptr) {
    throw std::logic_error(std::string("weft: ") + operation +
                           " called outside a coroutine; call it from weft::run's main or "
                           "from a coroutine started with weft::spawn");
  }
  return *core;
}

coroutine& self_or_throw(const char* operation) {
  return core_or_throw(operation).current_or_throw(operation);
}

}  // namespace

void enter_protected() { self_or_throw("weft::protect").enter_protected(); }

void leave_protected() noexcept {
  if (scheduler_core* core = current_core(); core != nullptr && core->current() != nullptr) {
    core->current()->leave_protected();
  }
}

// --- the control block -----------------------------------------------------------------------

coroutine::coroutine(scheduler& owner, std::string&& name, weft::priority priority,
                     const std::source_location& spawned_at) noexcept
    : owner_(&owner), priority_(priority), name_(std::move(name)), spawned_at_(spawned_at) {
  // The saved stack pointer, null until the coroutine first runs: the scheduler's prefetch of a
  // successor's stack reads it before then (scheduler_core::prefetch_successors).
  context_.registers[0] = nullptr;
}

coroutine::~coroutine() { delete handlers_; }

void coroutine::release_last() noexcept {
  if (error_ && !error_observed_ && !cancelled_) {
    // The last handle went away and nobody ever looked at the exception.
    error_observed_ = true;
    scheduler_core* core = current_core();
    if (core != nullptr && &core->owner() == owner_) {
      core->report_uncaught(error_);
    } else {
      try {
        std::rethrow_exception(error_);
      } catch (const std::exception& unobserved) {
        std::fprintf(stderr, "weft: task %llu failed and nobody awaited it: %s\n",
                     static_cast<unsigned long long>(id_), unobserved.what());
      } catch (...) {
        std::fprintf(stderr, "weft: task %llu failed with a non-std exception nobody awaited\n",
                     static_cast<unsigned long long>(id_));
      }
    }
  }
  destroy();
}

switch_handlers& coroutine::handlers() {
  if (handlers_ == nullptr) {
    handlers_ = new switch_handlers();
  }
  return *handlers_;
}

std::string timed_out_after(const timeout& limit) {
  auto milliseconds = std::chrono::duration_cast<std::chrono::milliseconds>(limit.limit()).count();
  if (limit.limit() < clock::duration::zero()) {
    if (limit.deadline() == clock::time_point::min()) {
      return "timed out: its deadline (time_point::min()) had already passed when the wait began";
    }
    return "timed out: its deadline had already passed " + std::to_string(-milliseconds) +
           " ms before the wait began";
  }
  return "timed out after " + std::to_string(milliseconds) + " ms";
}

}  // namespace detail

void yield() {
  detail::scheduler_core* core = detail::current_core();
  if (core == nullptr) [[unlikely]] {
    throw std::logic_error(
        "weft::yield called outside a coroutine; call it from weft::run's main or from a "
        "coroutine started with weft::spawn");
  }
  core->yield_fast();
}

void sleep_until(clock::time_point deadline) {
  detail::scheduler_core& core = detail::core_or_throw("weft::sleep_until");
  detail::coroutine& self = core.waiter_or_throw("weft::sleep_until");
  detail::deadline_wait until(core, deadline, self.background());
  detail::wait_source* sources[] = {&until};
  core.wait(sources, 1);
}

namespace this_coroutine {

std::uint64_t id() { return detail::self_or_throw("weft::this_coroutine::id").id(); }

const std::string& name() { return detail::self_or_throw("weft::this_coroutine::name").name(); }

bool is_main() { return detail::self_or_throw("weft::this_coroutine::is_main").is_main(); }

bool cancel_requested() {
  return detail::self_or_throw("weft::this_coroutine::cancel_requested").cancel_requested();
}

void on_enter(std::function<bool()> handler) {
  detail::self_or_throw("weft::this_coroutine::on_enter")
      .handlers()
      .enter.push_back(std::move(handler));
}

void on_leave(std::function<bool()> handler) {
  detail::self_or_throw("weft::this_coroutine::on_leave")
      .handlers()
      .leave.push_back(std::move(handler));
}

void on_finish(std::function<bool()> handler) {
  detail::coroutine& self = detail::self_or_throw("weft::this_coroutine::on_finish");
  if (!handler) {
    detail::throw_empty_finish_handler();
  }
  self.handlers().finish.push_back(std::move(handler));
}

}  // namespace this_coroutine
}  // namespace weft

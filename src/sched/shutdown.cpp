// The end of a run: graceful shutdown, uncaught errors, deadlock detection and its report, and
// closing the scheduler (see include/weft/sched/scheduler.hpp for the contract).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <source_location>
#include <stdexcept>
#include <string>
#include <utility>

#include "sched/scheduler_core.hpp"
#include "weft/error.hpp"

namespace weft {
namespace detail {
namespace {

// Deadlock cancellation rounds before giving up on coroutines that keep waiting again.
constexpr std::uint32_t deadlock_round_limit = 1000;

std::string where(const std::source_location& location) {
  return std::string(location.file_name()) + ":" + std::to_string(location.line()) + " (in " +
         location.function_name() + ")";
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// shutdown, errors, deadlock

void scheduler_core::graceful_shutdown() {
  shutting_down_ = true;
  live_.for_each([this](list_node& node) {
    coroutine* alive = static_cast<coroutine::live_link&>(node).self;
    cancel(*alive, "graceful shutdown");
  });
}

void scheduler_core::report_uncaught(std::exception_ptr error) noexcept {
  if (!first_uncaught_) {
    first_uncaught_ = std::move(error);
  }
  graceful_shutdown();
}

void scheduler_core::handle_deadlock() {
  ++stats_.deadlocks;
  if (++deadlock_rounds_ > deadlock_round_limit) {
    std::fprintf(stderr,
                 "weft: coroutines keep waiting after %u rounds of deadlock cancellation (they "
                 "catch cancelled_error and wait again); aborting\n%s",
                 deadlock_round_limit, deadlock_report(suspended_).c_str());
    std::abort();
  }
  if (!deadlocked_) {
    deadlocked_ = true;
    deadlock_waiting_ = suspended_;
    deadlock_report_ = deadlock_report(suspended_);
    if (options_.deadlock_reporter) {
      try {
        options_.deadlock_reporter(deadlock_report_);
      } catch (...) {
        report_uncaught(std::current_exception());
      }
    } else {
      std::fputs(deadlock_report_.c_str(), stderr);
    }
  }
  live_.for_each([this](list_node& node) {
    coroutine* alive = static_cast<coroutine::live_link&>(node).self;
    if (alive->state_ == coroutine_state::suspended) {
      cancel(*alive, "deadlock", true);
    }
  });
}

std::string scheduler_core::deadlock_report(std::size_t waiting) const {
  std::string report =
      "weft: deadlock: no active coroutines, " + std::to_string(waiting) + " coroutines waiting:\n";
  live_.for_each([&](list_node& node) {
    const coroutine* alive = static_cast<coroutine::live_link&>(node).self;
    if (alive->state_ != coroutine_state::suspended) {
      return;
    }
    report += "  coroutine " + std::to_string(alive->id_);
    report += alive->name_.empty() ? std::string(" (unnamed)") : " '" + alive->name_ + "'";
    report +=
        alive->is_main_ ? " started by weft::run" : " spawned at " + where(alive->spawned_at_);
    report += "\n    waits on: ";
    for (std::size_t index = 0; index < alive->waiting_count_; ++index) {
      if (index > 0) {
        report += ", or ";
      }
      alive->waiting_on_[index]->describe(report);
    }
    report += "\n";
  });
  return report;
}

// ---------------------------------------------------------------------------------------------
// run

void scheduler_core::run_from_root() {
  coroutine* first = with_stack(pick_next());
  if (first != nullptr) {
    switch_to(&root_, *first);
  }
}

void scheduler_core::close_and_report() {
  stats();
  reactor_->close();
  if (deadlocked_) {
    throw deadlock_error(deadlock_waiting_, deadlock_report_);
  }
  if (first_uncaught_) {
    std::rethrow_exception(first_uncaught_);
  }
}

const scheduler_stats& scheduler_core::stats() noexcept {
  stats_.stacks_allocated = stacks_.allocated();
  stats_.stacks_guarded = stacks_.guarded();
  stats_.stacks_pooled = stacks_.pooled();
  return stats_;
}

microtask_handle scheduler_core::add_microtask(unique_function<void()> fn,
                                               unique_function<void()> cleanup) {
  if (!fn) {
    throw std::invalid_argument("weft: add_microtask needs a callable handler, got an empty one");
  }
  auto task = std::make_shared<microtask_handle::state>();
  task->handler = std::move(fn);
  task->cleanup = std::move(cleanup);
  microtasks_.push_back(task);
  slow_tick_ = true;
  return microtask_handle(std::move(task));
}

}  // namespace detail
}  // namespace weft

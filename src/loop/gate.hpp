// A gate: the one wait source the loop parks coroutines on (the dispatcher while idle, the
// standalone run's keeper, a suspended coroutine, the takeover of a run()).
//
// signal() wakes the coroutine parked on it, or, when none is, lets the next wait through at
// once. It carries no count and no value: every user re-checks its own condition after waking,
// so a signal that finds the waiter already woken by something else loses nothing.
#pragma once

#include <string>

#include "sched/scheduler_core.hpp"
#include "weft/sched/detail/coroutine.hpp"

namespace weft::loop::detail {

class gate final : public weft::detail::wait_source {
 public:
  explicit gate(const char* what) noexcept : what_(what) {}
  gate(const gate&) = delete;
  gate& operator=(const gate&) = delete;

  bool arm(weft::detail::coroutine& waiter) override {
    if (open_) {
      open_ = false;
      return false;
    }
    waiter_ = &waiter;
    return true;
  }
  void disarm() noexcept override { waiter_ = nullptr; }
  void describe(std::string& out) const override { out += what_; }

  void signal() noexcept {
    if (waiter_ != nullptr) {
      // A parked waiter means its scheduler runs on this thread: the gate's users are all
      // bound to the loop's thread.
      weft::detail::current_core()->wake(*waiter_, this);
    } else {
      open_ = true;
    }
  }
  // Parks the running coroutine until signal() (a cancellation point).
  void wait() {
    weft::detail::wait_source* sources[] = {this};
    weft::detail::current_core()->wait(sources, 1);
  }
  bool parked() const noexcept { return waiter_ != nullptr; }
  void close() noexcept { open_ = false; }

 private:
  weft::detail::coroutine* waiter_ = nullptr;
  const char* what_;
  bool open_ = false;
};

}  // namespace weft::loop::detail

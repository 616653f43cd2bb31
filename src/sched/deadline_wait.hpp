// A wait source that fires at a deadline (see scheduler.hpp for the wait protocol).
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <span>
#include <string>
#include <vector>

#include "reactor/timer_queue.hpp"
#include "sched/scheduler_core.hpp"
#include "weft/error.hpp"
#include "weft/sched/this_coroutine.hpp"
#include "weft/sched/timeout.hpp"

namespace weft::detail {

// Waiting for a deadline: one entry in the reactor's timer heap. Used by sleeps and as the
// timeout half of any wait with a time limit. A background deadline does not keep the reactor
// alive (a coroutine sleeping in the background does not count against deadlock detection).
class deadline_wait final : public wait_source {
 public:
  deadline_wait(scheduler_core& core, clock::time_point deadline, bool background = false)
      : core_(core) {
    entry_.deadline = deadline;
    entry_.background = background;
    entry_.fire = &deadline_wait::on_fire;
    entry_.owner = this;
  }

  bool arm(coroutine& waiter) override {
    if (entry_.deadline <= clock::now()) {
      return false;
    }
    waiter_ = &waiter;
    core_.driver().add_timer(entry_);
    return true;
  }
  void disarm() noexcept override { core_.driver().remove_timer(entry_); }
  void describe(std::string& out) const override {
    out += entry_.background ? "background " : "";
    if (entry_.deadline == clock::time_point::max()) {
      out += "deadline that never comes";
      return;
    }
    auto remaining = std::chrono::duration_cast<std::chrono::milliseconds>(
        saturating_remaining(entry_.deadline, clock::now()));
    out += "deadline in " + std::to_string(remaining.count()) + " ms";
  }

 private:
  static void on_fire(timer_entry& entry) {
    deadline_wait* self = static_cast<sleep_entry&>(entry).owner;
    self->core_.wake(*self->waiter_, self);
  }

  struct sleep_entry : timer_entry {
    deadline_wait* owner = nullptr;
  };

  scheduler_core& core_;
  coroutine* waiter_ = nullptr;
  sleep_entry entry_{};
};

// Waits on sources and, when limit is bounded, on its deadline too. Returns the source that
// fired; throws timeout_error "weft: <describe()> timed out after N ms" when the deadline came
// first (describe is only called then).
template <class Describe>
wait_source& wait_with_limit(scheduler_core& core, coroutine& self,
                             std::span<wait_source* const> sources, const timeout& limit,
                             Describe&& describe) {
  if (!limit.bounded()) {
    return core.wait(sources.data(), sources.size());
  }
  deadline_wait until(core, limit.deadline(), self.background());
  // Every I/O call with a time limit comes through here: no allocation for the usual handful.
  constexpr std::size_t inline_sources = 8;
  std::array<wait_source*, inline_sources> few;
  std::vector<wait_source*> many;
  wait_source** all = few.data();
  if (sources.size() >= inline_sources) {
    many.resize(sources.size() + 1);
    all = many.data();
  }
  std::copy(sources.begin(), sources.end(), all);
  all[sources.size()] = &until;
  wait_source& fired = core.wait(all, sources.size() + 1);
  if (&fired == &until) {
    throw timeout_error("weft: " + std::string(describe()) + " " + timed_out_after(limit));
  }
  return fired;
}

}  // namespace weft::detail

// A wait source that fires at a deadline (see scheduler.hpp for the wait protocol).
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

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

// The limits of one wait (see timeout.hpp) as wait sources to arm after what the wait is for:
// the deadline when the limit is bounded, the token's watch when it has one. Arming them last
// means that a wait whose event is ready returns it even when a limit has passed too.
class limit_wait {
 public:
  limit_wait(scheduler_core& core, coroutine& self, const timeout& limit)
      : core_(core),
        limit_(limit),
        deadline_(core, limit.bounded() ? limit.deadline() : clock::time_point::max(),
                  self.background()) {
    if (limit.bounded()) {
      sources_[count_++] = &deadline_;
    }
    if (const cancel_token* token = detail::cancel_token_of(limit); token != nullptr) {
      watch_ = token->watch(&storage_);
      sources_[count_++] = watch_;
    }
  }
  limit_wait(const limit_wait&) = delete;
  limit_wait& operator=(const limit_wait&) = delete;
  ~limit_wait() {
    if (watch_ != nullptr) {
      detail::cancel_token_of(limit_)->unwatch(watch_);
    }
  }

  // Waits on what the wait is for and on the limits; returns the source that fired (the
  // caller checks fired() and whether its event raced the limit and won).
  wait_source& wait_with(wait_source& event) {
    std::array<wait_source*, 3> all{&event};
    std::copy(sources_.begin(), sources_.begin() + static_cast<std::ptrdiff_t>(count_),
              all.begin() + 1);
    return core_.wait(all.data(), 1 + count_);
  }

  // The sources to arm (0, 1 or 2).
  std::span<wait_source* const> sources() const noexcept { return {sources_.data(), count_}; }
  // Whether fired is one of the limit's sources (the wait is over without its event).
  bool fired(const wait_source& fired) const noexcept {
    return &fired == &deadline_ || (watch_ != nullptr && &fired == watch_);
  }
  // Throws what ends the wait when fired is one of the limit's sources: timeout_error
  // "weft: WHAT timed out after N ms" for the deadline, cancelled_error for the token.
  template <class Describe>
  [[noreturn]] void raise(const wait_source& fired, Describe&& describe) const {
    if (&fired == &deadline_) {
      throw timeout_error("weft: " + std::string(describe()) + " " + timed_out_after(limit_));
    }
    throw wait_cancelled_error(std::string(describe()) + " cancelled by its cancel token: " +
                               detail::cancel_token_of(limit_)->reason());
  }

 private:
  scheduler_core& core_;
  const timeout& limit_;
  deadline_wait deadline_;
  wait_source* watch_ = nullptr;
  std::array<wait_source*, 2> sources_{};
  std::size_t count_ = 0;
  alignas(std::max_align_t) std::byte storage_[cancel_token::watch_storage];
};

// Waits on sources and on what limits the wait (see limit_wait). Returns the source of the
// wait's own that fired; throws timeout_error "weft: <describe()> timed out after N ms" when the
// deadline came first, cancelled_error when the cancel token did (describe is only called
// then). self is the running coroutine as waiter_or_throw returned it (not checked again).
template <class Describe>
wait_source& wait_with_limit(scheduler_core& core, coroutine& self,
                             std::span<wait_source* const> sources, const timeout& limit,
                             Describe&& describe) {
  if (!limit.limited()) {
    return core.wait_as(self, sources.data(), sources.size());
  }
  limit_wait limits(core, self, limit);
  // Every I/O call with a time limit comes through here: no allocation for the usual handful.
  constexpr std::size_t inline_sources = 8;
  std::array<wait_source*, inline_sources + 2> few;
  std::vector<wait_source*> many;
  wait_source** all = few.data();
  if (sources.size() > inline_sources) {
    many.resize(sources.size() + 2);
    all = many.data();
  }
  std::copy(sources.begin(), sources.end(), all);
  std::copy(limits.sources().begin(), limits.sources().end(), all + sources.size());
  wait_source& fired = core.wait_as(self, all, sources.size() + limits.sources().size());
  if (limits.fired(fired)) {
    limits.raise(fired, describe);
  }
  return fired;
}

}  // namespace weft::detail

// Waiting for the state of a long-lived libuv handle (an fs_event watcher, a child process and
// its pipes) to change. Internal to the I/O layer.
//
// Unlike a one-shot request (weft/reactor/operation.hpp), a handle outlives every single wait:
// libuv callbacks update the handle's heap state and call notify_all(); each waiting coroutine
// wakes, re-checks its own condition and waits again if it does not hold yet. A waiter's
// handle_wait lives on its stack and is linked into the state's handle_waiters while armed, so
// the state must outlive every waiter: the owners in fs_watch.cpp and process.cpp count waiters
// as users of the state and free it only when no user and no open handle remain.
//
// Thread: the scheduler's thread only.
#pragma once

#include <chrono>
#include <string>

#include "sched/deadline_wait.hpp"
#include "sched/scheduler_core.hpp"
#include "weft/error.hpp"
#include "weft/sched/detail/coroutine.hpp"
#include "weft/sched/timeout.hpp"

namespace weft::detail {

class handle_wait;

class handle_waiters {
 public:
  explicit handle_waiters(scheduler_core& core) : core_(core) {}
  handle_waiters(const handle_waiters&) = delete;
  handle_waiters& operator=(const handle_waiters&) = delete;

  // Wakes every waiting coroutine; each re-checks what it waits for.
  void notify_all() noexcept;
  bool empty() const noexcept { return list_.empty(); }
  scheduler_core& core() const noexcept { return core_; }

 private:
  friend class handle_wait;
  scheduler_core& core_;
  intrusive_list list_;
};

class handle_wait final : public wait_source {
 public:
  handle_wait(handle_waiters& waiters, const std::string& what) : waiters_(waiters), what_(what) {}

  bool arm(coroutine& waiter) override {
    waiter_ = &waiter;
    waiters_.list_.push_back(link_);
    return true;
  }
  void disarm() noexcept override {
    if (link_.linked()) {
      intrusive_list::remove(link_);
    }
    waiter_ = nullptr;
  }
  void describe(std::string& out) const override { out += what_; }

 private:
  friend class handle_waiters;
  struct link : list_node {
    handle_wait* wait = nullptr;
  };
  handle_waiters& waiters_;
  const std::string& what_;
  coroutine* waiter_ = nullptr;
  link link_{{}, this};
};

inline void handle_waiters::notify_all() noexcept {
  // wake() only queues the waiter (it unlinks itself when it runs), so the list is stable here.
  list_.for_each([this](list_node& node) {
    handle_wait* wait = static_cast<handle_wait::link&>(node).wait;
    core_.wake(*wait->waiter_, wait);
  });
}

// Suspends the calling coroutine until ready() holds. Throws timeout_error ("WHAT timed out
// after N ms") when limit passes first, and cancelled_error when the caller is cancelled;
// std::logic_error naming operation (the public call, "weft::child::wait") outside a coroutine.
template <class Condition>
void wait_until(handle_waiters& waiters, Condition&& ready, const timeout& limit,
                const std::string& what, const char* operation) {
  scheduler_core& core = waiters.core();
  coroutine& self = core.waiter_or_throw(operation);
  while (!ready()) {
    handle_wait until_ready(waiters, what);
    limit_wait limits(core, self, limit);
    wait_source& fired = limits.wait_with(until_ready);
    if (limits.fired(fired) && !ready()) {
      limits.raise(fired, [&] { return what; });
    }
  }
}

// Frees state (on the heap, shared by weft objects and open libuv handles) once no user is left
// and no handle is open. While libuv alone still holds it, it counts as an abandoned operation,
// so run() waits for the close callbacks before closing the loop. Call it last: it may free
// state.
template <class State>
void free_when_unused(State& state, bool handles_open) noexcept {
  if (state.users > 0) {
    return;
  }
  if (!handles_open) {
    if (state.counted_as_abandoned) {
      state.driver.abandoned_operation_completed();
    }
    delete &state;
    return;
  }
  if (!state.counted_as_abandoned) {
    state.driver.operation_abandoned();
    state.counted_as_abandoned = true;
  }
}

// A coroutine inside a call on such a state keeps it alive (its handle_wait is linked into it):
// one more user while it is in the call; on leaving, release (the state's free_when_unused rule)
// may free it.
template <class State, void (*Release)(State&) noexcept>
class state_user {
 public:
  explicit state_user(State& state) noexcept : state_(state) { ++state_.users; }
  state_user(const state_user&) = delete;
  state_user& operator=(const state_user&) = delete;
  ~state_user() {
    --state_.users;
    Release(state_);
  }

 private:
  State& state_;
};

}  // namespace weft::detail

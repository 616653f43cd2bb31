// Waiting for the state of a long-lived libuv handle (an fs_event watcher, a child process and
// its pipes) to change, and the heap state such a handle lives in. Internal to the I/O layer.
//
// Unlike a one-shot request (weft/reactor/operation.hpp), a handle outlives every single wait:
// libuv callbacks update the handle's heap state and call notify_all(); each waiting coroutine
// wakes, re-checks its own condition and waits again if it does not hold yet. A waiter's
// handle_wait lives on its stack and is linked into the state's handle_waiters while armed, so
// the state must outlive every waiter: shared_handle_state counts the waiters as users of the
// state and frees it only when no user and no open handle remain (fs_watch.cpp, subprocess.cpp).
//
// Thread: the scheduler's thread only.
#pragma once

#include <uv.h>

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

// The heap state behind a weft object whose libuv handle outlives every single wait (a
// fs::watcher's uv_fs_event_t, a weft::child's uv_process_t; the handle is a member of the
// derived state). Three parties hold it: the owning object, each coroutine inside one of its
// calls (state_user), and libuv from the handle's init to its close callback. `users` counts the
// first two. The state is freed when no user is left and the handle is closed; while libuv alone
// still holds it, it counts as an abandoned operation, so run() waits for the close callback
// before closing the loop.
struct shared_handle_state {
  explicit shared_handle_state(scheduler_core& core) : waiters(core), driver(core.driver()) {}
  shared_handle_state(const shared_handle_state&) = delete;
  shared_handle_state& operator=(const shared_handle_state&) = delete;
  virtual ~shared_handle_state() = default;  // freed through this base

  // Call once libuv has initialised handle (uv_spawn does even when it then fails): callbacks
  // find the state through handle->data, and from now on only close_handle may end it.
  void handle_initialized(uv_handle_t* handle) noexcept {
    handle->data = this;
    handle_open = true;
  }
  // Hands the handle to uv_close; its callback marks it closed and frees the state if no user
  // is left. Once per handle.
  void close_handle(uv_handle_t* handle) noexcept { uv_close(handle, &on_handle_closed); }
  // The owning object lets go: every waiter wakes (to see whatever the owner changed before
  // this), and the owner's use ends. Call it last: it may free the state.
  void release_owner() noexcept {
    waiters.notify_all();
    --users;
    free_if_unused();
  }
  // Frees the state if no user is left and the handle is closed; counts it as abandoned while
  // only libuv holds it. Call it last: it may free the state.
  void free_if_unused() noexcept {
    if (users > 0) {
      return;
    }
    if (!handle_open) {
      if (counted_as_abandoned) {
        driver.abandoned_operation_completed();
      }
      delete this;
      return;
    }
    if (!counted_as_abandoned) {
      driver.operation_abandoned();
      counted_as_abandoned = true;
    }
  }

  handle_waiters waiters;
  detail::driver& driver;
  int users = 1;             // the owning object, and each coroutine inside one of its calls
  bool handle_open = false;  // initialised, close callback not yet run
  bool counted_as_abandoned = false;

 private:
  static void on_handle_closed(uv_handle_t* handle) noexcept {
    auto* state = static_cast<shared_handle_state*>(handle->data);
    state->handle_open = false;
    state->free_if_unused();  // last: may free the state
  }
};

// The derived state a handle belongs to (handle->data, set by handle_initialized).
template <class State>
State& state_of_handle(void* handle_data) noexcept {
  return static_cast<State&>(*static_cast<shared_handle_state*>(handle_data));
}

// A coroutine inside a call on such a state keeps it alive (its handle_wait is linked into it):
// one more user while it is in the call; on leaving, the state may be freed.
class state_user {
 public:
  explicit state_user(shared_handle_state& state) noexcept : state_(state) { ++state_.users; }
  state_user(const state_user&) = delete;
  state_user& operator=(const state_user&) = delete;
  ~state_user() {
    --state_.users;
    state_.free_if_unused();
  }

 private:
  shared_handle_state& state_;
};

}  // namespace weft::detail

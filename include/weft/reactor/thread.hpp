// weft::spawn_thread(fn): fn as the main coroutine of a new scheduler on a new OS thread,
// awaitable from the spawning coroutine without blocking its scheduler.
//
// The thread runs weft::run(fn) on the spawner's driver (see run_options::driver), so fn may
// use everything weft offers (its own coroutines, timers, I/O). await() suspends the calling
// coroutine until the thread's run ends and returns fn's value or rethrows its exception (a
// deadlock_error or the first uncaught exception of that run included). The thread is joined before
// await() returns.
//
// A thread_task dropped without being awaited still waits for its thread to end: inside a
// coroutine by suspending (cancellation deferred), elsewhere by blocking in join(). There is
// no way to cancel another scheduler's coroutines from here; give fn its own stop signal (a
// weft::trigger, an atomic) when it must be stoppable.
#pragma once

#include <atomic>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>

#include "weft/reactor/trigger.hpp"
#include "weft/sched/scheduler.hpp"
#include "weft/sched/task.hpp"
#include "weft/sched/this_coroutine.hpp"
#include "weft/sched/timeout.hpp"

namespace weft {

// The handle of a spawn_thread: await() the thread's result (see above).
template <class T>
class thread_task {
 public:
  thread_task() = default;
  thread_task(thread_task&&) noexcept = default;
  thread_task& operator=(thread_task&& other) noexcept {
    if (this != &other) {
      finish();
      state_ = std::move(other.state_);
    }
    return *this;
  }
  ~thread_task() { finish(); }

  // False for an empty (default-made or moved-from) handle.
  bool valid() const noexcept { return state_ != nullptr; }
  // True once the thread's run has ended (its result is ready).
  bool done() const noexcept {
    return state_ != nullptr && state_->finished.load(std::memory_order_acquire);
  }

  // Waits for the thread's run to end; returns fn's value or rethrows its exception. Throws
  // timeout_error when limit passes first (the thread keeps running; await again later).
  T await(const timeout& limit = timeout::never()) {
    if (state_ == nullptr) {
      detail::throw_invalid_task("await of a weft::thread_task");
    }
    while (!state_->finished.load(std::memory_order_acquire)) {
      state_->ended.wait(limit);
    }
    if (state_->thread.joinable()) {
      state_->thread.join();
    }
    if (state_->error) {
      std::rethrow_exception(state_->error);
    }
    if constexpr (!std::is_void_v<T>) {
      return std::move(*state_->value);
    }
  }

 private:
  template <class Function>
  friend auto spawn_thread(Function&& fn)
      -> thread_task<std::invoke_result_t<std::decay_t<Function>&>>;

  struct state {
    trigger ended;                      // notified by the thread as its last act
    std::atomic<bool> finished{false};  // release-stored after value/error are written
    std::optional<std::conditional_t<std::is_void_v<T>, bool, T>> value;
    std::exception_ptr error;
    std::thread thread;
  };

  void finish() noexcept {
    if (state_ == nullptr || !state_->thread.joinable()) {
      return;
    }
    if (current_scheduler_or_null() != nullptr && this_coroutine_is_running()) {
      // Suspend (not block) until the thread ends; a cancel must not abandon the join.
      protect([this] {
        while (!state_->finished.load(std::memory_order_acquire)) {
          state_->ended.wait();
        }
      });
    }
    state_->thread.join();
  }
  static bool this_coroutine_is_running() noexcept {
    return detail::running_coroutine(*current_scheduler_or_null()) != nullptr;
  }

  std::unique_ptr<state> state_;
};

// Runs fn as the main coroutine of a new scheduler on a new thread (see above).
template <class Function>
auto spawn_thread(Function&& fn) -> thread_task<std::invoke_result_t<std::decay_t<Function>&>> {
  using result = std::invoke_result_t<std::decay_t<Function>&>;
  thread_task<result> handle;
  handle.state_ = std::make_unique<typename thread_task<result>::state>();
  auto* shared = handle.state_.get();
  // The new scheduler blocks on the spawner's driver (chosen by run_options or WEFT_DRIVER).
  run_options options;
  options.driver = std::string(current_driver());
  shared->thread =
      std::thread([shared, options = std::move(options),
                   body = std::decay_t<Function>(std::forward<Function>(fn))]() mutable {
        try {
          if constexpr (std::is_void_v<result>) {
            weft::run(std::move(body), std::move(options));
            shared->value.emplace(true);
          } else {
            shared->value.emplace(weft::run(std::move(body), std::move(options)));
          }
        } catch (...) {
          shared->error = std::current_exception();
        }
        shared->finished.store(true, std::memory_order_release);
        shared->ended.notify();  // last: after this the spawner may destroy the state
      });
  return handle;
}

}  // namespace weft

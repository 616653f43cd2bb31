// weft::loop::suspension<T>: parks a coroutine until a callback (or another coroutine) hands it
// a value, the bridge between callback code and coroutine code on one event loop (Revolt's
// Suspension).
//
//   auto parked = loop.suspension<int>();          // in the coroutine that will wait
//   loop.delay(0.5, [parked]() mutable { parked.resume(42); });
//   int answer = parked.suspend();                 // 42, half a second later
//
// Contract:
//   - event_loop::suspension<T>() is called by the coroutine that will suspend (its owner); it
//     is a std::logic_error outside a coroutine. The handle is a cheap copyable reference to
//     one shared state: callbacks keep a copy and resume through it.
//   - suspend() parks the owner until resume(value) (then returns the value) or
//     throw_into(error) (then rethrows error). It is a cancellation point: a cancelled owner
//     leaves with weft::cancelled_error and the suspension goes back to idle. While it is
//     parked, the loop keeps dispatching: in the coroutine that called run(); when no run() is
//     active, in the suspended coroutine itself (so `suspend()` alone drives the loop until
//     resumed, as Revolt's main suspension does). A callback error the loop would throw out of
//     run() (no error handler) is then thrown out of that suspend(); a run() started meanwhile
//     takes the dispatching over after the current tick.
//   - A suspension is reusable: after suspend() returned, the owner may suspend again.
//   - Misuse is a std::logic_error naming it: resume()/throw_into() while the owner is not
//     suspended (before suspend(), or twice for one suspend()); suspend() while already
//     suspended; suspend() from a coroutine other than the owner; suspend() from a callback of
//     the loop (callbacks run on the dispatching coroutine: parking it would stop the loop that
//     has to deliver the resume; spawn a coroutine instead); any use once the loop is gone.
//   - A loop that runs dry while the owner is suspended (nothing left that could resume it: no
//     referenced watcher, no other coroutine able to run) is a deadlock: weft::run ends with
//     weft::deadlock_error, whose report names the suspension, and suspend() unwinds with
//     weft::cancelled_error. A referenced fd watcher counts as something that could: while one
//     is registered the loop waits for its fd instead of reporting a deadlock; an unreferenced
//     one does not.
//   - T is the type of the value resume() hands over; suspension<> (T = void) carries none:
//     resume() takes no argument and suspend() returns nothing. T must be move-constructible.
//     A value is handed over by move, never copied.
//   - Threads: the loop's thread only, like everything of the loop (std::logic_error elsewhere).
#pragma once

#include <exception>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

namespace weft::loop {

class event_loop;

namespace detail {

class loop_core;

// The part of a suspension that does not depend on T: who owns it, where it is in its life,
// and the parking itself (src/loop/suspension.cpp).
class suspension_state {
 public:
  enum class phase : unsigned char { idle, suspended, resumed };

  suspension_state(const suspension_state&) = delete;
  suspension_state& operator=(const suspension_state&) = delete;
  virtual ~suspension_state();

  // Parks the owner until resumed; rethrows what throw_into passed.
  void suspend();
  // The checks of resume()/throw_into(): the owner must be suspended and not yet resumed.
  void check_resumable(const char* operation) const;
  // Wakes the owner (after the value, if any, was stored).
  void wake() noexcept;
  void throw_into(std::exception_ptr error);

  phase current_phase() const noexcept { return phase_; }

 protected:
  explicit suspension_state(loop_core& loop);

 private:
  friend class loop_core;
  struct parking;

  // For the loop: the source the owner parks on, and waking it (not resumed) to take over the
  // dispatching when the loop's dispatcher leaves.
  void* parked_gate() const noexcept;
  void wake_to_dispatch() noexcept;

  loop_core* loop_;  // null once the loop is destroyed
  void* owner_;      // the owning coroutine (an opaque weft::detail::coroutine*)
  parking* parked_ = nullptr;
  std::exception_ptr error_;
  phase phase_ = phase::idle;
  // The loop's list of live suspensions (detached when the loop goes).
  suspension_state* previous_ = nullptr;
  suspension_state* next_ = nullptr;
};

template <class T>
class suspension_value final : public suspension_state {
 public:
  explicit suspension_value(loop_core& loop) : suspension_state(loop) {}
  std::optional<T> value;
};

template <>
class suspension_value<void> final : public suspension_state {
 public:
  explicit suspension_value(loop_core& loop) : suspension_state(loop) {}
};

}  // namespace detail

template <class T = void>
class suspension {
  static_assert(std::is_void_v<T> || std::is_move_constructible_v<T>,
                "weft::loop::suspension<T> needs a move-constructible T");

 public:
  // The type of the value resume() hands over.
  using value_type = T;

  // An empty handle (valid() is false); every operation on it is a std::logic_error.
  suspension() = default;

  // False for an empty handle.
  bool valid() const noexcept { return state_ != nullptr; }

  // Parks the calling coroutine (the owner) until resume() or throw_into() (see the file
  // comment). Returns the value resume() passed.
  T suspend() {
    try {
      state().suspend();
    } catch (...) {
      if constexpr (!std::is_void_v<T>) {
        state_->value.reset();  // a value that raced a cancellation is dropped with it
      }
      throw;
    }
    if constexpr (!std::is_void_v<T>) {
      T result = std::move(*state_->value);
      state_->value.reset();
      return result;
    }
  }

  // Resumes the suspended owner with value (std::logic_error when it is not suspended).
  template <class U = T>
  requires(!std::is_void_v<U>) void resume(U value) {
    state().check_resumable("resume");
    state_->value.emplace(std::move(value));
    state_->wake();
  }
  // Resumes the suspended owner of a suspension<> (std::logic_error when it is not suspended).
  template <class U = T>
  requires std::is_void_v<U>
  void resume() {
    state().check_resumable("resume");
    state_->wake();
  }

  // Resumes the suspended owner by throwing error out of its suspend() (std::invalid_argument
  // for a null error, std::logic_error when it is not suspended).
  void throw_into(std::exception_ptr error) { state().throw_into(std::move(error)); }

 private:
  friend class event_loop;
  explicit suspension(std::shared_ptr<detail::suspension_value<T>> state)
      : state_(std::move(state)) {}

  detail::suspension_state& state() const;

  std::shared_ptr<detail::suspension_value<T>> state_;
};

namespace detail {
[[noreturn]] void throw_empty_suspension();
}

template <class T>
detail::suspension_state& suspension<T>::state() const {
  if (state_ == nullptr) {
    detail::throw_empty_suspension();
  }
  return *state_;
}

}  // namespace weft::loop

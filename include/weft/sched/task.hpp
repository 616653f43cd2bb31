// Spawning coroutines and awaiting them.
//
// spawn() is lazy and FIFO: the new coroutine is queued and starts when the spawner next
// suspends, after the coroutines queued before it. A task<T> is a handle to the coroutine's
// settled result: awaiting it any number of times returns the same value (or rethrows the same
// exception); awaiting a finished task never suspends. Dropping every handle detaches the
// coroutine, which keeps running; an exception escaping a coroutine whose handles are all gone
// (and that nobody observed) is uncaught and shuts the program down (run() rethrows it).
//
// Threads: a task belongs to the scheduler that spawned it. Await, cancel and copy it only on
// that scheduler's thread; awaiting it from another thread is a std::logic_error.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <source_location>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "weft/sched/detail/coroutine.hpp"
#include "weft/sched/scheduler.hpp"
#include "weft/sched/timeout.hpp"

namespace weft {

// How spawn() names and schedules a coroutine.
struct spawn_options {
  std::string name{};  // in errors, deadlock reports and this_coroutine::name()
  weft::priority priority = weft::priority::normal;  // high runs before normal
  // A background coroutine (a healthcheck loop, a metrics flusher) does not keep run() going:
  // once every other coroutine has ended, background ones are cancelled (their cleanup runs)
  // and run() returns. Its sleeps do not count against deadlock detection either.
  bool background = false;
  // Set a stack aside for the coroutine at spawn rather than take one when it first runs, so
  // that spawn() throws the std::system_error when no stack can be had (out of memory, of
  // mappings, of address space, or stack_options::max_stacks reached; the error says which)
  // and the coroutine is never made. Without it such a coroutine ends unstarted with that
  // error when its turn comes (its task, scope or group sees it; a detached one's is uncaught
  // and ends run()). For an accept loop: it closes that one connection and goes on. It costs a
  // count: a coroutine that starts on the stack of one that just ended (as lazy ones do)
  // leaves the stack set aside in the pool.
  bool stack_at_spawn = false;
};

namespace detail {
// Suspends the current coroutine until target has finished (returns at once if it has).
// Throws std::logic_error on misuse and cancelled_error if the awaiter is cancelled.
void await_finished(coroutine& target);
// Same, giving up at limit with weft::timeout_error (the target keeps running).
void await_finished(coroutine& target, const timeout& limit);
[[noreturn]] void throw_invalid_task(const char* operation);
// A new cancel token (one reference, the caller's) that completes when target ends.
const cancel_token* make_task_cancel_token(coroutine& target);
}  // namespace detail

// A handle to a coroutine's result (see above).
template <class T>
class task;

namespace detail {
// The task handle for coroutine, adopting one reference the caller holds (spawn, scope,
// task_group).
template <class T>
task<T> adopt_task(result_holder<T>* coroutine) noexcept;
}  // namespace detail

template <class T>
class task {
 public:
  using value_type = T;  // T

  task() noexcept = default;
  task(const task& other) noexcept : coroutine_(other.coroutine_) {
    if (coroutine_ != nullptr) {
      coroutine_->add_ref();
    }
  }
  task(task&& other) noexcept : coroutine_(std::exchange(other.coroutine_, nullptr)) {}
  task& operator=(task other) noexcept {
    std::swap(coroutine_, other.coroutine_);
    return *this;
  }
  ~task() {
    if (coroutine_ != nullptr) {
      coroutine_->release();
    }
  }

  // Waits for the coroutine to end and returns its value (a reference into the task, valid while
  // this handle lives), or rethrows its exception.
  decltype(auto) await() & {
    settle("await");
    if constexpr (std::is_void_v<T>) {
      return;
    } else {
      return static_cast<T&>(coroutine_->value());
    }
  }
  // Same, but gives up with weft::timeout_error when limit passes first; the coroutine keeps
  // running (cancel it if its result is no longer wanted) and can be awaited again.
  decltype(auto) await(const timeout& limit) & {
    valid_or_throw("await");
    detail::await_finished(*coroutine_, limit);
    return await();
  }

  // On a temporary (spawn(f).await()) the value is moved out.
  T await() && {
    settle("await");
    if constexpr (std::is_reference_v<T>) {
      return coroutine_->value();
    } else if constexpr (!std::is_void_v<T>) {
      return std::move(coroutine_->value());
    }
  }

  // Cancels the coroutine: if it never started it never will; if it is suspended it wakes with
  // cancelled_error at its suspension point (deferred while inside weft::protect); if it is
  // ready or running, the error is raised at its next suspension point. No-op once done.
  void cancel(std::string reason = "cancelled") {
    valid_or_throw("cancel");
    detail::cancel_coroutine(coroutine_->owner(), *coroutine_, std::move(reason));
  }

  // False for an empty (default-made or moved-from) task.
  bool valid() const noexcept { return coroutine_ != nullptr; }
  // The control block (null for an empty task), for the layers that wait on tasks themselves
  // (the await combinators wait on several at once). Not for application code.
  detail::coroutine* control_block() const noexcept { return coroutine_; }
  // done(): whether the coroutine ended; id() and name(): the coroutine's (std::logic_error on an
  // empty task).
  bool done() const {
    valid_or_throw("done");
    return coroutine_->done();
  }
  std::uint64_t id() const {
    valid_or_throw("id");
    return coroutine_->id();
  }
  const std::string& name() const {
    valid_or_throw("name");
    return coroutine_->name();
  }
  // The exception the coroutine ended with (null while running or after success). Reading it
  // counts as observing it.
  std::exception_ptr exception() const {
    valid_or_throw("exception");
    coroutine_->observe_error();
    return coroutine_->error();
  }

  // Switch handlers: run on this coroutine's stack when it starts and each time it is switched
  // back to (enter), each time it is switched away from while still alive (leave), and once
  // when it ends (finish: a finished coroutine runs finish handlers, not leave handlers). No
  // switch, no handler: a yield with nothing else ready runs neither. A handler returning false
  // is unregistered.
  void on_enter(std::function<bool()> handler) { handlers().enter.push_back(std::move(handler)); }
  void on_leave(std::function<bool()> handler) { handlers().leave.push_back(std::move(handler)); }
  // Finish handlers run once each, in registration order, when the coroutine ends however it
  // ends (value, exception, cancellation, or cancelled before it started), and before it counts
  // as ended for anyone: its scope, its awaiters and the run's uncaught-error check. They cannot
  // wait (std::logic_error). Their return value does not matter.
  //
  // An exception escaping a finish handler is an error of the coroutine, like one escaping its
  // body, and none is dropped: the coroutine's outcome (what await() rethrows, what a task_group
  // hands out, what run() rethrows for main or a detached coroutine) becomes that error, or
  // weft::all_failed_error holding, in order, the coroutine's own failure (a cancellation is not
  // one) and each handler's error, when there are several. Its weft::scope gets the handlers'
  // errors (one, or all_failed_error holding each; its own failure reached the scope when it
  // left the body) as a failure of that coroutine: the scope's exception handler, or the scope
  // fails with it.
  //
  // Registered on a coroutine that has already finished (or from one of its own finish
  // handlers), the handler runs at once, on the caller's stack, and an exception escaping it
  // propagates to the caller of on_finish: the coroutine's outcome is settled by then. An empty
  // handler is std::invalid_argument.
  void on_finish(std::function<bool()> handler) {
    valid_or_throw("on_finish");
    if (!handler) {
      detail::throw_empty_finish_handler();
    }
    if (coroutine_->done()) {
      handler();
      return;
    }
    handlers().finish.push_back(std::move(handler));
  }

  // A task is a cancel token: weft::cancel_on(task) ends a wait when the task ends (see
  // timeout.hpp). Found by argument-dependent lookup only.
  friend const detail::cancel_token* make_cancel_token(const task& token) {
    token.valid_or_throw("weft::cancel_on");
    return detail::make_task_cancel_token(*token.coroutine_);
  }

 private:
  // Adopts one reference of coroutine (detail::adopt_task).
  explicit task(detail::result_holder<T>* coroutine) noexcept : coroutine_(coroutine) {}
  template <class U>
  friend task<U> detail::adopt_task(detail::result_holder<U>* coroutine) noexcept;
  friend class scheduler;
  void valid_or_throw(const char* operation) const {
    if (coroutine_ == nullptr) {
      detail::throw_invalid_task(operation);
    }
  }
  void settle(const char* operation) {
    valid_or_throw(operation);
    detail::await_finished(*coroutine_);
    if (coroutine_->error()) {
      coroutine_->observe_error();
      std::rethrow_exception(coroutine_->error());
    }
  }
  detail::switch_handlers& handlers() {
    valid_or_throw("switch handler registration");
    return coroutine_->handlers();
  }

  detail::result_holder<T>* coroutine_ = nullptr;
};

// Spawns fn as a new coroutine on the current scheduler and returns its task. Outside a
// running scheduler it is a std::logic_error.
template <class T>
task<T> detail::adopt_task(result_holder<T>* coroutine) noexcept {
  return task<T>(coroutine);
}

// Spawns fn as a new coroutine and returns its task (see above: lazy, FIFO).
template <class Function>
auto spawn(Function&& fn, spawn_options options = {},
           std::source_location spawned_at = std::source_location::current())
    -> task<std::invoke_result_t<std::decay_t<Function>&>> {
  using result = std::invoke_result_t<std::decay_t<Function>&>;
  using block = detail::coroutine_impl<std::decay_t<Function>, result>;
  scheduler& owner = current_scheduler();
  std::decay_t<Function> function(std::forward<Function>(fn));
  block* coroutine = block::create(std::move(function), owner, std::move(options.name),
                                   options.priority, spawned_at);
  coroutine->set_background(options.background);
  if (options.stack_at_spawn) {
    detail::set_stack_aside(owner, *coroutine);
  }
  coroutine->add_ref();  // the task's reference
  detail::enqueue_coroutine(owner, *coroutine);
  return detail::adopt_task<result>(coroutine);
}

template <class Function>
auto scheduler::run(Function&& main) -> std::invoke_result_t<std::decay_t<Function>&> {
  using result = std::invoke_result_t<std::decay_t<Function>&>;
  using block = detail::coroutine_impl<std::decay_t<Function>, result>;
  std::decay_t<Function> function(std::forward<Function>(main));
  block* coroutine = block::create(std::move(function), *this, std::string("main"),
                                   priority::normal, std::source_location::current());
  task<result> main_task(coroutine);  // adopts the creation reference; run_main adds its own
  run_main(*coroutine);               // rethrows the first uncaught exception, or deadlock_error
  if constexpr (std::is_void_v<result>) {
    if (coroutine->was_cancelled()) {
      return;  // graceful shutdown cancelled main: a normal end for a void main
    }
  }
  return std::move(main_task).await();
}

// Runs main on a fresh scheduler on this thread (see scheduler::run).
template <class Function>
auto run(Function&& main, run_options options = {})
    -> std::invoke_result_t<std::decay_t<Function>&> {
  scheduler instance(std::move(options));
  return instance.run(std::forward<Function>(main));
}

}  // namespace weft

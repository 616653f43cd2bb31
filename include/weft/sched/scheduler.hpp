// The per-thread scheduler.
//
// A scheduler runs coroutines on the thread that called run(), and only there: coroutines never
// migrate, so thread-locals and errno stay valid inside them. Other threads reach a scheduler
// only through the reactor's cross-thread triggers. (Step-driven processes on a pool of worker
// threads are weft::procs::runtime's, weft/procs/runtime.hpp.)
//
// One switch per suspend/resume: a suspending coroutine runs the scheduler tick inline (its
// microtasks, a rate-limited non-blocking reactor poll, and, when nothing is runnable, the
// blocking reactor wait) and then jumps straight to the next ready coroutine. A coroutine that
// finishes starts the next not-yet-started one on the same stack without switching at all. The
// thread's own stack (the scheduler context) is only used to enter the first coroutine and to
// return from run().
//
// run() returns when every coroutine has ended. It ends with
//   - main's result, when everything ended normally;
//   - the first uncaught exception (an exception escaping a coroutine nobody holds a task for,
//     escaping main, or a failing microtask), after cancelling every coroutine and letting their
//     cleanup run;
//   - weft::deadlock_error, when coroutines were left waiting on each other with nothing that
//     could ever wake them (after a report and cancellation of all of them, even if they caught
//     the cancellation). A deadlock cancellation is delivered even inside weft::protect, since
//     nothing else could ever wake those coroutines. Coroutines that catch it and wait again are
//     cancelled again; after 1000 such rounds the process aborts with the report, rather than
//     spin forever.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <source_location>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "weft/context/stack.hpp"
#include "weft/detail/unique_function.hpp"
#include "weft/sched/detail/coroutine.hpp"

namespace weft {

class scheduler;

namespace detail {
class scheduler_core;

// What the layers built on the scheduler (task, scope, task_group, the wait sources) need of it,
// kept out of weft::scheduler's public interface: users never name a coroutine control block.
// From the scheduler's own thread, during run().

// Queues a spawned coroutine (lazy: it starts when the spawner suspends).
void enqueue_coroutine(scheduler& owner, coroutine& spawned);
// spawn_options::stack_at_spawn: has the pool set a stack aside now for a coroutine made but
// not yet queued. When none can be had it releases the block (its creation reference, the only
// one) and throws the pool's std::system_error.
void set_stack_aside(scheduler& owner, coroutine& spawned);
// Drops the stack set aside for a coroutine made but never queued (nothing if none was).
void drop_stack_set_aside(scheduler& owner, coroutine& spawned) noexcept;
// Makes a suspended coroutine ready; the first wake of a suspension wins.
void wake_coroutine(scheduler& owner, coroutine& waiter, wait_source& by) noexcept;
// Cancels a coroutine of owner: the cancellation is raised at its next suspension (at once if
// it is suspended). std::logic_error from another thread.
void cancel_coroutine(scheduler& owner, coroutine& target, std::string reason);
// The coroutine running on owner right now, or null (between coroutines, outside run()).
coroutine* running_coroutine(const scheduler& owner) noexcept;
}  // namespace detail

// The order in which ready coroutines run (run_options::order).
enum class scheduling_order {
  fifo,    // ready coroutines run in the order they became ready (high priority first)
  random,  // chaos order for tests: a random ready coroutine of the highest ready priority
};

// How a scheduler runs (weft::run and scheduler take one).
struct run_options {
  stack_options stacks{};  // coroutine stacks: size, guard pages, max_stacks
  // The event machinery the scheduler blocks on: "uv" (libuv), "ev" (libev), "event"
  // (libevent), "epoll" (epoll(7), no library), "poll" (poll(2), no library) or "uring"
  // (io_uring, where liburing and the kernel allow). Empty: the environment's WEFT_DRIVER, and
  // when that is unset too the first of uv, ev, event, epoll, poll, uring that this build has.
  // Every weft API works on every driver (docs/architecture.md, "The seam between the scheduler and
  // the drivers"); a name that is unknown or not in this build makes run() throw
  // std::invalid_argument listing the valid ones. weft::spawn_thread passes its spawner's on.
  std::string driver{};
  // Unset: taken from the environment, WEFT_SCHED=random WEFT_SEED=n (fifo otherwise).
  std::optional<scheduling_order> order{};
  // The seed of the random order; unset: WEFT_SEED, else random.
  std::optional<std::uint64_t> seed{};
  // How often, at most, the scheduler polls the reactor without blocking while coroutines are
  // runnable, so that timers and I/O are noticed by a busy program. Zero polls at every switch.
  // Measured (docs/context-and-scheduler.md): a poll costs ~1 us, and from 20 us up the yield
  // cost is flat (the clock is read only every 256 ticks); 250 us keeps polling under 0.5% of a
  // busy thread while timers fire within ~10 us of their deadline under load (1 ms: ~140 us).
  // A due poll also waits until the coroutines the last poll woke have run (the drivers are
  // level-triggered: a poll before then reports their fds again), for at most four intervals
  // since that poll; so with thousands of coroutines woken at once, timers and new events are
  // noticed within about four intervals.
  std::chrono::microseconds reactor_poll_interval{250};
  // Receives the deadlock report before the waiting coroutines are cancelled. Default: stderr.
  std::function<void(std::string_view report)> deadlock_reporter{};
  // Run on the main coroutine's stack, in order, right before main's body.
  std::vector<std::function<void()>> on_main_start{};
};

// Counters of a run (scheduler::stats()).
struct scheduler_stats {
  const char* driver = "";                // the driver's name (as run_options::driver)
  std::uint64_t switches = 0;             // context switches (jumps between stacks)
  std::uint64_t spawned = 0;              // coroutines created (main included)
  std::uint64_t started = 0;              // coroutines that began running
  std::uint64_t started_in_place = 0;     // ... of which on the stack of one that just finished
  std::uint64_t finished = 0;             // coroutines that ended (any way)
  std::uint64_t cancelled = 0;            // coroutines that ended cancelled
  std::uint64_t never_started = 0;        // cancelled before they ever ran
  std::uint64_t start_failures = 0;       // ended unstarted: no stack could be had for them
  std::uint64_t microtasks_run = 0;       // microtasks run (add_microtask)
  std::uint64_t reactor_polls = 0;        // non-blocking polls between switches
  std::uint64_t reactor_waits = 0;        // blocking waits (nothing was runnable)
  std::uint64_t deadlocks = 0;            // deadlocks found
  std::uint64_t live_coroutines = 0;      // unfinished right now
  std::uint64_t max_live_coroutines = 0;  // the most unfinished at once
  std::uint64_t stacks_allocated = 0;     // stacks taken from the kernel
  std::uint64_t stacks_guarded = 0;       // ... of which with a guard page
  std::uint64_t stacks_pooled = 0;        // free stacks held for reuse right now
};

// A cancellable microtask. Dropping the handle does not cancel it.
class microtask_handle {
 public:
  microtask_handle() = default;
  // cancel(): the microtask will not run (nothing if it ran); valid(): false for an empty handle.
  void cancel() noexcept;
  bool valid() const noexcept { return static_cast<bool>(state_); }

  struct state;  // opaque: defined by the scheduler

 private:
  friend class scheduler;
  friend class detail::scheduler_core;
  explicit microtask_handle(std::shared_ptr<state> state) : state_(std::move(state)) {}
  std::shared_ptr<state> state_;
};

// A scheduler that runs coroutines on the calling thread (weft::run makes one for a call).
class scheduler {
 public:
  // A scheduler with these options; nothing runs until run().
  explicit scheduler(run_options options = {});
  ~scheduler();
  scheduler(const scheduler&) = delete;
  scheduler& operator=(const scheduler&) = delete;

  // Runs main as the main coroutine until every coroutine has ended. One run at a time per
  // thread. The scheduler can run again after run() returns.
  template <class Function>
  auto run(Function&& main) -> std::invoke_result_t<std::decay_t<Function>&>;

  // Statistics of the current or the last run.
  const scheduler_stats& stats() const noexcept;
  // options(): what it was made with; running(): whether a run() is under way.
  const run_options& options() const noexcept { return options_; }
  bool running() const noexcept { return core_ != nullptr; }

  // --- from the scheduler's own thread, during run() ---

  // Queues fn to run before the next context switch (FIFO). cleanup, when given, runs once the
  // microtask is done with: after fn ran, or when it was cancelled or the run ended first. An
  // exception from fn stops the batch there and is reported as uncaught (the program starts a
  // graceful shutdown and run() rethrows it); the remaining microtasks then still run before the
  // next switch.
  microtask_handle add_microtask(unique_function<void()> fn, unique_function<void()> cleanup = {});

  // Cancels every coroutine (those that never started never will), lets their cleanup run,
  // and ends run() once all have ended. Idempotent. Coroutines spawned by that cleanup run
  // normally (a cleanup may need helpers); they are not cancelled unless shutdown is asked again.
  void graceful_shutdown();
  bool shutting_down() const noexcept;  // whether graceful_shutdown() was called during this run

  // Lets the other ready coroutines run first; the caller is resumed after them.
  void yield();
  // Records an exception nobody will see (first one wins) and shuts down gracefully.
  void report_uncaught(std::exception_ptr error) noexcept;

 private:
  void run_main(detail::coroutine& main);

  friend void detail::enqueue_coroutine(scheduler&, detail::coroutine&);
  friend void detail::set_stack_aside(scheduler&, detail::coroutine&);
  friend void detail::drop_stack_set_aside(scheduler&, detail::coroutine&) noexcept;
  friend void detail::wake_coroutine(scheduler&, detail::coroutine&, detail::wait_source&) noexcept;
  friend void detail::cancel_coroutine(scheduler&, detail::coroutine&, std::string);
  friend detail::coroutine* detail::running_coroutine(const scheduler&) noexcept;

  run_options options_;
  std::unique_ptr<detail::scheduler_core> core_;
  scheduler_stats last_stats_{};
};

// The scheduler running on this thread; std::logic_error outside weft::run.
scheduler& current_scheduler();
// Same, or null.
scheduler* current_scheduler_or_null() noexcept;

// The name of the driver the scheduler running on this thread blocks on ("uv", "ev", "event",
// "epoll", "poll", "uring"); std::logic_error outside weft::run.
std::string_view current_driver();
// The steady clock's time when this thread's scheduler last polled its reactor: a reading the
// scheduler took anyway, so it costs no clock reading (a steady_clock::now() costs 20-30 ns),
// and it is behind now by what ran since then (microseconds in a server, longer while a
// coroutine computes without yielding). For limits that slack does not matter to:
// timeout::from(loop_time(), 30s). steady_clock::now() outside weft::run.
std::chrono::steady_clock::time_point loop_time() noexcept;
// The drivers this build has, in the order the default is picked (uv first).
const std::vector<std::string_view>& available_drivers();

// current_scheduler().graceful_shutdown().
void graceful_shutdown();

}  // namespace weft

// weft::task_group<T>: a scope that runs at most `concurrency` of its tasks at once and hands
// out their outcomes.
//
// Admission. A spawned task starts at once if fewer than `concurrency` tasks run and none is
// queued; otherwise it is queued: its coroutine and task handle exist, but it is not given to
// the scheduler (it has no stack and no id yet) until a running task ends, in spawn order.
// At most `queue_limit` tasks wait in the queue (task_group::unlimited by default; 0: a task
// is spawned only when it can start). When the queue is full, spawn() itself suspends
// (backpressure, a cancellation point): blocked spawners are admitted in FIFO order with
// hand-off, i.e. the capacity a finishing task frees is reserved for the oldest blocked spawner,
// and a blocked spawner that is cancelled after that passes it to the next one. spawn(fn, limit)
// gives up with timeout_error (fn is then never run). A queued task cancelled through its
// handle keeps its place in the queue and ends, unstarted, when its turn comes.
//
// Outcomes. A task's exception is its outcome, not a failure of the group: it settles on the
// task and the group hands it out. Every ended task (value, error or cancellation) is kept, in
// completion order, until taken by:
//   - next(): the next ended task, as the task itself (await() gives its value or rethrows), or
//     std::nullopt once no task is left (none running, queued or blocked in spawn);
//   - all(): waits for every task and returns the values in completion order (void for
//     task_group<void>); cancelled tasks have no value and are skipped. At the first failure it
//     cancels the unfinished tasks, waits for them, and throws that failure (later failures,
//     usually caused by the cancellation, are dropped);
//   - race(): the outcome of the first task to end with a value or an error (the value, or the
//     error rethrown); the unfinished tasks are cancelled and waited for, their outcomes dropped;
//   - any(): the value of the first task to succeed, cancelling and waiting for the rest like
//     race(); when every task fails, weft::all_failed_error carrying every error (indexes: the
//     order they ended in).
// race() and any() on a group with no task at all are std::logic_error; when every task was
// cancelled they throw cancelled_error. These calls also wait for tasks spawned while they wait.
// They take the outcomes they use (values are moved out of the tasks). An error nobody took by
// the time the group is destroyed goes to the parent scope, as a failed child scope's would, or,
// without one, is reported as uncaught (the program shuts down and weft::run rethrows it).
//
// As a scope: the group is a child of the calling coroutine's scope unless told otherwise, and
// the cancellation of that scope reaches its tasks. cancel() closes it: running and queued tasks
// are cancelled, blocked spawners get scope_closed_error, and so does every later spawn.
//
// Sealing: close() says no more work is coming without cancelling any. Every later spawn() throws
// std::logic_error naming the group (spawning into a group its owner has sealed is a bug, not a
// runtime condition); the tasks already running or queued run to their end, and spawn() calls
// already blocked on a full queue when close() was called still get their task in (they were
// made before it). next()/all()/race()/any() work as before and end once those tasks have ended:
// all() returns every one of their values. close() is idempotent, may be called from anywhere on
// the group's thread (one of its own tasks included) and never waits; cancel() after close() still
// cancels. closed() is true after either; sealed() only after close().
// Destruction cancels and waits like weft::scope's (see scope.hpp). next/all/race/any from one
// of the group's own tasks is a std::logic_error (it would wait for itself).
//
// Threads: one scheduler's thread, as weft::scope.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <limits>
#include <optional>
#include <source_location>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "weft/error.hpp"
#include "weft/sched/task.hpp"
#include "weft/sched/timeout.hpp"
#include "weft/sync/detail/waiter_queue.hpp"
#include "weft/sync/scope.hpp"

namespace weft {

// Counters of a task_group (stats()).
struct task_group_stats {
  std::uint64_t spawned = 0;           // tasks spawned
  std::uint64_t running = 0;           // handed to the scheduler, not yet ended
  std::uint64_t queued = 0;            // waiting for a running task to end
  std::uint64_t blocked_spawners = 0;  // spawn() calls suspended on a full queue
  std::uint64_t unclaimed = 0;         // ended, not yet taken by next/all/race/any
  std::uint64_t max_running = 0;       // the most that ran at once
  std::uint64_t succeeded = 0;         // ended with a value
  std::uint64_t failed = 0;            // ended with an error
  std::uint64_t cancelled = 0;         // ended cancelled (or never started)
};

namespace detail {

// Throws weft::all_failed_error for task_group::any when every task failed.
[[noreturn]] void throw_all_tasks_failed(std::vector<std::exception_ptr> errors);

// The part of task_group that does not depend on T.
class task_group_base : public weft::scope {
 public:
  static constexpr std::size_t unlimited = std::numeric_limits<std::size_t>::max();

 protected:
  task_group_base(std::size_t concurrency, std::size_t queue_limit, std::string name);
  task_group_base(weft::scope& parent, std::size_t concurrency, std::size_t queue_limit,
                  std::string name);
  task_group_base(detached_scope_t, std::size_t concurrency, std::size_t queue_limit,
                  std::string name);
  ~task_group_base() override;

  // Takes one unit of capacity, suspending while there is none. The checks of a spawn included.
  scheduler& admit(const timeout& limit);
  void seal() noexcept { sealed_ = true; }
  bool sealed() const noexcept { return sealed_; }
  void give_back_admission() noexcept;
  // Starts a newly made member or queues it.
  void place(member& record) noexcept;
  // The next ended task (with a reference for the caller), or null when none is left.
  coroutine* take(const timeout& limit, const char* operation);
  bool nothing_left() const noexcept;
  // Cancels every unfinished task (queued ones end without starting); the group stays open.
  void cancel_unfinished(const std::string& reason) noexcept;
  // take() until nothing is left, dropping the outcomes.
  void drain();
  task_group_stats group_stats() const noexcept;
  std::size_t concurrency_;
  std::size_t queue_limit_;

 private:
  void on_closed() noexcept override;
  void on_member_finished(member& record) noexcept override;
  void pump() noexcept;
  void start(member& record) noexcept;
  void flush(member& record) noexcept;
  void hand_out(coroutine& ended, bool to_front) noexcept;
  void wake_if_exhausted() noexcept;
  std::size_t capacity() const noexcept;
  static void describe_spawners(const void* self, std::string& out);
  static void describe_results(const void* self, std::string& out);

  bool sealed_ = false;
  std::size_t running_ = 0;
  std::size_t admitted_ = 0;  // running + queued + reserved for granted spawners
  std::size_t blocked_ = 0;
  std::size_t max_running_ = 0;
  std::deque<member*> queue_;
  std::deque<coroutine*> completions_;
  waiter_queue spawn_waiters_{this, &task_group_base::describe_spawners};
  waiter_queue result_waiters_{this, &task_group_base::describe_results};
};

}  // namespace detail

template <class T>
class task_group : private detail::task_group_base {
  static_assert(!std::is_reference_v<T>, "weft::task_group<T>: T must be a value type or void");

 public:
  using value_type = T;  // T
  // What all() returns: the values, or nothing for void.
  using results_type = std::conditional_t<std::is_void_v<T>, void, std::vector<T>>;
  using detail::task_group_base::unlimited;

  // std::invalid_argument when concurrency is 0.
  explicit task_group(std::size_t concurrency, std::size_t queue_limit = unlimited,
                      std::string name = "task_group")
      : task_group_base(concurrency, queue_limit, std::move(name)) {}
  task_group(weft::scope& parent, std::size_t concurrency, std::size_t queue_limit = unlimited,
             std::string name = "task_group")
      : task_group_base(parent, concurrency, queue_limit, std::move(name)) {}
  task_group(detached_scope_t detached, std::size_t concurrency,
             std::size_t queue_limit = unlimited, std::string name = "task_group")
      : task_group_base(detached, concurrency, queue_limit, std::move(name)) {}

  // Spawns fn (its result converted to T), starting it or queueing it; suspends while the queue
  // is full. Throws scope_closed_error once the group is cancelled, std::logic_error once it was
  // sealed by close().
  template <class Function>
  task<T> spawn(Function&& fn, spawn_options options = {},
                std::source_location spawned_at = std::source_location::current()) {
    return spawn(std::forward<Function>(fn), timeout::never(), std::move(options), spawned_at);
  }
  // Same, giving up with timeout_error when no room was made before limit.
  template <class Function>
  task<T> spawn(Function&& fn, const timeout& limit, spawn_options options = {},
                std::source_location spawned_at = std::source_location::current());

  // The next ended task, or nullopt once none is left (see above); the limit form gives up with
  // timeout_error.
  std::optional<task<T>> next() { return next(timeout::never()); }
  // Throws timeout_error when no task ended before limit.
  std::optional<task<T>> next(const timeout& limit) {
    detail::coroutine* ended = take(limit, "task_group::next");
    if (ended == nullptr) {
      return std::nullopt;
    }
    return detail::adopt_task(
        static_cast<detail::result_holder<T>*>(ended));  // adopts take's reference
  }

  // all(), race() and any() (see above).
  results_type all();
  T race();
  T any();

  // Closes the group and cancels its tasks (see above).
  void cancel(std::string reason = "task_group cancelled") { scope::cancel(std::move(reason)); }
  // Seals the group: see "Sealing" above.
  void close() noexcept { seal(); }

  // concurrency(), queue_limit() and stats(): what it was made with, and its counters.
  std::size_t concurrency() const noexcept { return concurrency_; }
  std::size_t queue_limit() const noexcept { return queue_limit_; }
  task_group_stats stats() const noexcept { return group_stats(); }
  // Cancelled, failed, being destroyed, or sealed by close().
  bool closed() const noexcept { return sealed() || scope::closed(); }
  bool sealed() const noexcept { return task_group_base::sealed(); }
  // The reason it was cancelled with (empty while not cancelled, also once only sealed).
  using scope::close_reason;
  // id() and name(), as the scope's.
  using scope::id;
  using scope::name;

 private:
  // Cancels the losers, waits for them, and returns the winner's outcome.
  T decide(detail::coroutine* winner, const char* operation);
};

template <class T>
template <class Function>
task<T> task_group<T>::spawn(Function&& fn, const timeout& limit, spawn_options options,
                             std::source_location spawned_at) {
  using produced = std::invoke_result_t<std::decay_t<Function>&>;
  static_assert(std::is_void_v<T> || std::is_convertible_v<produced, T>,
                "weft::task_group<T>::spawn: the function's result must convert to T");
  scheduler& owner = admit(limit);
  member* record = nullptr;
  detail::result_holder<T>* coroutine = nullptr;
  try {
    coroutine = make_member<T>(std::forward<Function>(fn), owner, options, spawned_at, record);
  } catch (...) {
    give_back_admission();
    throw;
  }
  coroutine->add_ref();  // the task's reference
  task<T> handle = detail::adopt_task(coroutine);
  place(*record);
  return handle;
}

template <class T>
auto task_group<T>::all() -> results_type {
  std::conditional_t<std::is_void_v<T>, int, std::vector<T>> values{};
  std::exception_ptr first_failure;
  while (detail::coroutine* ended = take(timeout::never(), "task_group::all")) {
    task<T> outcome = detail::adopt_task(static_cast<detail::result_holder<T>*>(ended));
    if (!ended->error()) {
      if constexpr (!std::is_void_v<T>) {
        values.push_back(std::move(outcome).await());
      }
    } else if (!ended->was_cancelled()) {
      ended->observe_error();
      if (!first_failure) {
        first_failure = ended->error();
        cancel_unfinished("task_group::all: another task of the group failed");
      }
    }
  }
  if (first_failure) {
    std::rethrow_exception(first_failure);
  }
  if constexpr (!std::is_void_v<T>) {
    return values;
  }
}

template <class T>
T task_group<T>::race() {
  if (nothing_left()) {
    throw std::logic_error(
        "weft: task_group::race on a group with no task; spawn the contenders first");
  }
  detail::coroutine* winner = nullptr;
  while (detail::coroutine* ended = take(timeout::never(), "task_group::race")) {
    if (ended->error() && ended->was_cancelled()) {
      ended->release();
      continue;
    }
    winner = ended;
    break;
  }
  return decide(winner, "race");
}

template <class T>
T task_group<T>::any() {
  if (nothing_left()) {
    throw std::logic_error(
        "weft: task_group::any on a group with no task; spawn the contenders first");
  }
  std::vector<std::exception_ptr> errors;
  detail::coroutine* winner = nullptr;
  while (detail::coroutine* ended = take(timeout::never(), "task_group::any")) {
    if (!ended->error()) {
      winner = ended;
      break;
    }
    if (!ended->was_cancelled()) {
      ended->observe_error();
      errors.push_back(ended->error());
    }
    ended->release();
  }
  if (winner == nullptr && !errors.empty()) {
    detail::throw_all_tasks_failed(std::move(errors));
  }
  return decide(winner, "any");
}

template <class T>
T task_group<T>::decide(detail::coroutine* winner, const char* operation) {
  if (winner == nullptr) {
    throw cancelled_error(std::string("weft: task_group::") + operation +
                          ": every task of the group was cancelled before one finished");
  }
  task<T> outcome = detail::adopt_task(static_cast<detail::result_holder<T>*>(winner));
  // Observed now: if this caller is cancelled while the losers end, the outcome goes with it.
  winner->observe_error();
  cancel_unfinished(std::string("task_group::") + operation + " decided");
  drain();
  return std::move(outcome).await();
}

}  // namespace weft

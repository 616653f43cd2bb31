// weft::procs::runtime: runs step-driven processes on its own worker threads (M:N, with work
// stealing).
//
// Not weft::scheduler (weft/sched/scheduler.hpp), which runs stackful coroutines on the one
// thread that called run(). Hence the two names: a weft::scheduler is per thread and schedules
// coroutines; a procs::runtime owns a pool of threads and schedules processes, which are state
// machines without stacks and may move between those threads at each step.
//
//   weft::procs::runtime engine({.workers = 4});
//   engine.on_command("fetch", [](const command& asked, completion done) {
//     start_fetch(asked.payload, std::move(done));  // completes later, from any thread
//   });
//   process_handle job = engine.submit(std::make_unique<my_workflow>(), "run", input);
//   engine.send(job.id(), "hello");
//   std::string result = job.wait();      // from a thread; job.await() from a weft coroutine
//   engine.stop(std::chrono::seconds(5)); // cancel, wait, force the rest, join the workers
//
// Threads: every member is thread-safe and may be called from any thread, from inside a
// process's step (through context::owner()) and from command handlers; none blocks except
// process_handle::wait and stop. The workers are the runtime's own threads (hardware
// threads by default); a process runs on one of them at a time and may move between them.
//
// Work distribution: each worker has a bounded local queue and a one-slot "next" that runs
// first: a process woken or started on a worker takes "next", and the one it displaces goes to
// the queue (so the last one started or woken by a step runs right after it, on the same core;
// "next" is not stolen, so a step that spawns should not then spin). One exception: when a
// step that woke a process with a message ends its own process (done or failed) and other work
// is queued, the woken one goes behind that work instead, since nobody awaits it: a parent
// hearing from many children that report and finish runs once per pass of the queue, with
// their messages together, rather than once per child. A global FIFO takes
// submissions from outside, and a worker takes up to global_batch from it at once; an idle
// worker steals half of a random victim's queue. The global queue is checked every
// global_queue_interval runs, and "next" is bounded, so no process can starve the others.
//
// Waiting for many processes: a parent that only needs to know its children finished counts
// them with a weft::procs::wait_group (weft/procs/wait_group.hpp, Go's WaitGroup): one event
// when the last is done, instead of a message from each into its inbox.
//
// Lifetime: a process's handle, pid and completions may outlive it, and the runtime (a
// completion for a finished process or a stopped runtime is dropped when completed).
// stop() (or the destructor, which stops with default_stop_grace) delivers a cancel event to
// every live process, waits for them to finish, force-completes the rest at the deadline, and
// joins every worker before it returns. submit/send racing stop either take effect (the
// process is cancelled like the others) or throw runtime_stopped_error.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "weft/error.hpp"
#include "weft/procs/process.hpp"
#include "weft/sched/timeout.hpp"

namespace weft::procs {

// send / cancel / terminate to a pid that is not (or no longer) a live process.
class unknown_process_error : public weft::error {
 public:
  using weft::error::error;
};

// submit / send after stop() began.
class runtime_stopped_error : public weft::error {
 public:
  using weft::error::error;
};

// A command yielded with a type no handler is registered for: the yield completes with this.
class unknown_command_error : public weft::error {
 public:
  using weft::error::error;
};

namespace detail {
class engine;
struct outcome_state;
}  // namespace detail

// The right (and the duty) to complete one yielded command. Move-only; complete() or fail()
// once, from any thread, inline in the handler or later. One destroyed while still pending
// fails the yield ("the handler for command X dropped its completion"): a process is never
// left waiting for a completion nobody holds.
class completion {
 public:
  completion() noexcept = default;
  completion(completion&& other) noexcept;
  completion& operator=(completion&& other) noexcept;
  completion(const completion&) = delete;
  completion& operator=(const completion&) = delete;
  ~completion();

  // Completes the yield with its result (complete) or an error (fail); once, from any thread.
  void complete(std::string data = {});
  void fail(std::exception_ptr error);
  void fail(std::string_view reason);  // a weft::error with this message

  // pending(): not yet completed; target(): the process that yielded; tag(): the yield's tag.
  bool pending() const noexcept { return engine_ != nullptr; }
  pid target() const noexcept { return target_; }
  std::uint64_t tag() const noexcept { return tag_; }

 private:
  friend class detail::engine;
  completion(std::shared_ptr<detail::engine> engine, pid target, std::uint64_t tag,
             const std::string& type);
  void deliver(std::string data, std::exception_ptr error);

  std::shared_ptr<detail::engine> engine_;
  pid target_ = no_pid;
  std::uint64_t tag_ = 0;
  const std::string* type_ = nullptr;  // the handler's registered name (lives in the engine)
};

// What runs a yielded command: it completes done, at once or later from any thread.
using command_handler = std::function<void(const command& yielded, completion done)>;

// A submitted process's outcome: its result (done), its error (failed; cancelled_error when
// terminated or forced at stop). Copyable; the process runs whether or not handles exist.
class process_handle {
 public:
  process_handle() noexcept = default;
  // id(): the process's pid; valid(): false for an empty handle; done(): whether it finished.
  pid id() const noexcept { return id_; }
  bool valid() const noexcept { return state_ != nullptr; }
  bool done() const noexcept;
  // Blocks the calling thread until the process finished; returns its result or throws its
  // error. Not from a weft coroutine (it would stall that thread's weft::scheduler): use await().
  std::string wait() const;
  // wait() with a limit: timeout_error when it passes first (the process keeps running). A
  // limit too long for the clock (duration::max()) means no limit; zero or negative, one that
  // has already passed.
  std::string wait_for(std::chrono::steady_clock::duration limit) const;
  // From a weft coroutine: suspends only the coroutine. timeout_error / cancelled_error as
  // for any weft wait; the process keeps running either way.
  std::string await(const weft::timeout& limit = weft::timeout::never()) const;

 private:
  friend class detail::engine;
  process_handle(pid id, std::shared_ptr<detail::outcome_state> state) noexcept
      : id_(id), state_(std::move(state)) {}
  pid id_ = no_pid;
  std::shared_ptr<detail::outcome_state> state_;
};

// How a runtime schedules (the defaults suit most uses).
struct runtime_options {
  std::size_t workers = 0;                 // 0: one per hardware thread
  std::size_t local_queue_capacity = 256;  // a power of two
  std::size_t global_queue_interval = 61;  // runs between forced looks at the global queue
  std::size_t global_batch = 16;           // taken from the global queue at once
  std::size_t next_slot_limit = 8;         // runs of "next" in a row before the queue's turn
  // The idle ladder: a worker out of work keeps looking (stealing, reading the global queue)
  // for spin_time, pausing the CPU between rounds, then yields the thread yield_rounds times,
  // then parks on a futex. At most half the workers (and half the cores) search at once; the others
  // park. Spinning makes a wake-up after a short lull cost a queue read instead of a futex wake and
  // a reschedule (microseconds); it costs at most spin_time of CPU per lull, nothing when idle.
  // With a single core allowed to the process there is no spinning nor yielding: it would only
  // delay the thread that makes the work.
  std::chrono::microseconds spin_time{200};
  std::size_t yield_rounds = 4;
  std::string name = "weft::procs";  // in error messages and thread names
  // Hears of a process started with spawn() that failed (an error other than cancelled_error):
  // it has no handle to carry the error. Called once, on the worker that ran it, after its
  // close(); must not block or throw. Empty: the failure is written to stderr with the pid.
  std::function<void(pid id, std::exception_ptr error)> on_detached_failure = nullptr;
};

// The grace period of the destructor's stop().
inline constexpr std::chrono::seconds default_stop_grace{10};

class runtime {
 public:
  // Starts the workers.
  explicit runtime(runtime_options options = {});
  ~runtime();  // stop(default_stop_grace) unless stopped
  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;

  // Registers (or replaces) the handler for commands of `type`. Handlers run on the worker
  // that ran the yielding step, right after the step; they must not block. A handler that
  // throws while it still holds its completion (it did not complete it or hand it on) fails
  // the yield with that exception, as completion::fail would; one that throws after
  // completing or handing on its completion leaves the yield to that, and the exception is
  // written to stderr.
  void on_command(std::string type, command_handler handler);

  // Starts a process at entry point `method` with `input`. The handle's id is valid at once
  // (send to it works before its first step). runtime_stopped_error after stop() began.
  process_handle submit(std::unique_ptr<process> body, std::string_view method = "main",
                        std::string_view input = {});
  // A plain function as a one-step process: its return value is the result, its exception
  // the error.
  process_handle submit(std::function<std::string()> function);

  // As submit, for a process nobody waits on (Go's `go`, Erlang's spawn): returns only its pid
  // and skips the outcome a handle would share, a good part of a small process's cost. Its
  // result is dropped; a failure goes to runtime_options::on_detached_failure.
  pid spawn(std::unique_ptr<process> body, std::string_view method = "main",
            std::string_view input = {});
  pid spawn(std::function<std::string()> function);

  // Delivers a message event to a live process, waking it if idle. unknown_process_error if
  // `to` is unknown or finished; runtime_stopped_error after stop() began. A message
  // accepted by a process that then finishes without stepping again is dropped with it.
  void send(pid to, std::string message, pid from = no_pid);
  // As send, but false instead of unknown_process_error.
  bool try_send(pid to, std::string message, pid from = no_pid);
  // Asks a process to finish: one cancel event (a second cancel is a no-op).
  void cancel(pid target);
  // Ends a process now: no further step; close() is called once (after its current step if
  // it is running); its outcome is cancelled_error. unknown_process_error if not live.
  void terminate(pid target);

  // Cancels every live process, waits up to `grace` for them to finish, force-completes the
  // rest (each closed once, outcome cancelled_error) and joins the workers. Returns true when
  // every process finished by itself. Later calls wait for the first, then return true. Not from a
  // worker. A grace too long for the clock (duration::max()) waits as long as it takes; zero or
  // negative forces at once whatever did not finish on the cancel.
  bool stop(std::chrono::steady_clock::duration grace);

  // The number of worker threads.
  std::size_t workers() const noexcept;
  // Processes submitted and not yet finished. Agrees with the handles: once wait(), await() or
  // done() on a process's handle has seen it finish, live() no longer counts it (the count is
  // settled before the handle). Processes submitted or finishing meanwhile on other threads may
  // or may not be counted.
  std::size_t live() const noexcept;

  // What the workers did, summed (stats()).
  struct counters {
    std::uint64_t steps = 0;           // steps run
    std::uint64_t steals = 0;          // successful steal operations
    std::uint64_t stolen = 0;          // processes moved by them
    std::uint64_t global_batches = 0;  // batches taken from the global queue
    std::uint64_t parks = 0;           // times a worker went to sleep
  };
  counters stats() const noexcept;  // sums over the workers; approximate while running

 private:
  friend class wait_group;  // names the engine its zero events go through
  std::shared_ptr<detail::engine> engine_;
};

}  // namespace weft::procs

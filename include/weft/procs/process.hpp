// weft::procs: step-driven processes (actors, workflows) run by a work-stealing runtime.
//
// A process is a state machine the runtime advances one step at a time, on whichever worker
// thread is free; it never blocks a thread. Between steps it waits for events: the completion
// of a command it yielded (a timer, a database call, anything a command handler does), a
// message from another process or thread, or a cancel.
//
// Contract for implementers of `process`:
//   - init(), step() and close() are called by one worker at a time, never concurrently, and
//     each call happens-after the previous one (a process may keep plain, unsynchronised state).
//     Successive steps may run on different threads: keep no thread-locals across steps.
//   - init() is called once, before the first step; it throws (std::invalid_argument for an
//     unknown method) to refuse the entry point: the process then fails without a step.
//   - step() reads the events delivered since the last step (in arrival order; it may move
//     their data out) and writes its status and its yields into `out`. It must return promptly:
//     a step is not preempted. It may throw: the process fails with that exception.
//   - close() is called exactly once, after the process completed (done, failed, terminated or
//     forced at stop), on a worker thread (or the thread calling stop()). It must not throw.
//   - The process object is owned by the runtime from submit() to close().
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "weft/detail/blocks.hpp"

namespace weft::procs {

class runtime;
namespace detail {
class engine;
}

// A process id: generation in the high 32 bits, table slot in the low 32. A finished process's
// slot is reused under a new generation, so an old pid never reaches the new process. 0 is
// never a valid pid.
using pid = std::uint64_t;
inline constexpr pid no_pid = 0;  // never a valid pid

// What an event tells a step.
enum class event_type : std::uint8_t {
  yield_complete,  // a command this process yielded finished: tag is the yield's tag
  message,         // send(pid, data) from another process or a thread
  cancel,          // the process is asked to finish (runtime::cancel or stop); sent once
};

// Something that happened to a process, handed to its step() to read. Not weft::event
// (weft/sync/event.hpp), the flag coroutines set() and wait() on: they share the word because
// each is its field's usual name (what an event-driven state machine is fed; what asyncio and
// threading call that flag), and they cannot be mistaken for one another in code: a
// procs::event is a value a step reads out of std::span<event>, never waited on; a weft::event
// is a non-copyable object that coroutines wait on, never read as data.
struct event {
  event_type type = event_type::message;  // what happened
  std::uint64_t tag = 0;                  // yield_complete: the tag the command was yielded with
  std::string data;                       // the message, or the command's result
  std::exception_ptr error;  // yield_complete: set when the command failed (data is empty)
  pid from = no_pid;         // message: the sending process, no_pid when sent from a thread
};

// What a step asks for next.
enum class step_status : std::uint8_t {
  keep_running,  // step again soon, after the other ready processes had a turn
  wait,          // step again when an event arrives (yields outstanding or a message)
  done,          // finished with a result
  failed,        // finished with an error
};

// A command yielded by a step, dispatched to the handler registered for its type.
struct command {
  std::string type;       // the handler it goes to (runtime::on_command)
  std::uint64_t tag = 0;  // comes back on the yield_complete event
  std::string payload;    // the handler's input
};

// What a step produced. The runtime reuses one per worker and clears it before each step:
// the strings and vectors keep their capacity, so a process in steady state allocates nothing
// here. The default status is `wait`.
class step_output {
 public:
  // The step's status: keep_running (step again soon), wait (step on the next event; the default),
  // done (finish with a result) or fail (finish with an error).
  void keep_running() noexcept { status_ = step_status::keep_running; }
  void wait() noexcept { status_ = step_status::wait; }
  void done(std::string_view result = {});
  void fail(std::string_view reason);
  void fail(std::exception_ptr error);
  // Yields a command: after the step, it is handed to the handler for `type`, whose
  // completion comes back as a yield_complete event carrying `tag`.
  void yield(std::string_view type, std::uint64_t tag, std::string_view payload = {});

  // What the step produced, for the runtime: status(), commands(), result() and error().
  step_status status() const noexcept { return status_; }
  std::span<const command> commands() const noexcept { return {commands_.data(), used_}; }
  const std::string& result() const noexcept { return result_; }
  const std::exception_ptr& error() const noexcept { return error_; }
  // Back to "wait, no yields", keeping every buffer's capacity.
  void clear() noexcept;

 private:
  friend class detail::engine;  // moves the result out instead of copying it
  step_status status_ = step_status::wait;
  std::vector<command> commands_;  // the first used_ are this step's; the rest are spare
  std::size_t used_ = 0;
  std::string result_;
  std::exception_ptr error_;
};

// What a process knows of its place: its pid and the runtime running it. Valid from init()
// to close(); usable only from the process's own init/step (send and submit are thread-safe
// anyway). It lives in the process object itself (see process), so reading it touches only
// memory the worker running the process already has: not the engine's record of the process,
// which senders on other cores write.
class context {
 public:
  // self(): this process's pid; owner(): the runtime running it.
  pid self() const noexcept { return self_; }
  runtime& owner() const noexcept { return *owner_; }

 private:
  friend struct process_record_access;
  pid self_ = no_pid;
  runtime* owner_ = nullptr;
};

// A step-driven process: implement init, step and, if needed, close (see above).
class process {
 public:
  virtual ~process() = default;

  // Process objects are made and dropped once per spawn, often by the thousand: `new` of any
  // class derived from process (std::make_unique included) takes its memory from weft's
  // small-block cache (weft/detail/blocks.hpp) instead of malloc. The runtime deletes the
  // object through this virtual destructor, so the size matches. Over-aligned classes and
  // placement new use the standard forms.
  static void* operator new(std::size_t size) { return weft::detail::allocate_block(size); }
  // The matching delete, and the aligned and placement forms of new and delete.
  static void operator delete(void* block, std::size_t size) noexcept {
    weft::detail::deallocate_block(block, size);
  }
  static void* operator new(std::size_t size, std::align_val_t alignment) {
    return ::operator new(size, alignment);
  }
  static void operator delete(void* block, std::size_t, std::align_val_t alignment) noexcept {
    ::operator delete(block, alignment);
  }
  static void* operator new(std::size_t, void* where) noexcept { return where; }
  static void operator delete(void*, void*) noexcept {}

  // `self` is this object's own context (the same reference for the whole life of the
  // process), so keeping a pointer or reference to it is safe until close().
  virtual void init(context& self, std::string_view method, std::string_view input) = 0;
  // Reads events and writes the step's status and yields into out (see above).
  virtual void step(std::span<event> events, step_output& out) = 0;
  // Called once after the process completed (see above); must not throw.
  virtual void close() noexcept {}

 private:
  friend struct process_record_access;  // the runtime binds it when the process starts
  context context_;
};

}  // namespace weft::procs

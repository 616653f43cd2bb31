// weft::process: child processes for coroutines (uv_spawn).
//
// exec() runs a program to its end and returns its exit status with everything it wrote:
// stdout and stderr are read concurrently while it runs (a chatty child never blocks on a full
// pipe) and stdin gets options.stdin_data, then end of file. spawn() starts a program and hands
// back a weft::child to talk to it and wait for it.
//
// Every blocking call takes a weft::timeout and is a cancellation point. When exec() is
// cancelled or times out it kills the child (SIGKILL) and reaps it before the exception leaves
// (the reaping wait itself cannot be interrupted; it lasts as long as the kernel takes to kill).
// A weft::child that is destroyed while its process still runs kills it with SIGKILL; the
// process is then reaped in the background (run() waits for that), so no zombie and no libuv
// handle outlives the run.
//
// Failures are weft::io_error with the libuv code and the program: "spawn nosuch-program: no
// such file or directory". Writing to a child's stdin after it has gone is an io_error (EPIPE):
// the first spawn ignores SIGPIPE for the whole process, unless the program installed its own
// handler, because otherwise that write would kill this process.
//
// Thread: call from a coroutine on the scheduler's thread (std::logic_error elsewhere).
#pragma once

#include <csignal>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "weft/sched/timeout.hpp"

namespace weft {

namespace detail {
struct child_state;
struct child_access;
}  // namespace detail

namespace process {

// What a child's standard stream is connected to.
enum class stdio {
  pipe,     // a pipe to this process (exec always uses pipes)
  inherit,  // this process's own stdin/stdout/stderr
  ignore,   // /dev/null
};

struct options {
  // "NAME=value" entries making up the child's whole environment; empty: it inherits ours.
  std::vector<std::string> env{};
  // The child's working directory; empty: ours.
  std::string cwd{};
  // exec only: written to the child's stdin, which is then closed (the child sees end of file).
  std::string stdin_data{};
  // exec only: the limit for the whole run; past it the child is killed (timeout_error).
  weft::timeout limit{};
  // spawn only (exec pipes all three).
  stdio stdin_mode = stdio::pipe;
  stdio stdout_mode = stdio::pipe;
  stdio stderr_mode = stdio::pipe;
};

// How a child ended: its exit status, or the signal that ended it (then exit_status is 0).
struct status {
  std::int64_t exit_status = 0;
  int term_signal = 0;
};

struct result {
  std::int64_t exit_status = 0;
  int term_signal = 0;
  std::string standard_output;
  std::string standard_error;
};

// Runs argv (argv[0] is looked up in PATH) to its end: it returns once the child has exited and
// both output pipes reached end of file (a background grandchild that keeps them open keeps
// exec waiting: bound it with options.limit). Throws io_error when it cannot be started,
// timeout_error past options.limit and cancelled_error, both after killing and reaping it.
result exec(const std::vector<std::string>& argv, const options& options = {});

}  // namespace process

// A running (or finished) child process started by process::spawn. Movable, not copyable; used
// by one coroutine at a time, except that one coroutine may read stdout, another stderr and a
// third wait for the exit at the same time (the way to drain both pipes of a chatty child).
//
// The stdin/stdout/stderr calls are built directly on libuv pipes for now; they will move onto
// weft::pipe (the streams layer) once that exists, keeping these semantics.
class child {
 public:
  child() noexcept = default;
  child(child&& other) noexcept;
  child& operator=(child&& other) noexcept;
  child(const child&) = delete;
  child& operator=(const child&) = delete;
  // Kills a still running child with SIGKILL and lets it be reaped in the background; closes
  // the pipes (unread output is dropped).
  ~child();

  int pid() const noexcept { return pid_; }
  // Waits for the child to end (returns at once if it has).
  process::status wait(const timeout& limit = timeout::never());
  // True once the child has ended and been reaped.
  bool exited() const noexcept;
  // Sends signal to the child. Does nothing once it has been reaped (its pid may be reused by
  // then). io_error if the kernel refuses.
  void kill(int signal = SIGTERM);

  // Writes all of data to the child's stdin; returns once the pipe has taken it. io_error
  // (broken pipe) if the child closed its end; std::logic_error if stdin is not a pipe or was
  // closed.
  void write_stdin(std::string_view data, const timeout& limit = timeout::never());
  // Closes the child's stdin once pending writes are done (the child sees end of file).
  // Idempotent.
  void close_stdin() noexcept;
  // Reads what the child wrote: up to buffer.size() bytes, at least one unless at end of file
  // (then 0). Output is read from the pipe only while asked for (up to 64 KiB ahead), so a child
  // whose output nobody reads blocks once the pipe is full.
  std::size_t read_stdout(std::span<char> buffer, const timeout& limit = timeout::never());
  std::size_t read_stderr(std::span<char> buffer, const timeout& limit = timeout::never());

 private:
  friend struct detail::child_access;
  explicit child(detail::child_state* state) noexcept;
  void release() noexcept;

  detail::child_state* state_ = nullptr;
  int pid_ = 0;
};

namespace process {

// Starts argv (argv[0] is looked up in PATH). io_error when it cannot be started
// ("spawn nosuch-program: no such file or directory").
child spawn(const std::vector<std::string>& argv, const options& options = {});

}  // namespace process
}  // namespace weft

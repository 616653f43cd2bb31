// weft::subprocess: child processes for coroutines (uv_spawn).
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
// A piped standard stream is a weft::pipe (one end of a socketpair; the child has the other as
// its fd 0, 1 or 2), so it is a weft::stream like any other: read_until, read_exactly, writev,
// timeouts and cancellation all work on it, and code written for sockets takes it as is.
//
// Failures are weft::io_error with the libuv code and the program: "spawn nosuch-program: no such
// file or directory", "write stdin of cat: broken pipe". When the working directory or a program
// given as a path is what failed, the message names it: "spawn true: working directory
// /nonexistent: no such file or directory", "spawn ./tool: program ./tool is not executable:
// permission denied". Writing to a child's stdin after it has gone is an io_error (EPIPE): the
// first spawn ignores SIGPIPE for the whole process, unless the program installed its own handler,
// because otherwise that write would kill this process. While children run, libuv catches
// SIGCHLD to reap them; once the last one of every scheduler is reaped, SIGCHLD is back to what
// the program had (its own handler, SIG_IGN, or the default).
//
// Thread: call from a coroutine on the scheduler's thread (std::logic_error elsewhere, naming
// the call made: "weft::subprocess::exec called outside a coroutine; ...").
#pragma once

#include <csignal>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "weft/io/pipe.hpp"
#include "weft/sched/timeout.hpp"

namespace weft {

namespace detail {
struct child_state;
struct child_access;
}  // namespace detail

namespace subprocess {

// What a child's standard stream is connected to.
enum class stdio {
  pipe,     // a pipe to this process (exec always uses pipes)
  inherit,  // this process's own stdin/stdout/stderr
  ignore,   // /dev/null
};

// How a child is started (exec and spawn).
struct options {
  // "NAME=value" entries making up the child's whole environment (an empty vector: an empty
  // environment); unset: the child inherits ours.
  std::optional<std::vector<std::string>> env{};
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
  std::int64_t exit_status = 0;  // the child's exit code
  int term_signal = 0;           // the signal that ended it, or 0
};

// What exec returns: how the child ended and everything it wrote.
struct result {
  std::int64_t exit_status = 0;  // the child's exit code
  int term_signal = 0;           // the signal that ended it, or 0
  std::string standard_output;   // all it wrote to stdout
  std::string standard_error;    // all it wrote to stderr
};

// Runs argv (argv[0] is looked up in PATH) to its end: it returns once the child has exited and
// both output pipes reached end of file (a background grandchild that keeps them open keeps
// exec waiting: bound it with options.limit). Throws io_error when it cannot be started,
// timeout_error past options.limit and cancelled_error, both after killing and reaping it.
result exec(const std::vector<std::string>& argv, const options& options = {});

}  // namespace subprocess

// A running (or finished) child process started by subprocess::spawn. Movable, not copyable. Its
// piped standard streams are weft::pipe objects with the usual stream rules (one reader and
// any number of writers per stream at a time), so one coroutine may read stdout, another stderr
// and a third wait for the exit at the same time (the way to drain both pipes of a chatty
// child).
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

  // The child's process id.
  int pid() const noexcept { return pid_; }
  // Waits for the child to end (returns at once if it has).
  subprocess::status wait(const timeout& limit = timeout::never());
  // True once the child has ended and been reaped.
  bool exited() const noexcept;
  // Sends signal to the child. Does nothing once it has been reaped (its pid may be reused by
  // then). io_error if the kernel refuses.
  void kill(int signal = SIGTERM);

  // The child's standard streams. std::logic_error if that stream was not spawned as
  // stdio::pipe. Errors on them name the stream and the program ("read stdout of cat: ...").
  // Output is read only while asked for (the stream's read-ahead limit), so a child whose
  // output nobody reads blocks once the pipe is full.
  weft::pipe& stdin_pipe();
  weft::pipe& stdout_pipe();
  weft::pipe& stderr_pipe();

  // Shorthands for the calls above. write_stdin writes all of data (io_error "broken pipe" if
  // the child closed its end; std::logic_error once close_stdin was called).
  void write_stdin(std::string_view data, const timeout& limit = timeout::never());
  // Closes our end of stdin: the child reads end of file once it has read what was written.
  // Bytes of a write that timed out or was cancelled and is still queued are dropped (call
  // stdin_pipe().shutdown() first to flush them). Idempotent.
  void close_stdin() noexcept;
  // read_some on stdout / stderr: at least one byte, or 0 at end of file.
  std::size_t read_stdout(std::span<char> buffer, const timeout& limit = timeout::never());
  std::size_t read_stderr(std::span<char> buffer, const timeout& limit = timeout::never());

 private:
  friend struct detail::child_access;
  explicit child(detail::child_state* state) noexcept;
  void release() noexcept;

  weft::pipe& piped(weft::pipe& stream, const char* name);

  detail::child_state* state_ = nullptr;
  int pid_ = 0;
  weft::pipe stdin_;
  weft::pipe stdout_;
  weft::pipe stderr_;
};

namespace subprocess {

// Starts argv (argv[0] is looked up in PATH). io_error when it cannot be started
// ("spawn nosuch-program: no such file or directory").
child spawn(const std::vector<std::string>& argv, const options& options = {});

}  // namespace subprocess
}  // namespace weft

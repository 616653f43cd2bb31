// Child processes over uv_spawn.
//
// Lifetimes. Everything libuv points at (the uv_process_t, the three uv_pipe_t, pending writes)
// lives in one heap child_state, never in a coroutine's frame or in the movable weft::child.
// The state is freed only when both hold:
//   - no user is left: the owning weft::child, and every coroutine inside a call on it (a
//     waiter's handle_wait is linked into the state until it resumes);
//   - every handle it initialised has been closed, i.e. its close callback has run.
// A child destroyed while its process runs sends SIGKILL and leaves the process handle open:
// libuv reaps the process (waitpid) only for open handles, so the handle is closed in the exit
// callback, after the reaping. Meanwhile the state counts as an abandoned operation of the
// reactor, so run() waits for it before closing the loop (no zombie, no leaked handle).
#include "weft/io/process.hpp"

#include <signal.h>
#include <uv.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "io/file_handle_wait.hpp"
#include "io/stream_handle.hpp"
#include "reactor/reactor.hpp"
#include "sched/scheduler_core.hpp"
#include "weft/error.hpp"
#include "weft/reactor/operation.hpp"
#include "weft/sched/this_coroutine.hpp"

namespace weft {
namespace detail {

// How far a spawned child's output is read ahead of its reader (exec reads without limit).
constexpr std::size_t read_ahead = 64 * 1024;

struct output_pipe {
  explicit output_pipe(const char* stream_name) : name(stream_name) {}
  const char* name;  // "stdout", for messages
  uv_pipe_t pipe{};
  bool piped = false;    // connected to the child by a pipe (not inherited or ignored)
  bool open = false;     // initialised and not closing
  bool reading = false;  // uv_read_start'ed
  bool ended = false;    // end of file, a read error, closed, or not a pipe at all
  bool allocation_pending = false;
  int error = 0;
  std::size_t allocated_at = 0;
  std::string buffered;  // read, not yet consumed
};

// One write to the child's stdin. Freed by its waiter, or by its callback if the waiter left.
struct stdin_write {
  uv_write_t request{};
  child_state* state = nullptr;
  std::string data;  // owned: libuv reads it until the callback
  int status = 0;
  bool done = false;
  bool waiter_gone = false;
};

struct child_state {
  child_state(scheduler_core& core, std::string name)
      : waiters(core), driver(core.driver()), program(std::move(name)) {}

  handle_waiters waiters;
  reactor& driver;
  std::string program;      // argv[0]
  std::string description;  // "process sleep (pid 42)"
  uv_process_t process{};
  bool process_open = false;  // initialised (uv_spawn does it even when it fails), not closing
  bool running = false;       // spawned and not yet reaped
  bool exited = false;
  process::status ended{};
  uv_pipe_t input{};
  bool input_piped = false;
  bool input_open = false;
  bool input_close_requested = false;
  std::size_t pending_writes = 0;
  output_pipe out{"stdout"};
  output_pipe err{"stderr"};
  bool capture = false;  // exec: read both pipes to the end, never pausing
  int handles_open = 0;
  int users = 1;  // the owning weft::child
  bool counted_as_abandoned = false;
};

namespace {

void maybe_free(child_state& state) noexcept { free_when_unused(state, state.handles_open > 0); }

void on_handle_closed(uv_handle_t* handle) {
  auto& state = *static_cast<child_state*>(handle->data);
  --state.handles_open;
  maybe_free(state);  // last: may free the state
}

void close_handle(uv_handle_t* handle) noexcept { uv_close(handle, &on_handle_closed); }

void close_input(child_state& state) noexcept {
  state.input_open = false;
  close_handle(reinterpret_cast<uv_handle_t*>(&state.input));  // pending writes end ECANCELED
}

void close_output(output_pipe& output) noexcept {
  if (output.open) {
    output.open = false;
    output.reading = false;
    close_handle(reinterpret_cast<uv_handle_t*>(&output.pipe));
  }
  output.ended = true;
}

output_pipe& output_of(uv_handle_t* handle) {
  auto& state = *static_cast<child_state*>(handle->data);
  return handle == reinterpret_cast<uv_handle_t*>(&state.out.pipe) ? state.out : state.err;
}

void on_exit(uv_process_t* process, std::int64_t exit_status, int term_signal) {
  auto& state = *static_cast<child_state*>(process->data);
  state.running = false;
  state.exited = true;
  state.ended = {exit_status, term_signal};
  // The process has been reaped: nothing is left for the handle to do.
  state.process_open = false;
  close_handle(reinterpret_cast<uv_handle_t*>(process));
  state.waiters.notify_all();
}

void on_allocate(uv_handle_t* handle, std::size_t, uv_buf_t* buffer) {
  // Reads land straight at the end of the buffered output (no copy), 64 KiB at a time.
  output_pipe& output = output_of(handle);
  constexpr std::size_t chunk = 64 * 1024;
  output.allocated_at = output.buffered.size();
  output.buffered.resize(output.allocated_at + chunk);
  output.allocation_pending = true;
  *buffer = uv_buf_init(output.buffered.data() + output.allocated_at, chunk);
}

void on_read(uv_stream_t* stream, ssize_t count, const uv_buf_t*) {
  auto* handle = reinterpret_cast<uv_handle_t*>(stream);
  auto& state = *static_cast<child_state*>(handle->data);
  output_pipe& output = output_of(handle);
  if (output.allocation_pending) {
    output.allocation_pending = false;
    output.buffered.resize(output.allocated_at +
                           static_cast<std::size_t>(std::max<ssize_t>(count, 0)));
  }
  if (count > 0) {
    if (!state.capture && output.buffered.size() >= read_ahead) {
      // Nobody is reading that fast: let the pipe fill and the child wait.
      uv_read_stop(stream);
      output.reading = false;
    }
  } else if (count < 0) {
    if (count != UV_EOF) {
      output.error = static_cast<int>(count);
    }
    close_output(output);
  } else {
    return;  // nothing read this time (EAGAIN)
  }
  state.waiters.notify_all();
}

void start_reading(output_pipe& output) noexcept {
  if (!output.open || output.reading || output.ended) {
    return;
  }
  int status = uv_read_start(reinterpret_cast<uv_stream_t*>(&output.pipe), &on_allocate, &on_read);
  if (status < 0) {
    output.error = status;
    close_output(output);
  } else {
    output.reading = true;
  }
}

void on_written(uv_write_t* request, int status) {
  auto* write = static_cast<stdin_write*>(request->data);
  child_state& state = *write->state;
  --state.pending_writes;
  if (state.pending_writes == 0 && state.input_close_requested && state.input_open) {
    close_input(state);
  }
  write->status = status;
  write->done = true;
  if (write->waiter_gone) {
    delete write;
  } else {
    state.waiters.notify_all();
  }
}

// Queues one write of data to the child's stdin; the caller owns the result unless it marks it
// waiter_gone.
stdin_write* queue_write(child_state& state, std::string_view data) {
  auto* write = new stdin_write;
  write->state = &state;
  write->data.assign(data);
  write->request.data = write;
  uv_buf_t buffer = uv_buf_init(write->data.data(), static_cast<unsigned int>(write->data.size()));
  int status = uv_write(&write->request, reinterpret_cast<uv_stream_t*>(&state.input), &buffer, 1,
                        &on_written);
  if (status < 0) {
    delete write;
    throw_uv_error(status, "write", "stdin of " + state.program);
  }
  ++state.pending_writes;
  return write;
}

void request_input_close(child_state& state) noexcept {
  if (!state.input_open || state.input_close_requested) {
    return;
  }
  state.input_close_requested = true;
  if (state.pending_writes == 0) {
    close_input(state);
  }
}

// A coroutine inside a call on the state keeps it alive (its handle_wait is linked into it).
class state_user {
 public:
  explicit state_user(child_state& state) noexcept : state_(state) { ++state_.users; }
  state_user(const state_user&) = delete;
  state_user& operator=(const state_user&) = delete;
  ~state_user() {
    --state_.users;
    maybe_free(state_);
  }

 private:
  child_state& state_;
};

std::size_t read_output(child_state& state, output_pipe& output, std::span<char> buffer,
                        const timeout& limit, const char* operation) {
  if (buffer.empty()) {
    return 0;
  }
  state_user user(state);
  start_reading(output);
  wait_until(
      state.waiters, [&] { return !output.buffered.empty() || output.ended; }, limit,
      std::string(output.name) + " of " + state.description);
  std::size_t count = std::min(buffer.size(), output.buffered.size());
  std::memcpy(buffer.data(), output.buffered.data(), count);
  output.buffered.erase(0, count);
  if (count == 0 && output.error != 0) {
    throw_uv_error(output.error, operation, std::string(output.name) + " of " + state.program);
  }
  if (output.buffered.size() < read_ahead) {
    start_reading(output);
  }
  return count;
}

}  // namespace

struct child_access {
  static child adopt(child_state* state) { return child(state); }
  static child_state& state(child& owner) { return *owner.state_; }
  static child spawn(const std::vector<std::string>& argv, const process::options& options,
                     bool capture);
};

child child_access::spawn(const std::vector<std::string>& argv, const process::options& options,
                          bool capture) {
  if (argv.empty() || argv[0].empty()) {
    throw std::logic_error(
        "weft::process: argv is empty; argv[0] must name the program to run (\"/bin/sh\")");
  }
  uv_loop_t& loop = current_uv_loop("weft::process::spawn");
  ignore_sigpipe_once();
  // From here on the owner's destructor closes whatever was initialised if anything throws.
  child owner = adopt(new child_state(*current_core(), argv[0]));
  child_state& state = *owner.state_;
  state.capture = capture;

  uv_stdio_container_t stdio[3] = {};
  auto connect = [&](int fd, process::stdio mode, uv_pipe_t& pipe, int direction) {
    switch (mode) {
      case process::stdio::pipe: {
        int status = uv_pipe_init(&loop, &pipe, 0);
        if (status < 0) {
          throw_uv_error(status, "spawn", argv[0]);
        }
        pipe.data = &state;
        ++state.handles_open;
        stdio[fd].flags = static_cast<uv_stdio_flags>(UV_CREATE_PIPE | direction);
        stdio[fd].data.stream = reinterpret_cast<uv_stream_t*>(&pipe);
        return true;
      }
      case process::stdio::inherit:
        stdio[fd].flags = UV_INHERIT_FD;
        stdio[fd].data.fd = fd;
        return false;
      case process::stdio::ignore:
        stdio[fd].flags = UV_IGNORE;
        return false;
    }
    return false;
  };
  // UV_READABLE_PIPE / UV_WRITABLE_PIPE are as seen from the child.
  state.input_piped = state.input_open =
      connect(0, options.stdin_mode, state.input, UV_READABLE_PIPE);
  state.out.piped = state.out.open =
      connect(1, options.stdout_mode, state.out.pipe, UV_WRITABLE_PIPE);
  state.out.ended = !state.out.open;
  state.err.piped = state.err.open =
      connect(2, options.stderr_mode, state.err.pipe, UV_WRITABLE_PIPE);
  state.err.ended = !state.err.open;

  std::vector<char*> args;
  for (const std::string& argument : argv) {
    args.push_back(const_cast<char*>(argument.c_str()));
  }
  args.push_back(nullptr);
  std::vector<char*> environment;
  for (const std::string& entry : options.env) {
    environment.push_back(const_cast<char*>(entry.c_str()));
  }
  environment.push_back(nullptr);

  uv_process_options_t spawn_options{};
  spawn_options.exit_cb = &on_exit;
  spawn_options.file = argv[0].c_str();
  spawn_options.args = args.data();
  spawn_options.env = options.env.empty() ? nullptr : environment.data();
  spawn_options.cwd = options.cwd.empty() ? nullptr : options.cwd.c_str();
  spawn_options.stdio_count = 3;
  spawn_options.stdio = stdio;
  state.process.data = &state;
  ++state.handles_open;
  state.process_open = true;  // uv_spawn initialises the handle first, even when it then fails
  int status = uv_spawn(&loop, &state.process, &spawn_options);
  if (status < 0) {
    throw_uv_error(status, "spawn", argv[0]);
  }
  state.running = true;
  owner.pid_ = state.process.pid;
  state.description = "process " + argv[0] + " (pid " + std::to_string(owner.pid_) + ")";
  return owner;
}

}  // namespace detail

using detail::child_access;
using detail::child_state;

child::child(detail::child_state* state) noexcept : state_(state) {}

child::child(child&& other) noexcept
    : state_(std::exchange(other.state_, nullptr)), pid_(std::exchange(other.pid_, 0)) {}

child& child::operator=(child&& other) noexcept {
  if (this != &other) {
    release();
    state_ = std::exchange(other.state_, nullptr);
    pid_ = std::exchange(other.pid_, 0);
  }
  return *this;
}

child::~child() { release(); }

void child::release() noexcept {
  if (state_ == nullptr) {
    return;
  }
  child_state& state = *std::exchange(state_, nullptr);
  if (state.running) {
    // on_exit reaps it and closes the process handle; if the kill fails the process is already
    // dead and its exit callback is on its way.
    uv_process_kill(&state.process, SIGKILL);
  } else if (state.process_open) {
    state.process_open = false;  // a failed spawn: the handle was initialised, never started
    detail::close_handle(reinterpret_cast<uv_handle_t*>(&state.process));
  }
  if (state.input_open) {
    detail::close_input(state);
  }
  detail::close_output(state.out);
  detail::close_output(state.err);
  state.waiters.notify_all();
  --state.users;
  detail::maybe_free(state);
}

namespace {
child_state& state_of(child_state* state, const char* operation) {
  if (state == nullptr) {
    throw std::logic_error(std::string("weft::child::") + operation +
                           " on an empty child (moved from, or never spawned); start one with "
                           "weft::process::spawn");
  }
  return *state;
}
}  // namespace

bool child::exited() const noexcept { return state_ != nullptr && state_->exited; }

process::status child::wait(const timeout& limit) {
  child_state& state = state_of(state_, "wait");
  detail::state_user user(state);
  detail::wait_until(
      state.waiters, [&] { return state.exited; }, limit, state.description);
  return state.ended;
}

void child::kill(int signal) {
  child_state& state = state_of(state_, "kill");
  if (!state.running) {
    return;  // reaped: its pid may belong to somebody else by now
  }
  int status = uv_process_kill(&state.process, signal);
  if (status < 0) {
    detail::throw_uv_error(status, "kill", state.description);
  }
}

void child::write_stdin(std::string_view data, const timeout& limit) {
  child_state& state = state_of(state_, "write_stdin");
  if (!state.input_piped) {
    throw std::logic_error("weft::child::write_stdin: stdin of " + state.description +
                           " is not a pipe; spawn it with options.stdin_mode = stdio::pipe");
  }
  if (!state.input_open || state.input_close_requested) {
    throw std::logic_error("weft::child::write_stdin: stdin of " + state.description +
                           " was closed by close_stdin()");
  }
  if (data.empty()) {
    return;
  }
  detail::state_user user(state);
  detail::stdin_write* write = detail::queue_write(state, data);
  try {
    detail::wait_until(
        state.waiters, [&] { return write->done; }, limit,
        "write to stdin of " + state.description);
  } catch (...) {
    if (write->done) {
      delete write;
    } else {
      write->waiter_gone = true;  // its callback frees it
    }
    throw;
  }
  int status = write->status;
  delete write;
  if (status < 0) {
    detail::throw_uv_error(status, "write", "stdin of " + state.program);
  }
}

void child::close_stdin() noexcept {
  if (state_ != nullptr) {
    detail::request_input_close(*state_);
  }
}

std::size_t child::read_stdout(std::span<char> buffer, const timeout& limit) {
  child_state& state = state_of(state_, "read_stdout");
  if (!state.out.piped) {
    throw std::logic_error("weft::child::read_stdout: stdout of " + state.description +
                           " is not a pipe; spawn it with options.stdout_mode = stdio::pipe");
  }
  return detail::read_output(state, state.out, buffer, limit, "read");
}

std::size_t child::read_stderr(std::span<char> buffer, const timeout& limit) {
  child_state& state = state_of(state_, "read_stderr");
  if (!state.err.piped) {
    throw std::logic_error("weft::child::read_stderr: stderr of " + state.description +
                           " is not a pipe; spawn it with options.stderr_mode = stdio::pipe");
  }
  return detail::read_output(state, state.err, buffer, limit, "read");
}

namespace process {

child spawn(const std::vector<std::string>& argv, const options& options) {
  return child_access::spawn(argv, options, false);
}

result exec(const std::vector<std::string>& argv, const options& options) {
  process::options piped = options;
  piped.stdin_mode = piped.stdout_mode = piped.stderr_mode = stdio::pipe;
  child running = child_access::spawn(argv, piped, true);
  child_state& state = child_access::state(running);
  if (!options.stdin_data.empty()) {
    // Not waited for on its own: it completes while the output is read (or fails with EPIPE if
    // the child does not read its stdin, which is the child's business).
    detail::queue_write(state, options.stdin_data)->waiter_gone = true;
  }
  detail::request_input_close(state);
  detail::start_reading(state.out);
  detail::start_reading(state.err);

  detail::state_user user(state);
  std::exception_ptr failure;
  try {
    detail::wait_until(
        state.waiters, [&] { return state.exited && state.out.ended && state.err.ended; },
        options.limit, state.description);
  } catch (...) {
    failure = std::current_exception();
  }
  if (failure) {
    // Timed out or cancelled: the child must not outlive the call. The reaping wait runs
    // outside the catch block (a suspension must not happen inside one) and cannot itself be
    // interrupted: SIGKILL ends it promptly.
    if (state.running) {
      uv_process_kill(&state.process, SIGKILL);
    }
    weft::protect([&] {
      detail::wait_until(
          state.waiters, [&] { return state.exited; }, timeout::never(),
          state.description + " (killed)");
    });
    std::rethrow_exception(failure);
  }
  for (detail::output_pipe* output : {&state.out, &state.err}) {
    if (output->error != 0) {
      detail::throw_uv_error(output->error, "read", std::string(output->name) + " of " + argv[0]);
    }
  }
  return {state.ended.exit_status, state.ended.term_signal, std::move(state.out.buffered),
          std::move(state.err.buffered)};
}

}  // namespace process
}  // namespace weft

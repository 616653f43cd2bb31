// Child processes over uv_spawn, with their standard streams as weft::pipe.
//
// Standard streams. Each piped stream is a socketpair (as libuv's own UV_CREATE_PIPE makes):
// the child's end is handed over with UV_INHERIT_FD (libuv dup2s it onto fd 0/1/2 in the child;
// both ends are close-on-exec, so no other child inherits them) and closed here right after the
// spawn; our end becomes a weft::pipe owned by the weft::child. Everything about reading and
// writing is then the stream layer's: buffers owned by the stream's state block, timeouts,
// cancellation, one error model.
//
// Lifetimes. The uv_process_t lives in a heap child_state, never in a coroutine's frame or in
// the movable weft::child. The state is freed only when both hold:
//   - no user is left: the owning weft::child, and every coroutine inside wait() (its
//     handle_wait is linked into the state until it resumes);
//   - the process handle has been closed, i.e. its close callback has run.
// A child destroyed while its process runs sends SIGKILL and leaves the process handle open:
// libuv reaps the process (waitpid) only for open handles, so the handle is closed in the exit
// callback, after the reaping. Meanwhile the state counts as an abandoned operation of the
// reactor, so run() waits for it before closing the loop (no zombie, no leaked handle).
#include "weft/io/subprocess.hpp"

#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include <array>
#include <cerrno>
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "io/c_string.hpp"
#include "io/file_handle_wait.hpp"
#include "io/stream_handle.hpp"
#include "io/stream_state.hpp"
#include "reactor/signal_disposition.hpp"
#include "reactor/uv_driver.hpp"
#include "sched/scheduler_core.hpp"
#include "weft/error.hpp"
#include "weft/reactor/detail/operation.hpp"
#include "weft/sched/task.hpp"
#include "weft/sched/this_coroutine.hpp"

namespace weft {
namespace detail {

struct child_state final : shared_handle_state {
  child_state(scheduler_core& core, std::string name)
      : shared_handle_state(core), program(std::move(name)) {}

  std::string program;      // argv[0]
  std::string description;  // "process sleep (pid 42)"
  uv_process_t process{};   // open from uv_spawn (which initialises it even when it fails)
  bool running = false;     // spawned and not yet reaped
  bool exited = false;
  subprocess::status ended{};
};

namespace {

void close_process(child_state& state) noexcept {
  // The loop's last process handle closing stops libuv's SIGCHLD watcher.
  child_signal_scope sigchld(*state.process.loop);
  state.close_handle(reinterpret_cast<uv_handle_t*>(&state.process));
}

void on_exit(uv_process_t* process, std::int64_t exit_status, int term_signal) {
  auto& state = state_of_handle<child_state>(process->data);
  state.running = false;
  state.exited = true;
  state.ended = {exit_status, term_signal};
  close_process(state);  // reaped: nothing is left for the handle to do
  state.waiters.notify_all();
}

// The child's ends of the socketpairs, closed here once the spawn has dup'ed them (or failed).
class child_ends {
 public:
  child_ends() { fds_.fill(-1); }
  child_ends(const child_ends&) = delete;
  child_ends& operator=(const child_ends&) = delete;
  ~child_ends() {
    for (int fd : fds_) {
      if (fd >= 0) {
        ::close(fd);
      }
    }
  }
  int& operator[](std::size_t index) noexcept { return fds_[index]; }

 private:
  std::array<int, 3> fds_{};
};

constexpr const char* stream_names[3] = {"stdin", "stdout", "stderr"};

// uv_spawn reports the errno of the child's chdir or of its execvp, and the two say ENOENT,
// EACCES or ENOTDIR alike: "spawn true: no such file or directory" for a missing working
// directory blames the program. On such a failure this looks at the working directory, then at
// a program given as a path, and names the one at fault ("spawn true: working directory
// /nonexistent: no such file or directory"). Returns the status and the message to report.
std::pair<int, std::string> explain_spawn_failure(int status, const std::string& program,
                                                  const std::string& cwd) {
  const bool path_error = status == UV_ENOENT || status == UV_EACCES || status == UV_ENOTDIR ||
                          status == UV_ELOOP || status == UV_ENAMETOOLONG;
  if (!path_error) {
    return {status, uv_strerror(status)};
  }
  auto failed = [](const std::string& what) {
    int code = uv_translate_sys_error(errno);
    return std::pair<int, std::string>(code, what + ": " + uv_strerror(code));
  };
  struct stat info {};
  if (!cwd.empty()) {
    if (::stat(cwd.c_str(), &info) != 0) {
      return failed("working directory " + cwd);
    }
    if (!S_ISDIR(info.st_mode)) {
      return {UV_ENOTDIR, "working directory " + cwd + ": " + uv_strerror(UV_ENOTDIR)};
    }
    if (::access(cwd.c_str(), X_OK) != 0) {
      return failed("working directory " + cwd);
    }
  }
  if (program.find('/') == std::string::npos) {
    return {status, uv_strerror(status)};  // looked up in PATH: the program is at fault
  }
  // A relative path is resolved in the child, after its chdir.
  std::string path = program.front() == '/' || cwd.empty() ? program : cwd + "/" + program;
  if (::stat(path.c_str(), &info) != 0) {
    return failed("program " + path);
  }
  if (S_ISDIR(info.st_mode)) {
    return {UV_EACCES, "program " + path + ": is a directory"};
  }
  if (::access(path.c_str(), X_OK) != 0) {
    return failed("program " + path + " is not executable");
  }
  if (status == UV_ENOENT) {
    // The file is there and executable, yet execve said ENOENT: what it needs is missing.
    return {status, "program " + path +
                        ": its interpreter (the #! line) or its dynamic loader was not found: " +
                        uv_strerror(status)};
  }
  return {status, uv_strerror(status)};
}

}  // namespace

struct child_access {
  // operation: the public call, named in misuse errors ("weft::subprocess::exec").
  static child spawn(const std::vector<std::string>& argv, const subprocess::options& options,
                     const char* operation);
};

child child_access::spawn(const std::vector<std::string>& argv, const subprocess::options& options,
                          const char* operation) {
  if (argv.empty() || argv[0].empty()) {
    throw std::logic_error(std::string(operation) +
                           ": argv is empty; argv[0] must name the program to run (\"/bin/sh\")");
  }
  for (const std::string& argument : argv) {
    refuse_nul(argument, "spawn", "argument");
  }
  if (options.env.has_value()) {
    for (const std::string& entry : *options.env) {
      refuse_nul(entry, "spawn", "environment entry");
    }
  }
  refuse_nul(options.cwd, "spawn", "working directory");
  uv_loop_t& loop = current_uv_loop(operation);
  ignore_sigpipe_once();
  // From here on the owner's destructor cleans up whatever was made if anything throws.
  child owner(new child_state(*current_core(), argv[0]));
  child_state& state = *owner.state_;

  uv_stdio_container_t stdio[3] = {};
  child_ends ends;
  weft::pipe* ours[3] = {&owner.stdin_, &owner.stdout_, &owner.stderr_};
  const subprocess::stdio modes[3] = {options.stdin_mode, options.stdout_mode, options.stderr_mode};
  for (int fd = 0; fd < 3; ++fd) {
    switch (modes[fd]) {
      case subprocess::stdio::pipe: {
        int pair[2];
        if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
          throw_uv_error(uv_translate_sys_error(errno), "spawn", argv[0]);
        }
        ends[fd] = pair[1];
        try {
          *ours[fd] = weft::pipe::open(pair[0]);
        } catch (...) {
          ::close(pair[0]);
          throw;
        }
        stdio[fd].flags = UV_INHERIT_FD;
        stdio[fd].data.fd = pair[1];
        break;
      }
      case subprocess::stdio::inherit:
        stdio[fd].flags = UV_INHERIT_FD;
        stdio[fd].data.fd = fd;
        break;
      case subprocess::stdio::ignore:
        stdio[fd].flags = UV_IGNORE;
        break;
    }
  }

  std::vector<char*> args;
  for (const std::string& argument : argv) {
    args.push_back(const_cast<char*>(argument.c_str()));
  }
  args.push_back(nullptr);
  std::vector<char*> environment;
  if (options.env.has_value()) {
    for (const std::string& entry : *options.env) {
      environment.push_back(const_cast<char*>(entry.c_str()));
    }
  }
  environment.push_back(nullptr);

  uv_process_options_t spawn_options{};
  spawn_options.exit_cb = &on_exit;
  spawn_options.file = argv[0].c_str();
  spawn_options.args = args.data();
  spawn_options.env = options.env.has_value() ? environment.data() : nullptr;
  spawn_options.cwd = options.cwd.empty() ? nullptr : options.cwd.c_str();
  spawn_options.stdio_count = 3;
  spawn_options.stdio = stdio;
  // uv_spawn initialises the handle first, even when it then fails.
  state.handle_initialized(reinterpret_cast<uv_handle_t*>(&state.process));
  int status = 0;
  {
    child_signal_scope sigchld(loop);  // the loop's first spawn starts libuv's SIGCHLD watcher
    status = uv_spawn(&loop, &state.process, &spawn_options);
  }
  if (status < 0) {
    auto [code, message] = explain_spawn_failure(status, argv[0], options.cwd);
    throw io_error(code, "spawn", argv[0], message);
  }
  state.running = true;
  owner.pid_ = state.process.pid;
  state.description = "process " + argv[0] + " (pid " + std::to_string(owner.pid_) + ")";
  for (int fd = 0; fd < 3; ++fd) {
    if (ours[fd]->is_open()) {
      stream_access::state_of(*ours[fd])->set_subject(std::string(stream_names[fd]) + " of " +
                                                      argv[0]);
    }
  }
  return owner;
}

}  // namespace detail

using detail::child_access;
using detail::child_state;

child::child(detail::child_state* state) noexcept : state_(state) {}

child::child(child&& other) noexcept
    : state_(std::exchange(other.state_, nullptr)),
      pid_(std::exchange(other.pid_, 0)),
      stdin_(std::move(other.stdin_)),
      stdout_(std::move(other.stdout_)),
      stderr_(std::move(other.stderr_)) {}

child& child::operator=(child&& other) noexcept {
  if (this != &other) {
    release();
    state_ = std::exchange(other.state_, nullptr);
    pid_ = std::exchange(other.pid_, 0);
    stdin_ = std::move(other.stdin_);
    stdout_ = std::move(other.stdout_);
    stderr_ = std::move(other.stderr_);
  }
  return *this;
}

child::~child() { release(); }

void child::release() noexcept {
  stdin_.close();
  stdout_.close();
  stderr_.close();
  if (state_ == nullptr) {
    return;
  }
  child_state& state = *std::exchange(state_, nullptr);
  if (state.running) {
    // on_exit reaps it and closes the process handle; if the kill fails the process is already
    // dead and its exit callback is on its way.
    uv_process_kill(&state.process, SIGKILL);
  } else if (state.handle_open && !state.exited) {
    detail::close_process(state);  // a failed spawn: initialised, never started
  }
  state.release_owner();
}

namespace {
child_state& state_of(child_state* state, const char* operation) {
  if (state == nullptr) {
    throw std::logic_error(std::string("weft::child::") + operation +
                           " on an empty child (moved from, or never spawned); start one with "
                           "weft::subprocess::spawn");
  }
  return *state;
}
}  // namespace

bool child::exited() const noexcept { return state_ != nullptr && state_->exited; }

subprocess::status child::wait(const timeout& limit) {
  child_state& state = state_of(state_, "wait");
  detail::state_user user(state);
  detail::wait_until(
      state.waiters, [&] { return state.exited; }, limit, state.description, "weft::child::wait");
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

weft::pipe& child::piped(weft::pipe& stream, const char* name) {
  child_state& state = state_of(state_, name);
  if (!stream.is_open()) {
    const char* which = &stream == &stdin_ ? "stdin" : &stream == &stdout_ ? "stdout" : "stderr";
    throw std::logic_error(std::string("weft::child::") + name + ": " + which + " of " +
                           state.description +
                           " is not an open pipe (spawned with another stdio mode, or closed)");
  }
  return stream;
}

weft::pipe& child::stdin_pipe() { return piped(stdin_, "stdin_pipe"); }
weft::pipe& child::stdout_pipe() { return piped(stdout_, "stdout_pipe"); }
weft::pipe& child::stderr_pipe() { return piped(stderr_, "stderr_pipe"); }

void child::write_stdin(std::string_view data, const timeout& limit) {
  piped(stdin_, "write_stdin").write_all(data, limit);
}

void child::close_stdin() noexcept { stdin_.close(); }

std::size_t child::read_stdout(std::span<char> buffer, const timeout& limit) {
  return piped(stdout_, "read_stdout").read_some(buffer, limit);
}

std::size_t child::read_stderr(std::span<char> buffer, const timeout& limit) {
  return piped(stderr_, "read_stderr").read_some(buffer, limit);
}

namespace subprocess {
namespace {

// Reads from until end of stream into out.
void drain(weft::pipe& from, std::string& out) {
  constexpr std::size_t chunk = 64 * 1024;
  for (;;) {
    std::size_t before = out.size();
    out.resize(before + chunk);
    std::size_t count = from.read_some(std::span<char>(out.data() + before, chunk));
    out.resize(before + count);
    if (count == 0) {
      return;
    }
  }
}

}  // namespace

child spawn(const std::vector<std::string>& argv, const options& options) {
  return child_access::spawn(argv, options, "weft::subprocess::spawn");
}

result exec(const std::vector<std::string>& argv, const options& options) {
  subprocess::options piped = options;
  piped.stdin_mode = piped.stdout_mode = piped.stderr_mode = stdio::pipe;
  child running = child_access::spawn(argv, piped, "weft::subprocess::exec");
  result outcome;

  // Three helpers run beside this coroutine and never outlive the call: stdin is fed while
  // both outputs are drained (a chatty child never blocks on a full pipe, and a child that
  // reads its input only after writing output never deadlocks against us).
  spawn_options helper;
  helper.name = "exec " + argv[0] + " stdin";
  task<void> feeder = weft::spawn(
      [&] {
        try {
          running.stdin_pipe().write_all(options.stdin_data);
        } catch (const io_error&) {
          // The child closed its stdin without reading it all: its business, not an error.
        }
        running.close_stdin();
      },
      helper);
  helper.name = "exec " + argv[0] + " stdout";
  task<void> out_reader =
      weft::spawn([&] { drain(running.stdout_pipe(), outcome.standard_output); }, helper);
  helper.name = "exec " + argv[0] + " stderr";
  task<void> err_reader =
      weft::spawn([&] { drain(running.stderr_pipe(), outcome.standard_error); }, helper);
  task<void>* helpers[] = {&feeder, &out_reader, &err_reader};

  std::exception_ptr failure;
  try {
    subprocess::status ended = running.wait(options.limit);
    outcome.exit_status = ended.exit_status;
    outcome.term_signal = ended.term_signal;
    for (task<void>* each : helpers) {
      each->await(options.limit);  // a reader's io_error ends the call too
    }
  } catch (...) {
    failure = std::current_exception();
  }
  if (failure) {
    // Timed out, cancelled, or a read failed: neither the child nor a helper may outlive the
    // call. The cleanup waits run outside the catch block (a suspension must not happen inside
    // one) and cannot themselves be interrupted: SIGKILL ends the child promptly and cancelled
    // helpers end at their next suspension point.
    running.kill(SIGKILL);
    weft::protect([&] {
      for (task<void>* each : helpers) {
        each->cancel("exec of " + argv[0] + " ended early");
        try {
          each->await();
        } catch (...) {
          // Its own ending (cancelled, or the read error already being reported) is not news.
        }
      }
      running.wait();
    });
    std::rethrow_exception(failure);
  }
  return outcome;
}

}  // namespace subprocess
}  // namespace weft

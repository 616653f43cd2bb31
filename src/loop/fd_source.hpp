// fd readiness for the event loop: the seam between the facade and whatever tells it that an fd
// is ready. Everything the loop knows of fds goes through this class; switching to native
// callback watches of the driver (when the driver interface grows them) changes this file and
// fd_source.cpp only.
//
// How it works today: the loop owns one epoll instance (made on the first fd watch) holding
// every watched fd, level-triggered. One helper coroutine, spawned while the loop is dispatched
// and has fds, waits for that epoll fd with weft::wait_readable, which works on every driver;
// when it fires, the dispatcher calls poll(), one epoll_wait(0) that returns every ready fd.
// Why not a weft::wait_readable per watched fd:
//   - one coroutine and one kernel object for any number of fds (10k idle connections cost 10k
//     epoll entries, not 10k coroutine stacks), and one switch per batch of events, not per
//     event;
//   - a closed fd cannot crash the process: the kernel drops a closed fd from the set by itself
//     and every epoll_ctl error comes back to us, whereas libuv aborts when it re-arms a uv_poll
//     whose fd the user closed;
//   - interest changes are batched: off_writable then on_writable in one tick cost no syscall.
// After a tick that ran fd callbacks the dispatcher polls once more before it goes idle: a
// callback's write often makes another watched fd ready at once (the two ends of a pipe or a
// proxy), and that poll then replaces the scheduler's blocking wait, the helper's wake and two
// switches.
//
// One case the kernel does not clean up: an fd closed while its file is still open elsewhere (a
// dup, a forked child) stays in the set under its old number, and no epoll_ctl can remove it
// once the number is closed. Its events would then wake the loop forever; poll() notices an
// event for a number it does not watch that cannot be deleted, and rebuild() moves every watched
// fd to a fresh epoll instance.
//
// A closed fd: the kernel removes it from the set without telling anyone, so a watcher of it
// would hang. It is caught two ways: an interest change whose epoll_ctl fails (EBADF, or ENOENT
// when the number now names another file), and check_closed(), which the loop runs about once a
// second while it watches fds (one fstat per watched fd, compared with the device and inode seen
// at the first watch). Each lands in dead(), and the loop removes the fd's watchers (all of
// them: a watcher registered on the reused number after the close goes too) and reports it.
//
// The helper's wait keeps the scheduler's reactor alive, so while any fd is watched (referenced
// or not) a deadlock is not reported: the scheduler waits for the fds. A native driver watch
// could follow the watchers' reference flags instead.
//
// Threads: the loop's thread only. The helper is a background coroutine of the dispatching
// scheduler; stop() cancels it and waits until it has ended, so that no weft fd registration of
// the epoll fd outlives a dispatch session.
#pragma once

#include <sys/epoll.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <vector>

#include "weft/loop/event_loop.hpp"
#include "weft/sched/task.hpp"

namespace weft::loop::detail {

enum class fd_direction : unsigned char { readable = 0, writable = 1 };

// The dispatcher, as the helpers see it (called from a helper coroutine, on the loop's thread):
// told when something is ready, and when a helper could not go on (an error of the driver,
// delivered through the loop's error handling).
class readiness_listener {
 public:
  virtual void readiness_arrived() noexcept = 0;
  virtual void source_failed(std::exception_ptr error) noexcept = 0;

 protected:
  ~readiness_listener() = default;
};

// An fd found closed (or closed and its number reused) under its watchers.
struct dead_fd {
  int fd = -1;
  int code = 0;  // errno: EBADF closed, ENOENT or ESTALE closed and the number reused
  watcher_id watchers[2] = {watcher_id::none, watcher_id::none};
};

struct ready_fd {
  int fd;
  bool readable;
  bool writable;
};

class fd_source {
 public:
  fd_source() = default;
  fd_source(const fd_source&) = delete;
  fd_source& operator=(const fd_source&) = delete;
  ~fd_source();

  // Starts reporting direction of fd for watcher id (replacing the direction's watcher, whose
  // id the caller has retired). A new fd is checked at once: std::invalid_argument when it is
  // closed, a regular file or a directory, or refused by epoll; weft::io_error for other
  // failures. operation names the caller's call in those messages.
  void watch(int fd, fd_direction direction, watcher_id id, const char* operation);
  // Stops reporting it. When the fd has no direction left it leaves the epoll set at once, so
  // the caller may close it right after.
  void unwatch(int fd, fd_direction direction) noexcept;
  watcher_id watcher(int fd, fd_direction direction) const noexcept {
    if (fd < 0 || static_cast<std::size_t>(fd) >= entries_.size()) {
      return watcher_id::none;
    }
    return entries_[static_cast<std::size_t>(fd)].ids[static_cast<int>(direction)];
  }
  // Fds with at least one watcher.
  std::size_t watched() const noexcept { return watched_; }

  // A dispatch session, on the dispatching coroutine: start() runs the helper while fds are
  // watched, settle() (at the end of each tick) starts or retires it as their number changes,
  // stop() retires it and waits for it.
  void start(readiness_listener& listener);
  void settle();
  void stop();

  bool poll_needed() const noexcept { return poll_needed_; }
  void request_poll() noexcept { poll_needed_ = true; }
  // Applies the pending interest changes and returns, without blocking, the ready fds.
  const std::vector<ready_fd>& poll();
  // The fstat sweep (see the file comment).
  void check_closed();
  // Fds found dead since the caller last emptied it.
  std::vector<dead_fd>& dead() noexcept { return dead_; }

 private:
  struct entry {
    watcher_id ids[2] = {watcher_id::none, watcher_id::none};
    std::uint32_t registered = 0;  // the events the kernel has; 0: not in the epoll set
    dev_t device = 0;
    ino_t inode = 0;
    bool dirty = false;
  };
  static std::uint32_t wanted(const entry& e) noexcept;
  void ensure_epoll(const char* operation);
  void mark_dead(int fd, entry& e, int code);
  void spawn_helper();
  void retire_helper() noexcept;
  void close_retired_epolls() noexcept;
  void rebuild();
  static void helper_main(fd_source& self, int epoll_fd);

  std::vector<entry> entries_;  // by fd
  std::vector<int> dirty_;
  std::vector<ready_fd> ready_;
  std::vector<dead_fd> dead_;
  std::vector<epoll_event> events_;
  std::size_t watched_ = 0;
  int epoll_fd_ = -1;
  bool poll_needed_ = false;

  readiness_listener* listener_ = nullptr;  // set during a session
  weft::task<void> helper_;
  std::vector<weft::task<void>> retired_;  // cancelled helpers not yet awaited
  // Epoll instances replaced by rebuild(), closed once no helper may still wait on them.
  std::vector<int> retired_epolls_;
};

}  // namespace weft::loop::detail

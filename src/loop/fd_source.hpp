// fd readiness for the event loop: the seam between the facade and the driver that tells it an
// fd is ready. Everything the loop knows of fds goes through this class.
//
// How it works: each watched fd has one native watch on the dispatching scheduler's driver, an
// fd_subscription (src/reactor/fd_subscription.hpp) that shares the driver's one watch per fd
// with coroutines waiting on the same fd. Its ready() callback runs inside the driver's poll: it
// records the directions reported, queues the fd once, and wakes the dispatcher if it idles; the
// next tick takes the queue (take_ready) and runs the callbacks. So an fd event costs no
// coroutine switch of its own, and on the poll driver the loop uses poll(2) like everything
// else. Level-triggered: a reported fd whose callback did not consume the readiness (or that was
// skipped: registered during the tick) is reported again by the driver's next poll.
//
// Subscriptions exist only while the loop is dispatched (a session, see loop_core.hpp): start()
// subscribes every watched fd on the scheduler that dispatches, stop() unsubscribes them all,
// since a standalone run()'s scheduler (and its driver) ends with the run. That costs one driver
// watch per fd per session; between sessions registrations are only recorded. Interest changes
// are batched and applied by settle() at the end of each tick and before the dispatcher idles:
// a watcher removed and added again in one tick costs nothing. Removing an fd's last watcher
// unsubscribes it at once, so the caller may close the fd right after.
//
// Probes: a direction registered while the loop is dispatched is not given to the driver at
// once. The next tick asks the kernel directly, one poll(2) with a zero timeout for every such
// fd together, and runs the callback when the fd is ready; only a watcher that is still
// registered after that (or whose fd was not ready) is subscribed, at the end of the tick. The
// common "register for writable, write, remove" costs one poll(2) per message instead of two
// driver changes (an epoll_ctl each on libev and libevent, two on libuv) and the readiness
// report of a driver poll; an fd closed under a new watcher is found at once (POLLNVAL).
//
// A closed fd: the epoll-based drivers forget a closed fd without telling anyone (the poll
// driver reports it: POLLNVAL), so a watcher of it would hang. It is caught three ways: a report
// that the driver stopped polling the fd (POLLNVAL, POLLERR, libev refusing a change), after
// which the fd is looked at (fstat) before it is polled again; an interest change the driver
// refuses (libevent's epoll_ctl fails with EBADF); and check_closed(), which the loop runs about
// once a second while it watches fds (one fstat per watched fd, compared with the device and inode
// seen at the first watch). Each lands in dead(), and the loop removes the fd's watchers (all of
// them: a watcher registered on the reused number after the close goes too) and reports it.
//
// References: a subscription is referenced while one of its fd's watchers is, and only then
// keeps the driver alive: a scheduler whose coroutines all wait while the loop has only
// unreferenced fd watchers is reported deadlocked, as it should be.
//
// Threads: the loop's thread only; start()/stop() on the dispatching coroutine.
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <vector>

#include "reactor/fd_subscription.hpp"
#include "weft/loop/event_loop.hpp"

namespace weft::loop::detail {

enum class fd_direction : unsigned char { readable = 0, writable = 1 };

// The dispatcher, as the event sources see it (on the loop's thread): told when something is
// ready, and when a source could not go on (an error of the driver, delivered through the loop's
// error handling).
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
  ~fd_source() = default;  // no session is active (the loop refuses to die in one)

  // Starts reporting direction of fd for watcher id (replacing the direction's watcher, whose
  // id the caller has retired), referenced; during a session it is probed in the first tick
  // after tick (see the file comment). A new fd is checked at once: std::invalid_argument when
  // it is closed, a regular file or a directory, or refused by the driver (while a session
  // runs); weft::io_error for other failures. operation names the caller's call.
  void watch(int fd, fd_direction direction, watcher_id id, const char* operation,
             std::uint64_t tick);
  // Stops reporting it. When the fd has no direction left its subscription ends at once, so
  // the caller may close the fd right after.
  void unwatch(int fd, fd_direction direction) noexcept;
  // Whether direction's watcher counts for the driver's alive() (see the file comment).
  void set_referenced(int fd, fd_direction direction, bool referenced) noexcept;
  watcher_id watcher(int fd, fd_direction direction) const noexcept {
    if (fd < 0 || static_cast<std::size_t>(fd) >= entries_.size() ||
        entries_[static_cast<std::size_t>(fd)] == nullptr) {
      return watcher_id::none;
    }
    return entries_[static_cast<std::size_t>(fd)]->ids[static_cast<int>(direction)];
  }
  // Fds with at least one watcher.
  std::size_t watched() const noexcept { return watched_; }

  // A dispatch session, on the dispatching coroutine: start() subscribes every watched fd on
  // its scheduler, settle() applies the interest changes made since, stop() unsubscribes all.
  void start(readiness_listener& listener);
  void settle();
  void stop() noexcept;

  // Whether the driver reported an fd since the last take_ready(), or a probe is pending.
  bool any_ready() const noexcept { return !reported_.empty() || !probes_.empty(); }
  bool probes_pending() const noexcept { return !probes_.empty(); }
  // The fds ready for tick: those the driver reported since the last call, in the order
  // reported, then those probed now (registered before tick). Fds the driver stopped polling
  // are looked at first (dead ones go to dead(), live ones are subscribed again at the next
  // settle()).
  const std::vector<ready_fd>& take_ready(std::uint64_t tick);
  // The fstat sweep (see the file comment).
  void check_closed();
  // Fds found dead since the caller last emptied it.
  std::vector<dead_fd>& dead() noexcept { return dead_; }

 private:
  struct watched_fd : weft::detail::fd_subscription {
    fd_source* owner = nullptr;
    watcher_id ids[2] = {watcher_id::none, watcher_id::none};
    bool referenced[2] = {false, false};
    dev_t device = 0;
    ino_t inode = 0;
    int reported = 0;              // directions the driver reported, not yet taken
    bool queued = false;           // in reported_
    bool dirty = false;            // in dirty_
    bool stopped = false;          // the driver stopped polling it: look at it before polling again
    int probing = 0;               // directions not yet given to the driver: probed first
    bool probe_queued = false;     // in probes_
    std::uint64_t probe_tick = 0;  // the tick its last probed direction was registered in
  };
  static void on_ready(weft::detail::fd_subscription& subscription, int events);
  static int wanted(const watched_fd& e) noexcept;
  void probe(std::uint64_t tick);
  void mark_dirty(watched_fd& e);
  void apply(watched_fd& e);
  void forget(watched_fd& e) noexcept;
  void mark_dead(watched_fd& e, int code);
  // errno of what became of e's fd: 0 when it is still the file first watched.
  static int fate(const watched_fd& e) noexcept;

  std::vector<std::unique_ptr<watched_fd>> entries_;  // by fd, kept for reuse
  std::vector<int> dirty_;
  std::vector<int> reported_;  // reserved for every entry: ready() never allocates
  std::vector<int> taking_;
  std::vector<int> probes_;  // reserved for every entry, as reported_
  std::vector<int> probing_;
  std::vector<pollfd> probe_set_;
  std::vector<ready_fd> ready_;
  std::vector<dead_fd> dead_;
  std::size_t watched_ = 0;
  std::size_t entry_count_ = 0;

  weft::detail::scheduler_core* core_ = nullptr;  // the dispatching scheduler, in a session
  readiness_listener* listener_ = nullptr;
};

}  // namespace weft::loop::detail

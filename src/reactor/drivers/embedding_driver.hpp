// The common half of the drivers that block on something other than libuv (ev, event, epoll,
// poll, uring):
// weft's timer heap, the bookkeeping of fd watches, and a libuv loop embedded in the native one
// so that everything only libuv provides works on them too.
//
// The native part of a driver is small: fd readiness (start, change, stop a watch) and one
// wait that blocks until a watch is ready or a deadline passes, with one native timer armed
// for it (ev_timer, a libevent timer, poll's timeout), rounded up to the native resolution.
// Everything else is here.
//
// The embedded libuv loop is driven honestly, the way libuv documents for embedding: its
// backend fd (an epoll fd, readable when anything libuv watches is ready: sockets, its signal
// pipe, the eventfd of uv_async and of the thread pool's completions) is watched with a native
// fd watch; uv_backend_timeout gives the deadline of libuv's own timers and says 0 when libuv
// has work that must run before anyone blocks (queued changes of its epoll set, pending
// callbacks, closing handles). uv_run(UV_RUN_NOWAIT) then runs when the backend fd is
// readable, when that deadline passes, and before blocking when libuv has such work. A
// uv_prepare_t, referenced only around those calls, keeps libuv from deciding on its own that
// it has nothing to do: the uv driver services unreferenced handles (an idle listener) whenever
// its loop turns, and so does this one. uv_loop_alive counts in alive().
//
// From the scheduler's thread only.
#pragma once

#include <uv.h>

#include <chrono>
#include <cstddef>
#include <string>

#include "reactor/timer_queue.hpp"
#include "reactor/uv_driver.hpp"

namespace weft::detail {

class embedding_driver : public reactor_driver {
 public:
  void poll(bool block) final;
  bool alive() final;
  void add_timer(timer_entry& entry) final { timers_.push(entry); }
  void remove_timer(timer_entry& entry) noexcept final { timers_.remove(entry); }
  int watch_fd(fd_watch& watch) final;
  void unwatch_fd(fd_watch& watch) noexcept final;
  void set_fd_referenced(fd_watch& watch, bool referenced) noexcept final;
  void close() final;

 protected:
  embedding_driver();
  ~embedding_driver() override;
  embedding_driver(const embedding_driver&) = delete;
  embedding_driver& operator=(const embedding_driver&) = delete;

  // The derived constructor's last step, once its native loop exists: watches libuv's backend
  // fd.
  void start_embedding();
  // The derived destructor's first step: close() if the scheduler did not (a failed start),
  // while the native part still exists.
  void close_if_open() noexcept;

  // --- the native part ---

  // Starts watching (watch.watched false: set it, and keep the watch in the driver's tables)
  // or changes what is polled to watch.events; sets watch.armed. The base has checked the fd.
  // Returns 0 or a negative errno.
  virtual int native_watch(fd_watch& watch) = 0;
  // Stops and forgets the watch (watched false, armed 0); never touches it again.
  virtual void native_unwatch(fd_watch& watch) noexcept = 0;
  // One turn of the native loop: waits until a watch is ready or until `until` has passed
  // (time_point::max(): no limit; a time already passed: no wait at all), and runs the ready
  // watches' callbacks through report_ready. May return early (a signal, a spurious wakeup).
  virtual void native_wait(timer_clock::time_point until) = 0;
  // Unwatches every watch still registered (close() found them left over) and returns their
  // fds, "5, 7".
  virtual std::string native_release_all() noexcept = 0;
  // Frees the native loop; every watch is gone.
  virtual void native_close() noexcept = 0;

  // From native_wait: watch is ready for events. stopped: the native side stopped polling it
  // (an error condition), so it reads armed 0 from now on.
  void report_ready(fd_watch& watch, int events, bool stopped) {
    if (stopped) {
      alive_.forget_armed(watch);
    }
    watch.ready(watch, events);
  }

  // What poll(2)'s revents (or the result of an io_uring poll) mean for a watch polled for
  // `armed`: POLLNVAL (a closed fd) and POLLERR (an error condition, which stays until the
  // caller reads it) stop the watch, ready both ways, as libuv does; POLLHUP is ready both ways
  // (neither would block); otherwise what was asked for and came. Nothing for an idle watch.
  struct poll_outcome {
    int events = 0;
    bool stopped = false;
  };
  static poll_outcome outcome_of(unsigned revents, int armed) noexcept;

  // native_wait's `until` as the timeout of poll(2) or epoll_wait: -1 for no limit
  // (time_point::max()), 0 for no wait (time_point::min(), read without the clock, or a time
  // passed), else the milliseconds to it rounded up, so that the wait never ends before it.
  static int timeout_ms(timer_clock::time_point until) noexcept;

  // Operations of the native side in flight that keep the loop alive (the uring driver's ring
  // operations: src/reactor/ring.hpp).
  std::size_t native_busy_ = 0;

  // The watch of libuv's backend fd: the driver's own, never left over.
  bool is_backend(const fd_watch& watch) const noexcept { return &watch == &backend_; }

  // native_release_all for a driver that keeps its watches in a watch_list (uv_driver.hpp):
  // unwatches every watch in it but the backend's and returns their fds.
  std::string release_all(watch_list& list) noexcept {
    return list.release_all(&backend_, [this](fd_watch& watch) { native_unwatch(watch); });
  }

 private:
  struct backend_watch : fd_watch {
    embedding_driver* owner = nullptr;
  };

  // libuv's deadline in ms (-1: none, 0: it has work to run now), on a fresh clock.
  int uv_timeout() noexcept;
  void run_uv();
  bool fire_due_timers(timer_clock::time_point now);
  static bool ready_work() noexcept;

  uv_loop_t uv_{};
  uv_prepare_t keepalive_{};
  backend_watch backend_{};
  bool backend_ready_ = false;
  timer_queue timers_;
  std::size_t watches_ = 0;  // fd watches of the callers (not the backend's)
  alive_watches alive_;      // ... of which those that count in alive()
  bool closing_ = false;
};

}  // namespace weft::detail

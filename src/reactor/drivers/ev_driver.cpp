// The libev driver: the scheduler blocks in ev_run on a loop of its own (ev_loop_new; never the
// default loop, which would take SIGCHLD from libuv's child-process handling).
//
// Native here: fd readiness (one ev_io per watch, allocated on the first watch_fd and freed by
// unwatch_fd, changed with ev_io_modify, which libev applies in one epoll_ctl at its next
// turn), the blocking wait (ev_run(EVRUN_ONCE), or EVRUN_NOWAIT for a non-blocking poll) and
// one ev_timer armed for the earliest deadline. libev measures timers on its cached loop time,
// so ev_now_update() refreshes it before the timer is armed; the delay is rounded up to the
// microsecond and libev rounds its epoll timeout up to the millisecond, so it never fires
// before the deadline. Everything libuv-only runs on the embedded libuv loop
// (embedding_driver.hpp), whose backend fd is one more ev_io.
//
// Errors: libev reports a fd it could not (re)register as EV_ERROR after stopping the watcher:
// ready both ways, and stopped. A fd closed before libev applied a change (EBADF) would trip an
// assertion of Debian's libev, which aborts the process: drop_closed catches it first. A fd closed
// after libev registered it leaves epoll silently (see fd_watch in src/sched/driver.hpp).
#include <ev.h>
#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "reactor/drivers/drivers.hpp"
#include "reactor/drivers/embedding_driver.hpp"
#include "reactor/drivers/libuv_loop.hpp"

namespace weft::detail {
namespace {

// A watch's ev_io, and whether it waits in queued_ or dropping_ (see drop_closed).
struct queued_io : ev_io {
  bool queued = false;
};

class ev_driver final : public embedding_driver {
 public:
  const char* name() const noexcept override { return ev_driver_name; }

  ev_driver() {
    // No signal mask games: libev watches no signal here (libuv does, on the embedded loop).
    loop_ = ev_loop_new(EVFLAG_AUTO | EVFLAG_NOSIGMASK);
    if (loop_ == nullptr) {
      throw std::runtime_error(
          "weft: libev could not create a loop (ev_loop_new failed: out of fds or memory?)");
    }
    ev_set_userdata(loop_, this);
    ev_init(&timer_, [](struct ev_loop*, ev_timer*, int) {
      // Only ends ev_run(EVRUN_ONCE): the embedding driver fires what is due.
    });
    try {
      start_embedding();
    } catch (...) {
      ev_loop_destroy(loop_);
      throw;
    }
  }
  ~ev_driver() override { close_if_open(); }

 private:
  static int to_ev(int events) noexcept {
    return ((events & fd_watch::readable) != 0 ? EV_READ : 0) |
           ((events & fd_watch::writable) != 0 ? EV_WRITE : 0);
  }

  int native_watch(fd_watch& watch) override {
    if (!watch.watched) {
      auto* io = new queued_io;
      ev_io_init(io, &ev_driver::on_io, watch.fd, 0);
      io->data = &watch;
      watch.slot = io;
      registered_.add(watch);
      watch.watched = true;
      watch.armed = 0;
    }
    if (watch.events != watch.armed) {
      auto* io = static_cast<queued_io*>(watch.slot);
      ev_io_stop(loop_, io);
      if (watch.events != 0) {
        ev_io_modify(io, to_ev(watch.events));
        ev_io_start(loop_, io);
        if (!io->queued) {
          io->queued = true;
          queued_.push_back(io);  // checked before the next wait (see drop_closed)
        }
      }
      watch.armed = watch.events;
    }
    return 0;
  }

  void native_unwatch(fd_watch& watch) noexcept override {
    if (!watch.watched) {
      return;
    }
    auto* io = static_cast<queued_io*>(watch.slot);
    ev_io_stop(loop_, io);  // also clears a pending event of this turn
    if (io->queued) {       // rare: unwatched before the poll after its change
      for (std::vector<queued_io*>* list : {&queued_, &dropping_}) {
        if (auto found = std::find(list->begin(), list->end(), io); found != list->end()) {
          *found = list->back();
          list->pop_back();
        }
      }
    }
    delete io;
    registered_.remove(watch);
    watch.slot = nullptr;
    watch.watched = false;
    watch.armed = 0;
  }

  // libev applies a change at its next turn, and Debian's libev fails an assertion (aborting
  // the process) when that epoll_ctl fails with EBADF: a fd closed between a change of its
  // watch and the next wait (by code that ran in between) must not get there. So every watcher
  // started since the last wait is checked first (one fcntl each); a closed one is stopped,
  // which libev then applies without a syscall, and reported as an error condition: ready
  // both ways, armed 0 (see fd_watch).
  void drop_closed() {
    for (queued_io* io : queued_) {
      auto& watch = *static_cast<fd_watch*>(io->data);
      if (watch.armed != 0 && ::fcntl(watch.fd, F_GETFD) < 0 && errno == EBADF) {
        ev_io_stop(loop_, io);
        dropping_.push_back(io);  // stays marked queued: unwatch looks for it there
      } else {
        io->queued = false;
      }
    }
    queued_.clear();
    // One at a time from the member list: ready() may unwatch (and free) a watch still in it,
    // and native_unwatch takes it out.
    while (!dropping_.empty()) {
      queued_io* io = dropping_.back();
      dropping_.pop_back();
      io->queued = false;
      report_ready(*static_cast<fd_watch*>(io->data), fd_watch::readable | fd_watch::writable,
                   true);
    }
  }

  void native_wait(timer_clock::time_point until) override {
    if (!queued_.empty()) {
      drop_closed();
    }
    if (until == timer_clock::time_point::min() || until <= timer_clock::now()) {
      ev_run(loop_, EVRUN_NOWAIT);
      return;
    }
    if (until == timer_clock::time_point::max()) {
      ev_timer_stop(loop_, &timer_);
    } else if (until != timer_for_ || !ev_is_active(&timer_)) {
      ev_timer_stop(loop_, &timer_);
      ev_now_update(loop_);  // libev adds the delay to its cached time
      auto delay = wait_until(until, timer_clock::now(), std::chrono::microseconds(max_delay));
      ev_timer_set(&timer_, static_cast<ev_tstamp>(delay.count()) * 1e-6, 0.);
      ev_timer_start(loop_, &timer_);
      timer_for_ = until;
    }
    ev_run(loop_, EVRUN_ONCE);
  }

  std::string native_release_all() noexcept override { return release_all(registered_); }

  void native_close() noexcept override {
    ev_timer_stop(loop_, &timer_);
    ev_loop_destroy(loop_);
    loop_ = nullptr;
  }

  static void on_io(struct ev_loop* loop, ev_io* io, int revents) {
    auto* self = static_cast<ev_driver*>(ev_userdata(loop));
    auto& watch = *static_cast<fd_watch*>(io->data);
    if ((revents & EV_ERROR) != 0) {
      // libev could not register the fd (closed, or not pollable) and stopped the watcher.
      self->report_ready(watch, fd_watch::readable | fd_watch::writable, true);
      return;
    }
    int events = ((revents & EV_READ) != 0 ? fd_watch::readable : 0) |
                 ((revents & EV_WRITE) != 0 ? fd_watch::writable : 0);
    if (events != 0) {
      self->report_ready(watch, events, false);
    }
  }

  // A day: libev blocks at most ~60 s at a time anyway; a later deadline re-arms when it fires.
  static constexpr std::chrono::microseconds::rep max_delay = 86'400'000'000;

  struct ev_loop* loop_ = nullptr;
  ev_timer timer_{};
  timer_clock::time_point timer_for_ = timer_clock::time_point::max();
  watch_list registered_;             // every watched fd_watch
  std::vector<queued_io*> queued_;    // started since the last wait (unwatch removes them)
  std::vector<queued_io*> dropping_;  // found closed, not yet reported (unwatch removes them)
};

}  // namespace

std::unique_ptr<reactor_driver> make_ev_driver() { return std::make_unique<ev_driver>(); }

}  // namespace weft::detail

// The libuv driver: the scheduler blocks in uv_run on a uv_loop_t of its own.
//
// One uv_loop_t per scheduler. Timers: weft keeps its own heap (timer_queue) and arms a single
// uv_timer_t for the earliest deadline, so a million sleeping coroutines cost a million heap
// slots rather than a million libuv handles, and cancelling a sleep never touches libuv unless
// it empties the heap. The uv timer is referenced only while a foreground timer is queued, so
// background timers do not keep the loop (and run()) alive.
//
// fd watches are uv_poll_t handles. A handle is closed asynchronously (libuv touches it until
// its close callback), so it is the driver's, not part of the caller's fd_watch: unwatch_fd
// detaches it and closes it, and its close callback keeps its memory for the next watch, so
// a wait on a fresh fd costs no allocation once the loop has warmed up.
//
// Poll handles are never referenced in libuv. The driver counts the watches that keep the loop
// alive (watched, armed and referenced: the rule libuv applies to a referenced handle) and
// references one always-active handle of its own, keepalive_, while that count is above zero.
// A socket served in a loop flips its watch's referenced flag at every wait (waited on, then
// idle); uv_ref/uv_unref on its handle each time cost two calls into libuv and a touch of a
// handle that is cold with many connections, where the count costs an increment.
//
// Past libuv_poll_limit poll handles, further watches go to an epoll set of the driver's own
// (the spill set), which libuv watches as one more fd. Why: libuv's uv__io_poll hands epoll_wait
// an array of 1024 events and, whenever a call fills it, calls again without blocking, up to 48
// times in one turn. Level-triggered, every socket reported and not yet read (its coroutine
// woken, not yet run: all of them, while the loop turns) is returned again by each of those
// calls, so with more than 1024 sockets ready at once a turn reported each of them dozens of
// times, and the fd registry dropped and re-added their interest (2000 connections on one
// worker, bench_net_weft echo: 13.0 us of CPU per message against libev's 8.9 and the floor's
// 6.2, with 3 epoll_ctl and an fcntl per message). Capped below 1024 (with room for libuv's own
// handles), libuv's epoll_wait never fills its array; the spill set is read with one
// epoll_wait per report of its fd, into an array as large as the set (up to epoll_set's batch
// limit), and what does not fit waits for the next turn (epoll_set.hpp, shared with the epoll
// driver). A watch stays where it started until
// unwatched. The spill set costs a nested epoll's wakeup per event (about 0.1 us on the
// development VM: bench/net/README.md), paid only by the watches past the limit, and
// its changes are epoll_ctl calls made at once, so a closed fd is refused there and then
// (-EBADF), with no queued change left to check before the next poll.
#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>
#include <uv.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "reactor/drivers/drivers.hpp"
#include "reactor/drivers/epoll_set.hpp"
#include "reactor/drivers/libuv_loop.hpp"
#include "reactor/timer_queue.hpp"
#include "reactor/uv_driver.hpp"

namespace weft::detail {
namespace {

static_assert(UV_READABLE == fd_watch::readable && UV_WRITABLE == fd_watch::writable,
              "fd_watch's event bits are libuv's, so the uv driver passes them through");

// A poll handle and its watch, aligned to a cache line. A report reads the handle's io watcher
// (libuv: its callback, its events) and the poll callback right before it; the watch pointer
// sits just after the handle, in the io watcher's last line, rather than in handle->data at
// the handle's start: with thousands of connections one cold line less per report (callgrind,
// /hello at 1000 connections, a 1 MiB last level: 8.2 -> 5.6 read misses per request).
struct alignas(64) poll_slot {
  uv_poll_t handle;
  fd_watch* watch = nullptr;
};

// The slot of a watch in the spill set: its address only marks the watch as spilled.
char spilled_slot = 0;

poll_slot& slot_of(uv_poll_t* handle) noexcept {
  // The handle is the first member of a standard-layout struct: the same address.
  static_assert(std::is_standard_layout_v<poll_slot>);
  return *reinterpret_cast<poll_slot*>(handle);
}

class uv_driver final : public reactor_driver {
 public:
  const char* name() const noexcept override { return uv_driver_name; }

  uv_driver() : reactor_driver(loop_) {
    check_uv(uv_loop_init(&loop_), "loop init");
    loop_.data = this;
    check_uv(uv_timer_init(&loop_, &timer_), "timer init");
    timer_.data = this;
    uv_unref(reinterpret_cast<uv_handle_t*>(&timer_));
    check_uv(uv_prepare_init(&loop_, &keepalive_), "prepare init");
    // Its callback is never needed: it only has to be active, so that referencing it keeps
    // uv_loop_alive true and lets uv_run block.
    check_uv(uv_prepare_start(&keepalive_, [](uv_prepare_t*) {}), "prepare start");
    uv_unref(reinterpret_cast<uv_handle_t*>(&keepalive_));
  }

  ~uv_driver() override {
    if (!closing_) {
      try {
        close();
      } catch (...) {
        // Destruction after a failed run: the leak was already reported by close().
      }
    }
    for (uv_poll_t* spare : spare_polls_) {
      delete &slot_of(spare);
    }
    // spilled_set_ closes itself (still open only after a close() that threw before it got
    // there).
  }

  [[gnu::hot]] void poll(bool block) override {
    if (!block) {
      // Due timers first, straight from weft's heap at nanosecond precision: libuv would only
      // see them on its millisecond clock, up to a millisecond late.
      if (timer_entry* first = timers_.top();
          first != nullptr && first->deadline <= timer_clock::now()) {
        run_due_timers();
      }
    }
    if (!queued_.empty()) {
      drop_closed();
    }
    uv_run(&loop_, block ? UV_RUN_ONCE : UV_RUN_NOWAIT);
  }

  bool alive() override { return uv_loop_alive(&loop_) != 0; }

  void add_timer(timer_entry& entry) override {
    timers_.push(entry);
    if (timers_.top() == &entry) {
      arm();
    } else if (!entry.background && timers_.foreground() == 1) {
      uv_ref(reinterpret_cast<uv_handle_t*>(&timer_));
    }
  }

  void remove_timer(timer_entry& entry) noexcept override {
    timers_.remove(entry);
    if (timers_.empty()) {
      uv_timer_stop(&timer_);
      armed_for_ = timer_clock::time_point::max();
    }
    if (timers_.foreground() == 0) {
      uv_unref(reinterpret_cast<uv_handle_t*>(&timer_));
    }
    // Removing the earliest entry leaves the uv timer armed for it; it then fires early,
    // finds nothing due and re-arms for the new earliest: cheaper than re-arming per cancel.
  }

  int watch_fd(fd_watch& watch) override {
    if (watch.slot == &spilled_slot ||
        (watch.slot == nullptr && libuv_polls_ >= libuv_poll_limit && spill_set_open())) {
      return watch_spilled(watch);
    }
    auto* handle = static_cast<uv_poll_t*>(watch.slot);
    if (handle == nullptr) {
      if (spare_polls_.empty()) {
        handle = &(new poll_slot())->handle;
      } else {
        handle = spare_polls_.back();
        spare_polls_.pop_back();
      }
      // Checks the fd (epoll_ctl add and del: EBADF, EPERM for a regular file) and sets it
      // non-blocking.
      int status = uv_poll_init(&loop_, handle, watch.fd);
      if (status < 0) {
        spare_polls_.push_back(handle);
        return status;
      }
      slot_of(handle).watch = &watch;
      ++libuv_polls_;
      uv_unref(reinterpret_cast<uv_handle_t*>(handle));  // counted by the driver instead
      watch.slot = handle;
      watch.watched = true;
      watch.armed = 0;
    }
    if (watch.events != watch.armed) {
      int status = watch.events == 0 ? uv_poll_stop(handle)
                                     : uv_poll_start(handle, watch.events, &uv_driver::on_poll);
      if (status < 0) {
        return status;
      }
      const bool counted = alive_watches::counts(watch);
      watch.armed = watch.events;
      keep_alive(alive_.update(counted, watch));
      if (watch.events != 0) {
        queued_.push_back(handle);  // checked before the next poll (see drop_closed)
      }
    }
    return 0;
  }

  void unwatch_fd(fd_watch& watch) noexcept override {
    if (watch.slot == &spilled_slot) {
      unwatch_spilled(watch);
      return;
    }
    auto* handle = static_cast<uv_poll_t*>(watch.slot);
    if (handle == nullptr) {
      return;
    }
    --libuv_polls_;
    slot_of(handle).watch = nullptr;
    // Stops the handle and removes the fd from the epoll set at once; the memory comes back
    // in the close callback.
    uv_close(reinterpret_cast<uv_handle_t*>(handle), &uv_driver::on_poll_closed);
    keep_alive(alive_.forget_armed(watch));
    watch.slot = nullptr;
    watch.watched = false;
  }

  [[gnu::hot]] void set_fd_referenced(fd_watch& watch, bool referenced) noexcept override {
    const bool counted = alive_watches::counts(watch);
    watch.referenced = referenced;
    keep_alive(alive_.update(counted, watch));
  }

  void close() override {
    closing_ = true;
    // Abandoned operations (a cancelled thread-pool job, a timed-out request) end on their own
    // soon; their callbacks must run before the loop goes away.
    while (abandoned_operations() > 0) {
      uv_run(&loop_, UV_RUN_ONCE);
    }
    close_extensions();
    timers_.clear();
    // Spilled watches still registered are left over, as a poll handle still open would be.
    std::string spilled_left =
        spilled_.release_all(nullptr, [this](fd_watch& watch) { unwatch_spilled(watch); });
    if (spilled_set_.is_open()) {
      // Takes the set's fd out of libuv's epoll set at once, so it may be closed right after.
      uv_close(reinterpret_cast<uv_handle_t*>(&spill_poll_), nullptr);
      spilled_set_.close();
    }
    uv_close(reinterpret_cast<uv_handle_t*>(&timer_), nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&keepalive_), nullptr);
    uv_run(&loop_, UV_RUN_NOWAIT);
    destroy_extensions();
    closed_ = true;
    close_libuv_loop(loop_);
    if (!spilled_left.empty()) {
      throw_watches_left(name(), spilled_left);
    }
  }

 private:
  static void on_timer(uv_timer_t* handle) {
    auto* self = static_cast<uv_driver*>(handle->data);
    self->armed_for_ = timer_clock::time_point::max();
    self->run_due_timers();
    // libuv runs due timers before it polls, then polls with the next timer's timeout: a
    // timer already due when a blocking poll(true) began would wake its coroutine here and
    // then block anyway until some later event, losing the deadline. uv_stop makes this
    // uv_run poll without blocking and return, so the woken coroutine runs now.
    uv_stop(&self->loop_);
  }

  [[gnu::hot]] static void on_poll(uv_poll_t* handle, int status, int events) {
    fd_watch* watch = slot_of(handle).watch;
    if (status < 0) {
      // An error condition on the fd (POLLERR: libuv reports it as UV_EBADF, whatever the
      // real error, and stops the handle). Ready both ways, as the interface says; the next
      // watch_fd starts the handle again.
      auto* self = static_cast<uv_driver*>(handle->loop->data);
      self->keep_alive(self->alive_.forget_armed(*watch));
      watch->ready(*watch, fd_watch::readable | fd_watch::writable);
      return;
    }
    events &= fd_watch::readable | fd_watch::writable;  // UV_DISCONNECT is never asked for
    if (events != 0) {
      watch->ready(*watch, events);
    }
  }

  // uv_poll_start takes the fd out of epoll and queues adding it back for the next poll, where
  // libuv aborts the process if that epoll_ctl fails with EBADF: a fd closed between a change
  // of its watch and the next poll (by code that ran in between) must not get there. So every
  // handle started since the last poll is checked first (one fcntl each); a closed one is
  // stopped, which drops the queued change, and reported as an error condition: ready both
  // ways, armed 0 (see fd_watch). A number closed and reused by another file is added anew,
  // which libuv handles.
  void drop_closed() {
    std::vector<uv_poll_t*> queued;
    queued.swap(queued_);
    std::size_t closed = 0;
    for (uv_poll_t* handle : queued) {
      fd_watch* watch = slot_of(handle).watch;
      if (watch != nullptr && watch->armed != 0 && ::fcntl(watch->fd, F_GETFD) < 0 &&
          errno == EBADF) {
        uv_poll_stop(handle);
        keep_alive(alive_.forget_armed(*watch));
        queued[closed++] = handle;
      }
    }
    for (std::size_t index = 0; index < closed; ++index) {
      // Looked up again: an earlier callback may have unwatched it (its handle stays
      // allocated, without a watch, until its close callback).
      if (fd_watch* watch = slot_of(queued[index]).watch) {
        watch->ready(*watch, fd_watch::readable | fd_watch::writable);
      }
    }
    queued.clear();
    if (queued_.empty()) {
      queued_.swap(queued);  // keeps the capacity
    }
  }

  // --- the spill set (see the top) ---

  // Whether the spill set exists, creating it (and having libuv watch it) on first use. When it
  // cannot be created (no fd left: EMFILE; tried again at the next watch) the new watch takes a
  // poll handle past the limit, as every watch did before the limit existed.
  bool spill_set_open() {
    if (spilled_set_.is_open()) {
      return true;
    }
    if (spill_failed_ || spilled_set_.open() < 0) {
      return false;
    }
    if (uv_poll_init(&loop_, &spill_poll_, spilled_set_.fd()) < 0) {
      spilled_set_.close();
      return false;
    }
    if (uv_poll_start(&spill_poll_, UV_READABLE, &uv_driver::on_spill) < 0) {
      uv_close(reinterpret_cast<uv_handle_t*>(&spill_poll_), nullptr);  // out of epoll at once
      spilled_set_.close();
      spill_failed_ = true;  // the handle is closing: never initialised again
      return false;
    }
    // Never referenced: the spilled watches count in alive_, as poll handles' watches do.
    uv_unref(reinterpret_cast<uv_handle_t*>(&spill_poll_));
    return true;
  }

  // watch_fd for a spilled watch (a new one past the limit, or one already spilled). Every
  // change is one epoll_ctl, made now; the fd is in the set from its first watch_fd to
  // unwatch_fd, idle or not (epoll_set.hpp).
  int watch_spilled(fd_watch& watch) {
    if (!watch.watched) {
      // The same checks as a poll handle's: epoll's own (EBADF; EPERM for a regular file or a
      // directory), by adding the fd now, and the fd made non-blocking.
      if (int status = spilled_set_.add(watch); status < 0) {
        return status;
      }
      if (int on = 1; ::ioctl(watch.fd, FIONBIO, &on) != 0) {
        int error = -errno;
        spilled_set_.remove(watch);
        return error;
      }
      watch.slot = &spilled_slot;
      spilled_.add(watch);
      watch.watched = true;
      watch.armed = 0;
    } else if (watch.events != watch.armed) {
      if (int status = spilled_set_.modify(watch); status < 0) {
        keep_alive(alive_.forget_armed(watch));  // polls for nothing now
        return status;
      }
    }
    const bool counted = alive_watches::counts(watch);
    watch.armed = watch.events;
    keep_alive(alive_.update(counted, watch));
    return 0;
  }

  void unwatch_spilled(fd_watch& watch) noexcept {
    spilled_set_.remove(watch);  // also from the events of this turn: the caller may free it
    keep_alive(alive_.forget_armed(watch));
    spilled_.remove(watch);
    watch.slot = nullptr;
    watch.watched = false;
  }

  // libuv found the spill set readable: one epoll_wait, with room for every spilled watch (up to
  // the set's batch limit), dispatched as libuv dispatches a poll handle (epoll_set.hpp).
  static void on_spill(uv_poll_t* handle, int status, int) {
    auto* self = static_cast<uv_driver*>(handle->loop->data);
    if (status < 0) {
      // An epoll fd has no error condition of its own; libuv stopped the handle: start it again.
      uv_poll_start(handle, UV_READABLE, &uv_driver::on_spill);
      return;
    }
    self->spilled_set_.wait(0, self->spilled_.size(),
                            [self](fd_watch& watch, int events, bool stopped) {
                              if (stopped) {
                                self->keep_alive(self->alive_.forget_armed(watch));
                              }
                              watch.ready(watch, events);
                            });
  }

  static void on_poll_closed(uv_handle_t* handle) {
    auto* self = static_cast<uv_driver*>(handle->loop->data);
    self->spare_polls_.push_back(reinterpret_cast<uv_poll_t*>(handle));
  }

  // keepalive_ is referenced while any watch counts (see the top).
  void keep_alive(alive_watches::edge edge) noexcept {
    if (edge == alive_watches::edge::first) {
      uv_ref(reinterpret_cast<uv_handle_t*>(&keepalive_));
    } else if (edge == alive_watches::edge::last) {
      uv_unref(reinterpret_cast<uv_handle_t*>(&keepalive_));
    }
  }

  // Fires what is due and re-arms the uv timer for what is left.
  void run_due_timers() {
    timers_.fire_due(timer_clock::now());
    if (!timers_.empty()) {
      arm();
    } else {
      uv_timer_stop(&timer_);
      armed_for_ = timer_clock::time_point::max();
      uv_unref(reinterpret_cast<uv_handle_t*>(&timer_));
    }
  }

  // Arms the uv timer for the earliest deadline, rounded up to libuv's millisecond resolution
  // so that it never fires before the deadline has passed.
  void arm() {
    timer_entry* first = timers_.top();
    if (first->deadline >= armed_for_ && uv_is_active(reinterpret_cast<uv_handle_t*>(&timer_))) {
      return;
    }
    // libuv adds the timeout to its millisecond loop time in 64 bits (and clamps an
    // overflow); the cap, the clock's whole range (292 years), stays far from that.
    auto milliseconds = wait_until(
        first->deadline, timer_clock::now(),
        std::chrono::duration_cast<std::chrono::milliseconds>(timer_clock::duration::max()));
    uv_update_time(&loop_);
    uv_timer_start(&timer_, &uv_driver::on_timer, static_cast<std::uint64_t>(milliseconds.count()),
                   0);
    armed_for_ = first->deadline;
    if (timers_.foreground() > 0) {
      uv_ref(reinterpret_cast<uv_handle_t*>(&timer_));
    } else {
      uv_unref(reinterpret_cast<uv_handle_t*>(&timer_));
    }
  }

  uv_loop_t loop_{};
  uv_timer_t timer_{};
  uv_prepare_t keepalive_{};  // active, referenced while alive_.count() > 0
  alive_watches alive_;
  timer_queue timers_;
  timer_clock::time_point armed_for_ = timer_clock::time_point::max();
  std::vector<uv_poll_t*> spare_polls_;  // closed poll handles, kept for the next watch
  // Handles started since the last poll (one may appear twice; an unwatched one has no watch and
  // is skipped: closed handles stay allocated while the driver lives).
  std::vector<uv_poll_t*> queued_;
  bool closing_ = false;

  // Poll handles in use (watched through libuv); new watches past the limit are spilled. 896:
  // 7/8 of libuv's 1024-event array, the rest left to libuv's own handles (its signal pipe and
  // async eventfd, and the streams, timers' fds and the like of the io layer).
  static constexpr std::size_t libuv_poll_limit = 896;
  std::size_t libuv_polls_ = 0;
  epoll_set spilled_set_;  // open only while spill_poll_ watches it (see spill_set_open)
  bool spill_failed_ = false;
  uv_poll_t spill_poll_{};
  watch_list spilled_;  // every spilled watch
};

}  // namespace

std::unique_ptr<reactor_driver> make_uv_driver() { return std::make_unique<uv_driver>(); }

}  // namespace weft::detail

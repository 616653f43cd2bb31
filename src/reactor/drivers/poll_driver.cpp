// The poll(2) driver: no library at all, and no select() (it cannot watch a fd past 1023).
//
// The fds live in one dense pollfd array handed to poll() as is, with a parallel array of
// their owners; each fd_watch keeps its index, so adding and removing a watch is O(1) (a
// removal moves the last entry into the hole). An idle watch (events 0) stays in place with a
// negative fd, which poll() skips: a stopped fd must not report POLLHUP or POLLERR, which
// poll() returns whatever was asked. During the dispatch of one poll()'s results the array
// must not move under the loop, so a watch removed by a callback leaves a tombstone, cleared
// once the dispatch is over.
//
// Timers: the timeout of poll() is the time to the earliest deadline (weft's heap or the
// embedded libuv loop's), rounded up to the millisecond, so it never wakes before it; EINTR
// (a signal, libuv's handler included) just ends the turn early. A closed fd is reported as
// POLLNVAL: ready both ways, and the watch stops polling it until watched again.
//
// libuv's backend fd (an epoll fd) is kept out of the array and appended as its last entry to
// every poll() that may wait, and to one in backend_check_period of those that do not (a zero
// timeout: the loop has work queued). Why: asking an epoll fd about readiness is the dearest
// entry of all (the kernel takes the epoll instance's mutex and scans its ready list), and a
// busy loop asks at every turn: 4.5% of fd_pingpong's round trip, where every wait has a zero
// timeout. What it costs: while the loop stays busy, readiness of what libuv watches (a cross-
// thread trigger, a thread-pool completion, a child's exit) is seen up to
// backend_check_period - 1 turns later; a loop about to sleep always asks, so nothing is
// missed. Last, because Linux's poll registers a wait-queue entry on each fd it scans only
// until one is ready. Cost: poll()
// scans every registered fd at each call, where epoll only returns the ready ones; see the
// README's driver table.
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <string>
#include <vector>

#include "reactor/drivers/drivers.hpp"
#include "reactor/drivers/embedding_driver.hpp"
#include "reactor/drivers/libuv_loop.hpp"

namespace weft::detail {
namespace {

class poll_driver final : public embedding_driver {
 public:
  const char* name() const noexcept override { return poll_driver_name; }

  poll_driver() { start_embedding(); }
  ~poll_driver() override { close_if_open(); }

 private:
  int native_watch(fd_watch& watch) override {
    if (is_backend(watch)) {
      keep_room_for_backend(0);
      backend_ = &watch;
      backend_entry_ = pollfd{watch.events != 0 ? watch.fd : -1, POLLIN, 0};
      watch.watched = true;
      watch.armed = watch.events;
      return 0;
    }
    if (!watch.watched) {
      keep_room_for_backend(1);
      watch.index = fds_.size();
      fds_.push_back(pollfd{-1, 0, 0});
      owners_.push_back(&watch);
      watch.watched = true;
    }
    pollfd& entry = fds_[watch.index];
    entry.events = static_cast<short>(((watch.events & fd_watch::readable) != 0 ? POLLIN : 0) |
                                      ((watch.events & fd_watch::writable) != 0 ? POLLOUT : 0));
    entry.fd = watch.events != 0 ? watch.fd : -1;
    watch.armed = watch.events;
    return 0;
  }

  void native_unwatch(fd_watch& watch) noexcept override {
    if (!watch.watched) {
      return;
    }
    if (is_backend(watch)) {
      backend_ = nullptr;
      watch.watched = false;
      watch.armed = 0;
      return;
    }
    std::size_t index = watch.index;
    if (dispatching_) {
      fds_[index].fd = -1;
      owners_[index] = nullptr;
      tombstones_.push_back(index);
    } else {
      remove(index);
    }
    watch.watched = false;
    watch.armed = 0;
  }

  void native_wait(timer_clock::time_point until) override {
    const int timeout = timeout_ms(until);
    // A poll() that does not wait (the loop is busy) asks about the backend only every
    // backend_check_period turns: see the header.
    bool with_backend = backend_ != nullptr && backend_entry_.fd >= 0 &&
                        (timeout != 0 || ++quick_turns_ % backend_check_period == 0);
    if (with_backend) {
      fds_.push_back(backend_entry_);  // never allocates: native_watch reserved the room
    }
    int ready = ::poll(fds_.data(), fds_.size(), timeout);
    if (with_backend) {
      short revents = fds_.back().revents;
      fds_.pop_back();
      if (revents != 0) {
        --ready;
        report_backend(revents);
      }
    }
    if (ready <= 0) {
      return;  // the deadline, or EINTR: the caller fires what is due and asks again
    }
    dispatching_ = true;
    // Entries added by a callback (appended) were not polled: stop at the count polled.
    std::size_t polled = fds_.size();
    for (std::size_t index = 0; index < polled && ready > 0; ++index) {
      short revents = fds_[index].revents;
      if (revents == 0) {
        continue;
      }
      --ready;
      fd_watch* watch = owners_[index];
      if (watch == nullptr || fds_[index].fd < 0) {
        continue;  // removed or stopped by an earlier callback of this turn
      }
      // A closed fd (POLLNVAL) would be reported at every turn: stopped until watched again.
      // The mask drops an interest an earlier callback of this turn dropped.
      const poll_outcome outcome = outcome_of(static_cast<unsigned short>(revents), watch->armed);
      if (outcome.stopped) {
        fds_[index].fd = -1;
      }
      if (outcome.events != 0) {
        report_ready(*watch, outcome.events, outcome.stopped);
      }
    }
    dispatching_ = false;
    if (!tombstones_.empty()) {
      // Highest first: each removal moves the last entry, which is then no tombstone.
      std::sort(tombstones_.rbegin(), tombstones_.rend());
      for (std::size_t index : tombstones_) {
        remove(index);
      }
      tombstones_.clear();
    }
  }

  std::string native_release_all() noexcept override {
    std::string fds;
    // Every watch in the array is left over (the backend's is kept apart).
    for (std::size_t index = fds_.size(); index-- > 0;) {
      fd_watch* watch = owners_[index];
      if (watch != nullptr) {
        fds = std::to_string(watch->fd) + (fds.empty() ? "" : ", ") + fds;
        native_unwatch(*watch);
      }
    }
    return fds;
  }

  void native_close() noexcept override {
    fds_.clear();
    owners_.clear();
  }

  // Capacity for `adding` more entries plus the backend's, which native_wait appends and removes
  // around each poll(): push_back there then never allocates. Grown geometrically, as push_back
  // would (reserve() alone allocates exactly what it is asked for).
  void keep_room_for_backend(std::size_t adding) {
    std::size_t needed = fds_.size() + adding + 1;
    if (fds_.capacity() < needed) {
      fds_.reserve(std::max(needed, 2 * fds_.capacity()));
    }
  }

  // The backend's report only sets a flag (embedding_driver runs libuv after the wait): safe
  // before the other entries are dispatched.
  void report_backend(short revents) {
    fd_watch& watch = *backend_;
    if ((revents & (POLLNVAL | POLLERR)) != 0) {
      backend_entry_.fd = -1;  // stopped, as any other watch; the base watches it again
      report_ready(watch, fd_watch::readable | fd_watch::writable, true);
    } else {
      report_ready(watch, fd_watch::readable, false);
    }
  }

  // Moves the last entry into index.
  void remove(std::size_t index) noexcept {
    std::size_t last = fds_.size() - 1;
    if (index != last) {
      fds_[index] = fds_[last];
      owners_[index] = owners_[last];
      if (owners_[index] != nullptr) {
        owners_[index]->index = index;
      }
    }
    fds_.pop_back();
    owners_.pop_back();
  }

  static constexpr unsigned backend_check_period = 8;
  unsigned quick_turns_ = 0;     // poll() calls with a zero timeout
  fd_watch* backend_ = nullptr;  // libuv's backend watch while watched
  pollfd backend_entry_{-1, 0, 0};
  std::vector<pollfd> fds_;
  std::vector<fd_watch*> owners_;  // null: a tombstone
  std::vector<std::size_t> tombstones_;
  bool dispatching_ = false;
};

}  // namespace

std::unique_ptr<reactor_driver> make_poll_driver() { return std::make_unique<poll_driver>(); }

}  // namespace weft::detail

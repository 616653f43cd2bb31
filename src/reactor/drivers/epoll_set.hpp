// An epoll set of fd watches, each event carrying its watch (data.ptr): the epoll driver's
// whole set, and the uv driver's spill set (the watches past its poll-handle limit).
//
// Changes are epoll_ctl calls made at once, so a closed fd is refused there and then (EBADF)
// and no queued change is left to check before the next wait. An idle watch (events 0) stays in
// the set, one-shot: epoll reports EPOLLHUP and EPOLLERR whatever was asked, and
// level-triggered those would come back at every wait with nobody to take them; one-shot, such a
// report comes once and then the fd is disabled until the next change. Going idle and back costs
// two EPOLL_CTL_MOD, where leaving the set would cost an EPOLL_CTL_DEL and an EPOLL_CTL_ADD (the
// kernel frees and allocates its item and wait-queue entry).
//
// wait() dispatches as libuv dispatches a poll handle: an error condition (EPOLLERR) makes the
// watch idle and is reported ready both ways and stopped; a hang-up reports what the watch polls
// for; the rest is masked by what it polls for now, which an earlier callback of the same wait
// may have changed. A watch removed by a callback gets none of the events still to come in that
// wait. The watches a few events ahead are prefetched while one is dispatched: at a thousand
// connections each is a cold line, and the whole array is known before the first callback.
//
// From the owning driver's thread only.
#pragma once

#include <sys/epoll.h>

#include <algorithm>
#include <cstddef>
#include <vector>

#include "sched/driver.hpp"

namespace weft::detail {

class epoll_set {
 public:
  epoll_set() = default;
  ~epoll_set() { close(); }
  epoll_set(const epoll_set&) = delete;
  epoll_set& operator=(const epoll_set&) = delete;

  // Creates the set: 0, or a negative errno (EMFILE).
  int open() noexcept;
  bool is_open() const noexcept { return fd_ >= 0; }
  int fd() const noexcept { return fd_; }
  void close() noexcept;

  // Adds watch (not yet in the set), polling for watch.events (idle when 0): 0, or a negative
  // errno (EBADF; EPERM for a regular file or a directory). Leaves watch's fields alone.
  int add(fd_watch& watch) noexcept;
  // Polls for watch.events from now on: 0, or a negative errno (EBADF: the fd was closed and
  // epoll dropped it; ENOENT: its number was reused), the fd then polled for nothing.
  int modify(fd_watch& watch) noexcept;
  // Takes watch out of the set (its fd may be closed already) and out of the events the current
  // wait has still to dispatch.
  void remove(fd_watch& watch) noexcept;

  // One epoll_wait of timeout ms (-1: no limit; 0: no wait) with room for `expected` events
  // (clamped to [64, batch_max]: what does not fit comes with the next wait), each dispatched as
  // report(watch, events, stopped), with events in fd_watch's terms. Returns the number of events
  // epoll returned (0 on EINTR).
  template <class Report>
  int wait(int timeout, std::size_t expected, Report&& report);

 private:
  static unsigned to_epoll(int events) noexcept;

  // How far ahead of the event being dispatched its watch is fetched: enough to cover a miss to
  // memory with the work of a few reports, few enough to stay in the first-level cache.
  static constexpr int prefetch_ahead = 8;
  static constexpr std::size_t batch_max = 4096;

  int fd_ = -1;
  std::vector<epoll_event> events_;
  int next_ = 0;   // while dispatching: the next event of events_ ...
  int count_ = 0;  // ... of this many
};

template <class Report>
int epoll_set::wait(int timeout, std::size_t expected, Report&& report) {
  const std::size_t room = std::clamp<std::size_t>(expected, 64, batch_max);
  if (events_.size() < room) {
    events_.resize(room);
  }
  const int count = ::epoll_wait(fd_, events_.data(), static_cast<int>(events_.size()), timeout);
  if (count <= 0) {
    return 0;  // the deadline, or EINTR
  }
  count_ = count;
  for (int index = 0; index < std::min(count, prefetch_ahead); ++index) {
    __builtin_prefetch(events_[static_cast<std::size_t>(index)].data.ptr);
  }
  for (next_ = 0; next_ < count_;) {
    if (next_ + prefetch_ahead < count_) {
      __builtin_prefetch(events_[static_cast<std::size_t>(next_ + prefetch_ahead)].data.ptr);
    }
    const epoll_event& event = events_[static_cast<std::size_t>(next_++)];
    auto* watch = static_cast<fd_watch*>(event.data.ptr);
    if (watch == nullptr || watch->armed == 0) {
      continue;  // removed or idled by an earlier callback of this wait
    }
    if ((event.events & EPOLLERR) != 0) {
      epoll_event idle{};
      idle.events = to_epoll(0);
      idle.data.ptr = watch;
      ::epoll_ctl(fd_, EPOLL_CTL_MOD, watch->fd, &idle);  // stopped, as libuv stops it
      report(*watch, fd_watch::readable | fd_watch::writable, true);
      continue;
    }
    int events = ((event.events & EPOLLIN) != 0 ? fd_watch::readable : 0) |
                 ((event.events & EPOLLOUT) != 0 ? fd_watch::writable : 0);
    if ((event.events & EPOLLHUP) != 0) {
      events |= watch->armed;
    }
    events &= watch->armed;
    if (events != 0) {
      report(*watch, events, false);
    }
  }
  count_ = 0;
  next_ = 0;
  return count;
}

}  // namespace weft::detail

// A callback-style watch of one fd on the scheduler's driver, for event sources above the
// reactor that are not coroutines waiting (the event-loop facade's on_readable/on_writable).
//
// It shares the driver's one watch of the fd (see fd_watch in src/sched/driver.hpp: one watch
// per fd per driver) with the coroutines waiting on that fd (weft::wait_readable/wait_writable)
// and its fd_registrations: the fd registry of src/reactor/fd.cpp polls for the union of what
// they all want, and reports to each what it asked for. So a loop watching an fd and a coroutine
// waiting on the same fd work side by side on every driver.
//
// Level-triggered: ready() runs from the driver's poll as long as the fd is ready for something
// in `events`, with those of `events` it is ready for. When the driver stopped polling the fd
// after an error condition (fd_watch's `armed` reads 0: POLLERR, POLLNVAL, a change refused),
// ready() gets readable | writable | stopped: nothing more is reported until the owner calls
// subscribe_fd again (after it looked at the fd: closed, or only in error). ready() runs inside
// the driver's poll: it may only record what it got and wake a coroutine (no call of
// subscribe_fd or unsubscribe_fd there, no switch).
//
// Threads and ownership: the scheduler's thread only, from a coroutine or a callback of its
// driver. The owner keeps the subscription alive and in place from subscribe_fd until
// unsubscribe_fd, and unsubscribes before the scheduler's run ends (the registry closes with
// the driver and then drops what is left without telling anyone). One subscription per fd per
// scheduler: a second is refused with -EEXIST.
#pragma once

#include "sched/scheduler_core.hpp"

namespace weft::detail {

struct fd_subscription {
  static constexpr int readable = 1;  // as fd_watch's
  static constexpr int writable = 2;
  static constexpr int stopped = 4;  // ready() only: the driver stopped polling the fd

  // --- set by the owner; given to the registry by subscribe_fd ---
  int fd = -1;
  // readable | writable. Set to 0 while subscribed, the subscription is dormant: nothing is
  // reported to it from then on, with no call into the registry; subscribe_fd with events
  // again wakes it, and it still holds the fd's one subscription. What the driver still polls
  // for when it goes dormant is dropped by the registry the first time it fires unwanted, so a
  // dormant subscription costs one report at most, never a poll loop that spins.
  int events = 0;
  // Counts for the driver's alive() (and so against a deadlock report).
  bool referenced = true;
  void (*ready)(fd_subscription& subscription, int events) = nullptr;

  // --- the registry's ---
  void* entry = nullptr;  // the fd's entry while subscribed
};

// How many reports of a fd a consumer already woken by it (a coroutine waiting on it, a
// hibernating connection's subscription) lets through before its interest is dropped: the fd
// stays ready until the woken one runs and reads, so each poll in between reports it again, and
// dropping the interest costs two epoll_ctl calls (drop, and add back at its next wait), while a
// burst of thousands of woken consumers must not keep every poll busy either (src/reactor/fd.cpp,
// fd_registry::on_ready; src/net/hibernate.cpp, on_hibernation_ready).
inline constexpr unsigned max_woken_repeats = 4;

// Subscribes (the first call) or applies a change of events or referenced (later calls, and
// after a `stopped` report). Returns 0, or a negative errno when the driver cannot poll the fd:
// -EBADF (not open), -EPERM (a regular file or a directory, or a file without readiness
// notification), -EEXIST (another subscription has the fd); a new subscription that fails is
// not registered, a change that fails leaves it registered and polling for nothing (call
// subscribe_fd again, or unsubscribe_fd). Throws std::bad_alloc only.
int subscribe_fd(scheduler_core& core, fd_subscription& subscription);

// Ends the subscription at once: when nothing else waits on the fd the driver stops watching
// it before this returns, so the owner may close the fd right after. No-op when not subscribed.
void unsubscribe_fd(scheduler_core& core, fd_subscription& subscription) noexcept;

}  // namespace weft::detail

// The driver interface: what the scheduler needs of the event machinery it blocks on. The
// scheduler knows nothing else of it; the drivers (libuv, libev, libevent, poll(2)) and the
// event sources built on them live in the reactor layer (src/reactor/), which implements this
// and provides make_driver(). No library header may be included here: the floors below the
// reactor build without any of them.
//
// A driver belongs to one scheduler and is driven only from its thread: poll() runs callbacks
// of events that are due (waking coroutines through the scheduler's wake, never switching
// stacks itself); poll(true) first waits until at least one event or timer is due (it may
// return early, with nothing done: the scheduler then asks again). alive() says whether
// anything registered can still produce an event that counts: deadlock detection treats a
// scheduler whose driver is not alive and whose coroutines all wait as deadlocked. Background
// sources (a pool's healthcheck timer, an unreferenced fd watch) do not count.
#pragma once

#include <cstddef>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "weft/detail/timer_entry.hpp"

namespace weft::detail {

// Readiness of one fd, watched by a driver. Intrusive: the caller owns it (the fd registry of
// src/reactor/fd.cpp keeps one per fd) and keeps it alive from the first watch_fd() until
// unwatch_fd(); after unwatch_fd() the driver never touches it again (a driver that must close
// something asynchronously, libuv's uv_poll_t, keeps that in a handle of its own).
//
// Level-triggered: ready() runs from poll() as long as the fd is ready for something in
// `events`, with the events it is ready for. An error condition on the fd (POLLERR, POLLHUP, a
// closed fd: POLLNVAL, EBADF) reports it ready for at least everything it polls for (the uv
// driver after POLLERR and the poll driver report both ways, as poll(2) does; libev and
// libevent report what was asked): the caller's next read or write returns the real error. A
// driver may stop polling after reporting an error (libuv stops a uv_poll_t on POLLERR, the
// poll driver stops a closed fd, libev one it could not add): `armed` then reads 0 and the next
// watch_fd() starts it again. ready() may call watch_fd / unwatch_fd / set_fd_referenced on
// this or any other watch, and may destroy an unwatched one.
//
// One watch per fd per driver: two live watches of one fd are not supported (libuv refuses the
// second, epoll and libev reject or merge them). The registry multiplexes waiters on one.
//
// A fd closed while watched: the poll driver reports it ready both ways (POLLNVAL) and stops
// polling it. The epoll-based drivers (uv, ev, event) mostly cannot see it: the kernel drops a
// closed fd from the epoll set silently, so the watch simply never fires again (a wait with a
// timeout times out). A change of the watch still queued when the fd closes would abort the
// process in libuv and libev (their epoll_ctl fails with EBADF: libuv calls abort(), Debian's
// libev fails an assertion), so the uv and ev drivers check the fds of the watches changed
// since their last poll (one fcntl each) before they poll, and report a closed one as an error
// condition: ready both ways, armed 0. libevent applies a change at once and watch_fd returns
// the error; so does the uv driver for a watch past its first 896 (those live in an epoll set of
// the driver's own, changed with an epoll_ctl at once: src/reactor/drivers/uv_driver.cpp). The
// uring driver's poll holds the file: the fd stays open in the kernel until the watch ends.
// Unwatch before closing all the same: everything in weft does.
struct fd_watch {
  static constexpr int readable = 1;
  static constexpr int writable = 2;

  // In an order without holes (40 bytes): the fd registry keeps what a report reads of its
  // entry in the cache line that starts with these fields.

  // --- set by the caller ---
  int fd = -1;
  int events = 0;  // readable | writable: what watch_fd() polls for; 0: registered, idle
  void (*ready)(fd_watch& watch, int events) = nullptr;

  // --- owned by the driver; the caller may read them ---
  int armed = 0;         // what the driver polls for right now
  bool watched = false;  // between the first watch_fd() and unwatch_fd()

  // --- set by the caller ---
  // Counts for alive() while armed. Change it with set_fd_referenced while watched.
  bool referenced = true;

  // --- owned by the driver ---
  void* slot = nullptr;   // the driver's own object for it (uv_poll_t, ev_io, struct event)
  std::size_t index = 0;  // its place in the driver's own tables
};

// Per-driver state of an event source (the fd registry, the signal handles): created on
// first use, closed with the driver, before the driver closes its own handles.
class driver_extension {
 public:
  virtual ~driver_extension() = default;
  // Closes every handle the extension owns; their callbacks run before the driver closes.
  virtual void close() noexcept = 0;
  // Brings what the driver counts for alive() up to date, for an extension that lets it lag
  // between waits (the fd registry: see src/reactor/fd.cpp). Called by settle_extensions().
  virtual void settle() noexcept {}
};

class driver {
 public:
  virtual ~driver() = default;

  // The driver's name ("uv", "ev", "event", "epoll", "poll", "uring"): a string with static
  // lifetime.
  virtual const char* name() const noexcept = 0;

  virtual void poll(bool block) = 0;
  virtual bool alive() = 0;

  // Timers: entry.fire runs from poll() once entry.deadline has passed, never before. An entry
  // must stay alive until it fired or was removed. Every driver keeps them in weft's own heap
  // (src/reactor/timer_queue.hpp) and arms one native timer for the earliest deadline, rounded
  // up to its resolution.
  virtual void add_timer(timer_entry& entry) = 0;
  virtual void remove_timer(timer_entry& entry) noexcept = 0;

  // fd readiness (see fd_watch). watch_fd starts watching (the first call) or changes what is
  // polled to watch.events; it returns 0, or a negative errno when the fd cannot be watched:
  // -EBADF (not open), -EPERM (a regular file or a directory: never "ready" in epoll's sense,
  // so refused by every driver alike). On an error a new watch is not registered, and a watch
  // whose change failed polls for nothing (armed reads 0). Throws std::bad_alloc only.
  virtual int watch_fd(fd_watch& watch) = 0;
  virtual void unwatch_fd(fd_watch& watch) noexcept = 0;
  virtual void set_fd_referenced(fd_watch& watch, bool referenced) noexcept = 0;

  // Closes the driver's own handles and checks that nothing else is left open; a leftover
  // handle is a std::logic_error naming what was left.
  virtual void close() = 0;

  // Operations whose waiter left before they completed (see src/reactor/operation.hpp). They
  // are bound to complete soon; close() waits for them before closing.
  void operation_abandoned() noexcept { ++abandoned_; }
  void abandoned_operation_completed() noexcept { --abandoned_; }
  std::size_t abandoned_operations() const noexcept { return abandoned_; }

  // Settles every extension (driver_extension::settle): the scheduler's step before it asks
  // alive() whether to block, the one place that asks.
  void settle_extensions() noexcept {
    for (auto& [tag, existing] : extensions_) {
      existing->settle();
    }
  }

  // The extension of type Extension, constructed from arguments on first use (later calls
  // ignore them). The search is inline (the fd registry is looked up at every fd wait); the
  // first use's construction is not.
  template <class Extension, class... Arguments>
  [[gnu::always_inline]] Extension& extension(Arguments&&... arguments) {
    for (auto& [tag, existing] : extensions_) {
      if (tag == &extension_key<Extension>) {
        return static_cast<Extension&>(*existing);
      }
    }
    return add_extension<Extension>(std::forward<Arguments>(arguments)...);
  }

 protected:
  void close_extensions() noexcept {
    for (auto& [tag, existing] : extensions_) {
      existing->close();
    }
  }
  void destroy_extensions() noexcept { extensions_.clear(); }

 private:
  // One key per extension type, whatever the arguments of the call that constructs it.
  template <class Extension>
  static constexpr char extension_key = 0;

  template <class Extension, class... Arguments>
  [[gnu::noinline]] Extension& add_extension(Arguments&&... arguments) {
    auto created = std::make_unique<Extension>(std::forward<Arguments>(arguments)...);
    Extension& result = *created;
    extensions_.emplace_back(&extension_key<Extension>, std::move(created));
    return result;
  }

  std::size_t abandoned_ = 0;
  std::vector<std::pair<const void*, std::unique_ptr<driver_extension>>> extensions_;
};

// The driver a new scheduler runs on (defined by the reactor layer, src/reactor/factory.cpp).
// requested: run_options::driver; empty means the environment's WEFT_DRIVER, and when that is
// unset too the first the build has of uv, ev, event, epoll, poll, uring. std::invalid_argument,
// listing the valid names, for a name that is unknown or not in this build.
std::unique_ptr<driver> make_driver(std::string_view requested);

}  // namespace weft::detail

// The drivers as the event sources built on libuv see them. Every driver has a libuv loop: the
// uv driver's is the one it blocks on; the ev, event and poll drivers embed one and drive it
// from their own wait (src/reactor/drivers/embedding_driver.hpp). So everything only libuv
// provides (streams, UDP, files, fs events, DNS, child processes, the thread pool, signals,
// triggers) works on every driver, through uv_loop_of.
//
// From the scheduler's thread only, like the driver itself.
#pragma once

#include <uv.h>

#include <cstddef>
#include <string>
#include <vector>

#include "sched/driver.hpp"

namespace weft::detail {

class ring_io;

// A driver of the reactor layer: every driver make_driver() returns is one.
class reactor_driver : public driver {
 public:
  // The libuv loop of this driver: its own (uv) or the embedded one (ev, event, epoll, poll,
  // uring). A plain member, not a virtual call: stream and request code reaches it on every
  // operation.
  uv_loop_t& libuv_loop() noexcept { return *libuv_loop_; }
  // After close(): the libuv loop is gone.
  bool closed() const noexcept { return closed_; }
  // Completion-based socket I/O (src/reactor/ring.hpp): the uring driver's ring; null on the
  // others and once closed.
  ring_io* ring() noexcept { return closed_ ? nullptr : ring_; }

 protected:
  explicit reactor_driver(uv_loop_t& loop) noexcept : libuv_loop_(&loop) {}
  bool closed_ = false;
  ring_io* ring_ = nullptr;

 private:
  uv_loop_t* libuv_loop_;
};

// The fd watches that keep a driver's loop alive: watched, armed and referenced. No driver lets
// its native watches keep its loop alive by themselves (the uv driver unrefs its poll handles;
// the ev, event and poll drivers count in alive() by the embedding rule), so each counts them
// here from every change of a watch: take counts(watch) before the change, then update().
// update() and forget_armed() report when the count leaves zero (first) or reaches it (last),
// for a driver that holds a reference of its own while any watch counts.
class alive_watches {
 public:
  enum class edge { none, first, last };

  static bool counts(const fd_watch& watch) noexcept {
    return watch.watched && watch.armed != 0 && watch.referenced;
  }
  edge update(bool counted_before, const fd_watch& watch) noexcept {
    const bool counted_now = counts(watch);
    if (counted_now && !counted_before) {
      return count_++ == 0 ? edge::first : edge::none;
    }
    if (counted_before && !counted_now) {
      return --count_ == 0 ? edge::last : edge::none;
    }
    return edge::none;
  }
  // The driver stopped polling watch (an error condition, an unwatch): it reads armed 0.
  edge forget_armed(fd_watch& watch) noexcept {
    const bool counted = counts(watch);
    watch.armed = 0;
    return update(counted, watch);
  }
  std::size_t count() const noexcept { return count_; }
  // Every watch was released at once (the driver closes).
  void clear() noexcept { count_ = 0; }

 private:
  std::size_t count_ = 0;
};

[[noreturn]] void throw_driver_closed(const char* operation);

// The watches a driver registered itself, each at its watch.index: O(1) add and remove (the last
// one moves into the hole), for a driver whose native side keeps no list it can walk (the ev,
// event and uring drivers; the uv driver's spill set).
class watch_list {
 public:
  void add(fd_watch& watch) {
    watch.index = watches_.size();
    watches_.push_back(&watch);
  }
  void remove(fd_watch& watch) noexcept {
    fd_watch* last = watches_.back();
    watches_[watch.index] = last;
    last->index = watch.index;
    watches_.pop_back();
  }
  std::size_t size() const noexcept { return watches_.size(); }
  // For a driver closing with watches left over: unwatches every watch but `keep` (the driver's
  // own) through unwatch, which must remove it from this list, newest first so that each
  // removal takes the last slot; returns their fds, oldest first ("5, 7").
  template <class Unwatch>
  std::string release_all(const fd_watch* keep, Unwatch&& unwatch) noexcept {
    std::string fds;
    for (std::size_t index = watches_.size(); index-- > 0;) {
      fd_watch* watch = watches_[index];
      if (watch != keep) {
        fds = std::to_string(watch->fd) + (fds.empty() ? "" : ", ") + fds;
        unwatch(*watch);
      }
    }
    return fds;
  }

 private:
  std::vector<fd_watch*> watches_;
};

// The std::logic_error of a driver whose close() found fd watches still registered (fds: what
// watch_list::release_all returned).
[[noreturn]] void throw_watches_left(const char* driver, const std::string& fds);

// The libuv loop behind d, whichever driver it is. std::logic_error naming operation once the
// driver has closed (the scheduler's run is over).
inline uv_loop_t& uv_loop_of(driver& d, const char* operation) {
  auto& reactor = static_cast<reactor_driver&>(d);
  if (reactor.closed()) [[unlikely]] {
    throw_driver_closed(operation);
  }
  return reactor.libuv_loop();
}

// The drivers' names (driver::name()): one object per name, so they compare by address too.
inline constexpr const char uv_driver_name[] = "uv";
inline constexpr const char ev_driver_name[] = "ev";
inline constexpr const char event_driver_name[] = "event";
inline constexpr const char epoll_driver_name[] = "epoll";
inline constexpr const char poll_driver_name[] = "poll";
inline constexpr const char uring_driver_name[] = "uring";

}  // namespace weft::detail

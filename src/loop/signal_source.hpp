// Signal deliveries for the event loop: the seam between the facade and whatever tells it that
// a signal arrived. Switching to native callback watches changes this file and
// signal_source.cpp only.
//
// How it works: while the loop is dispatched, one helper coroutine per watched signal number
// waits in weft::signals::wait (which catches the signal with libuv's uv_signal_t: the OS
// handler only records the delivery, nothing runs inside it), marks the number pending and
// tells the dispatcher, which runs the callback in its next tick. Deliveries that arrive before
// that tick coalesce into one. Removing a watcher cancels its helper. The signal is caught from
// on_signal() on when a coroutine registers it (a zero-timeout wait installs the handler at
// once), and from the start of the dispatch otherwise.
//
// Why not a native watch, as fds have (fd_source.hpp): the driver interface has none for
// signals. Every driver catches them the same way, through uv_signal_t on its libuv loop (the
// embedded one on ev, event and poll: src/reactor/signals.cpp), since a process has one
// disposition per signal and libuv's must own it for the rest of weft (child processes need
// SIGCHLD). A native seam would be a callback variant of that registry; signals are rare, so
// the one coroutine switch per delivery it would save is not worth a second delivery path.
//
// Threads: the loop's thread only. stop() cancels every helper and waits until each has ended.
#pragma once

#include <csignal>
#include <cstddef>
#include <vector>

#include "loop/fd_source.hpp"
#include "weft/loop/event_loop.hpp"
#include "weft/sched/task.hpp"

namespace weft::loop::detail {

class signal_source {
 public:
  signal_source();
  signal_source(const signal_source&) = delete;
  signal_source& operator=(const signal_source&) = delete;

  // std::invalid_argument for a number that cannot be caught (out of range, SIGKILL, SIGSTOP).
  static void check_number(int signal_number, const char* operation);

  // Starts reporting signal_number for watcher id (replacing its watcher).
  void watch(int signal_number, watcher_id id);
  void unwatch(int signal_number) noexcept;
  watcher_id watcher(int signal_number) const noexcept {
    return signal_number > 0 && signal_number < NSIG ? numbers_[signal_number].id
                                                     : watcher_id::none;
  }

  void start(readiness_listener& listener);
  void stop();

  bool any_pending() const noexcept { return pending_count_ > 0; }
  // Takes the pending delivery of signal_number, if any.
  bool take(int signal_number) noexcept {
    if (!numbers_[signal_number].pending) {
      return false;
    }
    numbers_[signal_number].pending = false;
    --pending_count_;
    return true;
  }
  // Leaves a delivery pending for the next tick (its callback was registered in this one).
  void keep(int signal_number) noexcept {
    if (!numbers_[signal_number].pending) {
      numbers_[signal_number].pending = true;
      ++pending_count_;
    }
  }

 private:
  struct number {
    watcher_id id = watcher_id::none;
    weft::task<void> helper;
    bool pending = false;
  };
  void catch_now(int signal_number);
  void spawn_helper(int signal_number);
  void retire_helper(number& n) noexcept;
  static void helper_main(signal_source& self, int signal_number);

  std::vector<number> numbers_;
  std::size_t pending_count_ = 0;
  readiness_listener* listener_ = nullptr;
  std::vector<weft::task<void>> retired_;
};

}  // namespace weft::loop::detail

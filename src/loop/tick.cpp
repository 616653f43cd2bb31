// One tick of the loop: errors of the event sources, defers, due timers, fd callbacks, signal
// callbacks, in that order (event_loop.hpp states the rules this keeps).
//
// "Created during a tick never runs in it": defers run from a snapshot of the queue taken when
// the tick starts; timers due are those armed before it started (sequence below the horizon);
// fd and signal watchers carry the tick they were created in and are skipped in that tick (their
// readiness is looked at again in the next). "Removed takes effect at once": every callback is
// looked up by id right before it runs.
//
// An error that ends run() leaves the rest of the tick pending: the defers not yet run go back
// to the front of the queue, due timers stay in the heap, signals not yet taken stay pending;
// fds not yet run are reported again by the driver
// (level-triggered).
#include <cerrno>
#include <csignal>
#include <cstring>
#include <exception>
#include <string>
#include <utility>

#include "loop/loop_core.hpp"
#include "weft/error.hpp"

namespace weft::loop::detail {
namespace {

std::string closed_fd_message(int fd, int code, bool readable, bool writable) {
  std::string watchers = readable && writable ? "readable and writable watchers were"
                         : readable           ? "readable watcher was"
                                              : "writable watcher was";
  std::string calls = readable && writable ? "off_readable/off_writable"
                      : readable           ? "off_readable"
                                           : "off_writable";
  if (code != EBADF && code != ENOENT && code != ESTALE) {
    // Refused by the driver while it is still the file first watched.
    return "could not be watched any more (" + std::string(std::strerror(code)) + ") while its " +
           watchers + " registered; the loop removed them";
  }
  std::string closed = code == EBADF ? "closed" : "closed, and its number reused,";
  return closed + " while its " + watchers + " still registered; the loop removed them (call " +
         calls + "(" + std::to_string(fd) + ") before closing an fd)";
}

}  // namespace

void loop_core::run_tick(std::int64_t now) {
  ++tick_;
  if (!pending_errors_.empty()) {
    run_pending_errors();
  }
  if (!defers_.empty()) {
    run_defers();
  }
  if (!timers_.empty()) {
    run_timers(now);
  }
  if (!fds_.dead().empty()) {
    report_dead_fds();
  }
  if (fds_.any_ready()) {
    run_fds();
  }
  if (signals_.any_pending()) {
    run_signals();
  }
}

void loop_core::run_pending_errors() {
  while (!pending_errors_.empty()) {
    std::exception_ptr error = std::move(pending_errors_.front());
    pending_errors_.erase(pending_errors_.begin());
    on_callback_error(std::move(error));
  }
}

void loop_core::run_defers() {
  running_defers_.swap(defers_);  // what callbacks defer now goes to the next tick
  std::size_t index = 0;
  std::exception_ptr failure;
  try {
    for (; index < running_defers_.size(); ++index) {
      watcher_id id = running_defers_[index];
      watcher* w = watchers_.find(id);
      if (w == nullptr || w->kind != watcher_kind::defer) {
        continue;  // removed by an earlier callback
      }
      run_once(watcher_table::slot_of(id));
    }
  } catch (...) {
    failure = std::current_exception();
  }
  if (failure) {
    defers_.insert(defers_.begin(),
                   running_defers_.begin() + static_cast<std::ptrdiff_t>(index) + 1,
                   running_defers_.end());
    running_defers_.clear();
    std::rethrow_exception(failure);
  }
  running_defers_.clear();
}

void loop_core::run_timers(std::int64_t now) {
  const std::uint64_t horizon = next_sequence_;
  while (!timers_.empty()) {
    const timer_node top = timers_.top();
    watcher& w = watchers_.at(top.slot);
    if (w.armed_sequence != top.sequence) {
      timers_.pop();  // cancelled
      --stale_nodes_;
      continue;
    }
    if (top.deadline > now || top.sequence >= horizon) {
      return;
    }
    timers_.pop();
    w.armed_sequence = 0;
    switch (w.kind) {
      case watcher_kind::delay:
        run_once(top.slot);
        break;
      case watcher_kind::repeat:
        // Once per tick, from the tick's start: no pile-up after a stall.
        arm_timer(top.slot, w, deadline_after(now, w.interval));
        invoke_in_place(top.slot);
        break;
      case watcher_kind::fd_check:
        run_fd_check(top.slot, now);
        break;
      default:
        break;
    }
  }
}

void loop_core::run_fd_check(std::uint32_t slot, std::int64_t now) {
  if (fds_.watched() == 0) {
    release(slot);
    return;
  }
  arm_timer(slot, watchers_.at(slot), deadline_after(now, closed_fd_check_interval));
  fds_.check_closed();
  report_dead_fds();
}

void loop_core::report_dead_fds() {
  std::vector<dead_fd>& dead = fds_.dead();
  while (!dead.empty()) {
    dead_fd found = dead.front();
    dead.erase(dead.begin());
    bool removed[2] = {false, false};
    for (int direction = 0; direction < 2; ++direction) {
      watcher_id id = found.watchers[direction];
      if (id != watcher_id::none &&
          fds_.watcher(found.fd, static_cast<fd_direction>(direction)) == id &&
          watchers_.find(id) != nullptr) {
        release(watcher_table::slot_of(id));
        removed[direction] = true;
      }
    }
    if (!removed[0] && !removed[1]) {
      continue;  // reported already, or removed meanwhile
    }
    std::exception_ptr error;
    try {
      throw weft::io_error(-found.code, "weft::loop::event_loop", "fd " + std::to_string(found.fd),
                           closed_fd_message(found.fd, found.code, removed[0], removed[1]));
    } catch (...) {
      error = std::current_exception();
    }
    on_callback_error(std::move(error));
  }
}

void loop_core::run_fds() {
  // Those reported before the tick (a report during it, from a callback that lets the scheduler
  // poll, waits for the next tick).
  const std::vector<ready_fd>& ready = fds_.take_ready(tick_);
  if (!fds_.dead().empty()) {
    report_dead_fds();  // fds the driver stopped polling that were found closed
  }
  // Level-triggered: an fd left out here (its watcher registered during this tick, or the rest
  // of a batch an error interrupted) is reported again by the driver's next poll.
  for (const ready_fd& event : ready) {
    if (event.readable) {
      run_fd(event.fd, fd_direction::readable);
    }
    if (event.writable) {
      run_fd(event.fd, fd_direction::writable);
    }
  }
}

void loop_core::run_fd(int fd, fd_direction direction) {
  watcher_id id = fds_.watcher(fd, direction);
  watcher* w = watchers_.find(id);
  if (w == nullptr) {
    return;  // removed by an earlier callback of this tick
  }
  fd_callbacks_ran_ = true;  // (or due in the next tick: look again right after this one)
  if (w->armed_tick == tick_) {
    return;  // registered during this tick
  }
  invoke_in_place(watcher_table::slot_of(id));
}

void loop_core::run_signals() {
  for (int number = 1; number < NSIG; ++number) {
    if (!signals_.take(number)) {
      continue;
    }
    watcher_id id = signals_.watcher(number);
    watcher* w = watchers_.find(id);
    if (w == nullptr) {
      continue;
    }
    if (w->armed_tick == tick_) {
      signals_.keep(number);  // registered during this tick: delivered in the next
      continue;
    }
    invoke_in_place(watcher_table::slot_of(id));
  }
}

// --- calling callbacks -----------------------------------------------------------------------

void loop_core::run_once(std::uint32_t slot) {
  // Removed before the callback runs (out of timer_count(), its id dead, a reference less),
  // while the callback itself stays in the slot until it returns: no move of it, and the slot
  // is recycled by end_running().
  watchers_.at(slot).running = true;
  release(slot);
  invoke_in_place(slot);
}

void loop_core::invoke_in_place(std::uint32_t slot) {
  watcher& w = watchers_.at(slot);  // chunks never move: valid while the callback registers
  w.running = true;
  std::exception_ptr failure;
  ++in_callback_;
  try {
    w.callback();
  } catch (...) {
    failure = std::current_exception();
  }
  --in_callback_;
  end_running(slot);
  if (failure) {
    on_callback_error(std::move(failure));
  }
}

void loop_core::on_callback_error(std::exception_ptr error) {
  if (weft::detail::is_cancellation(error) || !handler_) {
    std::rethrow_exception(error);  // ends run(): see ERRORS in event_loop.hpp
  }
  // Called from a local, so that the handler may replace itself.
  error_handler handler = std::move(handler_);
  handler_replaced_ = false;
  std::exception_ptr failure;
  ++in_callback_;
  try {
    handler(error);
  } catch (...) {
    failure = std::current_exception();
  }
  --in_callback_;
  if (!handler_replaced_) {
    handler_ = std::move(handler);
  }
  if (failure) {
    std::rethrow_exception(failure);
  }
}

}  // namespace weft::loop::detail

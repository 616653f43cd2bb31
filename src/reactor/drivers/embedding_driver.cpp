#include "reactor/drivers/embedding_driver.hpp"

#include <poll.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <stdexcept>
#include <string>

#include "reactor/drivers/libuv_loop.hpp"
#include "sched/scheduler_core.hpp"

namespace weft::detail {

embedding_driver::embedding_driver() : reactor_driver(uv_) {
  check_uv(uv_loop_init(&uv_), "loop init");
  int status = uv_prepare_init(&uv_, &keepalive_);
  if (status == 0) {
    // Never called for anything: it only has to be active, so that a referenced keepalive_
    // makes uv_run turn and uv_backend_timeout tell the truth.
    status = uv_prepare_start(&keepalive_, [](uv_prepare_t*) {});
  }
  if (status < 0) {
    uv_loop_close(&uv_);
    check_uv(status, "prepare init");
  }
  uv_unref(reinterpret_cast<uv_handle_t*>(&keepalive_));
}

embedding_driver::~embedding_driver() {
  if (!closing_) {
    // The derived constructor failed after this one succeeded: only the libuv loop exists.
    uv_close(reinterpret_cast<uv_handle_t*>(&keepalive_), nullptr);
    uv_run(&uv_, UV_RUN_NOWAIT);
    uv_loop_close(&uv_);
  }
}

void embedding_driver::start_embedding() {
  backend_.owner = this;
  backend_.fd = uv_backend_fd(&uv_);
  backend_.events = fd_watch::readable;
  backend_.referenced = false;  // libuv's own liveness counts, through uv_loop_alive
  backend_.ready = [](fd_watch& watch, int) {
    static_cast<backend_watch&>(watch).owner->backend_ready_ = true;
  };
  int status = native_watch(backend_);
  if (status < 0) {
    throw std::runtime_error(std::string("weft: driver '") + name() +
                             "' cannot watch libuv's backend fd: " + uv_strerror(status));
  }
}

void embedding_driver::close_if_open() noexcept {
  if (!closing_) {
    try {
      close();
    } catch (...) {
      // Destruction after a failed run: the leak was already reported by close().
    }
  }
}

bool embedding_driver::ready_work() noexcept {
  scheduler_core* core = current_core();
  return core != nullptr && core->has_ready_work();
}

int embedding_driver::uv_timeout() noexcept {
  uv_ref(reinterpret_cast<uv_handle_t*>(&keepalive_));
  uv_update_time(&uv_);
  int timeout = uv_backend_timeout(&uv_);
  uv_unref(reinterpret_cast<uv_handle_t*>(&keepalive_));
  return timeout;
}

void embedding_driver::run_uv() {
  uv_ref(reinterpret_cast<uv_handle_t*>(&keepalive_));
  uv_run(&uv_, UV_RUN_NOWAIT);
  uv_unref(reinterpret_cast<uv_handle_t*>(&keepalive_));
}

bool embedding_driver::fire_due_timers(timer_clock::time_point now) {
  timer_entry* first = timers_.top();
  if (first == nullptr || first->deadline > now) {
    return false;
  }
  timers_.fire_due(now);
  return true;
}

void embedding_driver::poll(bool block) {
  // Due timers first, as libuv orders a turn: a deadline that passed while I/O also became
  // ready wins over that I/O (the first wake of a coroutine counts).
  timer_clock::time_point now = timer_clock::now();
  if (fire_due_timers(now)) {
    block = block && !ready_work();
  }
  // libuv work that must run before anyone waits: changes of its epoll set still queued (a
  // stream that just started reading is not in the set until uv_run), pending callbacks,
  // closing handles. Callbacks that made a coroutine ready end the blocking here.
  if (uv_timeout() == 0) {
    run_uv();
    block = block && !ready_work();
  }
  // Nothing left that could end a wait (the callbacks above finished the last request): a
  // blocking wait would never return.
  block = block && alive();
  if (backend_.armed == 0) {
    native_watch(backend_);  // stopped after an error report: watch it again
  }
  timer_clock::time_point until = timer_clock::time_point::min();
  timer_clock::time_point uv_due = timer_clock::time_point::max();
  if (block) {
    until = timers_.empty() ? timer_clock::time_point::max() : timers_.top()->deadline;
    int uv_milliseconds = uv_timeout();
    if (uv_milliseconds >= 0) {
      uv_due = now + std::chrono::milliseconds(uv_milliseconds);
      until = std::min(until, uv_due);
    }
  }
  backend_ready_ = false;
  native_wait(until);
  if (block) {
    now = timer_clock::now();  // after a wait that did not wait, the reading above still serves
  }
  if (backend_ready_ || now >= uv_due) {
    run_uv();
  }
  fire_due_timers(now);
}

embedding_driver::poll_outcome embedding_driver::outcome_of(unsigned revents, int armed) noexcept {
  constexpr int both = fd_watch::readable | fd_watch::writable;
  if ((revents & (POLLNVAL | POLLERR)) != 0) {
    return {both, true};
  }
  if (armed == 0) {
    return {};
  }
  if ((revents & POLLHUP) != 0) {
    return {both, false};
  }
  return {(((revents & POLLIN) != 0 ? fd_watch::readable : 0) |
           ((revents & POLLOUT) != 0 ? fd_watch::writable : 0)) &
              armed,
          false};
}

int embedding_driver::timeout_ms(timer_clock::time_point until) noexcept {
  if (until == timer_clock::time_point::max()) {
    return -1;
  }
  if (until == timer_clock::time_point::min()) {
    return 0;
  }
  return static_cast<int>(
      wait_until(until, timer_clock::now(), std::chrono::milliseconds(INT_MAX)).count());
}

bool embedding_driver::alive() {
  return timers_.foreground() > 0 || alive_.count() > 0 || native_busy_ > 0 ||
         uv_loop_alive(&uv_) != 0;
}

int embedding_driver::watch_fd(fd_watch& watch) {
  if (!watch.watched) {
    // What epoll refuses (EPERM), every driver refuses alike: poll(2) would call a regular file
    // always ready, libev would fake it, libevent would fail with a warning on stderr.
    struct stat info {};
    if (::fstat(watch.fd, &info) != 0) {
      return -errno;
    }
    if (S_ISREG(info.st_mode) || S_ISDIR(info.st_mode)) {
      return -EPERM;
    }
  }
  const bool counted = alive_watches::counts(watch);
  bool fresh = !watch.watched;
  int status = native_watch(watch);
  if (status < 0 && fresh && watch.watched) {
    native_unwatch(watch);  // a new watch that failed is not registered at all
  }
  if (fresh && watch.watched) {
    ++watches_;
  }
  alive_.update(counted, watch);
  return status < 0 ? status : 0;
}

void embedding_driver::unwatch_fd(fd_watch& watch) noexcept {
  if (!watch.watched) {
    return;
  }
  alive_.forget_armed(watch);
  --watches_;
  native_unwatch(watch);
}

void embedding_driver::set_fd_referenced(fd_watch& watch, bool referenced) noexcept {
  const bool counted = alive_watches::counts(watch);
  watch.referenced = referenced;
  alive_.update(counted, watch);
}

void embedding_driver::close() {
  closing_ = true;
  // Abandoned operations (a cancelled thread-pool job, a timed-out request) end on their own
  // soon, through the embedded loop; their callbacks must run before it goes away.
  while (abandoned_operations() > 0) {
    poll(true);
  }
  close_extensions();
  timers_.clear();
  std::string left_over;
  if (watches_ > 0) {
    left_over = native_release_all();
    watches_ = 0;
    alive_.clear();
  }
  native_unwatch(backend_);
  uv_close(reinterpret_cast<uv_handle_t*>(&keepalive_), nullptr);
  uv_run(&uv_, UV_RUN_NOWAIT);  // the close callbacks of the extensions' handles
  destroy_extensions();
  native_close();
  closed_ = true;
  close_libuv_loop(uv_);
  if (!left_over.empty()) {
    throw_watches_left(name(), left_over);
  }
}

}  // namespace weft::detail

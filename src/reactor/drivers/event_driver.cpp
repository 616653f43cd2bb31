// The libevent driver: the scheduler blocks in event_base_loop on an event_base of its own.
//
// Native here: fd readiness (one persistent event per watch, made on the first watch_fd and
// freed by unwatch_fd; a change of interests is event_del, event_assign, event_add, i.e. one
// epoll_ctl), the blocking wait (event_base_loop with EVLOOP_ONCE, with EVLOOP_NONBLOCK added for a
// non-blocking poll) and one timer event armed for the earliest deadline, rounded up to the
// microsecond. The base is made with EVENT_BASE_FLAG_PRECISE_TIMER: by default libevent reads
// CLOCK_MONOTONIC_COARSE (4 ms ticks on many kernels), which fires timers up to a tick late;
// the precise timer reads CLOCK_MONOTONIC and sleeps through a timerfd, at the cost of one
// timerfd_settime per turn of the loop. EVENT_BASE_FLAG_NOLOCK: the base belongs to one
// thread (other threads reach the scheduler through libuv's uv_async on the embedded loop).
// Everything libuv-only runs on the embedded libuv loop (embedding_driver.hpp), whose backend
// fd is one more event.
//
// Errors: libevent reports POLLERR/POLLHUP as readiness for what was asked. A fd closed while
// registered leaves epoll silently (see fd_watch in src/sched/driver.hpp); a change of interests
// on such a fd fails in event_add (EBADF), which watch_fd returns (libevent also prints a
// warning on stderr).
#include <event2/event.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "reactor/drivers/drivers.hpp"
#include "reactor/drivers/embedding_driver.hpp"
#include "reactor/drivers/libuv_loop.hpp"

namespace weft::detail {
namespace {

class event_driver final : public embedding_driver {
 public:
  const char* name() const noexcept override { return event_driver_name; }

  event_driver() {
    // Debian's libev exports libevent 1.x's names too (event_add, event_base_loop, ...); linked
    // first, it would take these calls and crash. weft links libevent first (CMakeLists.txt,
    // weft.pc); a program that reorders the libraries gets this error instead of a crash.
    if (std::strcmp(event_get_version(), LIBEVENT_VERSION) != 0) {
      throw std::runtime_error(
          std::string("weft: the event driver's libevent calls bind to another library (") +
          "event_get_version() says '" + event_get_version() + "', libevent is " +
          LIBEVENT_VERSION + "): link libevent_core before libev");
    }
    event_config* config = event_config_new();
    if (config != nullptr) {
      event_config_set_flag(config, EVENT_BASE_FLAG_NOLOCK | EVENT_BASE_FLAG_PRECISE_TIMER);
      base_ = event_base_new_with_config(config);
      event_config_free(config);
    }
    if (base_ != nullptr) {
      timer_ = evtimer_new(
          base_,
          [](evutil_socket_t, short, void*) {
            // Only ends event_base_loop(EVLOOP_ONCE): the embedding driver fires what is due.
          },
          nullptr);
    }
    if (base_ == nullptr || timer_ == nullptr) {
      if (base_ != nullptr) {
        event_base_free(base_);
      }
      throw std::runtime_error(
          "weft: libevent could not create an event base (out of fds or memory?)");
    }
    try {
      start_embedding();
    } catch (...) {
      event_free(timer_);
      event_base_free(base_);
      throw;
    }
  }
  ~event_driver() override { close_if_open(); }

 private:
  static short to_event(int events) noexcept {
    return static_cast<short>(((events & fd_watch::readable) != 0 ? EV_READ : 0) |
                              ((events & fd_watch::writable) != 0 ? EV_WRITE : 0) | EV_PERSIST);
  }

  int native_watch(fd_watch& watch) override {
    if (!watch.watched) {
      event* created = event_new(base_, watch.fd, to_event(0), &event_driver::on_event, &watch);
      if (created == nullptr) {
        throw std::bad_alloc();
      }
      watch.slot = created;
      registered_.add(watch);
      watch.watched = true;
      watch.armed = 0;
    }
    if (watch.events != watch.armed) {
      auto* native = static_cast<event*>(watch.slot);
      event_del(native);
      watch.armed = 0;
      if (watch.events != 0) {
        event_assign(native, base_, watch.fd, to_event(watch.events), &event_driver::on_event,
                     &watch);
        errno = 0;
        if (event_add(native, nullptr) != 0) {
          return errno != 0 ? -errno : -EIO;
        }
        watch.armed = watch.events;
      }
    }
    return 0;
  }

  void native_unwatch(fd_watch& watch) noexcept override {
    if (!watch.watched) {
      return;
    }
    event_free(static_cast<event*>(watch.slot));  // deletes it (from this turn's too)
    registered_.remove(watch);
    watch.slot = nullptr;
    watch.watched = false;
    watch.armed = 0;
  }

  void native_wait(timer_clock::time_point until) override {
    timer_clock::time_point now = timer_clock::now();
    if (until <= now) {
      // NONBLOCK alone would turn again as long as callbacks ran, and a level-triggered fd
      // this turn did not drain (libuv's backend fd, drained after this returns) would keep it
      // turning forever: ONCE makes it one turn.
      event_base_loop(base_, EVLOOP_NONBLOCK | EVLOOP_ONCE);
      return;
    }
    if (until == timer_clock::time_point::max()) {
      evtimer_del(timer_);
    } else if (until != timer_for_ || evtimer_pending(timer_, nullptr) == 0) {
      auto delay = wait_until(until, now, std::chrono::microseconds(max_delay));
      timeval after{};
      after.tv_sec = static_cast<time_t>(delay.count() / 1'000'000);
      after.tv_usec = static_cast<suseconds_t>(delay.count() % 1'000'000);
      evtimer_add(timer_, &after);  // re-adding moves it
      timer_for_ = until;
    }
    event_base_loop(base_, EVLOOP_ONCE);
  }

  std::string native_release_all() noexcept override { return registered_.release_all(*this); }

  void native_close() noexcept override {
    event_free(timer_);
    timer_ = nullptr;
    event_base_free(base_);
    base_ = nullptr;
  }

  static void on_event(evutil_socket_t, short what, void* argument) {
    auto& watch = *static_cast<fd_watch*>(argument);
    int events = ((what & EV_READ) != 0 ? fd_watch::readable : 0) |
                 ((what & EV_WRITE) != 0 ? fd_watch::writable : 0);
    if (events != 0) {
      // libevent never stops a persistent event on its own, so this is report_ready(watch,
      // events, false), which needs no driver.
      watch.ready(watch, events);
    }
  }

  // A day: a later deadline re-arms when this fires.
  static constexpr std::chrono::microseconds::rep max_delay = 86'400'000'000;

  event_base* base_ = nullptr;
  event* timer_ = nullptr;
  timer_clock::time_point timer_for_ = timer_clock::time_point::max();
  watch_list registered_;  // every watched fd_watch
};

}  // namespace

std::unique_ptr<reactor_driver> make_event_driver() { return std::make_unique<event_driver>(); }

}  // namespace weft::detail

// The libevent driver: the scheduler blocks in event_base_loop on an event_base of its own.
//
// Native here: fd readiness (one persistent event per watch, made on the first watch_fd and
// freed by unwatch_fd; a change of interests is event_del, event_assign, event_add, i.e. one
// epoll_ctl), the blocking wait (event_base_loop with EVLOOP_ONCE, with EVLOOP_NONBLOCK added for a
// non-blocking poll) and one timerfd, watched by a persistent read event, armed with the
// earliest deadline as an absolute CLOCK_MONOTONIC time. Not a libevent timer: libevent reads
// CLOCK_MONOTONIC_COARSE by default (4 ms ticks on many kernels), which fires timers up to a
// tick late, and its EVENT_BASE_FLAG_PRECISE_TIMER sleeps through a timerfd of its own that it
// sets at every turn of the loop (one timerfd_settime per wait, two per round trip of a
// ping-pong); this one is set only when the earliest deadline changes, and read when it
// fires. EVENT_BASE_FLAG_NOLOCK: the base belongs to one
// thread (other threads reach the scheduler through libuv's uv_async on the embedded loop).
// Everything libuv-only runs on the embedded libuv loop (embedding_driver.hpp), whose backend
// fd is one more event.
//
// Errors: libevent reports POLLERR/POLLHUP as readiness for what was asked. A fd closed while
// registered leaves epoll silently (see fd_watch in src/sched/driver.hpp); a change of interests
// on such a fd fails in event_add (EBADF), which watch_fd returns (libevent also prints a
// warning on stderr).
#include <event2/event.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
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
      event_config_set_flag(config, EVENT_BASE_FLAG_NOLOCK);
      base_ = event_base_new_with_config(config);
      event_config_free(config);
    }
    timer_fd_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (base_ != nullptr && timer_fd_ >= 0) {
      timer_ = event_new(base_, timer_fd_, EV_READ | EV_PERSIST, &event_driver::on_timer, this);
      if (timer_ != nullptr && event_add(timer_, nullptr) != 0) {
        event_free(timer_);
        timer_ = nullptr;
      }
    }
    if (base_ == nullptr || timer_ == nullptr) {
      if (base_ != nullptr) {
        event_base_free(base_);
      }
      if (timer_fd_ >= 0) {
        ::close(timer_fd_);
      }
      throw std::runtime_error(
          "weft: libevent could not create an event base (out of fds or memory?)");
    }
    try {
      start_embedding();
    } catch (...) {
      event_free(timer_);
      event_base_free(base_);
      ::close(timer_fd_);
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
    timer_clock::time_point now =
        until == timer_clock::time_point::min() ? until : timer_clock::now();  // min: no wait
    if (until <= now) {
      // NONBLOCK alone would turn again as long as callbacks ran, and a level-triggered fd
      // this turn did not drain (libuv's backend fd, drained after this returns) would keep it
      // turning forever: ONCE makes it one turn.
      event_base_loop(base_, EVLOOP_NONBLOCK | EVLOOP_ONCE);
      return;
    }
    if (until != timer_for_) {
      // An absolute CLOCK_MONOTONIC deadline (steady_clock's clock), at most a day ahead (a
      // later one re-arms when this fires); zero disarms.
      itimerspec spec{};
      if (until != timer_clock::time_point::max()) {
        auto target = std::min(until, now + std::chrono::microseconds(max_delay));
        auto nanoseconds =
            std::chrono::duration_cast<std::chrono::nanoseconds>(target.time_since_epoch()).count();
        spec.it_value.tv_sec = static_cast<time_t>(nanoseconds / 1'000'000'000);
        spec.it_value.tv_nsec = static_cast<long>(nanoseconds % 1'000'000'000);
      }
      ::timerfd_settime(timer_fd_, TFD_TIMER_ABSTIME, &spec, nullptr);
      timer_for_ = until;
    }
    event_base_loop(base_, EVLOOP_ONCE);
  }

  std::string native_release_all() noexcept override { return release_all(registered_); }

  void native_close() noexcept override {
    event_free(timer_);
    timer_ = nullptr;
    event_base_free(base_);
    base_ = nullptr;
    ::close(timer_fd_);
    timer_fd_ = -1;
  }

  // The timerfd expired: drain it (it is level-triggered) and forget what it was armed for, so
  // that the next wait arms it again. Ending event_base_loop(EVLOOP_ONCE) is all it is for: the
  // embedding driver fires what is due.
  static void on_timer(evutil_socket_t fd, short, void* argument) {
    std::uint64_t expirations = 0;
    while (::read(fd, &expirations, sizeof(expirations)) < 0 && errno == EINTR) {
    }
    static_cast<event_driver*>(argument)->timer_for_ = timer_clock::time_point::max();
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
  int timer_fd_ = -1;
  event* timer_ = nullptr;  // timer_fd_'s persistent read event
  timer_clock::time_point timer_for_ = timer_clock::time_point::max();
  watch_list registered_;  // every watched fd_watch
};

}  // namespace

std::unique_ptr<reactor_driver> make_event_driver() { return std::make_unique<event_driver>(); }

}  // namespace weft::detail

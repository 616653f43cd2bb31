// The epoll driver: the scheduler blocks in epoll_wait on an epoll set of its own, with no
// event library between the kernel's report and the fd_watch.
//
// Why a driver of its own when libuv is epoll underneath: at a thousand connections on one
// worker, a report through libuv reads the fd's uv_poll_t (a cache line cold by then) before
// it reaches the watch, one object after another, and nothing can fetch ahead because libuv
// hands out one event per callback. Here epoll's event carries the watch itself (data.ptr),
// and the whole array is known before the first callback, so the watches a few events ahead
// are prefetched while the current one runs (prefetch_ahead). Measured with bench_http_weft,
// six alternating rounds: user time per request 0.80 us against the uv driver's 0.96 at 1000
// connections, 0.66 against 0.76 at 64; the totals (user and system) were inside the VM's noise
// of each other (bench/http/README.md, "A native epoll driver"), so uv stays the default.
//
// Native here: fd readiness (epoll_ctl, applied at once, so a closed fd is refused there and
// then with EBADF and no queued change needs checking before the next wait) and the blocking
// wait (epoll_wait with the time to the earliest deadline, rounded up to the millisecond so
// that it never wakes before it). Everything libuv-only runs on the embedded libuv loop
// (embedding_driver.hpp), whose backend fd, itself an epoll fd, is one more entry of the set:
// what libuv watches (the io layer's streams, its signal pipe, async handles) pays a nested
// epoll's wakeup per event, the fd watches nothing.
//
// An idle watch (events 0) stays in the set, one-shot: epoll reports EPOLLHUP and EPOLLERR
// whatever was asked, and level-triggered those would come back at every wait with nobody to
// take them; one-shot, such a report comes once and then the fd is disabled until the next
// change. Going idle and back costs two EPOLL_CTL_MOD, where leaving the set would cost an
// EPOLL_CTL_DEL and an EPOLL_CTL_ADD (the kernel frees and allocates its item). An error
// condition (EPOLLERR) makes the watch idle and is reported ready both ways, as libuv does.
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "reactor/drivers/drivers.hpp"
#include "reactor/drivers/embedding_driver.hpp"
#include "reactor/drivers/libuv_loop.hpp"

namespace weft::detail {
namespace {

class epoll_driver final : public embedding_driver {
 public:
  const char* name() const noexcept override { return epoll_driver_name; }

  epoll_driver() {
    epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd_ < 0) {
      throw std::runtime_error(std::string("weft: the epoll driver could not create its set: ") +
                               uv_strerror(-errno));
    }
    try {
      start_embedding();
    } catch (...) {
      ::close(epoll_fd_);
      throw;
    }
  }
  ~epoll_driver() override { close_if_open(); }

 private:
  // What a watch polls for, in epoll's terms (an idle watch: one-shot, see the top).
  static unsigned to_epoll(int events) noexcept {
    if (events == 0) {
      return EPOLLONESHOT;
    }
    return ((events & fd_watch::readable) != 0 ? unsigned{EPOLLIN} : 0U) |
           ((events & fd_watch::writable) != 0 ? unsigned{EPOLLOUT} : 0U);
  }

  int native_watch(fd_watch& watch) override {
    epoll_event interest{};
    interest.data.ptr = &watch;
    interest.events = to_epoll(watch.events);
    if (!watch.watched) {
      if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, watch.fd, &interest) != 0) {
        return -errno;
      }
      if (!is_backend(watch)) {
        registered_.add(watch);
      }
      watch.watched = true;
    } else if (watch.events != watch.armed &&
               ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, watch.fd, &interest) != 0) {
      // A fd closed since (EBADF: epoll dropped it), or its number reused (ENOENT): polls for
      // nothing now.
      watch.armed = 0;
      return -errno;
    }
    watch.armed = watch.events;
    return 0;
  }

  void native_unwatch(fd_watch& watch) noexcept override {
    if (!watch.watched) {
      return;
    }
    epoll_event unused{};
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, watch.fd, &unused);  // EBADF after a close: gone
    // Its events still to be dispatched in this turn must not reach it: the caller may free it.
    for (int index = next_; index < count_; ++index) {
      if (events_[static_cast<std::size_t>(index)].data.ptr == &watch) {
        events_[static_cast<std::size_t>(index)].data.ptr = nullptr;
      }
    }
    if (!is_backend(watch)) {
      registered_.remove(watch);
    }
    watch.watched = false;
    watch.armed = 0;
  }

  void native_wait(timer_clock::time_point until) override {
    int timeout = 0;
    if (until == timer_clock::time_point::max()) {
      timeout = -1;
    } else if (until != timer_clock::time_point::min()) {  // min: no wait, no clock to read
      timeout = static_cast<int>(
          wait_until(until, timer_clock::now(), std::chrono::milliseconds(INT_MAX)).count());
    }
    // Room for every watch (and the backend) at once, up to batch_max: what does not fit is
    // reported by the next wait.
    const std::size_t room = std::clamp<std::size_t>(registered_.size() + 1, 64, batch_max);
    if (events_.size() < room) {
      events_.resize(room);
    }
    const int count =
        ::epoll_wait(epoll_fd_, events_.data(), static_cast<int>(events_.size()), timeout);
    if (count <= 0) {
      return;  // the deadline, or EINTR: the caller fires what is due and asks again
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
        continue;  // unwatched or idled by an earlier callback of this turn
      }
      if ((event.events & EPOLLERR) != 0) {
        epoll_event idle{};
        idle.events = to_epoll(0);
        idle.data.ptr = watch;
        ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, watch->fd, &idle);  // stopped, as libuv stops it
        report_ready(*watch, fd_watch::readable | fd_watch::writable, true);
        continue;
      }
      int events = ((event.events & EPOLLIN) != 0 ? fd_watch::readable : 0) |
                   ((event.events & EPOLLOUT) != 0 ? fd_watch::writable : 0);
      if ((event.events & EPOLLHUP) != 0) {
        events |= watch->armed;
      }
      events &= watch->armed;  // an earlier callback of this turn may have dropped an interest
      if (events != 0) {
        report_ready(*watch, events, false);
      }
    }
    count_ = 0;
    next_ = 0;
  }

  std::string native_release_all() noexcept override { return release_all(registered_); }

  void native_close() noexcept override {
    ::close(epoll_fd_);
    epoll_fd_ = -1;
  }

  // How far ahead of the event being dispatched its watch is fetched: enough to cover a miss
  // to memory with the work of a few reports, few enough to stay in the first-level cache.
  static constexpr int prefetch_ahead = 8;
  static constexpr std::size_t batch_max = 4096;

  int epoll_fd_ = -1;
  watch_list registered_;  // every watch but the backend's
  std::vector<epoll_event> events_;
  int next_ = 0;   // while dispatching: the next event of events_ ...
  int count_ = 0;  // ... of this many
};

}  // namespace

std::unique_ptr<reactor_driver> make_epoll_driver() { return std::make_unique<epoll_driver>(); }

}  // namespace weft::detail

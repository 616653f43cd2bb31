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
// Native here: fd readiness and the blocking wait, on an epoll_set (epoll_set.hpp: changes
// applied at once, idle watches one-shot, the next events' watches prefetched), waited on with
// the time to the earliest deadline, rounded up to the millisecond so that it never wakes before
// it. Everything libuv-only runs on the embedded libuv loop (embedding_driver.hpp), whose
// backend fd, itself an epoll fd, is one more entry of the set: what libuv watches (the io
// layer's streams, its signal pipe, async handles) pays a nested epoll's wakeup per event, the
// fd watches nothing.
#include <memory>
#include <stdexcept>
#include <string>

#include "reactor/drivers/drivers.hpp"
#include "reactor/drivers/embedding_driver.hpp"
#include "reactor/drivers/epoll_set.hpp"
#include "reactor/drivers/libuv_loop.hpp"

namespace weft::detail {
namespace {

class epoll_driver final : public embedding_driver {
 public:
  const char* name() const noexcept override { return epoll_driver_name; }

  epoll_driver() {
    if (int status = set_.open(); status < 0) {
      throw std::runtime_error(std::string("weft: the epoll driver could not create its set: ") +
                               uv_strerror(status));
    }
    start_embedding();  // on failure set_ closes with this object
  }
  ~epoll_driver() override { close_if_open(); }

 private:
  int native_watch(fd_watch& watch) override {
    if (!watch.watched) {
      if (int status = set_.add(watch); status < 0) {
        return status;
      }
      if (!is_backend(watch)) {
        registered_.add(watch);
      }
      watch.watched = true;
    } else if (watch.events != watch.armed) {
      if (int status = set_.modify(watch); status < 0) {
        watch.armed = 0;  // polls for nothing now
        return status;
      }
    }
    watch.armed = watch.events;
    return 0;
  }

  void native_unwatch(fd_watch& watch) noexcept override {
    if (!watch.watched) {
      return;
    }
    set_.remove(watch);
    if (!is_backend(watch)) {
      registered_.remove(watch);
    }
    watch.watched = false;
    watch.armed = 0;
  }

  void native_wait(timer_clock::time_point until) override {
    // Room for every watch and the backend at once (up to the set's batch limit).
    set_.wait(timeout_ms(until), registered_.size() + 1,
              [this](fd_watch& watch, int events, bool stopped) {
                report_ready(watch, events, stopped);
              });
  }

  std::string native_release_all() noexcept override { return release_all(registered_); }

  void native_close() noexcept override { set_.close(); }

  epoll_set set_;
  watch_list registered_;  // every watch but the backend's
};

}  // namespace

std::unique_ptr<reactor_driver> make_epoll_driver() { return std::make_unique<epoll_driver>(); }

}  // namespace weft::detail

// The libuv driver.
//
// One uv_loop_t per scheduler. Timers: weft keeps its own heap (timer_queue) and arms a single
// uv_timer_t for the earliest deadline, so a million sleeping coroutines cost a million heap
// slots rather than a million libuv handles, and cancelling a sleep never touches libuv unless
// it empties the heap. The uv timer is referenced only while a foreground timer is queued, so
// background timers do not keep the loop (and run()) alive.
#include <uv.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>

#include "reactor/timer_queue.hpp"
#include "reactor/uv_driver.hpp"

namespace weft::detail {
namespace {

void check_uv(int code, const char* operation) {
  if (code < 0) {
    throw std::runtime_error(std::string("weft: libuv ") + operation +
                             " failed: " + uv_strerror(code));
  }
}

class uv_reactor final : public driver {
 public:
  const char* name() const noexcept override { return uv_driver_name; }

  uv_reactor() {
    check_uv(uv_loop_init(&loop_), "loop init");
    check_uv(uv_timer_init(&loop_, &timer_), "timer init");
    timer_.data = this;
    uv_unref(reinterpret_cast<uv_handle_t*>(&timer_));
  }

  ~uv_reactor() override {
    if (!closed_) {
      try {
        close();
      } catch (...) {
        // Destruction after a failed run: the leak was already reported by close().
      }
    }
  }

  void poll(bool block) override {
    if (!block) {
      // Due timers first, straight from weft's heap at nanosecond precision: libuv would only
      // see them on its millisecond clock, up to a millisecond late.
      if (timer_entry* first = timers_.top();
          first != nullptr && first->deadline <= timer_clock::now()) {
        run_due_timers();
      }
    }
    uv_run(&loop_, block ? UV_RUN_ONCE : UV_RUN_NOWAIT);
  }

  bool alive() override { return uv_loop_alive(&loop_) != 0; }

  uv_loop_t& loop() noexcept { return loop_; }

  void add_timer(timer_entry& entry) override {
    timers_.push(entry);
    if (timers_.top() == &entry) {
      arm();
    } else if (!entry.background && timers_.foreground() == 1) {
      uv_ref(reinterpret_cast<uv_handle_t*>(&timer_));
    }
  }

  void remove_timer(timer_entry& entry) noexcept override {
    timers_.remove(entry);
    if (timers_.empty()) {
      uv_timer_stop(&timer_);
      armed_for_ = timer_clock::time_point::max();
    }
    if (timers_.foreground() == 0) {
      uv_unref(reinterpret_cast<uv_handle_t*>(&timer_));
    }
    // Removing the earliest entry leaves the uv timer armed for it; it then fires early,
    // finds nothing due and re-arms for the new earliest: cheaper than re-arming per cancel.
  }

  void close() override {
    closed_ = true;
    // Abandoned operations (a cancelled thread-pool job, a timed-out request) end on their own
    // soon; their callbacks must run before the loop goes away.
    while (abandoned_operations() > 0) {
      uv_run(&loop_, UV_RUN_ONCE);
    }
    close_extensions();
    timers_.clear();
    uv_close(reinterpret_cast<uv_handle_t*>(&timer_), nullptr);
    uv_run(&loop_, UV_RUN_NOWAIT);
    destroy_extensions();
    if (uv_loop_close(&loop_) == UV_EBUSY) {
      std::string open;
      uv_walk(
          &loop_,
          [](uv_handle_t* handle, void* names) {
            auto& text = *static_cast<std::string*>(names);
            text += text.empty() ? "" : ", ";
            text += uv_handle_type_name(uv_handle_get_type(handle));
            text += uv_is_closing(handle) ? " (closing)" : "";
          },
          &open);
      throw std::logic_error("weft: libuv handles still open when the scheduler closed: " + open +
                             "; close every handle (or let its owner end) before run() returns");
    }
  }

 private:
  static void on_timer(uv_timer_t* handle) {
    auto* self = static_cast<uv_reactor*>(handle->data);
    self->armed_for_ = timer_clock::time_point::max();
    self->run_due_timers();
  }

  // Fires what is due and re-arms the uv timer for what is left.
  void run_due_timers() {
    timers_.fire_due(timer_clock::now());
    if (!timers_.empty()) {
      arm();
    } else {
      uv_timer_stop(&timer_);
      armed_for_ = timer_clock::time_point::max();
      uv_unref(reinterpret_cast<uv_handle_t*>(&timer_));
    }
  }

  // Arms the uv timer for the earliest deadline, rounded up to libuv's millisecond resolution
  // so that it never fires before the deadline has passed.
  void arm() {
    timer_entry* first = timers_.top();
    if (first->deadline >= armed_for_ && uv_is_active(reinterpret_cast<uv_handle_t*>(&timer_))) {
      return;
    }
    auto remaining = first->deadline - timer_clock::now();
    auto milliseconds = remaining <= timer_clock::duration::zero()
                            ? 0
                            : std::chrono::ceil<std::chrono::milliseconds>(remaining).count();
    uv_update_time(&loop_);
    uv_timer_start(&timer_, &uv_reactor::on_timer, static_cast<std::uint64_t>(milliseconds), 0);
    armed_for_ = first->deadline;
    if (timers_.foreground() > 0) {
      uv_ref(reinterpret_cast<uv_handle_t*>(&timer_));
    } else {
      uv_unref(reinterpret_cast<uv_handle_t*>(&timer_));
    }
  }

  uv_loop_t loop_{};
  uv_timer_t timer_{};
  timer_queue timers_;
  timer_clock::time_point armed_for_ = timer_clock::time_point::max();
  bool closed_ = false;
};

}  // namespace

std::unique_ptr<driver> make_driver() { return std::make_unique<uv_reactor>(); }

uv_loop_t& uv_loop_of(driver& d, const char* operation) {
  // Names are compared by address: one driver, one name object.
  if (d.name() != uv_driver_name) [[unlikely]] {
    throw std::logic_error(std::string("weft: ") + operation +
                           " needs the libuv driver; this scheduler runs on driver '" + d.name() +
                           "'");
  }
  return static_cast<uv_reactor&>(d).loop();
}

}  // namespace weft::detail

// The drivers as the event sources built on libuv see them. Every driver has a libuv loop: the
// uv driver's is the one it blocks on; the ev, event and poll drivers embed one and drive it
// from their own wait (src/reactor/drivers/embedding_driver.hpp). So everything only libuv
// provides (streams, UDP, files, fs events, DNS, child processes, the thread pool, signals,
// triggers) works on every driver, through uv_loop_of.
//
// From the scheduler's thread only, like the driver itself.
#pragma once

#include <uv.h>

#include "sched/driver.hpp"

namespace weft::detail {

// A driver of the reactor layer: every driver make_driver() returns is one.
class reactor_driver : public driver {
 public:
  // The libuv loop of this driver: its own (uv) or the embedded one (ev, event, poll). A plain
  // member, not a virtual call: stream and request code reaches it on every operation.
  uv_loop_t& libuv_loop() noexcept { return *libuv_loop_; }
  // After close(): the libuv loop is gone.
  bool closed() const noexcept { return closed_; }

 protected:
  explicit reactor_driver(uv_loop_t& loop) noexcept : libuv_loop_(&loop) {}
  bool closed_ = false;

 private:
  uv_loop_t* libuv_loop_;
};

[[noreturn]] void throw_driver_closed(const char* operation);

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
inline constexpr const char poll_driver_name[] = "poll";

}  // namespace weft::detail

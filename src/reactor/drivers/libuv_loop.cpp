#include "reactor/drivers/libuv_loop.hpp"

#include <stdexcept>
#include <string>

#include "reactor/ring.hpp"
#include "reactor/uv_driver.hpp"
#include "sched/scheduler_core.hpp"

namespace weft::detail {

void check_uv(int status, const char* operation) {
  if (status < 0) {
    throw std::runtime_error(std::string("weft: libuv ") + operation +
                             " failed: " + uv_strerror(status));
  }
}

void close_libuv_loop(uv_loop_t& loop) {
  if (uv_loop_close(&loop) != UV_EBUSY) {
    return;
  }
  std::string open;
  uv_walk(
      &loop,
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

void throw_driver_closed(const char* operation) {
  throw std::logic_error(std::string("weft: ") + operation +
                         " after the scheduler's run ended (its driver is closed); call it from "
                         "inside weft::run");
}

ring_io* current_ring() noexcept {
  scheduler_core* core = current_core();
  return core != nullptr ? static_cast<reactor_driver&>(core->driver()).ring() : nullptr;
}

void throw_watches_left(const char* driver, const std::string& fds) {
  throw std::logic_error(std::string("weft: fd watches still registered when the scheduler ") +
                         "closed (driver '" + driver + "'): fd " + fds +
                         "; stop every watch before run() returns");
}

}  // namespace weft::detail

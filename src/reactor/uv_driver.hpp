// The libuv driver, as the event sources built on libuv see it. Everything libuv-specific in
// the layers above the scheduler goes through uv_loop_of, which fails with an error naming the
// driver when the scheduler runs on another one.
#pragma once

#include <uv.h>

#include "sched/driver.hpp"

namespace weft::detail {

// The libuv loop behind d; std::logic_error "weft: OPERATION needs the libuv driver; this
// scheduler runs on driver 'NAME'" when d is not the libuv driver.
uv_loop_t& uv_loop_of(driver& d, const char* operation);

// The name the libuv driver reports (driver::name()).
inline constexpr const char uv_driver_name[] = "uv";

}  // namespace weft::detail

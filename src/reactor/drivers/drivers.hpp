// The constructors of the drivers, for the factory (src/reactor/factory.cpp). The ev, event and
// uring drivers are compiled only when CMake found their library (WEFT_HAVE_LIBEV,
// WEFT_HAVE_LIBEVENT, WEFT_HAVE_LIBURING: liburing, and a kernel that let the probe set up a
// ring); uv and poll always are.
#pragma once

#include <memory>

#include "reactor/uv_driver.hpp"

namespace weft::detail {

std::unique_ptr<reactor_driver> make_uv_driver();
std::unique_ptr<reactor_driver> make_ev_driver();
std::unique_ptr<reactor_driver> make_event_driver();
std::unique_ptr<reactor_driver> make_epoll_driver();
std::unique_ptr<reactor_driver> make_poll_driver();
std::unique_ptr<reactor_driver> make_uring_driver();

}  // namespace weft::detail

// The driver factory: which driver a new scheduler blocks on.
//
// run_options::driver first, then the environment's WEFT_DRIVER, then the first this build has
// of uv, ev, event, epoll, poll, uring (libuv is the most complete; epoll and poll need
// nothing; uring, the newest, is chosen only by name).
// A thread's scheduler decides for itself: weft::spawn_thread passes its spawner's choice on in
// run_options, so a program that picked a driver keeps it on every thread it starts.
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "reactor/drivers/drivers.hpp"
#include "weft/sched/scheduler.hpp"

namespace weft {
namespace detail {
namespace {

struct driver_kind {
  std::string_view name;
  std::unique_ptr<reactor_driver> (*make)();
};

const std::vector<driver_kind>& kinds() {
  static const std::vector<driver_kind> built {
    {uv_driver_name, &make_uv_driver},
#if defined(WEFT_HAVE_LIBEV)
        {ev_driver_name, &make_ev_driver},
#endif
#if defined(WEFT_HAVE_LIBEVENT)
        {event_driver_name, &make_event_driver},
#endif
        {epoll_driver_name, &make_epoll_driver}, {poll_driver_name, &make_poll_driver},
#if defined(WEFT_HAVE_LIBURING)
        {uring_driver_name, &make_uring_driver},
#endif
  };
  return built;
}

std::string valid_names() {
  std::string names;
  for (const driver_kind& kind : kinds()) {
    names += names.empty() ? "" : ", ";
    names += kind.name;
  }
  return names;
}

}  // namespace

std::unique_ptr<driver> make_driver(std::string_view requested) {
  const char* origin = "weft::run_options::driver";
  if (requested.empty()) {
    const char* environment = std::getenv("WEFT_DRIVER");
    if (environment == nullptr || *environment == '\0') {
      return kinds().front().make();
    }
    requested = environment;
    origin = "WEFT_DRIVER";
  }
  for (const driver_kind& kind : kinds()) {
    if (kind.name == requested) {
      return kind.make();
    }
  }
  constexpr std::string_view all[] = {uv_driver_name,    ev_driver_name,   event_driver_name,
                                      epoll_driver_name, poll_driver_name, uring_driver_name};
  bool known = false;
  for (std::string_view name : all) {
    known = known || name == requested;
  }
  throw std::invalid_argument(std::string("weft: ") + origin + " names the driver '" +
                              std::string(requested) + "', which " +
                              (known ? "this build of weft does not have (its library was not "
                                       "found when weft was configured)"
                                     : "does not exist") +
                              "; valid drivers here: " + valid_names());
}

}  // namespace detail

const std::vector<std::string_view>& available_drivers() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> list;
    for (const detail::driver_kind& kind : detail::kinds()) {
      list.push_back(kind.name);
    }
    return list;
  }();
  return names;
}

}  // namespace weft

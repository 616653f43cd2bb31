#include "weft/error.hpp"

#include <string>
#include <utility>

namespace weft {

cancelled_error::cancelled_error(std::string reason)
    : error("coroutine cancelled: " + reason), reason_(std::move(reason)) {}

channel_closed_error::channel_closed_error(std::string reason)
    : error("channel closed: " + reason), reason_(std::move(reason)) {}

all_failed_error::all_failed_error(const std::string& message,
                                   std::vector<std::exception_ptr> errors,
                                   std::vector<std::size_t> indexes)
    : error(message), errors_(std::move(errors)), indexes_(std::move(indexes)) {}

scope_closed_error::scope_closed_error(const std::string& message, std::string reason)
    : error(message), reason_(std::move(reason)) {}

resource_destroy_error::resource_destroy_error(const std::string& message,
                                               std::vector<std::exception_ptr> errors)
    : error(message), errors_(std::move(errors)) {}

deadlock_error::deadlock_error(std::size_t waiting, std::string report)
    : error("deadlock: no active coroutines, " + std::to_string(waiting) +
            " coroutines waiting; nothing is left that could wake them (see report())"),
      waiting_(waiting),
      report_(std::move(report)) {}

// io_error's members are defined in src/reactor/io_error.cpp: they need libuv, which this
// layer may not include.

namespace detail {

std::string what_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& failure) {
    return failure.what();
  } catch (...) {
    return "a non-std exception";
  }
}

bool is_cancellation(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const cancelled_error&) {
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace detail

}  // namespace weft

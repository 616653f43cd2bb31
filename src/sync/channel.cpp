// The non-template parts of weft::channel and weft::thread_channel: names and messages, and the
// hooks into the scheduler (see include/weft/sync/channel.hpp).
#include "weft/sync/channel.hpp"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "sched/scheduler_core.hpp"
#include "sync/describe.hpp"

namespace weft::detail {

namespace {

std::string readable_type_name(const std::type_info& type) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> demangled(
      abi::__cxa_demangle(type.name(), nullptr, nullptr, &status), &std::free);
  return status == 0 && demangled ? std::string(demangled.get()) : std::string(type.name());
}

// A channel_closed_error whose message says which channel and what happened to the value; the
// reason() is still exactly the first close reason.
class channel_closed_with_context final : public channel_closed_error {
 public:
  channel_closed_with_context(std::string reason, std::string message)
      : channel_closed_error(std::move(reason)), message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

}  // namespace

std::string channel_name(const char* kind, const std::type_info& value_type, const void* address) {
  return std::string(kind) + "<" + readable_type_name(value_type) + "> " + address_text(address);
}

void describe_channel(const channel_view& view, std::string& out) {
  out += channel_name(view.kind, view.value_type, view.address);
  out += ' ';
  out += view.operation;
  out += ": capacity ";
  out += view.capacity == unlimited_capacity ? std::string("unbounded")
                                             : std::to_string(view.capacity);
  out += ", " + std::to_string(view.buffered) + " buffered, ";
  out += std::to_string(view.other_side_waiting) + " " + view.other_side + " waiting";
  if (view.closed) {
    out += ", closed";
  }
}

void throw_channel_closed(const std::string& channel, const std::string& reason,
                          closed_during when) {
  std::string message = "weft: ";
  switch (when) {
    case closed_during::send:
      message += "send on " + channel + " failed: the channel is closed (reason: " + reason +
                 "); the value was not delivered";
      break;
    case closed_during::blocked_send:
      message += channel + " was closed (reason: " + reason +
                 ") while send waited for room; the value was not delivered";
      break;
    case closed_during::recv:
      message += "recv on " + channel + ": the channel is closed (reason: " + reason +
                 ") and every value sent before the close has been received";
      break;
  }
  throw channel_closed_with_context(reason, std::move(message));
}

void defer_cancellation(const cancelled_error& cancelled) {
  scheduler_core* core = current_core();
  // The error came from a suspension point of the current coroutine, so both exist. The cancel
  // is not forced: a forced (deadlock) cancel only reaches coroutines that nothing woke, and
  // this one was woken by the receiver that took its value.
  core->cancel(*core->current(), cancelled.reason());
}

void claim_thread(std::thread::id& owner, const std::string& channel) {
  const std::thread::id here = std::this_thread::get_id();
  if (owner == std::thread::id()) {
    owner = here;
  } else if (owner != here) {
    throw std::logic_error("weft: " + channel +
                           " is used from two threads; a weft::channel belongs to the scheduler "
                           "of one thread: use weft::thread_channel between threads");
  }
}

}  // namespace weft::detail

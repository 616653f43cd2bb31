// How the sync primitives name an object in their messages and in the descriptions their
// waiter_queue reports in deadlock and stall reports ("mutex 0x7ffd... held by task 3, ...").
// Internal to src/sync; any thread may call it.
#pragma once

#include <cstdio>
#include <string>

namespace weft::detail {

// The address as printf's %p writes it ("0x7ffd5e8c1a40"): the object's identity in a message,
// the same text in every primitive's messages so one object can be followed through a report.
inline std::string address_text(const void* address) {
  char text[32];
  std::snprintf(text, sizeof text, "%p", address);
  return text;
}

}  // namespace weft::detail

// weft::event: see include/weft/sync/event.hpp.
#include "weft/sync/event.hpp"

#include <string>

#include "sync/describe.hpp"

namespace weft {

event::event(bool initially_set) noexcept : set_(initially_set), waiters_(this, &event::describe) {}

void event::describe(const void* self, std::string& out) {
  const event& target = *static_cast<const event*>(self);
  out += "event " + detail::address_text(self);
  out += target.set_ ? " (set, " : " (not set, ";
  out += std::to_string(target.waiters_.size()) + " waiting)";
}

void event::set() noexcept {
  set_ = true;
  waiters_.grant_all(0);
}

void event::wait(const timeout& limit) {
  if (set_) {
    return;
  }
  // Leaving needs no passing on: a set releases every waiter, nothing was consumed.
  detail::queued_waiter me(waiters_);
  waiters_.wait(me, limit);
}

}  // namespace weft

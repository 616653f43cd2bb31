// weft::wait_group: see include/weft/sync/wait_group.hpp.
#include "weft/sync/wait_group.hpp"

#include <stdexcept>
#include <string>

#include "sync/describe.hpp"

namespace weft {

wait_group::wait_group() noexcept : waiters_(this, &wait_group::describe) {}

void wait_group::describe(const void* self, std::string& out) {
  const wait_group& target = *static_cast<const wait_group*>(self);
  out += "wait_group " + detail::address_text(self);
  out += " (counter " + std::to_string(target.count_) + ", " +
         std::to_string(target.waiters_.size()) + " waiting)";
}

void wait_group::add(std::ptrdiff_t delta) {
  std::ptrdiff_t updated = 0;
  if (__builtin_add_overflow(count_, delta, &updated) || updated < 0) {
    throw std::logic_error(
        "weft::wait_group " + detail::address_text(this) + ": " +
        (delta == -1 ? std::string("done()") : "add(" + std::to_string(delta) + ")") +
        " with the counter at " + std::to_string(count_) +
        " would take it below zero; call add() for each job before it "
        "starts and done() once when it ends");
  }
  count_ = updated;
  if (count_ == 0) {
    waiters_.grant_all(0);
  }
}

void wait_group::wait(const timeout& limit) {
  if (count_ == 0) {
    return;
  }
  // Leaving needs no passing on: a zero counter released everyone, nothing was consumed.
  detail::queued_waiter me(waiters_);
  waiters_.wait(me, limit);
}

}  // namespace weft

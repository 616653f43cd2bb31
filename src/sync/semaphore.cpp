// weft::semaphore: see include/weft/sync/semaphore.hpp.
//
// Each waiter's request size rides in its queued_waiter::value; grant_waiters() subtracts it
// from the count when it grants, so a granted waiter's permits are never visible to anyone else.
#include "weft/sync/semaphore.hpp"

#include <stdexcept>
#include <string>

#include "sync/describe.hpp"

namespace weft {
namespace {

std::string name_of(const semaphore& target) {
  return "weft::semaphore " + detail::address_text(&target);
}

}  // namespace

semaphore::semaphore(std::size_t initial, std::size_t max)
    : count_(initial), max_(max), waiters_(this, &semaphore::describe) {
  if (max == 0 || initial > max) {
    throw std::invalid_argument("weft::semaphore: initial count " + std::to_string(initial) +
                                " with max " + std::to_string(max) +
                                "; max must be at least 1 and the initial count at most max");
  }
}

void semaphore::describe(const void* self, std::string& out) {
  const semaphore& target = *static_cast<const semaphore*>(self);
  out += "semaphore " + detail::address_text(self);
  out += " (count " + std::to_string(target.count_) + ", " +
         std::to_string(target.waiters_.size()) + " waiting";
  if (const detail::queued_waiter* oldest = target.waiters_.front(); oldest != nullptr) {
    out += ", the oldest for " + std::to_string(oldest->value) + " permits";
  }
  out += ")";
}

void semaphore::refuse_request(std::size_t permits, const char* operation) const {
  if (permits == 0) {
    throw std::invalid_argument(name_of(*this) + ": " + operation +
                                "(0); ask for at least one permit");
  }
  throw std::invalid_argument(name_of(*this) + ": " + operation + "(" + std::to_string(permits) +
                              ") exceeds the semaphore's max of " + std::to_string(max_) +
                              " permits and could never be served");
}

bool semaphore::try_acquire(std::size_t permits) {
  if (permits == 0 || permits > max_) {
    refuse_request(permits, "try_acquire");
  }
  if (!waiters_.empty() || count_ < permits) {
    return false;
  }
  count_ -= permits;
  return true;
}

void semaphore::release(std::size_t permits) {
  if (permits == 0) {
    throw std::invalid_argument(name_of(*this) + ": release(0); release at least one permit");
  }
  if (permits > max_ - count_) {
    throw std::logic_error(name_of(*this) + ": release(" + std::to_string(permits) +
                           ") would raise the count from " + std::to_string(count_) +
                           " past its max of " + std::to_string(max_) +
                           "; every release must match permits acquired before");
  }
  count_ += permits;
  grant_waiters();
}

void semaphore::grant_waiters() noexcept {
  for (detail::queued_waiter* oldest = waiters_.front();
       oldest != nullptr && oldest->value <= count_; oldest = waiters_.front()) {
    count_ -= oldest->value;
    waiters_.grant_front();
  }
}

}  // namespace weft

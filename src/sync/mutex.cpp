// weft::mutex: see include/weft/sync/mutex.hpp.
//
// Ownership moves at grant time: unlock() records the oldest waiter as the owner before that
// waiter runs, so there is never a moment where the mutex is free while coroutines wait for it,
// and "free" needs no separate flag (owner_ == nullptr).
#include "weft/sync/mutex.hpp"

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "sched/scheduler_core.hpp"
#include "sync/describe.hpp"
#include "weft/error.hpp"
#include "weft/sched/scheduler.hpp"

namespace weft {
namespace detail {

std::string describe_coroutine(const coroutine& who) {
  std::string out = "task " + std::to_string(who.id());
  if (!who.name().empty()) {
    out += " '" + who.name() + "'";
  } else if (who.is_main()) {
    out += " (main)";
  }
  return out;
}

}  // namespace detail

namespace {

[[noreturn]] __attribute__((noinline, cold)) void throw_outside_coroutine(const mutex& target,
                                                                          const char* operation) {
  detail::scheduler_core* core = detail::current_core();
  if (core != nullptr && core->current() != nullptr) {
    // A microtask, reactor callback or switch handler: waiter_or_throw says so.
    core->waiter_or_throw(
        ("weft::mutex " + detail::address_text(&target) + ": " + operation).c_str());
  }
  throw std::logic_error("weft::mutex " + detail::address_text(&target) + ": " + operation +
                         " called outside a coroutine; a weft::mutex is held by coroutines, so "
                         "call it from weft::run's main or a coroutine started with weft::spawn");
}

// The calling coroutine, which a mutex records as its owner. Inline, with the error out of line:
// lock and unlock are hot.
__attribute__((always_inline)) inline detail::coroutine& calling_coroutine(const mutex& target,
                                                                           const char* operation) {
  detail::scheduler_core* core = detail::current_core();
  detail::coroutine* self = core == nullptr ? nullptr : core->current();
  if (self == nullptr || self->state() != detail::coroutine_state::running) [[unlikely]] {
    throw_outside_coroutine(target, operation);
  }
  return *self;
}

}  // namespace

mutex::mutex() noexcept : waiters_(this, &mutex::describe) {}

mutex::~mutex() {
  // Waiters left behind make waiters_'s destructor abort with a report; a lock still held is
  // tolerated (like a std::unique_lock going out of scope after its mutex in a cleanup path).
  if (owner_ != nullptr) {
    std::exchange(owner_, nullptr)->release();
  }
}

void mutex::describe(const void* self, std::string& out) {
  const mutex& target = *static_cast<const mutex*>(self);
  out += "mutex " + detail::address_text(self);
  if (target.owner_ == nullptr) {
    out += " (unlocked)";
  } else {
    out += " held by " + detail::describe_coroutine(*target.owner_);
  }
  out += ", " + std::to_string(target.waiters_.size()) + " waiting";
}

std::optional<std::uint64_t> mutex::owner_id() const noexcept {
  if (owner_ == nullptr) {
    return std::nullopt;
  }
  return owner_->id();
}

__attribute__((always_inline)) inline void mutex::set_owner(detail::coroutine* owner) noexcept {
  owner->add_ref();
  owner_ = owner;
}

__attribute__((always_inline)) inline void mutex::hand_on() noexcept {
  detail::coroutine* previous = std::exchange(owner_, nullptr);
  if (detail::queued_waiter* next = waiters_.front(); next != nullptr) {
    set_owner(static_cast<detail::coroutine*>(next->slot));
    waiters_.grant_front();
  }
  // The previous owner is the running coroutine (unlock) or the one leaving wait (pass on), so
  // this is never its last reference.
  previous->release();
}

detail::coroutine* mutex::take_now_or_caller() {
  detail::coroutine& self = calling_coroutine(*this, "lock");
  if (owner_ == &self) {
    throw_relock(self);
  }
  if (owner_ == nullptr && waiters_.empty()) {
    set_owner(&self);
    return nullptr;
  }
  return &self;
}

void mutex::pass_on() noexcept { hand_on(); }

void mutex::throw_relock(const detail::coroutine& self) const {
  throw std::logic_error("weft::mutex " + detail::address_text(this) + ": " +
                         detail::describe_coroutine(self) +
                         " locks a mutex it already holds, which would wait forever; weft::mutex "
                         "is not recursive: unlock it first or restructure the code");
}

bool mutex::try_lock() {
  detail::coroutine& self = calling_coroutine(*this, "try_lock");
  if (owner_ == &self) {
    throw std::logic_error("weft::mutex " + detail::address_text(this) + ": " +
                           detail::describe_coroutine(self) +
                           " tries to lock a mutex it already holds; weft::mutex is not "
                           "recursive: unlock it first or restructure the code");
  }
  if (owner_ != nullptr || !waiters_.empty()) {
    return false;
  }
  set_owner(&self);
  return true;
}

bool mutex::try_lock_within(const timeout& limit) {
  try {
    lock(limit);
    return true;
  } catch (const timeout_error&) {
    return false;
  }
}

void mutex::unlock() {
  detail::coroutine& self = calling_coroutine(*this, "unlock");
  if (owner_ == nullptr) {
    throw std::logic_error("weft::mutex " + detail::address_text(this) + ": " +
                           detail::describe_coroutine(self) +
                           " unlocks a mutex that is not locked; every unlock must match a "
                           "lock by the same coroutine");
  }
  if (owner_ != &self) {
    throw std::logic_error("weft::mutex " + detail::address_text(this) + ": " +
                           detail::describe_coroutine(self) + " unlocks a mutex held by " +
                           detail::describe_coroutine(*owner_) +
                           "; only the coroutine that locked a mutex may unlock it");
  }
  hand_on();
}

namespace {

// The mutexes in the one order every lock_all takes them in (by address), checked.
std::vector<mutex*> in_lock_order(std::span<mutex* const> mutexes) {
  std::vector<mutex*> ordered(mutexes.begin(), mutexes.end());
  std::sort(ordered.begin(), ordered.end(), std::less<mutex*>());
  if (!ordered.empty() && ordered.front() == nullptr) {
    throw std::logic_error("weft::lock_all: a null mutex among the " +
                           std::to_string(mutexes.size()) + " given");
  }
  auto twice = std::adjacent_find(ordered.begin(), ordered.end());
  if (twice != ordered.end()) {
    throw std::logic_error("weft::lock_all: weft::mutex " + detail::address_text(*twice) +
                           " is named twice; it would wait for itself");
  }
  return ordered;
}

}  // namespace

void lock_all(std::span<mutex* const> mutexes, const timeout& limit) {
  std::vector<mutex*> ordered = in_lock_order(mutexes);
  std::size_t taken = 0;
  try {
    for (; taken < ordered.size(); ++taken) {
      ordered[taken]->lock(limit);
    }
  } catch (...) {
    while (taken > 0) {
      ordered[--taken]->unlock();
    }
    throw;
  }
}

void unlock_all(std::span<mutex* const> mutexes) {
  std::vector<mutex*> ordered = in_lock_order(mutexes);
  for (auto each = ordered.rbegin(); each != ordered.rend(); ++each) {
    (*each)->unlock();
  }
}

}  // namespace weft

// weft::loop::suspension: the protocol checks and the parking (see suspension.hpp).
#include "weft/loop/suspension.hpp"

#include <stdexcept>
#include <string>
#include <utility>

#include "loop/gate.hpp"
#include "loop/loop_core.hpp"

namespace weft::loop::detail {
namespace {

std::string name_of(const void* opaque) {
  const auto* coroutine = static_cast<const weft::detail::coroutine*>(opaque);
  if (coroutine == nullptr) {
    return "outside any coroutine";
  }
  std::string text = "coroutine " + std::to_string(coroutine->id());
  if (!coroutine->name().empty()) {
    text += " '" + coroutine->name() + "'";
  }
  return text;
}

[[noreturn]] void throw_loop_gone(const char* operation) {
  throw std::logic_error(std::string("weft::loop::suspension::") + operation +
                         ": its event loop was destroyed");
}

}  // namespace

struct suspension_state::parking {
  gate parked{"weft::loop suspension (waits for resume() or throw_into())"};
};

void throw_empty_suspension() {
  throw std::logic_error(
      "weft::loop::suspension: empty handle; get one from event_loop::suspension()");
}

suspension_state::suspension_state(loop_core& loop) : loop_(&loop) {
  weft::detail::scheduler_core* core = weft::detail::current_core();
  if (core == nullptr || core->current() == nullptr) {
    throw std::logic_error(
        "weft::loop::event_loop::suspension called outside a coroutine; call it from the "
        "coroutine that will suspend (weft::run's main, or a coroutine started with "
        "weft::spawn)");
  }
  owner_ = core->current();
  parked_ = new parking();
  loop.link(*this);
}

suspension_state::~suspension_state() {
  if (loop_ != nullptr) {
    loop_->unlink(*this);
  }
  delete parked_;
}

void* suspension_state::parked_gate() const noexcept {
  return static_cast<weft::detail::wait_source*>(&parked_->parked);
}

void suspension_state::wake_to_dispatch() noexcept { parked_->parked.signal(); }

void suspension_state::suspend() {
  if (loop_ == nullptr) {
    throw_loop_gone("suspend");
  }
  loop_->check_thread("suspension::suspend");
  if (phase_ != phase::idle) {
    throw std::logic_error(
        "weft::loop::suspension::suspend called while it is already suspended; a suspension "
        "parks one suspend() at a time");
  }
  weft::detail::scheduler_core* core = weft::detail::current_core();
  const void* self = core != nullptr ? core->current() : nullptr;
  if (self != owner_) {
    throw std::logic_error("weft::loop::suspension::suspend called from " + name_of(self) +
                           ", but the suspension belongs to " + name_of(owner_) +
                           " (the coroutine that called event_loop::suspension())");
  }
  if (loop_->in_callback_of(self)) {
    throw std::logic_error(
        "weft::loop::suspension::suspend called from a callback of its event loop; callbacks run "
        "on the dispatching coroutine, and parking it would stop the loop that has to resume "
        "it: spawn a coroutine (weft::spawn) that suspends instead");
  }
  core->waiter_or_throw("weft::loop::suspension::suspend");
  phase_ = phase::suspended;
  std::exception_ptr failure;
  try {
    for (;;) {
      if (phase_ == phase::resumed) {
        break;
      }
      if (loop_ == nullptr) {
        throw_loop_gone("suspend");
      }
      if (!loop_->dispatching()) {
        loop_->dispatch_until(*this);  // nobody dispatches: drive the loop until resumed
        continue;
      }
      parked_->parked.wait();
    }
  } catch (...) {
    failure = std::current_exception();
  }
  phase_ = phase::idle;
  parked_->parked.close();
  std::exception_ptr thrown = std::exchange(error_, nullptr);
  if (failure) {
    std::rethrow_exception(failure);
  }
  if (thrown) {
    std::rethrow_exception(thrown);
  }
}

void suspension_state::check_resumable(const char* operation) const {
  if (loop_ == nullptr) {
    throw_loop_gone(operation);
  }
  loop_->check_thread(operation);
  if (phase_ == phase::idle) {
    throw std::logic_error(std::string("weft::loop::suspension::") + operation +
                           " called while its coroutine is not suspended (before suspend(), or "
                           "after it returned); resume a suspension only while it is suspended");
  }
  if (phase_ == phase::resumed) {
    throw std::logic_error(std::string("weft::loop::suspension::") + operation +
                           " called twice for one suspend(); it was resumed already");
  }
}

void suspension_state::wake() noexcept {
  phase_ = phase::resumed;
  parked_->parked.signal();
}

void suspension_state::throw_into(std::exception_ptr error) {
  if (!error) {
    throw std::invalid_argument("weft::loop::suspension::throw_into needs an exception, got null");
  }
  check_resumable("throw_into");
  error_ = std::move(error);
  wake();
}

// --- the loop's list of live suspensions ---------------------------------------------------

void loop_core::link(suspension_state& state) noexcept {
  state.previous_ = nullptr;
  state.next_ = suspensions_;
  if (suspensions_ != nullptr) {
    suspensions_->previous_ = &state;
  }
  suspensions_ = &state;
}

void loop_core::unlink(suspension_state& state) noexcept {
  if (state.previous_ != nullptr) {
    state.previous_->next_ = state.next_;
  } else if (suspensions_ == &state) {
    suspensions_ = state.next_;
  }
  if (state.next_ != nullptr) {
    state.next_->previous_ = state.previous_;
  }
  state.previous_ = state.next_ = nullptr;
}

}  // namespace weft::loop::detail

// weft::trigger on uv_async_t.
//
// Memory ordering. notify() stores pending = true (release) and then calls uv_async_send,
// which libuv documents as thread-safe and which makes the loop run on_async after the send.
// The loop thread consumes the flag with an acq_rel exchange, either in on_async or directly
// in a wait's arm(), so writes made by the notifying thread before notify() happen before the
// woken coroutine continues. No notification is lost: if arm() finds the flag clear and
// registers its waiter, a concurrent notify's uv_async_send guarantees a later on_async, which
// finds the flag set (or already consumed by a later arm(), which then did not suspend) and
// wakes the registered waiter.
#include "weft/reactor/trigger.hpp"

#include <uv.h>

#include <atomic>
#include <stdexcept>
#include <string>

#include "reactor/uv_driver.hpp"
#include "sched/deadline_wait.hpp"
#include "sched/scheduler_core.hpp"
#include "weft/error.hpp"
#include "weft/reactor/detail/operation.hpp"

namespace weft::detail {

struct trigger_state {
  uv_async_t async{};
  std::atomic<bool> pending{false};
  scheduler_core* core = nullptr;
  intrusive_list waiters;
  std::size_t waiting = 0;
};

namespace {

class trigger_wait final : public wait_source {
 public:
  explicit trigger_wait(trigger_state& state) : state_(state) {}

  bool arm(coroutine& waiter) override {
    if (state_.pending.exchange(false, std::memory_order_acq_rel)) {
      return false;
    }
    waiter_ = &waiter;
    link_.wait = this;
    state_.waiters.push_back(link_);
    if (state_.waiting++ == 0) {
      uv_ref(reinterpret_cast<uv_handle_t*>(&state_.async));
    }
    return true;
  }
  void disarm() noexcept override {
    if (link_.linked()) {
      intrusive_list::remove(link_);
    }
    if (--state_.waiting == 0) {
      uv_unref(reinterpret_cast<uv_handle_t*>(&state_.async));
    }
  }
  void describe(std::string& out) const override { out += "a weft::trigger (another thread)"; }

  struct link : list_node {
    trigger_wait* wait = nullptr;
  };
  coroutine* waiter_ = nullptr;
  link link_{};

 private:
  trigger_state& state_;
};

void on_async(uv_async_t* handle) {
  auto* state = static_cast<trigger_state*>(handle->data);
  if (state->waiters.empty()) {
    return;  // nobody waits: the notification stays pending for the next wait
  }
  if (!state->pending.exchange(false, std::memory_order_acq_rel)) {
    return;  // already consumed by a wait that then did not suspend
  }
  while (list_node* node = state->waiters.pop_front()) {
    trigger_wait& waiting = *static_cast<trigger_wait::link*>(node)->wait;
    state->core->wake(*waiting.waiter_, &waiting);
  }
}

}  // namespace
}  // namespace weft::detail

namespace weft {

trigger::trigger() {
  detail::scheduler_core* core = detail::current_core();
  if (core == nullptr) {
    throw std::logic_error(
        "weft::trigger must be created inside weft::run (it belongs to that scheduler)");
  }
  state_ = new detail::trigger_state();
  state_->core = core;
  int status = uv_async_init(&uv_loop_of(core->driver(), "weft::trigger"), &state_->async,
                             &detail::on_async);
  if (status < 0) {
    delete state_;
    detail::throw_uv_error(status, "weft::trigger", "uv_async_init");
  }
  state_->async.data = state_;
  uv_unref(reinterpret_cast<uv_handle_t*>(&state_->async));
}

trigger::~trigger() {
  // A waiter cannot outlive the trigger: it holds the trigger by reference while it waits.
  uv_close(reinterpret_cast<uv_handle_t*>(&state_->async),
           [](uv_handle_t* handle) { delete static_cast<detail::trigger_state*>(handle->data); });
}

void trigger::notify() noexcept {
  state_->pending.store(true, std::memory_order_release);
  uv_async_send(&state_->async);
}

void trigger::wait(const timeout& limit) {
  detail::scheduler_core* core = detail::current_core();
  if (core == nullptr || core != state_->core) {
    throw std::logic_error(
        "weft::trigger::wait called outside a coroutine of the trigger's scheduler; other "
        "threads notify() it, only its own scheduler's coroutines wait on it");
  }
  detail::coroutine& self = core->waiter_or_throw("weft::trigger::wait");
  detail::trigger_wait notified(*state_);
  detail::wait_source* sources[] = {&notified};
  detail::wait_with_limit(*core, self, sources, limit, [] { return "waiting on a trigger"; });
}

}  // namespace weft

#include "weft/reactor/detail/operation.hpp"

#include <uv.h>

#include <chrono>
#include <stdexcept>
#include <string>

#include "reactor/uv_driver.hpp"
#include "sched/deadline_wait.hpp"
#include "sched/scheduler_core.hpp"
#include "weft/error.hpp"

namespace weft::detail {

// The wait source for a pending operation.
class operation_wait final : public wait_source {
 public:
  explicit operation_wait(pending_operation& operation) : operation_(operation) {}

  bool arm(coroutine& waiter) override {
    if (operation_.completed_) {
      return false;
    }
    operation_.waiter_ = &waiter;
    operation_.source_ = this;
    operation_.core_ = current_core();
    return true;
  }
  void disarm() noexcept override {
    operation_.waiter_ = nullptr;
    operation_.source_ = nullptr;
  }
  void describe(std::string& out) const override { operation_.describe(out); }

 private:
  pending_operation& operation_;
};

void pending_operation::complete() noexcept {
  completed_ = true;
  if (abandoned_) {
    core_->driver().abandoned_operation_completed();
    delete this;
    return;
  }
  if (waiter_ != nullptr) {
    core_->wake(*waiter_, source_);
  }
}

void abandon(std::unique_ptr<pending_operation>& operation, scheduler_core& core) noexcept {
  pending_operation* abandoned = operation.release();
  abandoned->abandoned_ = true;
  abandoned->core_ = &core;
  core.driver().operation_abandoned();
  abandoned->abandon();
}

void await_operation(std::unique_ptr<pending_operation>& operation, const timeout& limit) {
  scheduler_core* core = current_core();
  coroutine& self = core->waiter_or_throw("a weft I/O wait");
  operation_wait until_done(*operation);
  limit_wait limits(*core, self, limit);
  wait_source* fired = nullptr;
  try {
    fired = &limits.wait_with(until_done);
  } catch (...) {
    if (!operation->completed()) {
      abandon(operation, *core);
    }
    throw;
  }
  // A limit that passed as the operation completed loses: the result is kept.
  if (limits.fired(*fired) && !operation->completed()) {
    std::string message;
    operation->describe(message);
    abandon(operation, *core);
    limits.raise(*fired, [&] { return message; });
  }
}

uv_loop_t& current_uv_loop(const char* operation) {
  scheduler_core* core = current_core();
  if (core == nullptr || core->current() == nullptr) {
    throw std::logic_error(std::string("weft: ") + operation +
                           " called outside a coroutine; call it from weft::run's main or "
                           "from a coroutine started with weft::spawn");
  }
  return uv_loop_of(core->driver(), operation);
}

void throw_uv_error(int status, const std::string& operation, const std::string& subject) {
  throw io_error(status, operation, subject, uv_strerror(status));
}

}  // namespace weft::detail

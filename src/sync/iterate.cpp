// weft::iterate's scope: see include/weft/sync/iterate.hpp for the contract.
//
// The caller's loop is the only waiter. It waits for its turn (the previous call started, a slot
// free) and, at the end, for the calls to end; every event that can change either (a call
// starting, a call ending, the scope closing) wakes it, and it checks again. At most one call is
// ever spawned and not yet started, which is what makes calls start in range order under any
// scheduling order.
#include "weft/sync/iterate.hpp"

#include <stdexcept>
#include <string>
#include <utility>

#include "weft/error.hpp"

namespace weft::detail {
namespace {

std::size_t validated(std::size_t concurrency) {
  if (concurrency == 0) {
    throw std::invalid_argument(
        "weft::iterate: concurrency must be at least 1 (how many calls may run at once; "
        "iterate_options::unlimited for no limit), got 0");
  }
  return concurrency;
}

}  // namespace

iteration_scope::iteration_scope(std::size_t concurrency, iterate_options& options)
    : scope(of_calling_coroutine(), options.name, false),
      concurrency_(validated(concurrency)),
      cancel_children_(options.cancel_children),
      call_name_(std::move(options.name)) {
  scheduler* running = current_scheduler_or_null();
  coroutine* self = running != nullptr ? detail::running_coroutine(*running) : nullptr;
  if (self == nullptr || self->state() != coroutine_state::running) {
    throw std::logic_error(
        "weft::iterate called outside a coroutine (or from a microtask or switch handler, which "
        "cannot wait); call it from weft::run's main or from a spawned coroutine");
  }
}

iteration_scope::~iteration_scope() {
  // Here, not in ~scope: the calls still ending must reach this class's on_member_finished.
  cancel_and_wait_for_all("iterate '" + name() + "' left");
}

bool iteration_scope::wait_for_turn() {
  wait_until([this] { return closed() || (unstarted_ == nullptr && running_ < concurrency_); });
  return !closed();
}

void iteration_scope::started() noexcept {
  unstarted_ = nullptr;
  notify();
}

void iteration_scope::on_member_finished(member& record) noexcept {
  if (!record.holds_slot) {
    return;  // a child
  }
  --running_;
  if (&record == unstarted_) {
    unstarted_ = nullptr;  // cancelled before it started: it never will
  }
  notify();
}

void iteration_scope::finish() {
  wait_until([this] { return running_ == 0; });
  const bool cancelled_from_inside = closed() && !failed();
  if (!closed() && cancel_children_) {
    cancel("iterate '" + name() + "': every call has returned; its children are cancelled");
  }
  join();  // the children's end; rethrows the first failure
  if (cancelled_from_inside) {
    throw cancelled_error(close_reason());
  }
}

void iteration_scope::abandon(const std::exception_ptr& why) noexcept {
  std::string reason = "iterate '" + name() + "': its caller left";
  try {
    std::rethrow_exception(why);
  } catch (const cancelled_error& cancelled) {
    reason += " (cancelled: " + cancelled.reason() + ")";
  } catch (...) {
    reason += " with an exception: " + what_of(why);
  }
  cancel_and_wait_for_all(reason);
}

void iteration_scope::describe_turn(const void* self, std::string& out) {
  const auto& iteration = *static_cast<const iteration_scope*>(self);
  out += "iterate '" + iteration.name() + "' (" + std::to_string(iteration.running_) +
         " calls alive, at most " + std::to_string(iteration.concurrency_) + ")";
}

}  // namespace weft::detail

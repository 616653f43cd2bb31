// Awaiting a coroutine's end: the task_wait source, the checks an await makes, and the entry
// points task<T> calls (see include/weft/sched/task.hpp).
#include <stdexcept>
#include <string>

#include "sched/deadline_wait.hpp"
#include "sched/scheduler_core.hpp"
#include "weft/sched/task.hpp"

namespace weft {
namespace detail {

// ---------------------------------------------------------------------------------------------
// awaiting a coroutine's end

bool scheduler_core::task_wait::arm(coroutine& waiter) {
  if (target_.done()) {
    return false;
  }
  waiter_ = &waiter;
  link_.wait = this;
  target_.awaiters_.push_back(link_);
  return true;
}

void scheduler_core::task_wait::disarm() noexcept {
  if (link_.linked()) {
    intrusive_list::remove(link_);
  }
}

void scheduler_core::task_wait::describe(std::string& out) const {
  out += "task " + std::to_string(target_.id());
  if (!target_.name().empty()) {
    out += " '" + target_.name() + "'";
  }
}

coroutine& scheduler_core::awaiter_for(coroutine& target) {
  coroutine& self = waiter_or_throw("weft::task::await");
  if (&target == &self) {
    throw std::logic_error("weft: coroutine " + std::to_string(self.id()) +
                           " awaits its own task, which can never finish while it waits");
  }
  return self;
}

void scheduler_core::await_finished(coroutine& target) {
  if (target.done()) {
    return;
  }
  awaiter_for(target);
  task_wait until_done(target);
  wait_source* sources[] = {&until_done};
  wait(sources, 1);
}

void scheduler_core::await_finished(coroutine& target, const timeout& limit) {
  if (target.done()) {
    return;
  }
  coroutine& self = awaiter_for(target);
  task_wait until_done(target);
  wait_source* sources[] = {&until_done};
  wait_with_limit(*this, self, sources, limit, [&] {
    std::string subject = "awaiting ";
    until_done.describe(subject);
    return subject + " (the task keeps running)";
  });
}

namespace {
scheduler_core& owner_core_for_await(coroutine& target) {
  scheduler_core* core = this_thread_core;
  if (core == nullptr || &target.owner() != &core->owner()) {
    throw std::logic_error(
        "weft: task " + std::to_string(target.id()) +
        " awaited from a thread that does not run its scheduler; a task can only be awaited "
        "by coroutines of the scheduler that spawned it (use a trigger or channel to cross "
        "threads)");
  }
  return *core;
}
}  // namespace

void await_finished(coroutine& target, const timeout& limit) {
  if (target.done()) {
    return;
  }
  if (!limit.limited()) {
    owner_core_for_await(target).await_finished(target);
  } else {
    owner_core_for_await(target).await_finished(target, limit);
  }
}

void await_finished(coroutine& target) {
  if (target.done()) {
    return;
  }
  owner_core_for_await(target).await_finished(target);
}

void throw_invalid_task(const char* operation) {
  throw std::logic_error(std::string("weft: ") + operation +
                         " on an empty task (default-constructed or moved from)");
}

void throw_empty_finish_handler() {
  throw std::invalid_argument(
      "weft: on_finish needs a callable handler, got an empty std::function");
}

}  // namespace detail
}  // namespace weft

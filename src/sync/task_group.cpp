// task_group's bookkeeping: see include/weft/sync/task_group.hpp for the contract.
//
// Capacity is counted in admissions: a running task, a queued one, or one reserved for a blocked
// spawner that was granted room but has not run yet. There are concurrency + queue_limit of them.
// Whatever frees one (a task ending, a queued task flushed by cancellation, a granted spawner
// leaving) calls pump(), which first starts queued tasks into free running slots and then
// grants the freed admissions to the oldest blocked spawners (waiter_queue hand-off).
//
// Outcomes go the same way: an ended task is handed straight to the oldest next() waiter if
// there is one (into the slot on its stack), else kept in completion order. When nothing is
// left that could end (no member, no blocked spawner), every waiter is woken with none.
#include "weft/sync/task_group.hpp"

#include <stdexcept>
#include <string>
#include <utility>

namespace weft {
namespace {

// How a blocked spawner's wait ended.
constexpr std::uint8_t granted_room = 0;
constexpr std::uint8_t group_closed = 1;
// How a next() waiter's wait ended.
constexpr std::uint8_t handed_a_task = 0;
constexpr std::uint8_t no_task_left = 1;

std::size_t validated(std::size_t concurrency) {
  if (concurrency == 0) {
    throw std::invalid_argument(
        "weft::task_group: concurrency must be at least 1 (how many tasks may run at once), "
        "got 0");
  }
  return concurrency;
}

std::string first_error_text(const std::vector<std::exception_ptr>& errors) {
  if (errors.empty()) {
    return "no error";
  }
  return detail::what_of(errors.front());
}

}  // namespace

namespace detail {

void throw_all_tasks_failed(std::vector<std::exception_ptr> errors) {
  std::string message = "weft: every task of the task_group failed (" +
                        std::to_string(errors.size()) +
                        " errors); the first: " + first_error_text(errors);
  std::vector<std::size_t> order(errors.size());
  for (std::size_t index = 0; index < order.size(); ++index) {
    order[index] = index;
  }
  throw all_failed_error(message, std::move(errors), std::move(order));
}

task_group_base::task_group_base(std::size_t concurrency, std::size_t queue_limit, std::string name)
    : scope(of_calling_coroutine(), std::move(name), true),
      concurrency_(validated(concurrency)),
      queue_limit_(queue_limit) {}

task_group_base::task_group_base(weft::scope& parent, std::size_t concurrency,
                                 std::size_t queue_limit, std::string name)
    : scope(&parent, std::move(name), true),
      concurrency_(validated(concurrency)),
      queue_limit_(queue_limit) {}

task_group_base::task_group_base(detached_scope_t, std::size_t concurrency, std::size_t queue_limit,
                                 std::string name)
    : scope(nullptr, std::move(name), true),
      concurrency_(validated(concurrency)),
      queue_limit_(queue_limit) {}

task_group_base::~task_group_base() {
  // Before our own members go: ending tasks run on_member_finished, which uses them.
  cancel_and_wait_for_all("task_group '" + name() + "' destroyed");
  while (!completions_.empty()) {
    coroutine* ended = completions_.front();
    completions_.pop_front();
    if (ended->error() && !ended->was_cancelled() && propagate_to_parent(ended->error())) {
      ended->observe_error();
    }
    ended->release();  // reports an error nobody took as uncaught
  }
}

std::size_t task_group_base::capacity() const noexcept {
  return queue_limit_ > unlimited - concurrency_ ? unlimited : concurrency_ + queue_limit_;
}

scheduler& task_group_base::admit(const timeout& limit) {
  if (sealed_) {
    throw std::logic_error("weft: spawn on task_group '" + name() +
                           "' after close(): the group is sealed and takes no more tasks (those "
                           "already in it run to their end); spawn before close(), or into "
                           "another group");
  }
  scheduler& owner = admit_spawn();
  if (spawn_waiters_.empty() && admitted_ < capacity()) {
    ++admitted_;
    return owner;
  }
  visit inside(*this);
  ++blocked_;
  queued_waiter waiter(spawn_waiters_);
  try {
    spawn_waiters_.wait(waiter, limit, [this](queued_waiter& leaving) {
      if (leaving.outcome == granted_room) {
        give_back_admission();  // cancelled after the grant: the next spawner gets the room
      }
    });
  } catch (...) {
    --blocked_;
    wake_if_exhausted();
    throw;
  }
  --blocked_;
  if (waiter.outcome == group_closed) {
    wake_if_exhausted();
    throw_closed();
  }
  if (closed()) {
    give_back_admission();  // room was granted, then the group closed before we ran
    wake_if_exhausted();
    throw_closed();
  }
  return owner;
}

void task_group_base::give_back_admission() noexcept {
  --admitted_;
  pump();
}

void task_group_base::place(member& record) noexcept {
  if (running_ < concurrency_ && queue_.empty()) {
    start(record);
  } else {
    record.queued = true;
    queue_.push_back(&record);
  }
}

void task_group_base::start(member& record) noexcept {
  record.holds_slot = true;
  ++running_;
  if (running_ > max_running_) {
    max_running_ = running_;
  }
  scheduler& owner = record.coroutine->owner();
  if (owner.shutting_down() && !record.coroutine->cancel_requested()) {
    detail::cancel_coroutine(owner, *record.coroutine,
                             "graceful shutdown");  // shutdown reached it in the queue
  }
  detail::enqueue_coroutine(owner, *record.coroutine);
}

void task_group_base::flush(member& record) noexcept {
  // A cancelled queued task: handed to the scheduler only to end unstarted, without a slot.
  --admitted_;
  scheduler& owner = record.coroutine->owner();
  if (!record.coroutine->cancel_requested()) {
    detail::cancel_coroutine(owner, *record.coroutine,
                             close_reason().empty() ? "graceful shutdown" : close_reason());
  }
  detail::enqueue_coroutine(owner, *record.coroutine);
}

void task_group_base::pump() noexcept {
  while (running_ < concurrency_ && !queue_.empty()) {
    member* next = queue_.front();
    queue_.pop_front();
    next->queued = false;
    if (next->coroutine->cancel_requested() || next->coroutine->owner().shutting_down()) {
      flush(*next);
    } else {
      start(*next);
    }
  }
  if (closed()) {
    return;
  }
  while (admitted_ < capacity() && spawn_waiters_.front() != nullptr) {
    ++admitted_;  // reserved for that spawner: nobody else can take it before it runs
    spawn_waiters_.grant_front(granted_room);
  }
}

void task_group_base::cancel_unfinished(const std::string& reason) noexcept {
  cancel_members(reason);
  while (!queue_.empty()) {
    member* queued = queue_.front();
    queue_.pop_front();
    queued->queued = false;
    flush(*queued);
  }
  pump();
}

void task_group_base::on_closed() noexcept {
  while (!queue_.empty()) {
    member* queued = queue_.front();
    queue_.pop_front();
    queued->queued = false;
    flush(*queued);  // close_tree cancelled it already
  }
  spawn_waiters_.grant_all(group_closed);
}

void task_group_base::on_member_finished(member& record) noexcept {
  if (record.holds_slot) {
    --running_;
    --admitted_;
  }
  record.coroutine->add_ref();  // the group keeps the outcome until someone takes it
  hand_out(*record.coroutine, false);
  pump();
  wake_if_exhausted();
}

void task_group_base::hand_out(coroutine& ended, bool to_front) noexcept {
  if (queued_waiter* waiter = result_waiters_.front()) {
    *static_cast<coroutine**>(waiter->slot) = &ended;
    result_waiters_.grant_front(handed_a_task);
  } else if (to_front) {
    completions_.push_front(&ended);
  } else {
    completions_.push_back(&ended);
  }
}

bool task_group_base::nothing_left() const noexcept {
  return live_ == 0 && blocked_ == 0 && completions_.empty();
}

void task_group_base::wake_if_exhausted() noexcept {
  if (nothing_left()) {
    result_waiters_.grant_all(no_task_left);
  }
}

coroutine* task_group_base::take(const timeout& limit, const char* operation) {
  refuse_other_thread(operation);
  refuse_own_coroutine(operation);
  if (!completions_.empty()) {
    coroutine* ended = completions_.front();
    completions_.pop_front();
    return ended;
  }
  if (nothing_left()) {
    return nullptr;
  }
  visit inside(*this);
  coroutine* handed = nullptr;
  queued_waiter waiter(result_waiters_, &handed);
  result_waiters_.wait(waiter, limit, [this](queued_waiter& leaving) {
    auto* slot = static_cast<coroutine**>(leaving.slot);
    if (*slot != nullptr) {
      hand_out(**slot, true);  // cancelled after the hand-off: the next taker gets it
      *slot = nullptr;
    }
  });
  return handed;
}

void task_group_base::drain() {
  while (coroutine* ended = take(timeout::never(), "task_group drain")) {
    ended->observe_error();
    ended->release();
  }
}

task_group_stats task_group_base::group_stats() const noexcept {
  scope_stats counts = stats();
  task_group_stats result;
  result.spawned = counts.spawned;
  result.running = running_;
  result.queued = queue_.size();
  result.blocked_spawners = blocked_;
  result.unclaimed = completions_.size();
  result.max_running = max_running_;
  result.succeeded = counts.succeeded;
  result.failed = counts.failed;
  result.cancelled = counts.cancelled;
  return result;
}

void task_group_base::describe_spawners(const void* self, std::string& out) {
  const auto& group = *static_cast<const task_group_base*>(self);
  out += "room in task_group '" + group.name() + "' (" + std::to_string(group.running_) +
         " running, " + std::to_string(group.queue_.size()) + " queued)";
}

void task_group_base::describe_results(const void* self, std::string& out) {
  const auto& group = *static_cast<const task_group_base*>(self);
  out += "a task of task_group '" + group.name() + "' to end (" + std::to_string(group.live_) +
         " unfinished)";
}

}  // namespace detail
}  // namespace weft

// The waiting and the policies behind the await combinators: see include/weft/sync/await.hpp.
//
// completion_watch hands out the inputs in the order they finish. A wait arms one source per
// pending input (the scheduler's task_wait on a task's awaiter list, a queued_waiter in a
// future's waiter queue) plus the deadline; the first completion wakes the coroutine, every
// source is disarmed, and whatever finished meanwhile is collected before waiting again.
#include "weft/sync/await.hpp"

#include <algorithm>
#include <deque>
#include <memory>
#include <optional>
#include <source_location>
#include <stdexcept>
#include <string>

#include "sched/deadline_wait.hpp"
#include "sched/scheduler_core.hpp"

namespace weft {

namespace detail {

namespace {

bool finished(const await_input& input) {
  return input.task != nullptr ? input.task->done() : input.future->settled();
}

// The error the input ended with (null after success). Reading a task's counts as observing it:
// the combinator reports it (returns, throws or collects it), so it is not an uncaught error.
std::exception_ptr failure(const await_input& input) {
  if (input.task != nullptr) {
    input.task->observe_error();
    return input.task->error();
  }
  return input.future->error();
}

class completion_watch {
 public:
  completion_watch(const char* combinator, std::span<const await_input> inputs,
                   const await_options& options)
      : combinator_(combinator),
        inputs_(inputs),
        options_(options),
        collected_(inputs.size(), false),
        uncollected_(inputs.size()) {
    scheduler* here = current_scheduler_or_null();
    scheduler_core* core = current_core();
    for (std::size_t index = 0; index < inputs.size(); ++index) {
      const await_input& input = inputs[index];
      if (input.task == nullptr && input.future == nullptr) {
        throw std::logic_error(std::string("weft: ") + combinator + ": input " +
                               std::to_string(index) +
                               " is an empty task or future (default-constructed or moved from)");
      }
      if (input.task != nullptr && &input.task->owner() != here) {
        throw std::logic_error(std::string("weft: ") + combinator + ": input " +
                               std::to_string(index) + " is task " +
                               std::to_string(input.task->id()) +
                               " of another thread's scheduler; a task can only be awaited by "
                               "coroutines of the scheduler that spawned it");
      }
      if (input.task != nullptr && core != nullptr && input.task == core->current()) {
        throw std::logic_error(std::string("weft: ") + combinator + ": input " +
                               std::to_string(index) +
                               " is the awaiting coroutine's own task, which can never finish "
                               "while it waits");
      }
    }
  }
  completion_watch(const completion_watch&) = delete;
  completion_watch& operator=(const completion_watch&) = delete;

  // The next input to finish that was not handed out yet: those already finished first (in input
  // order), then in the order they finish, suspending while none has. nullopt once all were.
  // in_input_order waits for the lowest pending input only (await_all, which needs them all
  // anyway: one source per wait instead of one per pending input).
  std::optional<std::size_t> next(bool in_input_order = false) {
    if (!scanned_) {
      scanned_ = true;
      collect_finished();
    }
    while (ready_.empty()) {
      if (uncollected_ == 0) {
        return std::nullopt;
      }
      wait_once(in_input_order);
    }
    std::size_t index = ready_.front();
    ready_.pop_front();
    return index;
  }

  // Cancels every input that has not finished (the losers, or everything on a timeout).
  void cancel_unfinished(const std::string& reason) {
    for (const await_input& input : inputs_) {
      if (finished(input)) {
        continue;
      }
      if (input.task != nullptr) {
        detail::cancel_coroutine(input.task->owner(), *input.task, reason);
      } else {
        input.future->cancel(reason, std::source_location::current());
      }
    }
  }

 private:
  // One per input, built the first time that input is waited on and reused by later waits (a
  // disarmed source can be armed again).
  struct source_slot {
    std::optional<scheduler_core::task_wait> task;
    std::optional<queued_waiter> future;
  };

  void collect(std::size_t index) {
    if (!collected_[index] && finished(inputs_[index])) {
      collected_[index] = true;
      --uncollected_;
      ready_.push_back(index);
    }
  }
  void collect_finished() {
    for (std::size_t index = 0; index < inputs_.size(); ++index) {
      collect(index);
    }
  }

  wait_source* source_for(std::size_t index) {
    if (!slots_) {
      slots_ = std::make_unique<source_slot[]>(inputs_.size());
    }
    source_slot& slot = slots_[index];
    const await_input& input = inputs_[index];
    if (input.task != nullptr) {
      if (!slot.task) {
        slot.task.emplace(*input.task);
      }
      return &*slot.task;
    }
    if (!slot.future) {
      slot.future.emplace(input.future->awaiters());
    }
    return &*slot.future;
  }

  void wait_once(bool in_input_order) {
    scheduler_core* core = current_core();
    if (core == nullptr || core->current() == nullptr) {
      throw std::logic_error(std::string("weft: ") + combinator_ +
                             " has to wait, outside a coroutine; call it from weft::run's main "
                             "or from a coroutine started with weft::spawn");
    }
    armed_.clear();
    armed_index_.clear();
    for (std::size_t index = 0; index < inputs_.size(); ++index) {
      if (!collected_[index]) {
        armed_.push_back(source_for(index));
        armed_index_.push_back(index);
        if (in_input_order) {
          break;
        }
      }
    }
    wait_source* fired = nullptr;
    try {
      fired =
          &wait_with_limit(*core, core->waiter_or_throw(combinator_), armed_, options_.limit, [&] {
            std::string what = std::string(combinator_) + " on " + std::to_string(inputs_.size()) +
                               " inputs (" + std::to_string(uncollected_) + " still pending";
            return what +
                   (options_.cancel_rest_on_timeout ? ", now cancelled)" : ", still running)");
          });
    } catch (const timeout_error&) {
      if (options_.cancel_rest_on_timeout) {
        cancel_unfinished(std::string(combinator_) + " timed out");
      }
      throw;
    } catch (const cancelled_error&) {
      if (options_.cancel_rest_on_cancel) {
        cancel_unfinished(std::string("the coroutine awaiting ") + combinator_ + " was cancelled");
      }
      throw;
    }
    // The one that woke us finished first; the others that finished meanwhile follow in input
    // order (their relative order is not known).
    auto position = std::find(armed_.begin(), armed_.end(), fired);
    if (position != armed_.end()) {
      collect(armed_index_[static_cast<std::size_t>(position - armed_.begin())]);
    }
    collect_finished();
  }

  const char* combinator_;
  std::span<const await_input> inputs_;
  const await_options& options_;
  std::vector<bool> collected_;
  std::size_t uncollected_;
  bool scanned_ = false;
  std::deque<std::size_t> ready_;
  std::unique_ptr<source_slot[]> slots_;
  std::vector<wait_source*> armed_;
  std::vector<std::size_t> armed_index_;
};

}  // namespace

void wait_for_all(std::span<const await_input> inputs, const await_options& options) {
  completion_watch watch("await_all", inputs, options);
  while (watch.next(/*in_input_order=*/true)) {
  }
}

void wait_for_all_or_fail(std::span<const await_input> inputs, const await_options& options) {
  completion_watch watch("await_all_or_fail", inputs, options);
  while (std::optional<std::size_t> index = watch.next()) {
    if (std::exception_ptr error = failure(inputs[*index])) {
      watch.cancel_unfinished("await_all_or_fail: input " + std::to_string(*index) + " failed");
      // Other inputs that failed too are covered by this one error (as in Go's errgroup).
      for (const await_input& input : inputs) {
        if (finished(input)) {
          failure(input);
        }
      }
      std::rethrow_exception(error);
    }
  }
}

std::size_t wait_for_any(std::span<const await_input> inputs, const await_options& options) {
  if (inputs.empty()) {
    throw std::invalid_argument(
        "weft: await_any_or_fail needs at least one input: with none, nothing can ever finish "
        "first");
  }
  completion_watch watch("await_any_or_fail", inputs, options);
  std::size_t winner = *watch.next();
  watch.cancel_unfinished("await_any_or_fail: input " + std::to_string(winner) + " finished first");
  if (std::exception_ptr error = failure(inputs[winner])) {
    std::rethrow_exception(error);
  }
  return winner;
}

std::size_t wait_for_first_success(std::span<const await_input> inputs,
                                   const await_options& options) {
  completion_watch watch("await_first_success", inputs, options);
  std::vector<std::exception_ptr> errors(inputs.size());
  while (std::optional<std::size_t> index = watch.next()) {
    errors[*index] = failure(inputs[*index]);
    if (!errors[*index]) {
      watch.cancel_unfinished("await_first_success: input " + std::to_string(*index) +
                              " succeeded first");
      return *index;
    }
  }
  std::vector<std::size_t> indexes(inputs.size());
  for (std::size_t index = 0; index < indexes.size(); ++index) {
    indexes[index] = index;
  }
  std::string message = inputs.empty()
                            ? "weft: await_first_success on no inputs: none can succeed"
                            : "weft: await_first_success: all " + std::to_string(inputs.size()) +
                                  " inputs failed; input 0: " + what_of(errors[0]);
  throw all_failed_error(message, std::move(errors), std::move(indexes));
}

std::vector<std::size_t> wait_for_successes(std::size_t count, std::span<const await_input> inputs,
                                            const await_options& options) {
  if (count > inputs.size()) {
    throw std::invalid_argument("weft: await_any_of(" + std::to_string(count) + ") on " +
                                std::to_string(inputs.size()) +
                                " inputs: asks for more successes than there are inputs");
  }
  std::vector<std::size_t> successes;
  if (count == 0) {
    return successes;
  }
  completion_watch watch("await_any_of", inputs, options);
  std::vector<std::exception_ptr> errors(inputs.size());
  std::size_t failures = 0;
  while (std::optional<std::size_t> index = watch.next()) {
    errors[*index] = failure(inputs[*index]);
    if (!errors[*index]) {
      successes.push_back(*index);
      if (successes.size() == count) {
        watch.cancel_unfinished("await_any_of: " + std::to_string(count) +
                                " inputs succeeded already");
        return successes;
      }
    } else if (++failures > inputs.size() - count) {
      watch.cancel_unfinished("await_any_of: " + std::to_string(count) +
                              " successes are no longer possible");
      break;
    }
  }
  std::vector<std::exception_ptr> failed;
  std::vector<std::size_t> indexes;
  for (std::size_t index = 0; index < inputs.size(); ++index) {
    if (errors[index]) {
      failed.push_back(errors[index]);
      indexes.push_back(index);
    }
  }
  // The message first: the vectors are moved into the error.
  std::string message = "weft: await_any_of(" + std::to_string(count) + ") on " +
                        std::to_string(inputs.size()) +
                        " inputs: " + std::to_string(failed.size()) + " failed, so at most " +
                        std::to_string(inputs.size() - failed.size()) + " can succeed; input " +
                        std::to_string(indexes.front()) + ": " + what_of(failed.front());
  throw all_failed_error(message, std::move(failed), std::move(indexes));
}

}  // namespace detail
}  // namespace weft

// weft::iterate: calls a function on every element of a range, each call in its own coroutine,
// at most `concurrency` of them at once, and returns when they are all over.
//
//   weft::iterate(urls, [&](const std::string& url) { fetch(url); }, 8);
//   weft::iterate(rows, [&](row& each, std::size_t index) { fill(each, index); }, 4,
//                 {.cancel_children = false});
//
// Contract:
// - Calls. fn(element) or, when fn accepts it, fn(element, index) (the element's position in the
//   range, from 0). fn must return void. A range of lvalues (a std::vector, a std::list) passes
//   each call a reference to its element (fn may modify it); any other range (std::views::iota, a
//   transform view) has each element moved into its call's coroutine and passed as an rvalue. fn
//   is called through a reference, from several coroutines whose calls interleave at their
//   suspension points. The range and fn are not copied: iterate returns only once nothing
//   touches them any more.
// - Concurrency. At most `concurrency` calls are alive at once (std::numeric_limits<size_t>::max()
//   or iterate_options::unlimited for no limit). 0 is std::invalid_argument, thrown before the
//   range is touched.
// - Order. Calls start in range order, whatever the scheduling order (WEFT_SCHED=random too): the
//   coroutine of an element is spawned only once the call before it has started and a slot is
//   free. The range is read lazily, so an input range (a generator, a stream) is fine; it is not
//   read any further once the iteration has failed or been cancelled.
// - Errors. The first exception other than cancelled_error escaping a call (or a child, below)
//   fails the iteration: the running calls and the children are cancelled, no further element is
//   started, and once every one of them has ended (their cleanup done) iterate rethrows it. Later
//   failures, usually caused by that cancellation, are dropped. The failure reaches the caller's
//   scope only if the caller lets it escape (unlike a nested weft::scope's, which goes to the
//   parent at once).
// - Children. The calls run as coroutines of the iteration's own scope, a child of the caller's
//   scope (so cancelling that scope, or graceful shutdown, reaches them). Coroutines a call spawns
//   into weft::scope::current() (that scope) are its children (plain weft::spawn makes a
//   coroutine of no scope, which is not one). Once every call has returned, the children still
//   alive are cancelled (options.cancel_children, the default) or waited for (false); either way
//   iterate returns only after they have ended, and a child's failure fails the iteration.
// - Cancellation of the caller (while waiting for a slot, for the calls or for the children):
//   iterate cancels the running calls and the children, waits for them to end (their cleanup; this
//   wait is not interruptible), then rethrows cancelled_error. A failure a call raises meanwhile is
//   not dropped: it is reported as uncaught (weft::run rethrows it). The iteration's scope
//   cancelled from inside (weft::scope::current()->cancel(reason) in a call) stops it the same
//   way: no further element starts, and iterate throws cancelled_error with that reason once
//   everything has ended.
// - An empty range returns at once, having spawned nothing.
// - Threads: called from a coroutine (std::logic_error elsewhere, or from a microtask or handler);
//   the calls run on the caller's scheduler.
#pragma once

#include <cstddef>
#include <exception>
#include <iterator>
#include <limits>
#include <memory>
#include <ranges>
#include <source_location>
#include <string>
#include <type_traits>
#include <utility>

#include "weft/sched/task.hpp"
#include "weft/sync/detail/waiter_queue.hpp"
#include "weft/sync/scope.hpp"

namespace weft {

// Options of weft::iterate.
struct iterate_options {
  // Concurrency: no limit.
  static constexpr std::size_t unlimited = std::numeric_limits<std::size_t>::max();
  // Once every call has returned: cancel the children still alive (true) or wait for them.
  bool cancel_children = true;
  // The name of the iteration's scope and of each call's coroutine (deadlock reports,
  // scope::children()).
  std::string name = "iterate";
};

namespace detail {

// The scope the calls of one weft::iterate run in, and its admission of calls.
class iteration_scope final : public weft::scope {
 public:
  // std::invalid_argument for concurrency 0, std::logic_error outside a coroutine.
  iteration_scope(std::size_t concurrency, iterate_options& options);
  ~iteration_scope() override;

  // Waits until the next call may start: the previous one has started and fewer than concurrency
  // are alive. False once the scope is closed (failed or cancelled): nothing more may start.
  bool wait_for_turn();
  // Spawns one call (call must be void()).
  template <class Call>
  void start(Call&& call);
  // After the last element: waits for the calls, then cancels or waits for the children, and
  // rethrows the iteration's failure (or cancelled_error if it was cancelled from inside).
  void finish();
  // The caller leaves with `why`: cancels what is alive and waits for it, uninterruptibly.
  void abandon(const std::exception_ptr& why) noexcept;
  // Called by a call's coroutine when it starts.
  void started() noexcept;

 private:
  void on_member_finished(member& record) noexcept override;
  void on_closed() noexcept override { notify(); }
  bool hands_failures_to_parent() const noexcept override { return false; }
  void notify() noexcept { turn_waiters_.grant_all(0); }
  template <class Condition>
  void wait_until(Condition&& condition);
  static void describe_turn(const void* self, std::string& out);

  std::size_t concurrency_;
  bool cancel_children_;
  std::string call_name_;
  std::size_t running_ = 0;      // calls spawned and not yet ended
  member* unstarted_ = nullptr;  // the last call spawned, until it starts (or ends unstarted)
  waiter_queue turn_waiters_{this, &iteration_scope::describe_turn};
};

template <class Call>
void iteration_scope::start(Call&& call) {
  scheduler& owner = admit_spawn();
  spawn_options options;
  options.name = call_name_;
  member* record = nullptr;
  detail::result_holder<void>* coroutine = make_member<void>(
      [this, body = std::forward<Call>(call)]() mutable {
        started();
        body();
      },
      owner, options, std::source_location::current(), record);
  record->holds_slot = true;
  unstarted_ = record;
  ++running_;
  detail::enqueue_coroutine(
      owner, *coroutine);  // no task handle: the scheduler's and the scope's references
}

template <class Condition>
void iteration_scope::wait_until(Condition&& condition) {
  while (!condition()) {
    queued_waiter waiter(turn_waiters_);
    turn_waiters_.wait(waiter, timeout::never());
  }
}

template <class Function, class Element>
void invoke_call(Function& fn, Element&& element, std::size_t index) {
  if constexpr (std::is_invocable_v<Function&, Element&&, std::size_t>) {
    fn(std::forward<Element>(element), index);
  } else {
    fn(std::forward<Element>(element));
  }
}

}  // namespace detail

// Runs fn on every element of range, at most concurrency at once (see above).
template <std::ranges::input_range Range, class Function>
void iterate(Range&& range, Function&& fn, std::size_t concurrency, iterate_options options = {}) {
  using reference = std::ranges::range_reference_t<Range>;
  using element = std::remove_cvref_t<reference>;
  using argument = std::conditional_t<std::is_lvalue_reference_v<reference>, reference, element&&>;
  constexpr bool with_index = std::is_invocable_v<Function&, argument, std::size_t>;
  static_assert(with_index || std::is_invocable_v<Function&, argument>,
                "weft::iterate: fn must be callable as fn(element) or fn(element, index)");
  if constexpr (with_index) {
    static_assert(std::is_void_v<std::invoke_result_t<Function&, argument, std::size_t>>,
                  "weft::iterate: fn must return void");
  } else {
    static_assert(std::is_void_v<std::invoke_result_t<Function&, argument>>,
                  "weft::iterate: fn must return void");
  }

  detail::iteration_scope iteration(concurrency, options);
  std::exception_ptr left_with;
  try {
    std::size_t index = 0;
    const auto end = std::ranges::end(range);
    for (auto it = std::ranges::begin(range); it != end; ++it, ++index) {
      if (!iteration.wait_for_turn()) {
        break;
      }
      if constexpr (std::is_lvalue_reference_v<reference>) {
        auto* item = std::addressof(*it);
        iteration.start([&fn, item, index] { detail::invoke_call(fn, *item, index); });
      } else {
        iteration.start([&fn, item = element(*it), index]() mutable {
          detail::invoke_call(fn, std::move(item), index);
        });
      }
    }
    iteration.finish();
    return;
  } catch (...) {
    left_with = std::current_exception();  // nothing waits inside a handler
  }
  iteration.abandon(left_with);
  std::rethrow_exception(left_with);
}

}  // namespace weft

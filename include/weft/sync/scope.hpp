// weft::scope: structured concurrency. Coroutines spawned into a scope belong to it; the scope
// can cancel them all, wait for them all, and decides what an exception escaping one of them
// means. Scopes form a tree: cancelling or failing a scope reaches its descendants, never its
// parent's other coroutines or its siblings (except through failure, below).
//
// Parent. `weft::scope s;` made inside a coroutine that belongs to scope P is P's child; made
// elsewhere (main, a plain weft::spawn) it has no parent. `weft::scope s(parent)` picks the
// parent; `weft::scope s(weft::detached_scope)` has none. A scope made under a closed parent
// starts closed (cancelled with the parent's reason).
//
// Errors. An exception other than cancelled_error escaping a coroutine of the scope (or thrown by
// its finish handlers: task::on_finish):
//   - with an exception handler set: the handler gets it (on the failing coroutine's stack,
//     right after the exception left the coroutine's function; it should not block) and the
//     scope carries on. A handler that throws fails the scope with what it threw.
//   - without one: the scope fails. The first error is kept; the scope closes and cancels its
//     other coroutines and its child scopes; join() rethrows that error (every time); and the
//     error propagates to the parent scope at once, as if a coroutine of the parent had failed
//     with it (the parent's handler gets it, or the parent fails in turn, and so on up). An
//     error reaches each scope once: when the coroutine owning a failed child scope lets the
//     child's rethrown error escape, the parent does not see it a second time.
// The task returned by spawn() still carries the coroutine's own outcome. A failure that no
// join() or error() observed and no parent took is reported as uncaught when the scope is
// destroyed (the program shuts down and weft::run rethrows it), never dropped silently.
//
// Closing. A scope is closed once cancelled, failed or being destroyed; spawn() into a closed
// scope throws weft::scope_closed_error. join() does not close it. join_or_cancel(limit) is join
// with a deadline after which the scope is cancelled and its cleanup waited for.
//
// Done. A scope is done once it is closed and no coroutine of it or of its descendants is left:
// right after cancel() of an empty scope, when the last cancelled coroutine ends, and at the
// latest when it is destroyed. A join() alone does not make it done (the scope stays open and may
// be spawned into again): a joined scope is done when it is then cancelled or destroyed.
// on_finally(fn) runs fn once, at that moment; registered on a scope already done, fn runs at
// once, on the caller's stack. done() says whether it has happened.
//
// Owned resources. A channel made with channel_options{.owner = &scope} is closed with the scope's
// close reason when the scope closes (see channel.hpp); either may be destroyed first.
//
// Diagnostics. id() is unique in the process (creation order, from 1). children() is a snapshot
// of the child scopes (task groups and weft::iterate's scopes included), each with its id, name,
// live coroutines and its own children. scope::current() is the scope the calling coroutine was
// spawned into (to spawn siblings into it, e.g. from a weft::iterate callback).
//
// Destruction cancels the scope's live coroutines (and its child scopes) and waits for them to
// end: the destructor never returns while one of them could still touch the scope. In a
// coroutine it suspends (uninterruptibly: a cancel arriving meanwhile is raised at the caller's
// next suspension point instead). Outside a coroutine, or inside one of the scope's own
// coroutines, with live coroutines, there is nothing to wait with: it aborts with a message.
// Otherwise the scope object must outlive every call on it, as any object.
//
// Threads: a scope belongs to the scheduler of the thread its coroutines run on; every call is
// made on that thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <source_location>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "weft/error.hpp"
#include "weft/sched/detail/coroutine.hpp"
#include "weft/sched/scheduler.hpp"
#include "weft/sched/task.hpp"
#include "weft/sched/timeout.hpp"
#include "weft/sync/detail/scope_link.hpp"
#include "weft/sync/detail/waiter_queue.hpp"

namespace weft {

// The type of weft::detached_scope.
struct detached_scope_t {
  explicit detached_scope_t() = default;
};
// weft::scope s(weft::detached_scope): a scope with no parent, wherever it is made.
inline constexpr detached_scope_t detached_scope{};

// Counters of a scope (scope::stats()).
struct scope_stats {
  std::uint64_t spawned = 0;       // coroutines spawned into it
  std::uint64_t live = 0;          // its own coroutines not yet ended
  std::uint64_t live_in_tree = 0;  // ... plus those of every descendant scope
  std::uint64_t succeeded = 0;     // ended with a value
  std::uint64_t failed = 0;        // ended with an exception other than cancelled_error
  std::uint64_t cancelled = 0;     // ended with cancelled_error (or never started)
};

// One scope in a scope::children() snapshot.
struct scope_info {
  std::uint64_t id = 0;              // the scope's id()
  std::string name;                  // the scope's name()
  std::uint64_t live = 0;            // its own coroutines not yet ended
  std::uint64_t live_in_tree = 0;    // ... plus those of every descendant scope
  bool closed = false;               // closed (cancelled, failed or being destroyed)
  std::string close_reason;          // why it closed
  std::vector<scope_info> children;  // its child scopes, oldest first
};

class scope;

namespace detail {
// Runs a scope member's function and reports an exception escaping it to the scope before it
// settles on the task.
template <class Function, class Result>
class scope_body {
 public:
  scope_body(Function&& function, weft::scope& owner)
      : function_(std::move(function)), owner_(&owner) {}
  Result operator()();

 private:
  Function function_;
  weft::scope* owner_;
};
}  // namespace detail

class scope {
 public:
  // Receives what escapes a coroutine of the scope (see set_exception_handler).
  using exception_handler = std::function<void(std::exception_ptr)>;

  // A child of the calling coroutine's scope, if it has one; else a scope with no parent.
  explicit scope(std::string name = {});
  explicit scope(scope& parent, std::string name = {});
  explicit scope(detached_scope_t, std::string name = {});
  scope(const scope&) = delete;
  scope& operator=(const scope&) = delete;
  virtual ~scope();

  // Spawns fn as a coroutine of this scope (lazy and FIFO, like weft::spawn). Throws
  // scope_closed_error if the scope is closed, std::logic_error outside a running scheduler.
  template <class Function>
  auto spawn(Function&& fn, spawn_options options = {},
             std::source_location spawned_at = std::source_location::current())
      -> task<std::invoke_result_t<std::decay_t<Function>&>>;

  // Waits until the scope and its descendants have no live coroutine, then rethrows the
  // scope's failure if it failed. Returns at once for an empty scope. A coroutine of this scope
  // or of a descendant gets std::logic_error (it would wait for itself). A cancellation point;
  // the timed version throws timeout_error and leaves the coroutines running.
  void join();
  void join(const timeout& limit);
  // join(limit), except that when limit passes first the scope is cancelled (closed, with reason,
  // or "<scope> not done within N ms (join_or_cancel)" when reason is empty), and the call waits
  // for the cancelled coroutines to end, then throws timeout_error. Either way the scope's
  // failure, if it failed, is rethrown instead. The wait for the cleanup is a cancellation point
  // too: a caller cancelled there gets cancelled_error, the scope's coroutines end on their own.
  void join_or_cancel(const timeout& limit, std::string reason = {});

  // Closes the scope and cancels its coroutines (the caller too, if it is one of them) and its
  // child scopes. Idempotent; the first reason stays.
  void cancel(std::string reason = "scope cancelled");

  // Replaces the handler (an empty one removes it). See the header comment.
  void set_exception_handler(exception_handler handler);

  // Runs fn once, when the scope is done (see the header comment), in registration order, on the
  // stack that made it done: the end of its last coroutine (inside the scheduler's switch),
  // cancel()'s caller, or the destructor's. fn cannot wait (std::logic_error); spawn a coroutine
  // for work that does (not into this scope: it is closed). An exception escaping fn is handled
  // as the failure of one of the scope's coroutines: the exception handler gets it, or the scope
  // fails with it (unless it failed already: the first failure stands). On a scope already done,
  // fn runs at once and its exception propagates to the caller. An empty fn is
  // std::invalid_argument.
  void on_finally(std::function<void()> fn);

  // name(), parent() (null without one), closed() and failed() (see above).
  const std::string& name() const noexcept { return name_; }
  scope* parent() const noexcept { return parent_; }
  bool closed() const noexcept { return closed_; }
  bool failed() const noexcept { return static_cast<bool>(error_); }
  // The reason it was closed with (empty while open).
  const std::string& close_reason() const noexcept { return close_reason_; }
  // The failure join() would rethrow, or null. Reading it counts as observing it.
  std::exception_ptr error() noexcept;
  // live(): its coroutines not yet ended; stats(): its counters; done() (see above); id(): unique
  // in the process.
  std::size_t live() const noexcept { return live_; }
  scope_stats stats() const noexcept;
  bool done() const noexcept { return done_; }
  std::uint64_t id() const noexcept { return id_; }
  // A snapshot of its child scopes (recursively), oldest first.
  std::vector<scope_info> children() const;

  // The scope the calling coroutine was spawned into (scope::spawn), or null: outside a
  // coroutine, in one started by plain weft::spawn, and in a task of a task_group (a group
  // counts and hands out its own tasks: spawn into it through the group).
  static scope* current() noexcept;

 protected:
  // One coroutine of the scope: linked in members_ from spawn until it ends.
  struct member : detail::list_node {
    detail::coroutine* coroutine = nullptr;
    weft::scope* owner = nullptr;
    bool queued = false;      // task_group: made, not yet handed to the scheduler
    bool holds_slot = false;  // task_group: counted against its concurrency
  };

  // For task_group: errors_are_results makes member failures outcomes of their tasks (the
  // group hands them out) instead of failures of the scope.
  scope(scope* parent, std::string name, bool errors_are_results);

  // Creates the coroutine of fn as a member (not yet queued in the scheduler). Returns its
  // control block with the scheduler's and the scope's references.
  template <class Result, class Function>
  detail::result_holder<Result>* make_member(Function&& fn, scheduler& owner,
                                             spawn_options& options,
                                             const std::source_location& spawned_at,
                                             member*& record);
  // The scope the calling coroutine belongs to, or null.
  static scope* of_calling_coroutine() noexcept;
  // The checks of every spawn: running scheduler, same thread, scope open.
  scheduler& admit_spawn();
  [[noreturn]] void throw_closed() const;
  // std::logic_error from a thread other than the one running the scope's coroutines.
  void refuse_other_thread(const char* operation) const;
  // std::logic_error if the calling coroutine belongs to this scope or a descendant.
  void refuse_own_coroutine(const char* operation) const;
  void cancel_members(const std::string& reason);
  // Cancels (unless already closed: then only re-cancels) and waits for everything to end and
  // every caller inside to leave; for destructors.
  void cancel_and_wait_for_all(const std::string& reason) noexcept;
  void wake_joiners() noexcept { joiners_.grant_all(0); }
  // Offers a failure to the parent; true when the parent took it (it then counts as observed).
  bool propagate_to_parent(const std::exception_ptr& error) noexcept;

  // Callers inside a waiting call (join, next, a blocked spawn): the destructor waits for them
  // to leave.
  class visit {
   public:
    explicit visit(scope& visited) noexcept : visited_(visited) { ++visited_.visitors_; }
    visit(const visit&) = delete;
    visit& operator=(const visit&) = delete;
    ~visit() {
      if (--visited_.visitors_ == 0 && visited_.destroying_) {
        visited_.wake_joiners();
      }
    }

   private:
    scope& visited_;
  };

  std::size_t live_ = 0;

 private:
  template <class Function, class Result>
  friend class detail::scope_body;

  // Hooks for task_group.
  virtual void on_closed() noexcept {}
  virtual void on_member_finished(member&) noexcept {}
  virtual bool takes_child_failures() const noexcept { return !errors_are_results_; }
  // Whether its own failure goes to its parent at once (weft::iterate's scope rethrows it to its
  // caller instead).
  virtual bool hands_failures_to_parent() const noexcept { return true; }

  void link_to_parent(scope* parent);
  member& adopt(detail::coroutine& coroutine);
  void member_finished(member& record, const std::exception_ptr& handler_error) noexcept;
  void member_failed(std::exception_ptr error) noexcept;
  void deliver(std::exception_ptr error) noexcept;
  void fail(std::exception_ptr error) noexcept;
  void close_tree(const std::string& reason) noexcept;
  void retire(detail::coroutine& failed);
  void release_retired() noexcept;
  static void describe(const void* self, std::string& out);
  // Done once closed with nothing left alive: runs the finally handlers.
  void finish_if_done() noexcept;
  void run_finally() noexcept;
  void close_owned() noexcept;
  scope_info snapshot() const;
  static std::uint64_t next_id() noexcept;
  friend class detail::scope_link;

  struct child_link : detail::list_node {
    scope* self = nullptr;
  };

  std::string name_;
  std::uint64_t id_ = next_id();
  scope* parent_ = nullptr;
  child_link in_parent_{};
  detail::intrusive_list children_;
  detail::intrusive_list members_;
  std::size_t live_in_tree_ = 0;
  std::size_t visitors_ = 0;
  scheduler* scheduler_ = nullptr;
  bool errors_are_results_ = false;
  bool closed_ = false;
  bool destroying_ = false;
  bool error_observed_ = false;
  bool done_ = false;
  std::string close_reason_;
  std::exception_ptr error_;
  exception_handler handler_;
  std::vector<std::function<void()>> finally_;
  detail::intrusive_list owned_;  // scope_links of the resources it closes (channels)
  // Errors this scope already got from failed child scopes: the same error escaping the
  // coroutine that owned the child is not delivered twice. The last few are enough.
  std::vector<std::exception_ptr> taken_from_children_;
  detail::waiter_queue joiners_{this, &scope::describe};
  // Failed members the scope took the error of: their last reference is dropped by a microtask,
  // after the scheduler has finished them (it reports a failed coroutine held only by itself).
  std::vector<detail::coroutine*> retired_;
  microtask_handle retire_task_;
  bool retire_scheduled_ = false;
  scope_stats counts_{};
};

namespace detail {

template <class Function, class Result>
Result scope_body<Function, Result>::operator()() {
  try {
    if constexpr (std::is_void_v<Result>) {
      function_();
    } else {
      return function_();
    }
  } catch (const cancelled_error&) {
    throw;
  } catch (...) {
    owner_->member_failed(std::current_exception());
    throw;
  }
}

}  // namespace detail

template <class Result, class Function>
detail::result_holder<Result>* scope::make_member(Function&& fn, scheduler& owner,
                                                  spawn_options& options,
                                                  const std::source_location& spawned_at,
                                                  member*& record) {
  using body = detail::scope_body<std::decay_t<Function>, Result>;
  using block = detail::coroutine_impl<body, Result>;
  std::decay_t<Function> function(std::forward<Function>(fn));
  block* coroutine = block::create(body(std::move(function), *this), owner, std::move(options.name),
                                   options.priority, spawned_at);
  coroutine->set_background(options.background);
  if (options.stack_at_spawn) {
    detail::set_stack_aside(owner, *coroutine);
  }
  try {
    record = &adopt(*coroutine);
  } catch (...) {
    detail::drop_stack_set_aside(owner, *coroutine);
    coroutine->release();  // the only reference: nobody saw it yet
    throw;
  }
  return coroutine;
}

template <class Function>
auto scope::spawn(Function&& fn, spawn_options options, std::source_location spawned_at)
    -> task<std::invoke_result_t<std::decay_t<Function>&>> {
  using result = std::invoke_result_t<std::decay_t<Function>&>;
  scheduler& owner = admit_spawn();
  member* record = nullptr;
  detail::result_holder<result>* coroutine =
      make_member<result>(std::forward<Function>(fn), owner, options, spawned_at, record);
  coroutine->add_ref();  // the task's reference
  task<result> handle = detail::adopt_task(coroutine);
  detail::enqueue_coroutine(owner, *coroutine);
  return handle;
}

}  // namespace weft

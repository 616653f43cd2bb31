// weft::scope: see include/weft/sync/scope.hpp for the contract.
//
// Bookkeeping. Each member coroutine has a small record (from the control-block allocator)
// linked in the scope's member list, and a finish handler that unlinks it when the coroutine
// ends, however it ends (a coroutine cancelled before it started never runs its body, so the
// body cannot do this). Every scope counts the live coroutines of its whole subtree, so join()
// is one comparison and the end of the last coroutine wakes the joiners of every scope it
// emptied.
//
// References. The scope holds a reference to each member until the member ends. For a failed
// member whose error the scope took (handler or scope failure), that reference is dropped by a
// microtask instead, after the scheduler has finished the coroutine: the scheduler reports a
// failed coroutine held by nobody but itself as uncaught, and this error was not.
#include "weft/sync/scope.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>

#include "weft/sched/this_coroutine.hpp"

namespace weft {
namespace {

// Errors remembered from child scopes, to deliver each error to a scope once.
constexpr std::size_t remembered_child_errors = 16;

std::string label(const std::string& name) {
  return name.empty() ? std::string("scope") : "scope '" + name + "'";
}

// The coroutine making this call, or null. A microtask or reactor callback runs inside the tick
// of whichever coroutine is giving up the CPU (then not in state running): that one is not the
// caller, and must not be made to wait.
detail::coroutine* calling_coroutine() noexcept {
  scheduler* running = current_scheduler_or_null();
  detail::coroutine* current = running != nullptr ? detail::running_coroutine(*running) : nullptr;
  return current != nullptr && current->state() == detail::coroutine_state::running ? current
                                                                                    : nullptr;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// construction and destruction

scope::scope(std::string name) : name_(std::move(name)) { link_to_parent(of_calling_coroutine()); }

scope::scope(scope& parent, std::string name) : name_(std::move(name)) { link_to_parent(&parent); }

scope::scope(detached_scope_t, std::string name) : name_(std::move(name)) {}

scope::scope(scope* parent, std::string name, bool errors_are_results)
    : name_(std::move(name)), errors_are_results_(errors_are_results) {
  link_to_parent(parent);
}

scope::~scope() {
  cancel_and_wait_for_all(label(name_) + " destroyed");
  if (retire_scheduled_) {
    retire_task_.cancel();
    retire_scheduled_ = false;
  }
  release_retired();
  if (!closed_) {
    closed_ = true;  // destroyed empty: nothing was cancelled, but it is over all the same
    close_reason_ = label(name_) + " destroyed";
  }
  close_owned();
  finish_if_done();
  while (detail::list_node* node = children_.pop_front()) {
    static_cast<child_link*>(node)->self->parent_ = nullptr;  // it outlives us: now a root
  }
  if (parent_ != nullptr) {
    detail::intrusive_list::remove(in_parent_);
  }
  if (error_ && !error_observed_) {
    // Nobody joined it and no parent took the failure: it must not vanish.
    if (scheduler* running = current_scheduler_or_null()) {
      running->report_uncaught(error_);
    } else {
      std::fprintf(stderr, "weft: %s failed and nobody joined it: %s\n", label(name_).c_str(),
                   detail::what_of(error_).c_str());
    }
  }
}

std::uint64_t scope::next_id() noexcept {
  // Process-wide so that ids stay unique across schedulers; read once per scope.
  static std::atomic<std::uint64_t> counter{0};
  return counter.fetch_add(1, std::memory_order_relaxed) + 1;
}

void scope::link_to_parent(scope* parent) {
  if (parent == nullptr) {
    return;
  }
  parent_ = parent;
  in_parent_.self = this;
  parent->children_.push_back(in_parent_);
  if (parent->closed_) {
    closed_ = true;  // born into a cancelled subtree
    close_reason_ = parent->close_reason_;
  }
}

scope* scope::of_calling_coroutine() noexcept {
  detail::coroutine* self = calling_coroutine();
  return self != nullptr ? self->owning_scope() : nullptr;
}

void scope::cancel_and_wait_for_all(const std::string& reason) noexcept {
  destroying_ = true;
  if (live_in_tree_ == 0 && visitors_ == 0) {
    return;
  }
  close_tree(reason);
  detail::coroutine* self = calling_coroutine();
  if (self == nullptr) {
    std::fprintf(stderr,
                 "weft: %s destroyed outside a coroutine while %zu of its coroutines are still "
                 "alive; join() it, or let it end, inside weft::run\n",
                 label(name_).c_str(), live_in_tree_);
    std::abort();
  }
  for (scope* owner = self->owning_scope(); owner != nullptr; owner = owner->parent_) {
    if (owner == this) {
      std::fprintf(stderr,
                   "weft: %s destroyed by one of its own coroutines, which would wait for "
                   "itself forever; destroy it from the coroutine that owns it\n",
                   label(name_).c_str());
      std::abort();
    }
  }
  // Uninterruptible: the coroutines still reference this scope. Only a deadlock cancellation
  // gets through protect; it also cancels what we wait for, so waiting again ends.
  bool cancelled_meanwhile = false;
  std::string cancel_reason;
  while (live_in_tree_ > 0 || visitors_ > 0) {
    try {
      weft::protect([&] {
        detail::queued_waiter waiter(joiners_);
        joiners_.wait(waiter, timeout::never());
      });
    } catch (const cancelled_error& cancel) {
      cancelled_meanwhile = true;
      cancel_reason = cancel.reason();
    } catch (...) {
      std::fprintf(stderr, "weft: %s: unexpected failure while waiting for its coroutines\n",
                   label(name_).c_str());
      std::abort();
    }
  }
  if (cancelled_meanwhile) {
    detail::cancel_coroutine(self->owner(), *self,
                             std::move(cancel_reason));  // raised at its next suspension
  }
}

// ---------------------------------------------------------------------------------------------
// members

scheduler& scope::admit_spawn() {
  scheduler& owner = current_scheduler();
  refuse_other_thread("spawn");
  scheduler_ = &owner;
  if (closed_) {
    throw_closed();
  }
  return owner;
}

void scope::throw_closed() const {
  const char* why = destroying_ ? "it is being destroyed"
                    : error_    ? "it failed"
                                : "it was cancelled";
  throw scope_closed_error("weft: cannot spawn into " + label(name_) + ": " + why + " (" +
                               close_reason_ + "); spawn into an open scope",
                           close_reason_);
}

scope::member& scope::adopt(detail::coroutine& coroutine) {
  void* memory = detail::allocate_block(sizeof(member));
  member* record = ::new (memory) member();
  record->coroutine = &coroutine;
  record->owner = this;
  coroutine.set_finish_hook(
      [](detail::coroutine&, void* context, const std::exception_ptr& handler_error) noexcept {
        auto& finished = *static_cast<member*>(context);
        finished.owner->member_finished(finished, handler_error);
      },
      record);
  coroutine.set_owning_scope(this);
  coroutine.add_ref();
  members_.push_back(*record);
  ++live_;
  ++counts_.spawned;
  for (scope* each = this; each != nullptr; each = each->parent_) {
    ++each->live_in_tree_;
  }
  return *record;
}

void scope::member_finished(member& record, const std::exception_ptr& handler_error) noexcept {
  detail::coroutine& coroutine = *record.coroutine;
  if (handler_error) {
    // Its finish handlers failed: a failure of the coroutine, delivered while it still counts
    // as live (a failing scope then closes before anyone sees it empty).
    member_failed(handler_error);
  }
  detail::intrusive_list::remove(record);
  --live_;
  const bool failed = coroutine.error() && !coroutine.was_cancelled();
  if (!coroutine.error()) {
    ++counts_.succeeded;
  } else if (failed) {
    ++counts_.failed;
  } else {
    ++counts_.cancelled;
  }
  on_member_finished(record);
  record.~member();
  detail::deallocate_block(&record, sizeof(member));
  for (scope* each = this; each != nullptr; each = each->parent_) {
    if (--each->live_in_tree_ == 0) {
      each->wake_joiners();
      each->finish_if_done();
    }
  }
  if (failed && !errors_are_results_) {
    coroutine.observe_error();  // the scope took it
    retire(coroutine);
  } else {
    coroutine.release();
  }
}

void scope::retire(detail::coroutine& failed) {
  retired_.push_back(&failed);
  if (!retire_scheduled_) {
    retire_scheduled_ = true;
    retire_task_ = failed.owner().add_microtask([this] {
      retire_scheduled_ = false;
      release_retired();
    });
  }
}

void scope::release_retired() noexcept {
  std::vector<detail::coroutine*> done;
  done.swap(retired_);
  for (detail::coroutine* coroutine : done) {
    coroutine->release();
  }
}

void scope::cancel_members(const std::string& reason) {
  members_.for_each([&](detail::list_node& node) {
    detail::coroutine& coroutine = *static_cast<member&>(node).coroutine;
    detail::cancel_coroutine(coroutine.owner(), coroutine, reason);
  });
}

// ---------------------------------------------------------------------------------------------
// cancellation and failure

void scope::cancel(std::string reason) {
  refuse_other_thread("cancel");
  close_tree(reason);
}

void scope::close_tree(const std::string& reason) noexcept {
  if (!closed_) {
    closed_ = true;
    close_reason_ = reason;
  }
  close_owned();
  cancel_members(reason);
  children_.for_each(
      [&](detail::list_node& node) { static_cast<child_link&>(node).self->close_tree(reason); });
  on_closed();
  finish_if_done();
}

void scope::close_owned() noexcept {
  // Unlinked as they are closed: a closed scope has nothing more to do with them.
  while (detail::list_node* node = owned_.pop_front()) {
    auto& link = static_cast<detail::scope_link&>(*node);
    link.owner_ = nullptr;
    link.on_close_(link.context_, close_reason_);
  }
}

void scope::finish_if_done() noexcept {
  if (!done_ && closed_ && live_in_tree_ == 0) {
    done_ = true;
    run_finally();
  }
}

void scope::run_finally() noexcept {
  std::vector<std::function<void()>> handlers;
  handlers.swap(finally_);
  for (auto& handler : handlers) {
    try {
      handler();
    } catch (...) {
      deliver(std::current_exception());
    }
  }
}

void scope::on_finally(std::function<void()> fn) {
  if (!fn) {
    throw std::invalid_argument("weft: " + label(name_) +
                                ": on_finally needs a callable handler, got an empty one");
  }
  refuse_other_thread("on_finally");
  finish_if_done();  // born closed under a closed parent, say: done without ever running anything
  if (done_) {
    fn();
    return;
  }
  finally_.push_back(std::move(fn));
}

void scope::member_failed(std::exception_ptr error) noexcept {
  if (errors_are_results_ || error == error_) {
    return;
  }
  for (auto it = taken_from_children_.begin(); it != taken_from_children_.end(); ++it) {
    if (*it == error) {
      taken_from_children_.erase(it);  // the owner of a failed child let its error escape
      return;
    }
  }
  deliver(std::move(error));
}

void scope::deliver(std::exception_ptr error) noexcept {
  if (handler_) {
    exception_handler handler = handler_;  // it may replace itself while running
    try {
      handler(error);
      return;
    } catch (...) {
      error = std::current_exception();
    }
  }
  fail(std::move(error));
}

void scope::fail(std::exception_ptr error) noexcept {
  if (error_) {
    return;  // the first error stands; everything is being cancelled already
  }
  error_ = error;
  close_tree(label(name_) + " failed: " + detail::what_of(error));
  if (propagate_to_parent(error)) {
    error_observed_ = true;
  }
}

bool scope::propagate_to_parent(const std::exception_ptr& error) noexcept {
  if (parent_ == nullptr || !hands_failures_to_parent() || !parent_->takes_child_failures()) {
    return false;
  }
  std::vector<std::exception_ptr>& taken = parent_->taken_from_children_;
  if (taken.size() >= remembered_child_errors) {
    taken.erase(taken.begin());
  }
  taken.push_back(error);
  parent_->deliver(error);
  return true;
}

void scope::set_exception_handler(exception_handler handler) { handler_ = std::move(handler); }

// ---------------------------------------------------------------------------------------------
// waiting and reading

void scope::refuse_other_thread(const char* operation) const {
  if (scheduler_ != nullptr && live_in_tree_ > 0 && current_scheduler_or_null() != scheduler_) {
    throw std::logic_error(std::string("weft: ") + operation + " on " + label(name_) +
                           " from a thread other than the one running its coroutines; a scope "
                           "belongs to one scheduler");
  }
}

void scope::refuse_own_coroutine(const char* operation) const {
  for (const scope* owner = of_calling_coroutine(); owner != nullptr; owner = owner->parent_) {
    if (owner == this) {
      throw std::logic_error(std::string("weft: ") + operation + " on " + label(name_) +
                             " from one of its own coroutines (or one of a scope nested in "
                             "it): it would wait for itself forever; call it from the "
                             "coroutine that owns the scope");
    }
  }
}

void scope::join() { join(timeout::never()); }

void scope::join(const timeout& limit) {
  refuse_other_thread("join");
  refuse_own_coroutine("join");
  if (live_in_tree_ > 0) {
    visit inside(*this);
    while (live_in_tree_ > 0) {
      detail::queued_waiter waiter(joiners_);
      joiners_.wait(waiter, limit);
    }
  }
  if (error_) {
    error_observed_ = true;
    std::rethrow_exception(error_);
  }
}

void scope::join_or_cancel(const timeout& limit, std::string reason) {
  refuse_other_thread("join_or_cancel");
  refuse_own_coroutine("join_or_cancel");
  std::string timed_out;
  if (live_in_tree_ > 0) {
    visit inside(*this);
    try {
      while (live_in_tree_ > 0) {
        detail::queued_waiter waiter(joiners_);
        joiners_.wait(waiter, limit);
      }
    } catch (const timeout_error&) {
      timed_out = detail::timed_out_after(limit);  // no waiting inside the handler
    }
  }
  if (!timed_out.empty()) {
    const std::size_t cancelled = live_in_tree_;
    close_tree(reason.empty() ? label(name_) + " not done within the time limit (join_or_cancel " +
                                    timed_out + ")"
                              : reason);
    join();  // the cleanup of what was cancelled; rethrows a failure
    throw timeout_error("weft: " + label(name_) + " join_or_cancel " + timed_out + ": " +
                        std::to_string(cancelled) +
                        " coroutines were still alive; they were cancelled and have ended");
  }
  if (error_) {
    error_observed_ = true;
    std::rethrow_exception(error_);
  }
}

std::exception_ptr scope::error() noexcept {
  if (error_) {
    error_observed_ = true;
  }
  return error_;
}

scope_stats scope::stats() const noexcept {
  scope_stats result = counts_;
  result.live = live_;
  result.live_in_tree = live_in_tree_;
  return result;
}

scope_info scope::snapshot() const {
  scope_info info;
  info.id = id_;
  info.name = name_;
  info.live = live_;
  info.live_in_tree = live_in_tree_;
  info.closed = closed_;
  info.close_reason = close_reason_;
  info.children = children();
  return info;
}

std::vector<scope_info> scope::children() const {
  std::vector<scope_info> result;
  children_.for_each([&](detail::list_node& node) {
    result.push_back(static_cast<child_link&>(node).self->snapshot());
  });
  return result;
}

scope* scope::current() noexcept {
  scope* owner = of_calling_coroutine();
  return owner != nullptr && !owner->errors_are_results_ ? owner : nullptr;
}

void scope::describe(const void* self, std::string& out) {
  const scope& described = *static_cast<const scope*>(self);
  out +=
      label(described.name_) + " (" + std::to_string(described.live_in_tree_) + " live coroutines)";
}

// ---------------------------------------------------------------------------------------------
// resources tied to a scope

namespace detail {

void scope_link::attach(weft::scope& owner) {
  if (owner_ != nullptr) {
    throw std::logic_error("weft: this object is already tied to " + label(owner_->name_));
  }
  owner.refuse_other_thread("channel_options::owner");
  if (owner.closed_) {
    on_close_(context_, owner.close_reason_);  // born into a closed scope: closed at once
    return;
  }
  owner_ = &owner;
  owner.owned_.push_back(*this);
}

void scope_link::detach() noexcept {
  if (owner_ != nullptr) {
    intrusive_list::remove(*this);
    owner_ = nullptr;
  }
}

}  // namespace detail
}  // namespace weft

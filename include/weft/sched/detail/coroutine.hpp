// The coroutine control block and the wait-source protocol, shared by every layer that
// suspends coroutines. Not part of the user-facing API (that is task.hpp / this_coroutine.hpp),
// but public because task<T> and the layers above build on it.
//
// Ownership: a control block is reference counted (not atomically: it belongs to its scheduler's
// thread). The scheduler holds one reference from spawn until the coroutine finishes; each
// task<T> handle holds one. The block outlives the coroutine's stack, so a finished task keeps
// its result without keeping its stack.
//
// Wait sources: a suspending coroutine first declares what can wake it (one or more
// wait_source objects living on its own stack), then suspends. Sources are armed only at
// suspend; a source that has already fired (a finished task, an elapsed deadline) makes arm()
// return false and the coroutine does not suspend at all. When a source fires it calls
// scheduler::wake(waiter, source); the first wake wins, later ones are ignored, and every armed
// source is disarmed before the coroutine continues.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <new>
#include <source_location>
#include <string>
#include <vector>

#include "weft/context/detail/execution_context.hpp"
#include "weft/context/stack.hpp"
#include "weft/detail/blocks.hpp"

namespace weft {

class scheduler;
class scope;

enum class priority : std::uint8_t { normal, high };

namespace detail {

class coroutine;

enum class coroutine_state : std::uint8_t {
  created,    // spawned, never ran (lazy spawn); has no stack yet
  ready,      // in the run queue
  running,    // the current coroutine of its scheduler
  suspended,  // waiting on its wait sources
  finished,   // result or exception settled; stack released
};

class wait_source {
 public:
  // Starts waiting on behalf of waiter. Returns false when the event has already happened; the
  // waiter then does not suspend and this source counts as the one that fired.
  virtual bool arm(coroutine& waiter) = 0;
  // Stops waiting. Called exactly once for every source whose arm() returned true, after the
  // waiter was woken by any source (or cancelled). Must not throw.
  virtual void disarm() noexcept = 0;
  // Appends what this source waits on, for the deadlock report ("task 7 'reader'").
  virtual void describe(std::string& out) const = 0;

 protected:
  ~wait_source() = default;
};

// Intrusive list link used by waiter lists (a coroutine's awaiters, a timer's sleepers, ...).
struct list_node {
  list_node* prev = nullptr;
  list_node* next = nullptr;
  bool linked() const noexcept { return prev != nullptr; }
};

// Circular intrusive list with a sentinel; O(1) push/remove, FIFO iteration.
class intrusive_list {
 public:
  intrusive_list() noexcept { head_.prev = head_.next = &head_; }
  intrusive_list(const intrusive_list&) = delete;
  intrusive_list& operator=(const intrusive_list&) = delete;

  bool empty() const noexcept { return head_.next == &head_; }
  list_node* front() const noexcept { return empty() ? nullptr : head_.next; }

  void push_back(list_node& node) noexcept {
    node.prev = head_.prev;
    node.next = &head_;
    head_.prev->next = &node;
    head_.prev = &node;
  }
  static void remove(list_node& node) noexcept {
    node.prev->next = node.next;
    node.next->prev = node.prev;
    node.prev = node.next = nullptr;
  }
  list_node* pop_front() noexcept {
    list_node* node = front();
    if (node != nullptr) {
      remove(*node);
    }
    return node;
  }
  template <class Function>
  void for_each(Function&& function) const {
    for (list_node* node = head_.next; node != &head_; node = node->next) {
      function(*node);
    }
  }

 private:
  list_node head_;
};

// on_finish given an empty handler: std::invalid_argument.
[[noreturn]] void throw_empty_finish_handler();

struct switch_handlers {
  std::vector<std::function<bool()>> enter;
  std::vector<std::function<bool()>> leave;
  std::vector<std::function<bool()>> finish;
};

class coroutine {
 public:
  coroutine(scheduler& owner, std::string&& name, weft::priority priority,
            const std::source_location& spawned_at) noexcept;
  coroutine(const coroutine&) = delete;
  coroutine& operator=(const coroutine&) = delete;

  std::uint64_t id() const noexcept { return id_; }
  const std::string& name() const noexcept { return name_; }
  coroutine_state state() const noexcept { return state_; }
  bool done() const noexcept { return state_ == coroutine_state::finished; }
  scheduler& owner() const noexcept { return *owner_; }
  const std::source_location& spawned_at() const noexcept { return spawned_at_; }
  // The exception the coroutine ended with (cancelled_error for a cancelled one), or null.
  const std::exception_ptr& error() const noexcept { return error_; }
  bool was_cancelled() const noexcept { return cancelled_; }
  bool is_main() const noexcept { return is_main_; }
  bool background() const noexcept { return background_; }
  void set_background(bool background) noexcept { background_ = background; }
  // The stack it runs on (empty before it starts and after it ends).
  const detail::stack& stack() const noexcept { return stack_; }

  void add_ref() noexcept { ++refs_; }
  void release() noexcept {
    if (--refs_ == 0) {
      release_last();
    }
  }

  // Marks the stored exception as seen by somebody (so dropping the last handle does not
  // report it as uncaught).
  void observe_error() noexcept { error_observed_ = true; }

  switch_handlers& handlers();

  bool cancel_requested() const noexcept { return cancel_pending_; }
  void enter_protected() noexcept { ++protect_depth_; }
  void leave_protected() noexcept { --protect_depth_; }

  // The weft::scope (or task_group) this coroutine was spawned into, or null: a scope made inside
  // the coroutine defaults to being its child, and joining it from inside is refused.
  weft::scope* owning_scope() const noexcept { return owning_scope_; }
  void set_owning_scope(weft::scope* owner) noexcept { owning_scope_ = owner; }

  // One hook for the layer that owns the coroutine (a weft::scope), run when it finishes, after
  // its finish handlers. Unlike a switch handler it allocates nothing and costs nothing on the
  // coroutine's switches (a coroutine with handlers takes the scheduler's slower switch path).
  // handler_error is what the finish handlers threw (one error, or all_failed_error holding
  // several), null when none did: the owner treats it as a failure of the coroutine (its own
  // failure already reached the owner when it left the body).
  using finish_hook = void (*)(coroutine& finished, void* context,
                               const std::exception_ptr& handler_error) noexcept;
  void set_finish_hook(finish_hook hook, void* context) noexcept {
    finish_hook_ = hook;
    finish_context_ = context;
  }

  // What the coroutine reads first when it runs, for a coroutine that starts on memory gone
  // cold (a server's connection, resumed after thousands of others): the scheduler prefetches
  // its first prefetch_hint_bytes while the coroutine before this one runs, as it prefetches
  // the stack of a suspended one (scheduler_core::prefetch_successors). Null: nothing.
  static constexpr std::size_t prefetch_hint_bytes = 384;
  void set_prefetch_hint(const void* first) noexcept { prefetch_hint_ = first; }
  // How many like objects alive (coroutines, a worker's connections) make theirs go cold between
  // two runs: about 3 KB of stack and 1 KB of state each against a core's 512 KB to 1 MB of L2.
  // The scheduler prefetches stacks from this many coroutines on, and a hint is worth setting
  // from this many objects on.
  static constexpr std::size_t prefetch_worth_from = 256;

 protected:
  virtual ~coroutine();
  // Runs the body and stores its result or exception in the derived block.
  virtual void run_body() noexcept = 0;
  // Destroys and deallocates this block.
  virtual void destroy() noexcept = 0;
  // release() of the last reference: reports an exception nobody looked at, then destroys.
  void release_last() noexcept;
  void fail(std::exception_ptr error) noexcept { error_ = std::move(error); }

 private:
  friend class weft::scheduler;
  friend class scheduler_core;

  // Hot fields first: the switch path touches these. Default-initialised, not `{}`: its saved
  // registers are written before they are read (prepare() at the first start, the resume hook
  // slot at every switch), and zeroing all nine cost every spawn a 112-byte `rep stos` (about
  // 90 instructions by callgrind); the constructor clears the one slot read earlier.
  execution_context context_;
  scheduler* owner_;
  coroutine_state state_ = coroutine_state::created;
  weft::priority priority_;
  bool cancel_pending_ = false;
  bool cancel_forced_ = false;  // deadlock cancellation: delivered even inside protect
  bool cancelled_ = false;
  bool error_observed_ = false;
  bool is_main_ = false;
  bool background_ = false;
  // 16 bits, so that stack_promised_ fits beside it and prefetch_hint_ stays in the first three
  // lines (a wider block moved it to byte 192: a miss per resumed connection at 1000
  // connections, +0.07 us of user time per request). 65,535 nested weft::protect scopes would
  // need a deeper stack than any coroutine has.
  std::uint16_t protect_depth_ = 0;
  bool stack_promised_ = false;  // spawn_options::stack_at_spawn: the pool holds one for it
  std::uint32_t refs_ = 1;       // the scheduler's reference
  switch_handlers* handlers_ = nullptr;
  wait_source* woken_by_ = nullptr;
  wait_source* const* waiting_on_ = nullptr;  // armed sources while suspended (deadlock report)
  std::size_t waiting_count_ = 0;
  wait_source* parked_on_ = nullptr;  // the one source of a park() (waiting_on_ points here)
  // In the block's first three lines, which the scheduler prefetches a tick before it reads
  // this once prefetch_worth_from coroutines are alive (set_prefetch_hint).
  const void* prefetch_hint_ = nullptr;
  detail::stack stack_{};
  std::uint64_t id_ = 0;
  struct live_link : list_node {
    coroutine* self = nullptr;
  };
  live_link live_link_;      // in the scheduler's list of unfinished coroutines
  intrusive_list awaiters_;  // task_wait sources waiting for this coroutine to finish
  std::exception_ptr error_;
  std::string name_;
  std::string cancel_reason_;
  std::source_location spawned_at_;
  weft::scope* owning_scope_ = nullptr;
  finish_hook finish_hook_ = nullptr;
  void* finish_context_ = nullptr;
};

template <class T>
class result_holder : public coroutine {
 public:
  using coroutine::coroutine;
  T& value() noexcept { return *std::launder(reinterpret_cast<T*>(storage_)); }

 protected:
  ~result_holder() override {
    if (has_value_) {
      value().~T();
    }
  }
  template <class Function>
  void invoke_and_store(Function& function) {
    ::new (static_cast<void*>(storage_)) T(function());
    has_value_ = true;
  }

 private:
  alignas(T) unsigned char storage_[sizeof(T)];
  bool has_value_ = false;
};

// A coroutine returning a reference settles on the referred object (which must outlive the
// task's use of it, as for any returned reference).
template <class T>
class result_holder<T&> : public coroutine {
 public:
  using coroutine::coroutine;
  T& value() noexcept { return *value_; }

 protected:
  template <class Function>
  void invoke_and_store(Function& function) {
    value_ = &function();
  }

 private:
  T* value_ = nullptr;
};

template <>
class result_holder<void> : public coroutine {
 public:
  using coroutine::coroutine;

 protected:
  template <class Function>
  void invoke_and_store(Function& function) {
    function();
  }
};

template <class Function, class T>
class coroutine_impl final : public result_holder<T> {
 public:
  template <class F>
  coroutine_impl(F&& function, scheduler& owner, std::string&& name, weft::priority priority,
                 const std::source_location& spawned_at)
      : result_holder<T>(owner, std::move(name), priority, spawned_at),
        function_(std::forward<F>(function)) {}

  static coroutine_impl* create(Function&& function, scheduler& owner, std::string&& name,
                                weft::priority priority, const std::source_location& spawned_at) {
    void* memory = allocate_block(sizeof(coroutine_impl));
    try {
      return ::new (memory)
          coroutine_impl(std::move(function), owner, std::move(name), priority, spawned_at);
    } catch (...) {
      deallocate_block(memory, sizeof(coroutine_impl));
      throw;
    }
  }

 private:
  void run_body() noexcept override {
    try {
      this->invoke_and_store(function_);
    } catch (...) {
      this->fail(std::current_exception());
    }
  }
  void destroy() noexcept override {
    this->~coroutine_impl();
    deallocate_block(this, sizeof(coroutine_impl));
  }

  Function function_;
};

}  // namespace detail
}  // namespace weft

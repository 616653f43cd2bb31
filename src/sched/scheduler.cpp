// The one-switch scheduler. See include/weft/sched/scheduler.hpp for the contract.
//
// The tick (pick_next) runs inline on the stack of whoever gives up the CPU: the suspending
// coroutine, a coroutine that just finished, or the thread's own stack at the start of run().
// It runs due microtasks, polls the reactor when a poll is due (or blocks in it when nothing is
// runnable), detects deadlock, and returns the coroutine to run next; the caller then jumps
// straight there. A finished coroutine whose successor has never run starts it on its own,
// still-warm stack by looping in coroutine_loop(): no switch at all.
#include "sched/scheduler_core.hpp"

#include <pthread.h>

#if defined(WEFT_SANITIZE_ADDRESS)
#include <sanitizer/asan_interface.h>
#endif
#if defined(WEFT_SANITIZE_THREAD)
#include <sanitizer/tsan_interface.h>
#endif

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#include "weft/error.hpp"

namespace weft {
namespace detail {
namespace {

std::uint64_t seed_from_environment() {
  const char* text = std::getenv("WEFT_SEED");
  if (text == nullptr || *text == '\0') {
    return 1;
  }
  char* end = nullptr;
  unsigned long long value = std::strtoull(text, &end, 10);
  if (*end != '\0') {
    throw std::invalid_argument(std::string("weft: WEFT_SEED must be a decimal number, got '") +
                                text + "'");
  }
  return value;
}

scheduling_order order_from_environment() {
  const char* text = std::getenv("WEFT_SCHED");
  if (text == nullptr || *text == '\0' || std::strcmp(text, "fifo") == 0) {
    return scheduling_order::fifo;
  }
  if (std::strcmp(text, "random") == 0) {
    return scheduling_order::random;
  }
  throw std::invalid_argument(std::string("weft: WEFT_SCHED must be 'fifo' or 'random', got '") +
                              text + "'");
}

void thread_stack_bounds(execution_context& root) {
  pthread_attr_t attributes;
  if (pthread_getattr_np(pthread_self(), &attributes) == 0) {
    void* bottom = nullptr;
    std::size_t size = 0;
    pthread_attr_getstack(&attributes, &bottom, &size);
    root.stack_bottom = bottom;
    root.stack_size = size;
    pthread_attr_destroy(&attributes);
  }
}

}  // namespace

constinit __attribute__((tls_model("initial-exec"))) thread_local scheduler_core* this_thread_core =
    nullptr;

// ---------------------------------------------------------------------------------------------
// construction

scheduler_core::scheduler_core(scheduler& owner, const run_options& options)
    : owner_(owner),
      options_(options),
      stacks_(options.stacks),
      reactor_(make_driver(options.driver)),
      poll_interval_(options.reactor_poll_interval) {
  stats_.driver = reactor_->name();
  chaos_ = options.order.value_or(order_from_environment()) == scheduling_order::random;
  slow_tick_ = chaos_;
  random_state_ = options.seed.has_value() ? *options.seed : seed_from_environment();
  random_state_ = random_state_ * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
  // Reading the clock costs ~20 ns; on the hot path it is read only every poll_stride_ ticks.
  poll_stride_ = poll_interval_ <= std::chrono::steady_clock::duration::zero() ? 1 : 256;
  poll_countdown_ = poll_stride_;
  last_poll_ = std::chrono::steady_clock::now();
  thread_stack_bounds(root_);
#if defined(WEFT_SANITIZE_THREAD)
  root_.tsan_fiber = __tsan_get_current_fiber();
#endif
}

scheduler_core::~scheduler_core() {
  // Microtasks nobody ran still owe their cleanup.
  for (auto& pending : microtasks_) {
    pending->finish();
  }
}

// ---------------------------------------------------------------------------------------------
// spawning, starting and finishing

void scheduler_core::enqueue_new(coroutine& fresh) {
  fresh.id_ = next_id_++;
  fresh.live_link_.self = &fresh;
  live_.push_back(fresh.live_link_);
  ++stats_.spawned;
  ++stats_.live_coroutines;
  if (!fresh.background_) {
    ++foreground_live_;
  }
  if (stats_.live_coroutines > stats_.max_live_coroutines) {
    stats_.max_live_coroutines = stats_.live_coroutines;
  }
  fresh.state_ = coroutine_state::created;
  push_ready(fresh);
}

void scheduler_core::give_stack(coroutine& starting, const stack& on) noexcept {
#if defined(WEFT_SANITIZE_ADDRESS)
  // Frames abandoned on a reused stack (the finished coroutine's last tick) leave poison behind.
  ASAN_UNPOISON_MEMORY_REGION(on.base, on.size);
#endif
  starting.stack_ = on;
  starting.context_.stack_bottom = on.base;
  starting.context_.stack_size = on.size;
  starting.context_.tsan_fiber = on.tsan_fiber;
}

bool scheduler_core::take_stack(coroutine& never_ran) noexcept {
  if (never_ran.stack_promised_) {
    never_ran.stack_promised_ = false;
    give_stack(never_ran, stacks_.acquire_reserved());
    return true;
  }
  try {
    give_stack(never_ran, stacks_.acquire());
    return true;
  } catch (...) {
    // The body never runs: the coroutine ends with the pool's error as if its first statement
    // had thrown it (its captures are destroyed here, on the switcher's stack).
    never_ran.fail(std::current_exception());
  }
  ++stats_.start_failures;
  finish(never_ran);
  return false;
}

void scheduler_core::yield_general() { yield(); }

coroutine* scheduler_core::start_first(coroutine* next) {
  while (next != nullptr && next->state_ == coroutine_state::created) {
    if (take_stack(*next)) {
      start_fresh(*next);
      return next;
    }
    next = pick_next();
  }
  return next;
}

void scheduler_core::start_fresh(coroutine& next) noexcept {
  ++stats_.started;
  prepare<&coroutine_entry>(next.context_, next.stack_.top(), next.stack_.size);
}

void scheduler_core::run_leave_handlers(coroutine& self) noexcept {
  run_handlers(self.handlers_->leave);
}

void scheduler_core::run_enter_handlers(coroutine& self) noexcept {
  run_handlers(self.handlers_->enter);
}

void scheduler_core::coroutine_entry() {
  land();
  this_thread_core->coroutine_loop();
}

[[gnu::hot]] void scheduler_core::coroutine_loop() {
  for (;;) {
    coroutine& self = *current_;
    execute(self);
    stack own = self.stack_;
    self.stack_ = {};
    finish(self);  // may free the control block
    coroutine* next = pick_next();
    if (next != nullptr && next->state_ == coroutine_state::created) {
      // Start the successor right here: this stack is warm and nobody else can use it. The
      // pool's promise to one spawned with stack_at_spawn is dropped.
      drop_stack_set_aside(*next);
      give_stack(*next, own);
      ++stats_.started;
      next->context_.fake_stack = nullptr;
      next->state_ = coroutine_state::running;
      current_ = next;
      ++stats_.started_in_place;
      continue;
    }
    // Leave this stack for good. Releasing it first is safe: the memory stays mapped, and no
    // other coroutine can take it before we have jumped away (this thread is the only user).
    stacks_.release(own);
    if (next == nullptr) {
      current_ = nullptr;
      jump(nullptr, root_);
    } else {
      switch_to(nullptr, *next);
    }
    std::abort();  // unreachable: nobody resumes an abandoned stack
  }
}

[[gnu::hot]] void scheduler_core::execute(coroutine& self) noexcept {
  if (self.handlers_ != nullptr) {
    run_handlers(self.handlers_->enter);
  }
  if (self.is_main_) {
    try {
      for (const auto& hook : options_.on_main_start) {
        hook();
      }
    } catch (...) {
      self.fail(std::current_exception());
      return;
    }
  }
  self.run_body();
}

void scheduler_core::finish(coroutine& self) noexcept {
  self.state_ = coroutine_state::finished;
  self.cancel_pending_ = false;
  // Finish handlers first: what they throw is part of the coroutine's outcome, so it must be
  // settled before the scope, the awaiters and the uncaught-error check below look at it.
  std::exception_ptr handler_error;
  if (self.handlers_ != nullptr && !self.handlers_->finish.empty()) {
    handler_error = run_finish_handlers(self);
  }
  if (self.error_ && is_cancellation(self.error_)) {
    self.cancelled_ = true;
    ++stats_.cancelled;
  }
  if (self.finish_hook_ != nullptr) {
    self.finish_hook_(self, self.finish_context_, handler_error);
  }
  intrusive_list::remove(self.live_link_);
  --stats_.live_coroutines;
  ++stats_.finished;
  if (!self.background_ && --foreground_live_ == 0 && stats_.live_coroutines > 0) {
    // Only background coroutines are left: they do not keep the run going.
    live_.for_each([this](list_node& node) {
      cancel(*static_cast<coroutine::live_link&>(node).self,
             "run ending: every foreground coroutine has ended");
    });
  }
  while (list_node* node = self.awaiters_.pop_front()) {
    task_wait& waiting = *static_cast<task_wait::link*>(node)->wait;
    wake(*waiting.waiter_, &waiting);
  }
  if (self.error_ && !self.cancelled_ && (self.is_main_ || self.refs_ == 1)) {
    // Main's exception ends run(); a detached coroutine's has nobody else to go to.
    self.error_observed_ = true;
    report_uncaught(self.error_);
  }
  self.release();
}

std::exception_ptr scheduler_core::run_finish_handlers(coroutine& self) noexcept {
  // Taken out of the block: each runs once, and one registering another finish handler on this
  // (already finished) coroutine has it run at once rather than growing the vector being walked.
  std::vector<std::function<bool()>> handlers;
  handlers.swap(self.handlers_->finish);
  std::vector<std::exception_ptr> raised;
  for (auto& handler : handlers) {
    try {
      handler();  // its result does not matter: a finish handler runs once anyway
    } catch (...) {
      raised.push_back(std::current_exception());
    }
  }
  if (raised.empty()) {
    return nullptr;
  }
  auto describe = [&self](std::size_t count, const char* from) {
    std::string message = "weft: coroutine " + std::to_string(self.id_);
    if (!self.name_.empty()) {
      message += " '" + self.name_ + "'";
    }
    return message + " ended with " + std::to_string(count) + " errors (" + from + ")";
  };
  auto combine = [](std::string message, std::vector<std::exception_ptr> errors) {
    message += "; the first: " + what_of(errors.front());
    std::vector<std::size_t> order(errors.size());
    for (std::size_t index = 0; index < order.size(); ++index) {
      order[index] = index;
    }
    try {
      throw all_failed_error(message, std::move(errors), std::move(order));
    } catch (...) {
      return std::current_exception();
    }
  };
  // The outcome: its own failure (a cancellation is not one) and then each handler's error.
  std::vector<std::exception_ptr> outcome;
  if (self.error_ && !is_cancellation(self.error_)) {
    outcome.push_back(self.error_);
  }
  outcome.insert(outcome.end(), raised.begin(), raised.end());
  std::exception_ptr handler_error =
      raised.size() == 1
          ? raised.front()
          : combine(describe(raised.size(), "thrown by its finish handlers"), raised);
  if (outcome.size() == 1) {
    self.error_ = outcome.front();
  } else if (outcome.size() == raised.size()) {
    self.error_ = handler_error;
  } else {
    self.error_ =
        combine(describe(outcome.size(), "its own, then its finish handlers'"), std::move(outcome));
  }
  return handler_error;
}

void scheduler_core::finish_unstarted(coroutine& never_ran) noexcept {
  try {
    throw cancelled_error(never_ran.cancel_reason_);
  } catch (...) {
    never_ran.fail(std::current_exception());
  }
  drop_stack_set_aside(never_ran);  // one promised at spawn (stack_at_spawn)
  ++stats_.never_started;
  finish(never_ran);
}

// ---------------------------------------------------------------------------------------------
// the tick

[[gnu::hot]] coroutine* scheduler_core::pick_next_slow() {
  for (;;) {
    poll_if_due();
    if (!microtasks_.empty()) {
      run_microtasks();
      if (!microtasks_.empty()) {
        continue;  // a failed microtask stopped the batch: the rest still run before a switch
      }
    }
    coroutine* next = chaos_ ? queue_.pop_random(next_random()) : queue_.pop();
    if (next != nullptr) {
      if (next->state_ == coroutine_state::created && next->cancel_pending_) {
        finish_unstarted(*next);
        continue;
      }
      return next;
    }
    if (!microtasks_.empty()) {
      continue;
    }
    if (stats_.live_coroutines == 0) {
      return nullptr;
    }
    reactor_->settle_extensions();
    if (reactor_->alive()) {
      ++stats_.reactor_waits;
      reactor_->poll(true);
      last_poll_ = std::chrono::steady_clock::now();
      batch_end_ = queue_.normal().pushed();
      continue;
    }
    handle_deadlock();
  }
}

[[gnu::hot]] void scheduler_core::poll_if_due() {
  if (--poll_countdown_ != 0) {
    return;
  }
  poll_countdown_ = poll_stride_;
  auto now = std::chrono::steady_clock::now();
  const auto since = now - last_poll_;
  if (since < poll_interval_) {
    return;
  }
  // A level-triggered driver (libuv's epoll, libev's, poll(2)) reports again every fd whose
  // coroutine was woken by the last poll and has not run yet, so a poll in the middle of a
  // batch of woken coroutines redoes, in the kernel, the readiness checks of all those still
  // queued (1000 connections: ~1 us of system time per request, a sixth of the request, in
  // ep_send_events, sock_poll and the ready list's bookkeeping; bench_net_weft echo). A due
  // poll therefore waits until that batch has run (a coroutine that yields goes behind the
  // batch, so a busy loop does not hold it back), but no longer than batch_wait_factor
  // intervals since the last poll: timers and new events are still noticed on a thread
  // with thousands of coroutines ready at once.
  constexpr int batch_wait_factor = 4;
  const bool batch_ran = static_cast<std::ptrdiff_t>(queue_.normal().popped() - batch_end_) >= 0;
  if (!batch_ran && since < poll_interval_ * batch_wait_factor) {
    return;
  }
  last_poll_ = now;
  ++stats_.reactor_polls;
  reactor_->poll(false);
  batch_end_ = queue_.normal().pushed();
}

void scheduler_core::run_microtasks() {
  while (!microtasks_.empty()) {
    std::shared_ptr<microtask_handle::state> task = std::move(microtasks_.front());
    microtasks_.pop_front();
    if (!task->cancelled) {
      ++stats_.microtasks_run;
      try {
        task->handler();
      } catch (...) {
        task->finish();
        report_uncaught(std::current_exception());
        return;  // the rest of the batch runs at the next tick
      }
    }
    task->finish();
  }
  slow_tick_ = chaos_;
}

std::uint64_t scheduler_core::next_random() noexcept {
  // xorshift64*: cheap and good enough to shuffle the run queue.
  random_state_ ^= random_state_ >> 12;
  random_state_ ^= random_state_ << 25;
  random_state_ ^= random_state_ >> 27;
  return random_state_ * 0x2545F4914F6CDD1Dull;
}

// ---------------------------------------------------------------------------------------------
// suspending and waking

wait_source& scheduler_core::wait(wait_source* const* sources, std::size_t count) {
  return wait_as(waiter_or_throw("a weft wait"), sources, count);
}

[[gnu::hot]] wait_source& scheduler_core::wait_as(coroutine& self, wait_source* const* sources,
                                                  std::size_t count) {
  check_cancel(self);
  std::size_t armed = 0;
  wait_source* fired = nullptr;
  for (; armed < count; ++armed) {
    if (!sources[armed]->arm(self)) {
      fired = sources[armed];
      break;
    }
  }
  if (fired == nullptr) {
    self.state_ = coroutine_state::suspended;
    self.woken_by_ = nullptr;
    self.waiting_on_ = sources;
    self.waiting_count_ = count;
    ++suspended_;
    suspend_current(self);
    self.waiting_on_ = nullptr;
    self.waiting_count_ = 0;
    fired = self.woken_by_;
  }
  for (std::size_t index = 0; index < armed; ++index) {
    sources[index]->disarm();
  }
  check_cancel(self);
  return *fired;
}

void scheduler_core::cancel(coroutine& target, std::string reason, bool forced) {
  if (target.state_ == coroutine_state::finished) {
    return;
  }
  if (!target.cancel_pending_) {
    target.cancel_pending_ = true;
    target.cancel_reason_ = std::move(reason);
  }
  target.cancel_forced_ = target.cancel_forced_ || forced;
  if (target.state_ == coroutine_state::suspended &&
      (target.protect_depth_ == 0 || target.cancel_forced_)) {
    wake(target, nullptr);
  }
}

void scheduler_core::raise_cancel(coroutine& self) {
  self.cancel_pending_ = false;
  self.cancel_forced_ = false;
  throw cancelled_error(std::move(self.cancel_reason_));
}

[[gnu::hot]] coroutine& scheduler_core::current_or_throw(const char* operation) const {
  if (current_ == nullptr) {
    throw std::logic_error(std::string(operation) +
                           " called outside a coroutine; call it from weft::run's main or from "
                           "a coroutine started with weft::spawn");
  }
  return *current_;
}

[[gnu::hot]] coroutine& scheduler_core::waiter_or_throw(const char* operation) const {
  coroutine& self = current_or_throw(operation);
  if (self.state_ != coroutine_state::running) {
    // A microtask or reactor callback runs inside the tick of the coroutine giving up the CPU
    // (then ready, suspended or finished), as do its leave and finish handlers: waiting there
    // would suspend that coroutine a second time, from the middle of its own switch.
    throw std::logic_error(std::string(operation) +
                           " called from a microtask, a reactor callback or a switch handler, "
                           "which run inside the scheduler's tick and cannot wait; spawn a "
                           "coroutine for the part that waits");
  }
  return self;
}

bool scheduler_core::run_handlers(std::vector<std::function<bool()>>& handlers) noexcept {
  for (std::size_t index = 0; index < handlers.size();) {
    bool keep = true;
    try {
      keep = handlers[index]();
    } catch (...) {
      report_uncaught(std::current_exception());
    }
    if (keep) {
      ++index;
    } else {
      handlers.erase(handlers.begin() + static_cast<std::ptrdiff_t>(index));
    }
  }
  return true;
}

}  // namespace detail
}  // namespace weft

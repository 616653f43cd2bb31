// The scheduler's machinery (the public face is weft::scheduler). One per running scheduler,
// created by run() and destroyed when it returns. Everything here runs on the scheduler's
// thread; the hot path is yield/wait -> pick_next -> switch_to.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <string>

#include "context/stack_pool.hpp"
#include "context/switch.hpp"
#include "sched/driver.hpp"
#include "sched/run_queue.hpp"
#include "weft/sched/detail/coroutine.hpp"
#include "weft/sched/scheduler.hpp"
#include "weft/sched/timeout.hpp"

namespace weft {

struct microtask_handle::state {
  detail::unique_function<void()> handler;
  detail::unique_function<void()> cleanup;
  bool cancelled = false;
  bool finished = false;

  void finish() noexcept;
};

namespace detail {

class scheduler_core {
 public:
  scheduler_core(scheduler& owner, const run_options& options);
  ~scheduler_core();

  // Runs from the thread's own stack until every coroutine has ended.
  void run_from_root();
  // After run_from_root: closes the reactor and throws what run() must throw.
  void close_and_report();

  void enqueue_new(coroutine& fresh);
  // spawn_options::stack_at_spawn: has the pool set a stack aside for fresh (made, not yet
  // queued); throws the pool's std::system_error when none can be had.
  void set_stack_aside(coroutine& fresh) {
    stacks_.reserve();
    fresh.stack_promised_ = true;
  }
  void drop_stack_set_aside(coroutine& fresh) noexcept {
    if (fresh.stack_promised_) {
      stacks_.unreserve();
      fresh.stack_promised_ = false;
    }
  }
  wait_source& wait(wait_source* const* sources, std::size_t count);
  // wait() for a caller that already has self from waiter_or_throw (the running coroutine,
  // in a state that may wait), without checking it again.
  wait_source& wait_as(coroutine& self, wait_source* const* sources, std::size_t count);
  // Makes a suspended coroutine ready; the first wake of a suspension wins. Inline: every
  // hand-off (a channel send, an unlock) ends here.
  void wake(coroutine& sleeper, wait_source* by) noexcept {
    if (sleeper.state_ != coroutine_state::suspended) {
      return;
    }
    sleeper.state_ = coroutine_state::ready;
    sleeper.woken_by_ = by;
    --suspended_;
    push_ready(sleeper);
  }
  // Lets every other ready coroutine run once. Inline with everything it calls on the common
  // path, so that a yield is one function around the switch: call depth is what makes a
  // switch expensive (see switch_x86_64.S).
  __attribute__((always_inline)) void yield() {
    if (current_ == nullptr || current_->state_ != coroutine_state::running) [[unlikely]] {
      waiter_or_throw("weft::yield");
    }
    coroutine& self = *current_;
    check_cancel(self);
    self.state_ = coroutine_state::ready;
    push_ready(self);
    return switch_away(self);
  }

  // The end of yield() and park(): gives the CPU to the next ready coroutine (self is already
  // queued or waiting). With the tail call to the switch, self resumes directly in the caller of
  // the function this is inlined into, and after_resume() (enter handlers, a pending cancel) runs
  // as the switch's resume hook only when the switcher saw it was needed.
  __attribute__((always_inline)) void switch_away(coroutine& self) {
#if defined(WEFT_TAIL_SWITCH)
    // Never null: self is alive. It is self when the tick made it ready again (a microtask or a
    // reactor callback that woke or cancelled it) before anyone else was.
    coroutine* next = with_stack(pick_next());
    if (next == &self) [[unlikely]] {
      self.state_ = coroutine_state::running;
      check_cancel(self);
      return;
    }
    if (self.handlers_ != nullptr) {
      run_leave_handlers(self);
    }
    self.context_.resumes_through_hook = true;
    prepare_switch(*next);
    before_jump(&self.context_, next->context_);
    return weft_switch_context(self.context_.registers, next->context_.registers);
#else
    suspend_current(self);
    check_cancel(self);
#endif
  }

#if defined(WEFT_TAIL_SWITCH) && !defined(WEFT_SANITIZE_THREAD)
  // The yield of a busy scheduler in steady state: a normal-priority coroutine hands the CPU to
  // the next ready one, which has run before, with no microtask queued, no reactor poll due,
  // no switch handler and no pending cancel. It calls nothing but (tail-)calls, so the compiler
  // needs no callee-saved register, hence no push before and no pop after: on Zen each pop on a
  // freshly switched stack costs a store-forwarding miss (see switch_x86_64.S). Anything else
  // goes to yield().
  __attribute__((always_inline)) void yield_fast() {
    coroutine* self = current_;
    if (self == nullptr || self->state_ != coroutine_state::running || self->cancel_pending_ ||
        self->handlers_ != nullptr || slow_tick_ || poll_countdown_ <= 1 ||
        self->priority_ != weft::priority::normal || !queue_.high_empty()) [[unlikely]] {
      return yield_general();
    }
    pointer_ring<coroutine>& ready = queue_.normal();
    if (ready.empty()) {
      --poll_countdown_;
      return;  // nothing else is ready: keep running, no switch
    }
    coroutine* next = ready.front();
    if (next->state_ == coroutine_state::created) [[unlikely]] {
      return yield_general();
    }
    --poll_countdown_;
    ready.rotate(self);
    self->state_ = coroutine_state::ready;
    self->context_.resumes_through_hook = true;
    next->state_ = coroutine_state::running;
    current_ = next;
    ++stats_.switches;
    next->context_.registers[8] =
        next->context_.resumes_through_hook && (next->handlers_ != nullptr || next->cancel_pending_)
            ? reinterpret_cast<void*>(&weft_resume_hook)
            : nullptr;
    return weft_switch_context(self->context_.registers, next->context_.registers);
  }
#else
  void yield_fast() { yield_general(); }
#endif
  // yield() out of line, for the fast path's slow cases.
  void yield_general();

  // wait() for a single source that the caller has already armed, with no deadline: the hand-off
  // path of every waiter_queue (a channel recv, a contended lock). It skips wait()'s generic
  // arm/disarm loops and ends in a tail call to the switch, like yield(), so the coroutine
  // resumes directly in park's caller: the resume hook runs the enter handlers and raises a
  // pending cancellation there. Returns normally only when woken by source; a cancel raises
  // cancelled_error with source still armed, and the caller disarms it while unwinding.
  __attribute__((always_inline)) void park(coroutine& self, wait_source& source) {
    self.state_ = coroutine_state::suspended;
    self.parked_on_ = &source;
    self.waiting_on_ = &self.parked_on_;
    self.waiting_count_ = 1;
    ++suspended_;
    return switch_away(self);
  }

  // What a coroutine does when it resumes from a yield: its enter handlers, then a pending
  // cancellation.
  void after_resume(coroutine& self) {
    if (self.handlers_ != nullptr) {
      run_enter_handlers(self);
    }
    check_cancel(self);
  }

  void cancel(coroutine& target, std::string reason, bool forced = false);
  void graceful_shutdown();
  void report_uncaught(std::exception_ptr error) noexcept;
  microtask_handle add_microtask(unique_function<void()> fn, unique_function<void()> cleanup);

  void await_finished(coroutine& target);
  void await_finished(coroutine& target, const timeout& limit);

  coroutine* current() const noexcept { return current_; }
  coroutine& current_or_throw(const char* operation) const;
  // current_or_throw for a call that suspends: also refuses the tick's callbacks (microtasks,
  // reactor callbacks, leave and finish handlers), which run while no coroutine is running.
  coroutine& waiter_or_throw(const char* operation) const;
  detail::driver& driver() noexcept { return *reactor_; }
  // Polls the reactor now, without blocking, as a due poll would (counted in stats(); the next
  // due poll is an interval from now): for a coroutine that expects an event right away, such
  // as the event loop after a tick whose fd callbacks wrote to another watched fd. From a
  // running coroutine; what the poll wakes runs after it yields.
  void poll_reactor_now() {
    // last_poll_ is left as it is: the periodic poll may then come once more than needed
    // within poll_interval_, which costs less than a clock reading at every call (a busy event
    // loop calls this once per tick).
    ++stats_.reactor_polls;
    reactor_->poll(false);
  }
  // Whether a coroutine or a microtask is ready to run: a driver that ran callbacks on its way
  // to a blocking wait asks, and returns instead of blocking when they made something ready.
  bool has_ready_work() const noexcept { return !queue_.empty() || !microtasks_.empty(); }
  bool shutting_down() const noexcept { return shutting_down_; }
  // When the reactor was last polled (at a blocking poll or a due one): weft::loop_time().
  std::chrono::steady_clock::time_point last_poll() const noexcept { return last_poll_; }
  const scheduler_stats& stats() noexcept;
  scheduler& owner() noexcept { return owner_; }

  // Raises a pending cancellation at a suspension point (unless deferred by protect).
  void check_cancel(coroutine& self) {
    if (self.cancel_pending_ && (self.protect_depth_ == 0 || self.cancel_forced_)) {
      raise_cancel(self);
    }
  }

  // Waiting for a coroutine's end: linked into the target's awaiters list while armed. Public so
  // that the await combinators (src/sync/await.cpp) can wait on several tasks at once.
  class task_wait final : public wait_source {
   public:
    explicit task_wait(coroutine& target) : target_(target) {}
    bool arm(coroutine& waiter) override;
    void disarm() noexcept override;
    void describe(std::string& out) const override;

    struct link : list_node {
      task_wait* wait = nullptr;
    };
    coroutine* waiter_ = nullptr;
    link link_{};

   private:
    coroutine& target_;
  };

 private:
  coroutine& awaiter_for(coroutine& target);

  [[noreturn]] static void coroutine_entry();
  [[noreturn]] void coroutine_loop();
  [[noreturn]] void raise_cancel(coroutine& self);

  // The tick. The inline part is the common case of a busy scheduler (no microtask queued, no
  // reactor poll due, FIFO order): pop the next ready coroutine. Everything else is the slow
  // path.
  __attribute__((always_inline)) coroutine* pick_next() {
    if (!slow_tick_ && poll_countdown_ > 1) {
      coroutine* next = queue_.pop();
      if (next != nullptr && !(next->cancel_pending_ && next->state_ == coroutine_state::created)) {
        --poll_countdown_;
        if (next->state_ != coroutine_state::created || next->prefetch_hint_ != nullptr) {
          prefetch_successors();  // a server's case; not a burst of fresh spawns
        }
        return next;
      }
      if (next != nullptr) {
        finish_unstarted(*next);
      }
    }
    return pick_next_slow();
  }
  coroutine* pick_next_slow();

  // With many connections, a coroutine resumed after a reactor poll has nothing of its own in
  // the cache: its control block, then the stack lines it resumes on, are misses taken one
  // after the other on the switch path (perf on 1000 keep-alive connections: most of
  // scheduler_core::wait's own time). The run queue says who comes next, so while the current
  // coroutine runs (microseconds) the memory of the next ones is fetched: the stack of the
  // coroutine after next, from a little below its saved stack pointer (the frames its resumed
  // wait calls before returning) up to its top (the frames it returns through; 3 KB at most),
  // its control block having been prefetched one tick
  // earlier so that reading the saved pointer is a hit, and the control block of the one
  // after that. Measured at 1000 connections (bench_net_weft echo, bench_http_weft hello):
  // the servers' user time per request fell by a quarter to a third; spawn_run_complete and
  // yield_switch (suite core) are unchanged.
  // Prefetches never fault; a wrong guess (a wake in between, chaos order, a coroutine that
  // never ran) only costs the fetch.
  // With few coroutines alive their hot stacks and blocks stay in the cache between runs, and
  // the fetch loop (up to 52 prefetches) is pure cost: at 64 connections it was a tenth of the
  // echo server's own instructions per request (callgrind). So it runs only once more
  // coroutines are alive than a core's L2 holds the working sets of (about 3 KB of stack and
  // 1 KB of state each against 512 KB to 1 MB: coroutine::prefetch_worth_from coroutines).
  __attribute__((always_inline)) void prefetch_successors() const noexcept {
    constexpr std::ptrdiff_t most = 3072;  // bytes of stack, at most, fetched per switch
    constexpr std::ptrdiff_t below = 256;  // ... and below the saved stack pointer
    const coroutine* soon = queue_.peek(0);
    if (soon == nullptr) {
      return;
    }
    // A hint is its setter's judgement that the memory is cold (a resumed hibernating
    // connection: there are hundreds of connections but only the woken few alive as
    // coroutines), so it is fetched whatever the count.
    // Both fetch loops are unrolled: their add, compare and branch were three quarters of their
    // instructions (callgrind, echo at 1000 connections, per message: 78 around the stack's 25
    // prefetches, 18 around the hint's 6). The hint's loop is unrolled whole.
    static_assert(coroutine::prefetch_hint_bytes / 64 <= 8, "the hint's unroll count is 8");
    if (const auto* hint = static_cast<const char*>(soon->prefetch_hint_)) {
#pragma GCC unroll 8
      for (std::size_t at = 0; at < coroutine::prefetch_hint_bytes; at += 64) {
        __builtin_prefetch(hint + at);
      }
    }
    if (stats_.live_coroutines < coroutine::prefetch_worth_from) {
      return;
    }
    // Null until the coroutine first runs (a prefetch of an unmapped address is no fault, but
    // it costs a page walk).
    if (const auto* resume = static_cast<const char*>(soon->context_.registers[0])) {
      const char* top =
          static_cast<const char*>(soon->context_.stack_bottom) + soon->context_.stack_size;
      const char* end = top - resume < most ? top : resume + most;
      // From just below the saved pointer, where the calls the resumed wait makes before it
      // returns (its sources' disarm) put their frames: written, a cold line there is a
      // read-for-ownership miss that the next pop waits for (perf at 1000 connections: most of
      // fd_wait::disarm's time, on its return). Never below the stack's own memory.
      const char* bottom = static_cast<const char*>(soon->context_.stack_bottom);
      const char* from = resume - bottom > below ? resume - below : bottom;
#pragma GCC unroll 4
      for (const char* line = from; line < end; line += 64) {
        __builtin_prefetch(line);
      }
    }
    if (const coroutine* later = queue_.peek(1)) {
      const char* block = reinterpret_cast<const char*>(later);
      __builtin_prefetch(block);
      __builtin_prefetch(block + 64);
      __builtin_prefetch(block + 128);
    }
  }

  // The pick made ready for a switch: a coroutine that never ran gets a stack of its own (the
  // switcher is alive, so it cannot start on the switcher's, as coroutine_loop's successor
  // does) and its first frame, out of line (start_first). Taking the stack can fail (out of
  // memory, of mappings, of address space): that coroutine then ends unstarted with the error
  // (take_stack) and the pick is made again, so the failure never surfaces in the coroutine
  // that happened to switch, whose wait is half made. The switch path tests the state once,
  // here (prepare_switch no longer does). Null only where pick_next may return null (nothing is
  // left alive).
  __attribute__((always_inline)) coroutine* with_stack(coroutine* next) {
    if (next != nullptr && next->state_ == coroutine_state::created) {
      return start_first(next);
    }
    return next;
  }
  coroutine* start_first(coroutine* next);
  // Gives never_ran a stack from the pool, the one promised to it if any (true), or ends it
  // unstarted with the pool's error (false: its task, scope or group sees the error; a
  // detached one's is uncaught).
  bool take_stack(coroutine& never_ran) noexcept;

  // Gives the CPU to the next ready coroutine (self must already be queued or waiting).
  __attribute__((always_inline)) void suspend_current(coroutine& self) {
    coroutine* next = with_stack(pick_next());
    if (next == &self) {
      self.state_ = coroutine_state::running;
      return;
    }
    if (self.handlers_ != nullptr) {
      run_leave_handlers(self);
    }
    // next is never null here: self is alive, so pick_next cannot conclude the run has ended.
    switch_to(&self.context_, *next);
    if (self.handlers_ != nullptr) {
      run_enter_handlers(self);
    }
  }
  __attribute__((always_inline)) void switch_to(execution_context* from, coroutine& next) {
    if (from != nullptr) {
      from->resumes_through_hook = false;
    }
    prepare_switch(next);
    jump(from, next.context_);
  }
  // Bookkeeping of every switch to next (one that never ran has its stack and first frame by
  // then: with_stack): its state, and whether it must resume through the hook.
  __attribute__((always_inline)) void prepare_switch(coroutine& next) {
    next.state_ = coroutine_state::running;
    current_ = &next;
    ++stats_.switches;
#if defined(WEFT_TAIL_SWITCH)
    next.context_.registers[8] =
        next.context_.resumes_through_hook && (next.handlers_ != nullptr || next.cancel_pending_)
            ? reinterpret_cast<void*>(&weft_resume_hook)
            : nullptr;
#elif defined(WEFT_NATIVE_SWITCH)
    next.context_.registers[8] = nullptr;  // no resume hook without the tail-called yield
#endif
  }
  void start_fresh(coroutine& next) noexcept;
  void run_leave_handlers(coroutine& self) noexcept;
  void run_enter_handlers(coroutine& self) noexcept;
  void give_stack(coroutine& starting, const stack& on) noexcept;
  void execute(coroutine& self) noexcept;
  void finish(coroutine& self) noexcept;
  void finish_unstarted(coroutine& never_ran) noexcept;
  // Runs the finish handlers of a finished coroutine and folds what they threw into its outcome
  // (see task::on_finish); returns the handlers' errors alone (one, or all_failed_error), or null.
  std::exception_ptr run_finish_handlers(coroutine& self) noexcept;
  void run_microtasks();
  void poll_if_due();
  void handle_deadlock();
  std::string deadlock_report(std::size_t waiting) const;
  bool run_handlers(std::vector<std::function<bool()>>& handlers) noexcept;
  void push_ready(coroutine& ready) { queue_.push(&ready, ready.priority_); }
  std::uint64_t next_random() noexcept;

  scheduler& owner_;
  const run_options& options_;
  scheduler_stats stats_{};
  stack_pool stacks_;
  std::unique_ptr<detail::driver> reactor_;
  run_queue queue_;
  std::deque<std::shared_ptr<microtask_handle::state>> microtasks_;
  intrusive_list live_;
  coroutine* current_ = nullptr;
  execution_context root_{};  // the thread's own stack
  std::uint64_t next_id_ = 0;
  std::size_t suspended_ = 0;
  std::size_t foreground_live_ = 0;  // unfinished coroutines that are not background ones

  bool chaos_ = false;
  bool slow_tick_ = false;  // chaos_ or microtasks queued: pick_next must take the slow path
  std::uint64_t random_state_ = 0;

  std::chrono::steady_clock::duration poll_interval_;
  std::chrono::steady_clock::time_point last_poll_{};
  // queue_.normal().pushed() right after the last poll: the coroutines that poll woke (and
  // those queued before them) have all been popped once normal().popped() reaches it.
  std::size_t batch_end_ = 0;
  std::uint32_t poll_stride_ = 1;
  std::uint32_t poll_countdown_ = 1;

  bool shutting_down_ = false;
  std::exception_ptr first_uncaught_;
  bool deadlocked_ = false;
  std::size_t deadlock_waiting_ = 0;
  std::string deadlock_report_;
  std::uint32_t deadlock_rounds_ = 0;
};

// The core running on this thread, or null. initial-exec TLS: it is read on every yield, and the
// general-dynamic model would cost a __tls_get_addr call each time (weft is a static library).
extern constinit
    __attribute__((tls_model("initial-exec"))) thread_local scheduler_core* this_thread_core;
inline scheduler_core* current_core() noexcept { return this_thread_core; }

}  // namespace detail
}  // namespace weft

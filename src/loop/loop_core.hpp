// The event loop's machinery (the public face is weft::loop::event_loop; the rules it keeps are
// written there). One per event_loop, on the loop's thread only.
//
// Layout:
//   - watchers_: every live watcher (callback, kind, reference flag), ids with generations;
//   - timers_: the loop's own heap of (deadline, sequence, slot) nodes with lazy removal, and
//     one driver timer_entry (driver_timer_) armed for the earliest node while the dispatcher is
//     idle;
//   - defers_: ids queued for the next tick;
//   - fds_, signals_: the readiness seams (src/loop/fd_source.hpp: native watches of the
//     driver; signal_source.hpp: weft::signals::wait);
//   - session_: who dispatches right now (run() outside weft, run() in a coroutine, or a
//     coroutine parked in suspension::suspend()), with the gate the dispatcher idles on.
//
// The dispatcher (dispatch.cpp) runs ticks back to back, yielding to the scheduler between
// them, and parks on session_->wakeup when nothing is due; whatever makes work for it (the
// driver timer, an fd watch's report, a signal helper, a registration from another coroutine,
// stop) signals that gate.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "loop/fd_source.hpp"
#include "loop/gate.hpp"
#include "loop/signal_source.hpp"
#include "loop/timer_heap.hpp"
#include "loop/watcher_table.hpp"
#include "sched/scheduler_core.hpp"
#include "weft/detail/timer_entry.hpp"
#include "weft/loop/event_loop.hpp"
#include "weft/loop/suspension.hpp"
#include "weft/reactor/trigger.hpp"

namespace weft::loop::detail {

static_assert(watcher_table::max_slots <= timer_heap::run_flag,
              "a watcher's slot must never look like a run's mark in the timer heap");

using callback = event_loop::callback;
using error_handler = event_loop::error_handler;

// Nanoseconds on the steady clock; the largest value means "never".
constexpr std::int64_t never = std::numeric_limits<std::int64_t>::max();

// How often the loop looks for fds closed under their watchers while it watches any.
constexpr std::int64_t closed_fd_check_interval = 1'000'000'000;

inline std::int64_t clock_now() noexcept {
  static_assert(std::is_same_v<std::chrono::steady_clock::period, std::nano>);
  return std::chrono::steady_clock::now().time_since_epoch().count();
}

// A lower bound of clock_now() that costs a few nanoseconds (CLOCK_MONOTONIC_COARSE: the time
// of the kernel's last tick, on steady_clock's clock), and how far behind it may be: the true
// time lies in [coarse_clock_now(), coarse_clock_now() + coarse_clock_slack()]. Used only to see
// that no timer can be due yet; a timer that might be is checked against clock_now(). Where the
// coarse clock is missing the slack is never, and every check reads the precise clock.
std::int64_t coarse_clock_now() noexcept;
std::int64_t coarse_clock_slack() noexcept;

// now + span, saturated to never.
inline std::int64_t deadline_after(std::int64_t now, std::int64_t span) noexcept {
  std::int64_t sum = 0;
  if (span == never || __builtin_add_overflow(now, span, &sum)) {
    return never;
  }
  return sum;
}

// The address of a thread-local is a cheap identity of the calling thread (what pthread_self()
// amounts to, without the call), and it survives fork() in the forking thread just as
// pthread_self() does: the fork generation, bumped in every child, tells a child from its
// parent. initial-exec: read on every call, where the general-dynamic model of a static library
// built as position-independent code would cost a __tls_get_addr call each time.
extern constinit __attribute__((tls_model("initial-exec"))) thread_local char loop_thread_identity;
extern std::atomic<std::uint64_t> fork_generation;

enum class session_kind : unsigned char {
  standalone,  // run() outside weft: a scheduler of its own, dispatcher in the background
  embedded,    // run() in a coroutine: that coroutine dispatches
  suspension,  // suspend() with nobody dispatching: the suspended coroutine dispatches
};

struct session {
  explicit session(session_kind k) noexcept : kind(k) {}
  session_kind kind;
  weft::detail::coroutine* dispatcher = nullptr;
  gate wakeup{"weft::loop event loop, idle until its next event"};
  suspension_state* until = nullptr;  // suspension: the dispatcher's own suspension
  std::exception_ptr failure;         // standalone: what run() rethrows
  // Made to wake the driver from a blocking wait (see on_driver_timer).
  std::unique_ptr<weft::trigger> nudge;
};

class loop_core final : private readiness_listener {
 public:
  loop_core();
  ~loop_core();
  loop_core(const loop_core&) = delete;
  loop_core& operator=(const loop_core&) = delete;

  // std::logic_error unless called on the loop's thread, in the process that made it.
  void check_thread(const char* operation) const {
    if (owner_ != thread_marker() || fork_generation_ != current_fork_generation()) [[unlikely]] {
      throw_wrong_thread(operation);
    }
  }

  // --- registration (event_loop.cpp) ---
  watcher_id add_timer(std::int64_t nanoseconds, bool repeating, callback&& fn);
  bool remove_timer(watcher_id id, const char* operation);
  std::size_t delete_all_timers();
  std::size_t timer_count() const noexcept { return timer_count_; }
  watcher_id add_fd(int fd, fd_direction direction, callback&& fn, const char* operation);
  bool remove_fd(int fd, fd_direction direction);
  watcher_id add_signal(int signal_number, callback&& fn);
  bool remove_signal(int signal_number);
  watcher_id add_defer(callback&& fn);
  bool remove_defer(watcher_id id);
  bool set_referenced(watcher_id id, bool referenced);
  void set_error_handler(error_handler handler);

  // --- running (dispatch.cpp) ---
  void run();
  void stop();

  // --- suspensions (suspension.cpp) ---
  void link(suspension_state& state) noexcept;
  void unlink(suspension_state& state) noexcept;
  // Whether the loop is dispatched, or about to be by a run() taking over.
  bool dispatching() const noexcept { return session_ != nullptr || takeover_requested_; }
  // Whether coroutine is the dispatcher, inside one of the loop's callbacks.
  bool in_callback_of(const void* coroutine) const noexcept {
    return session_ != nullptr && session_->dispatcher == coroutine && in_callback_ > 0;
  }
  // Dispatches in the calling coroutine until state is resumed (it is suspended and nobody
  // dispatches).
  void dispatch_until(suspension_state& state);

 private:
  struct driver_timer : weft::detail::timer_entry {
    loop_core* owner = nullptr;
  };

  static const void* thread_marker() noexcept { return &loop_thread_identity; }
  static std::uint64_t current_fork_generation() noexcept {
    return fork_generation.load(std::memory_order_relaxed);
  }
  [[noreturn]] void throw_wrong_thread(const char* operation) const;

  // watchers
  std::uint32_t new_watcher(watcher_kind kind, callback&& fn, int target);
  void release(std::uint32_t slot) noexcept;
  void end_running(std::uint32_t slot) noexcept;
  void arm_timer(std::uint32_t slot, watcher& w, std::int64_t deadline);
  // Arms w for w.interval after the next clock reading (see unstarted_).
  void arm_after_call(std::uint32_t slot, watcher& w);
  void start_timers(std::int64_t now);
  void drop_stale_nodes();
  void add_reference();
  void drop_reference() noexcept;
  void compact_if_worth_it();
  void ensure_fd_check();
  void notify() noexcept {
    if (session_ != nullptr && session_->wakeup.parked()) {
      session_->wakeup.signal();
    }
  }

  // readiness_listener
  void readiness_arrived() noexcept override { notify(); }
  void source_failed(std::exception_ptr error) noexcept override;

  // dispatch
  void run_standalone();
  void take_over();
  void run_embedded();
  void dispatcher_main(session& s);
  void keep_alive(session& s);
  void spawn_keeper();
  std::exception_ptr run_session(session& s);
  void begin_session(session& s);
  void end_session(session& s);
  void dispatch(session& s);
  bool session_over(const session& s) const noexcept;
  bool has_work(std::int64_t now);
  void idle(session& s);
  void arm_driver_timer();
  void disarm_driver_timer() noexcept;
  static void on_driver_timer(weft::detail::timer_entry& entry);
  void drop_stale_top() noexcept;

  // the tick (tick.cpp)
  void run_tick(std::int64_t now);
  void run_pending_errors();
  void run_defers();
  void run_timers(std::int64_t now);
  void run_fd_check(std::uint32_t slot, std::int64_t now);
  void run_fds();
  void run_fd(int fd, fd_direction direction);
  void report_dead_fds();
  void run_signals();
  void run_once(std::uint32_t slot);
  void invoke_in_place(std::uint32_t slot);
  void on_callback_error(std::exception_ptr error);

  const void* owner_;
  std::uint64_t fork_generation_;

  watcher_table watchers_;
  timer_heap timers_;
  // Timers armed by delay(), repeat() and the fd check, not yet in the heap: their deadline is
  // w.interval after a clock reading taken after the call, the next one the dispatcher makes
  // (it reads the clock before every tick while timers exist) or, every unstarted_limit timers,
  // one made at once. Why: a clock read costs 20 to 100 ns, as much as the rest of delay()
  // and off_delay() together. Why not libuv's uv_now (the time cached at the start of the
  // tick): a deadline from a time read before the call fires up to a tick early measured from
  // the call; a time read after it can only make the timer late, by at most the time until
  // that reading (the rest of the tick: a timer cannot fire before the next tick anyway), and
  // never early: nothing fires before call time + d.
  struct unstarted_timer {
    std::int64_t interval;  // the watcher's, copied: starting it does not touch the watcher
    std::uint64_t sequence;
    std::uint32_t slot;
  };
  static constexpr std::size_t unstarted_limit = std::size_t{1} << 20;  // 24 MiB
  std::vector<unstarted_timer> unstarted_;
  std::uint64_t next_sequence_ = 1;
  std::size_t stale_nodes_ = 0;
  std::size_t timer_count_ = 0;
  std::size_t referenced_timers_ = 0;
  std::size_t referenced_ = 0;  // live referenced watchers (pending defers included)
  std::uint32_t fd_check_slot_ = watcher_table::no_slot;

  std::vector<watcher_id> defers_;
  std::vector<watcher_id> running_defers_;
  std::vector<std::exception_ptr> pending_errors_;
  fd_source fds_;
  signal_source signals_;

  error_handler handler_;
  bool handler_replaced_ = false;

  session* session_ = nullptr;
  bool stop_requested_ = false;
  bool takeover_requested_ = false;
  gate takeover_gate_{"weft::loop run(), taking the dispatching over from a suspended coroutine"};
  std::uint64_t tick_ = 0;
  int in_callback_ = 0;
  bool fd_callbacks_ran_ = false;  // in the current tick
  driver_timer driver_timer_;

  // standalone run: the foreground coroutine that keeps weft::run going while referenced
  // watchers remain (the dispatcher itself is a background coroutine).
  gate keeper_gate_{"weft::loop run(), keeping the run going while referenced watchers remain"};
  bool keeper_alive_ = false;

  suspension_state* suspensions_ = nullptr;  // live suspensions of this loop
};

}  // namespace weft::loop::detail

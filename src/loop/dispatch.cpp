// Running the loop: the three ways a loop gets dispatched (run() outside weft, run() in a
// coroutine, a coroutine suspended with nobody dispatching), the dispatch loop, idling, and the
// driver timer that wakes an idle dispatcher for the earliest timer.
//
// Nothing here may suspend inside a catch block: the C++ runtime keeps the exceptions being
// handled in a per-thread stack, which a switch to another coroutine that throws and catches
// would corrupt. Errors are captured as exception_ptr, the cleanup that waits runs after the
// catch, and the error is rethrown last.
#include <memory>
#include <stdexcept>
#include <string>

#include "loop/loop_core.hpp"
#include "weft/error.hpp"
#include "weft/sched/scheduler.hpp"
#include "weft/sched/task.hpp"
#include "weft/sched/this_coroutine.hpp"

namespace weft::loop::detail {
namespace {

std::string coroutine_name(const weft::detail::coroutine* coroutine) {
  if (coroutine == nullptr) {
    return "no coroutine";
  }
  std::string text = "coroutine " + std::to_string(coroutine->id());
  if (!coroutine->name().empty()) {
    text += " '" + coroutine->name() + "'";
  }
  return text;
}

}  // namespace

// --- run and stop ------------------------------------------------------------------------------

void loop_core::run() {
  check_thread("run");
  weft::detail::scheduler_core* core = weft::detail::current_core();
  if (session_ != nullptr || takeover_requested_) {
    if (in_callback_ > 0) {
      throw std::logic_error(
          "weft::loop::event_loop::run called from one of the loop's own callbacks; the loop is "
          "already running");
    }
    if (takeover_requested_ || session_->kind != session_kind::suspension) {
      throw std::logic_error(
          "weft::loop::event_loop::run called while the loop is already "
          "being dispatched by " +
          coroutine_name(session_ != nullptr ? session_->dispatcher : nullptr) +
          "; one run() at a time (stop() it first)");
    }
  }
  if (core == nullptr) {
    run_standalone();
    return;
  }
  core->waiter_or_throw("weft::loop::event_loop::run");
  if (session_ != nullptr) {
    take_over();
  }
  run_embedded();
}

// A coroutine suspended in suspend() dispatches the loop while no run() does; run() takes the
// dispatching over: the suspended coroutine ends its session after its current tick and parks.
void loop_core::take_over() {
  takeover_requested_ = true;
  notify();
  std::exception_ptr failure;
  try {
    while (session_ != nullptr) {
      takeover_gate_.wait();
    }
  } catch (...) {
    failure = std::current_exception();
  }
  takeover_requested_ = false;
  if (failure) {
    // Cancelled while waiting: the suspended coroutine may dispatch again.
    for (suspension_state* state = suspensions_; state != nullptr; state = state->next_) {
      if (state->phase_ == suspension_state::phase::suspended) {
        state->wake_to_dispatch();
        break;
      }
    }
    std::rethrow_exception(failure);
  }
}

void loop_core::stop() {
  check_thread("stop");
  if (session_ == nullptr || session_->kind == session_kind::suspension) {
    return;  // documented: stop() ends a run(), and does nothing while none is active
  }
  stop_requested_ = true;
  notify();
}

void loop_core::run_embedded() {
  session s(session_kind::embedded);
  std::exception_ptr failure = run_session(s);
  stop_requested_ = false;
  if (failure) {
    std::rethrow_exception(failure);
  }
}

void loop_core::run_standalone() {
  session s(session_kind::standalone);
  std::exception_ptr scheduler_failure;
  try {
    weft::scheduler scheduler;
    scheduler.run([this, &s] {
      weft::spawn([this, &s] { dispatcher_main(s); },
                  {.name = "weft::loop dispatcher", .background = true});
      keep_alive(s);
    });
  } catch (...) {
    scheduler_failure = std::current_exception();
  }
  stop_requested_ = false;
  keeper_alive_ = false;
  keeper_gate_.close();
  if (s.failure) {
    std::rethrow_exception(s.failure);
  }
  if (scheduler_failure) {
    std::rethrow_exception(scheduler_failure);
  }
}

// The dispatcher of a standalone run: a background coroutine, so that the run ends once the
// keeper (referenced watchers) and every coroutine the callbacks started have ended.
void loop_core::dispatcher_main(session& s) {
  std::exception_ptr failure = run_session(s);
  if (failure && weft::detail::is_cancellation(failure)) {
    return;  // the run is ending (nothing keeps it) or was shut down: nothing to add
  }
  // stop() or a callback error without a handler: end the whole run now.
  s.failure = failure;
  weft::graceful_shutdown();
}

// The keeper: a foreground coroutine parked while the loop has referenced watchers. weft::run
// ends when no foreground coroutine is left, so this is what "referenced" means to a standalone
// run; coroutines spawned by callbacks keep the run (and the background dispatcher) going by
// themselves.
void loop_core::keep_alive(session& s) {
  keeper_alive_ = true;
  try {
    while (!stop_requested_ && referenced_ > 0 && s.failure == nullptr) {
      keeper_gate_.wait();
    }
  } catch (const weft::cancelled_error&) {
    // The run is being shut down (stop(), an error): the keeper has nothing to clean up.
  }
  keeper_alive_ = false;
}

void loop_core::spawn_keeper() {
  session* s = session_;
  keeper_alive_ = true;
  weft::spawn([this, s] { keep_alive(*s); }, {.name = "weft::loop run"});
}

// --- sessions --------------------------------------------------------------------------------

// One dispatch session, begun and always ended, returning what it threw. Not an RAII guard:
// end_session may suspend (it waits for the signal helpers it cancelled), and a destructor
// running during unwinding would then switch coroutines with an exception in flight, which the
// file comment rules out. The caller rethrows once the session is over.
std::exception_ptr loop_core::run_session(session& s) {
  std::exception_ptr failure;
  try {
    begin_session(s);
    dispatch(s);
  } catch (...) {
    failure = std::current_exception();
  }
  end_session(s);
  return failure;
}

void loop_core::begin_session(session& s) {
  s.nudge = std::make_unique<weft::trigger>();
  session_ = &s;
  s.dispatcher = weft::detail::current_core()->current();
  fds_.start(*this);
  signals_.start(*this);
}

void loop_core::end_session(session& s) {
  disarm_driver_timer();
  fds_.stop();
  signals_.stop();
  session_ = nullptr;
  s.nudge.reset();
  if (s.kind == session_kind::standalone) {
    return;  // the scheduler ends with the run: suspended coroutines are cancelled
  }
  if (takeover_requested_) {
    takeover_gate_.signal();  // a run() takes the dispatching over
    return;
  }
  // A coroutine parked in suspend() while this session dispatched takes over, so that the loop
  // keeps being dispatched for it.
  for (suspension_state* state = suspensions_; state != nullptr; state = state->next_) {
    if (state != s.until && state->phase_ == suspension_state::phase::suspended) {
      state->wake_to_dispatch();
      break;
    }
  }
}

void loop_core::dispatch_until(suspension_state& state) {
  session s(session_kind::suspension);
  s.until = &state;
  std::exception_ptr failure = run_session(s);
  if (failure) {
    std::rethrow_exception(failure);
  }
}

// --- the dispatch loop -------------------------------------------------------------------------

bool loop_core::session_over(const session& s) const noexcept {
  switch (s.kind) {
    case session_kind::suspension:
      return s.until->phase_ == suspension_state::phase::resumed || takeover_requested_;
    case session_kind::embedded:
      return stop_requested_ || referenced_ == 0;
    case session_kind::standalone:
      return stop_requested_;  // referenced watchers are the keeper's business
  }
  return true;
}

void loop_core::dispatch(session& s) {
  for (;;) {
    if (session_over(s)) {
      return;
    }
    if (s.kind == session_kind::standalone && referenced_ == 0 && keeper_alive_) {
      keeper_gate_.signal();  // nothing referenced: the keeper may end (it re-checks)
    }
    std::int64_t now = 0;
    if (!unstarted_.empty()) {
      now = clock_now();
      start_timers(now);
    } else if (!timers_.empty()) {
      // A busy loop ticks far more often than its timers come due (the fd check's second, an
      // idle timeout): a coarse reading that shows the earliest deadline still ahead saves the
      // precise one. Any deadline that might have passed is compared with clock_now().
      std::int64_t coarse = coarse_clock_now();
      std::int64_t latest = deadline_after(coarse, coarse_clock_slack());
      now = timers_.top().deadline > latest ? coarse : clock_now();
    }
    if (has_work(now)) {
      fd_callbacks_ran_ = false;
      run_tick(now);
      fds_.settle();
      if (fd_callbacks_ran_ && !fds_.probes_pending()) {
        // Look again at once: a callback's write often readies another watched fd (the two
        // ends of a pipe, a proxy), and a fd still ready runs again in the next tick, as
        // level-triggered readiness does. When the poll finds nothing the dispatcher idles
        // below. (With probes pending the next tick makes a system call anyway, and polls
        // after it.)
        weft::detail::current_core()->poll_reactor_now();
      }
      compact_if_worth_it();
      weft::yield();  // other coroutines, and the reactor when its poll is due
      continue;
    }
    idle(s);
  }
}

bool loop_core::has_work(std::int64_t now) {
  if (!defers_.empty() || !pending_errors_.empty() || fds_.any_ready() || !fds_.dead().empty() ||
      signals_.any_pending()) {
    return true;
  }
  drop_stale_top();
  return !timers_.empty() && timers_.top().deadline <= now;
}

void loop_core::drop_stale_top() noexcept {
  while (!timers_.empty()) {
    const timer_node& top = timers_.top();
    if (watchers_.at(top.slot).armed_sequence == top.sequence) {
      return;
    }
    timers_.pop();
    --stale_nodes_;
  }
}

void loop_core::idle(session& s) {
  fds_.settle();  // registrations made outside a tick (by other coroutines)
  compact_if_worth_it();
  arm_driver_timer();
  weft::detail::wait_source* sources[2] = {&s.wakeup, nullptr};
  std::size_t count = 1;
  if (s.until != nullptr) {
    sources[count++] = static_cast<weft::detail::wait_source*>(s.until->parked_gate());
  }
  weft::detail::current_core()->wait(sources, count);
}

// --- the driver timer --------------------------------------------------------------------------

void loop_core::arm_driver_timer() {
  drop_stale_top();
  if (timers_.empty()) {
    disarm_driver_timer();
    return;
  }
  auto deadline = std::chrono::steady_clock::time_point(
      std::chrono::steady_clock::duration(timers_.top().deadline));
  // Unreferenced timers alone must not keep the scheduler's reactor alive (nor hide a
  // deadlock).
  bool background = referenced_timers_ == 0;
  weft::detail::driver& driver = weft::detail::current_core()->driver();
  if (driver_timer_.queued()) {
    if (driver_timer_.deadline == deadline && driver_timer_.background == background) {
      return;
    }
    driver.remove_timer(driver_timer_);
  }
  driver_timer_.deadline = deadline;
  driver_timer_.background = background;
  driver.add_timer(driver_timer_);
}

void loop_core::disarm_driver_timer() noexcept {
  if (driver_timer_.queued()) {
    weft::detail::current_core()->driver().remove_timer(driver_timer_);
  }
}

void loop_core::on_driver_timer(weft::detail::timer_entry& entry) {
  loop_core& self = *static_cast<driver_timer&>(entry).owner;
  if (self.session_ == nullptr || !self.session_->wakeup.parked()) {
    return;  // the dispatcher is not idle: it looks at the clock before it next parks
  }
  self.session_->wakeup.signal();
  // The driver may be about to block: libuv 1.44 runs the timers already due when a blocking
  // poll starts and then blocks until its next event anyway, so a timer that came due while the
  // scheduler was busy would wake the dispatcher and leave it queued behind a wait of up to
  // hours (or forever, with an fd watched). A trigger notification is an event for the driver:
  // its wait returns at once. One extra wakeup per idle timer wake, none while the loop is busy.
  self.session_->nudge->notify();
}

}  // namespace weft::loop::detail

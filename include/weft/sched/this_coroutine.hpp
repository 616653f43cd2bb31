// Calls a coroutine makes about itself. Every function here must be called from inside a
// coroutine (weft::run's main or a spawned one); elsewhere it throws std::logic_error. The
// suspending ones (yield, sleep_for, sleep_until) are cancellation points: they throw
// cancelled_error when the coroutine was cancelled, unless inside weft::protect.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>

#include "weft/sched/timeout.hpp"

namespace weft {

// The clock of sleeps and deadlines.
using clock = std::chrono::steady_clock;

// Lets every other ready coroutine run once, then continues (FIFO order). Returns at once (no
// switch) when nothing else is ready. In chaos order (WEFT_SCHED=random) the next coroutine is
// picked at random among the ready ones and may be the caller itself.
void yield();

// Sleeps until the deadline (returns after a yield-free check when it has passed). A deadline of
// time_point::max() never comes: the coroutine sleeps until it is cancelled.
void sleep_until(clock::time_point deadline);
// Any duration works: one too long for the clock (duration::max(), hours::max()) saturates to
// "never" instead of overflowing into the past; zero or negative returns at once.
template <class Rep, class Period>
void sleep_for(std::chrono::duration<Rep, Period> duration) {
  sleep_until(detail::saturating_add(clock::now(), detail::saturating_ticks(duration)));
}

namespace detail {
void enter_protected();
void leave_protected() noexcept;
}  // namespace detail

// Runs fn with cancellation deferred: a cancel that arrives meanwhile does not interrupt fn's
// suspensions; it is raised at the first suspension point after fn returns.
template <class Function>
decltype(auto) protect(Function&& fn) {
  detail::enter_protected();
  struct leave {
    ~leave() { detail::leave_protected(); }
  } guard;
  return std::forward<Function>(fn)();
}

namespace this_coroutine {
// id(), name() and is_main(): the calling coroutine's id, its spawn_options::name, and whether it
// is weft::run's main coroutine.
std::uint64_t id();
const std::string& name();
bool is_main();
// True once a cancel is waiting to be raised (e.g. inside protect).
bool cancel_requested();
// Switch handlers for the calling coroutine (see task::on_enter and task::on_finish).
void on_enter(std::function<bool()> handler);
void on_leave(std::function<bool()> handler);
void on_finish(std::function<bool()> handler);
}  // namespace this_coroutine

}  // namespace weft

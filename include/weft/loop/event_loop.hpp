// weft::loop::event_loop: the callback-style event loop (delay, repeat, on_readable, on_signal,
// defer, run, stop) for code written the way libuv, libev, Workerman or Revolt code is, on the
// same thread and the same scheduler as weft's coroutines.
//
// WATCHERS AND IDS. Every registration (delay, repeat, on_readable, on_writable, on_signal,
// defer) creates a watcher and returns its watcher_id. Ids are distinct and never reused in a
// loop's life (a slot's generation is part of the id; a slot whose generation would wrap is
// retired), so a stale id can never name a newer watcher. off_* returns whether it removed
// something: false for an id that already fired, was removed, or names a watcher of another
// kind. off_delay and off_repeat both remove a timer of either kind. There is one callback per
// fd and direction and one per signal number: registering again replaces the watcher (the old
// id stops working, the new one is returned). Callbacks take no arguments; capture what they
// need (an id a callback needs is known before it can first run: see the tick rules).
//
// THE TICK. run() dispatches ticks. A tick runs, in this order: the defers queued before it
// began (FIFO); the timers due at its start, by deadline, equal deadlines in the order they were
// set; the fd callbacks whose fd is ready (readable before writable for one fd); the signal
// callbacks of the signals delivered. A callback created or re-enabled during a tick never runs
// in that same tick (a zero delay, a defer, an fd or signal watcher registered by a callback
// runs in a later tick); removing a watcher takes effect at once (a callback removed by an
// earlier callback of the same tick does not run). Callbacks run one after another on the
// dispatching coroutine: a callback that blocks (a weft::sleep_for, a blocking read) holds the
// loop, as in every event loop; have it weft::spawn a coroutine for the part that waits.
// Between ticks the loop yields to the scheduler, so coroutines run while the loop is busy and
// fd readiness reaches a busy loop within the scheduler's reactor_poll_interval (250 us).
//
// TIMERS. delay(d, fn) runs fn once, d after the call; repeat(i, fn) runs fn every i. Durations
// are double seconds or any std::chrono duration. Nothing fires early: the deadline is d
// (rounded up to the nanosecond) after a clock reading taken after the call, and the driver's
// own timer is rounded up to its resolution. The loop does not read the clock at each call (a
// reading costs as much as the rest of delay()): timers set between two readings start from
// the later one, which the loop takes before its next tick (or after a million such calls).
// So a timer may start up to the rest of the current tick late, never early (libuv's uv_now,
// read at the tick's start, would let it fire early by as much), and timers set together fire
// by duration, equal durations in the order they were set. A one-shot timer leaves timer_count()
// (and its id stops working) just before its callback runs. A repeat is re-armed at the tick's
// start + i once per tick, before its callback runs: after a stall it fires once, not once per
// missed interval, and a zero interval runs it once per tick. Huge durations (1e300 s,
// hours::max(), infinity) saturate to "never": the timer stays registered, never fires, and can be
// removed. Negative or NaN durations are std::invalid_argument naming the value. Timers are kept in
// the loop's own heap with one driver timer for the earliest, and their slots are reused: setting
// one allocates nothing once the loop has grown to its peak.
//
// FDS. on_readable(fd, fn) / on_writable(fd, fn): level-triggered, like poll(2): fn runs in
// every tick that follows a look at the fd that found it ready (do the non-blocking read or
// write; EAGAIN means wait for the next callback). The loop looks through the scheduler's
// driver: one native watch per fd (a uv_poll_t, an ev_io, a libevent event, a pollfd), shared
// with coroutines that weft::wait_readable on the same fd; the driver is polled whenever the
// loop idles, right after a tick that ran fd callbacks, and at least every
// reactor_poll_interval (250 us) while the loop is busy. A direction registered while the loop
// runs is first looked at directly, by one poll(2) in the next tick, and given to the driver
// only if it is still registered after that tick: "register for writable, write, remove" costs
// the driver nothing. A hang-up or error condition counts as ready both ways, so the next read
// or write reports the real error. fd must be open and pollable (a socket, pipe, FIFO, tty,
// eventfd...): a closed fd, a regular file or a directory is std::invalid_argument at once, as
// is one the driver refuses (while the loop runs; otherwise when it next runs, through the
// error handler as below). On the uv driver the fd is made non-blocking (uv_poll_init does).
// Call off_readable/off_writable before closing an fd. An fd closed while a watcher of it is
// still registered is reported, not ignored: within about a second (sooner when the loop next
// touches the fd, and at once on the poll driver) its watchers are removed and the error
// handler gets a weft::io_error "fd N was closed while its readable watcher was registered"
// (see ERRORS for what happens without a handler). Caveat of epoll (the uv, ev and event
// drivers): when the fd had been duplicated (dup, fork) closing it does not end the kernel's
// interest, and while the file stays ready its events can keep waking the driver until every
// copy is closed (no epoll_ctl can remove them once the number is closed); the watchers are
// reported and removed all the same. Only a referenced fd watcher keeps the scheduler's
// driver alive: coroutines all waiting while the loop has only unreferenced fd watchers are
// a deadlock, reported as such.
//
// SIGNALS. on_signal(signo, fn) runs fn on the loop's thread, from a tick, never inside the OS
// signal handler (any code may run there). Deliveries that arrive between two ticks coalesce into
// one call. Signals are caught while the loop is dispatched; from the first on_signal of a run,
// weft keeps catching that signal until the scheduler's run ends (see weft::signals::wait), so a
// delivery that arrives while no callback is registered for it runs the next callback
// registered for it in that run. SIGKILL, SIGSTOP and numbers out of range are
// std::invalid_argument.
//
// DEFER. defer(fn) runs fn once at the start of the next tick.
//
// RUN AND STOP. run() dispatches until stop() is called, or until no referenced watcher is left
// (see REFERENCES):
//   - Called outside weft (no scheduler on this thread), it runs a weft scheduler of its own
//     (weft::run) for the duration of the call. Callbacks may spawn coroutines there and those
//     coroutines may register callbacks: the loop keeps dispatching while coroutines it did
//     not create still run, and run() returns once nothing referenced is left and every such
//     coroutine has ended. stop() makes run() return after the current tick; coroutines still
//     running then are cancelled (their cleanup runs) because the scheduler ends with run().
//   - Called from a weft coroutine, it dispatches in that coroutine and returns to it once
//     stop() was called or nothing referenced is left, whatever the scheduler's other
//     coroutines do: they are the caller's, not the loop's. Watchers they register later run at
//     the next run(), or while a coroutine is in suspension::suspend().
// One run() at a time: run() while another is active (in another coroutine, or from one of the
// loop's own callbacks) is a std::logic_error; a coroutine that dispatches only because it is
// suspended (see suspension.hpp) hands the dispatching over to run() after its current tick.
// stop() finishes the current tick, then
// run() returns; whatever is left (timers, watchers, queued defers) runs at the next run().
// stop() while no run() is active does nothing (a later run() runs normally), and it does not
// end the dispatching a suspended coroutine does for itself.
//
// ERRORS. An exception escaping a callback goes to the error handler (set_error_handler) and the
// loop goes on with the next callback. Without a handler, run() ends at once and throws it; the
// callbacks of the interrupted tick that did not run yet stay pending, and a later run() goes on
// from there. An exception escaping the handler itself ends run() the same way. A
// weft::cancelled_error escaping a callback is not a callback error: it means the dispatching
// coroutine was cancelled, and run() ends with it.
//
// REFERENCES. Every watcher starts referenced: it keeps run() going. unreference(id) lets run()
// return while the watcher is still registered (a periodic flush, a SIGHUP handler);
// reference(id) undoes it. Both return whether id names a live watcher. A pending defer counts
// until it ran.
//
// THREADS AND FORK. An event_loop belongs to the thread that made it; a thread has at most one
// at a time (a second is a std::logic_error). Every member is for that thread only: from another
// thread each throws std::logic_error, and none may be called concurrently. To reach the loop
// from another thread, write to an eventfd or pipe watched with on_readable (or use a
// weft::thread_channel read by a coroutine of the loop's thread). Create loops after fork(): a
// loop made before a fork is unusable in the child (every member throws std::logic_error; it can
// only be destroyed there), while a loop made in the child works normally.
//
// LIFETIME. The loop owns its callbacks and destroys them when their watcher is removed (after
// the callback returns when it removes itself) or when the loop is destroyed. Destroying a loop
// while it is being dispatched aborts the process with a message.
#pragma once

#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <limits>
#include <memory>
#include <ratio>
#include <type_traits>

#include "weft/detail/unique_function.hpp"
#include "weft/loop/suspension.hpp"

namespace weft::loop {

// Names one watcher of one loop; none (0) is never returned.
enum class watcher_id : std::uint64_t { none = 0 };

namespace detail {
// The duration a timer call was given, in nanoseconds rounded up; "never" (the maximum) when it
// is too long for the clock. Negative or NaN: std::invalid_argument naming operation and value.
std::int64_t seconds_to_nanoseconds(double seconds, const char* operation);
[[noreturn]] void throw_negative_duration(const char* operation, double seconds);

template <class Rep, class Period>
std::int64_t nanoseconds_of(std::chrono::duration<Rep, Period> duration, const char* operation) {
  if constexpr (std::is_floating_point_v<Rep>) {
    return seconds_to_nanoseconds(std::chrono::duration<double>(duration).count(), operation);
  } else {
    if (duration < duration.zero()) {
      throw_negative_duration(operation, std::chrono::duration<double>(duration).count());
    }
    if constexpr (std::ratio_less_equal_v<Period, std::nano> && sizeof(Rep) <= 8) {
      return std::chrono::ceil<std::chrono::nanoseconds>(duration).count();  // always fits
    } else {
      const long double exact = std::chrono::duration<long double, std::nano>(duration).count();
      if (exact >= static_cast<long double>(std::numeric_limits<std::int64_t>::max())) {
        return std::numeric_limits<std::int64_t>::max();
      }
      return static_cast<std::int64_t>(std::ceil(exact));
    }
  }
}
}  // namespace detail

class event_loop {
 public:
  // What the loop calls: a callback takes nothing and returns nothing (capture what it needs); the
  // error handler gets what escaped a callback.
  using callback = weft::unique_function<void()>;
  // Receives what escaped a callback (set_error_handler).
  using error_handler = weft::unique_function<void(std::exception_ptr)>;

  event_loop();
  ~event_loop();
  event_loop(const event_loop&) = delete;
  event_loop& operator=(const event_loop&) = delete;

  // --- timers ---
  // Runs fn once, after the delay (see TIMERS); returns the timer's id.
  watcher_id delay(double seconds, callback fn);
  template <class Rep, class Period>
  watcher_id delay(std::chrono::duration<Rep, Period> after, callback fn) {
    return add_timer(detail::nanoseconds_of(after, "delay"), false, std::move(fn));
  }
  // Runs fn every interval until removed (see TIMERS); returns the timer's id.
  watcher_id repeat(double interval_seconds, callback fn);
  template <class Rep, class Period>
  watcher_id repeat(std::chrono::duration<Rep, Period> interval, callback fn) {
    return add_timer(detail::nanoseconds_of(interval, "repeat"), true, std::move(fn));
  }
  // Removes a timer of either kind; false when id names no live timer.
  bool off_delay(watcher_id id);
  bool off_repeat(watcher_id id);
  // Removes every timer (delays and repeats); returns how many.
  std::size_t delete_all_timers();
  // Live timers: delays not yet fired and repeats, referenced or not.
  std::size_t timer_count() const;

  // --- fds ---
  // Runs fn whenever fd is readable (writable), level-triggered, until removed (see FDS). One
  // callback per fd and direction: registering again replaces it.
  watcher_id on_readable(int fd, callback fn);
  watcher_id on_writable(int fd, callback fn);
  // Removes the readable (writable) callback of fd; false when there was none.
  bool off_readable(int fd);
  bool off_writable(int fd);

  // --- signals ---
  // Runs fn in a tick after each delivery of the signal (see SIGNALS); one callback per signal.
  watcher_id on_signal(int signal_number, callback fn);
  // Removes the signal's callback; false when there was none.
  bool off_signal(int signal_number);

  // --- defer ---
  // Runs fn once, at the start of the next tick.
  watcher_id defer(callback fn);
  // Removes a defer that has not run yet.
  bool off_defer(watcher_id id);

  // --- references ---
  // Makes a watcher keep run() going again (reference) or not (unreference), see REFERENCES;
  // false when id names no live watcher.
  bool reference(watcher_id id);
  bool unreference(watcher_id id);

  // --- running ---
  // Dispatches ticks until stop() or until no referenced watcher is left (see RUN AND STOP).
  void run();
  // Ends run() after the current tick; nothing when no run() is active.
  void stop();
  // Replaces the handler (an empty one removes it). It runs on the dispatching coroutine, right
  // after the failed callback.
  void set_error_handler(error_handler handler);

  // A suspension for the calling coroutine (see suspension.hpp).
  template <class T = void>
  weft::loop::suspension<T> suspension() {
    auto state = std::make_shared<detail::suspension_value<T>>(core_for_suspension());
    return weft::loop::suspension<T>(std::move(state));
  }

 private:
  watcher_id add_timer(std::int64_t nanoseconds, bool repeating, callback&& fn);
  detail::loop_core& core_for_suspension();

  std::unique_ptr<detail::loop_core> core_;
};

}  // namespace weft::loop

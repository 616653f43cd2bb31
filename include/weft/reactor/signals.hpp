// Waiting for POSIX signals from coroutines.
//
// weft::signals::wait({SIGINT, SIGTERM}) suspends until one of the signals is delivered and
// returns its number. One libuv signal handle per signal number fans every delivery out to all
// the coroutines waiting on that number. From the first wait on a signal number, the scheduler
// catches that signal until run() ends (the default action, e.g. termination, no longer
// applies), so a delivery that arrives while nobody waits (say, during a reload after the last
// SIGHUP) is kept, and the next wait on that number returns at once. Deliveries that arrive
// while nobody waits coalesce into one per signal number. When run() ends, the disposition the
// program had before the first wait on that number is back (its own handler, SIG_IGN as under
// nohup, or the default), unless a scheduler on another thread still catches that number: then
// it is back when the last of them ends.
//
// A signal handle does not keep run() alive, except while a coroutine waits on it; so a
// coroutine waiting for SIGTERM alone is not reported as deadlocked.
#pragma once

#include <initializer_list>

#include "weft/sched/timeout.hpp"

namespace weft::signals {

// Suspends until one of signal_numbers is delivered and returns it (see above).
int wait(std::initializer_list<int> signal_numbers, const timeout& limit = timeout::never());

}  // namespace weft::signals

// Waiting for a file descriptor to become readable or writable: the hook for integrating
// libraries that do their own non-blocking I/O (a database driver, a TLS library).
//
// The coroutine suspends until the reactor reports the fd ready (level-triggered: after waking,
// do the non-blocking read or write, and wait again on EAGAIN). Any number of coroutines may
// wait on one fd, for reading and for writing; they share one libuv poll handle per fd (libuv
// allows only one), started on the first wait and closed when the last waiter leaves. The fd
// must be pollable (a socket, pipe, tty, eventfd: not a regular file) and must stay open while
// waited on. Errors: io_error naming the operation and the fd.
#pragma once

#include "weft/sched/timeout.hpp"

namespace weft {

void wait_readable(int fd, const timeout& limit = timeout::never());
void wait_writable(int fd, const timeout& limit = timeout::never());

}  // namespace weft

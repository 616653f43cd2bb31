// Waiting for a file descriptor to become readable or writable: the hook for integrating
// libraries that do their own non-blocking I/O (a database driver, a TLS library).
//
// The coroutine suspends until the driver reports the fd ready (level-triggered: after waking,
// do the non-blocking read or write, and wait again on EAGAIN). Any number of coroutines may
// wait on one fd, for reading and for writing; they share one watch of the driver per fd,
// started on the first wait and stopped when the last waiter leaves. The fd must be pollable (a
// socket, pipe, tty, eventfd: not a regular file or a directory, which every driver refuses)
// and must stay open while waited on; make it non-blocking yourself (the uv driver's
// uv_poll_init also sets O_NONBLOCK on it, the other drivers leave its flags alone). An error
// condition on the fd (a reset connection, a closed peer) counts as ready, as in poll(2): the
// next read or write reports the real error. A fd closed while waited on: the poll driver wakes
// the waiter (POLLNVAL) and its next read fails with EBADF; on the epoll-based drivers (uv, ev,
// event) the kernel forgets the fd silently and the wait lasts until its timeout or a cancel.
// Errors: io_error naming the operation and the fd when it cannot be watched at all.
#pragma once

#include "weft/sched/timeout.hpp"

namespace weft {

// wait_readable (wait_writable) suspends until fd is readable (writable) or limit passes (see
// above).
void wait_readable(int fd, const timeout& limit = timeout::never());
void wait_writable(int fd, const timeout& limit = timeout::never());

// Keeps fd registered with the driver between waits. Without one, the fd's watch is made on the
// first wait and stopped when the last waiter leaves, which costs several syscalls each time
// (on the uv driver uv_poll_init checks the fd with epoll_ctl add+del and sets O_NONBLOCK, and
// uv_close deletes it again): fine for an occasional wait, a real cost for a socket waited on
// at every request (a database connection). While registered, the fd keeps being polled for
// what it was last waited for; an interest that fires with nobody waiting is dropped until the
// next wait, so an idle registered fd costs nothing. Destroy (or reset) the registration before
// closing the fd, on the scheduler's thread and before run() returns. Registrations of one fd nest.
class fd_registration {
 public:
  fd_registration() noexcept = default;
  explicit fd_registration(int fd);  // from a coroutine; std::logic_error elsewhere
  fd_registration(fd_registration&& other) noexcept;
  fd_registration& operator=(fd_registration&& other) noexcept;
  fd_registration(const fd_registration&) = delete;
  fd_registration& operator=(const fd_registration&) = delete;
  ~fd_registration();

  // fd(): the registered fd (-1 when empty); reset(): ends the registration early, as the
  // destructor.
  int fd() const noexcept { return fd_; }
  void reset() noexcept;

 private:
  int fd_ = -1;
};

}  // namespace weft

// Completion-based socket I/O, for a driver that has a ring (the uring driver): a recv or a send
// is queued in the ring, goes to the kernel with the driver's next io_uring_enter (the one that
// also waits), and its result comes back to a ring_completion from the driver's poll. No system
// call per message: a request read and its reply written cost no recv(2) and no send(2) of
// their own (bench/http/README.md, "The HTTP floor on io_uring").
//
// The rules, which the caller keeps:
// - The memory of an operation and the completion object stay alive and unmoved until
//   ring_completed ran. The fd stays open until then too: the operation names it by number
//   until the enter that submits it, so a fd closed and reused meanwhile would get the bytes.
// - An operation in flight keeps the driver alive (driver::alive()), so the scheduler goes on
//   polling until it completes; a socket shut down makes its operations complete at once.
// - ring_completed runs inside the driver's poll, on the scheduler's thread, with no coroutine
//   running: it may record the result, submit the next operation, set events and wake
//   coroutines, spawn one; it may not wait.
// - cancel() asks the kernel to end an operation early; it completes either way, with its own
//   result when it came first or -ECANCELED.
//
// From the scheduler's thread only.
#pragma once

#include <cstddef>
#include <exception>

#include "weft/sched/timeout.hpp"

namespace weft::detail {

class ring_completion {
 public:
  // The operation's result: bytes moved (0 for a recv: the peer's end), or -errno.
  virtual void ring_completed(int result) noexcept = 0;

 protected:
  ~ring_completion() = default;
};

class ring_io {
 public:
  // Throws std::runtime_error when the ring cannot take the entry (the kernel refused the
  // submission of a full queue).
  virtual void submit_recv(int fd, void* data, std::size_t size, ring_completion& done) = 0;
  // MSG_NOSIGNAL: a reset peer is -EPIPE, never SIGPIPE. May complete short.
  virtual void submit_send(int fd, const void* data, std::size_t size, ring_completion& done) = 0;
  virtual void cancel(ring_completion& done) = 0;

 protected:
  ~ring_io() = default;
};

// The ring of the calling thread's scheduler's driver; null when it has none (every driver but
// uring), outside a scheduler, or once the driver has closed.
ring_io* current_ring() noexcept;

}  // namespace weft::detail

namespace weft::detail {

// A receive through the ring from a coroutine (the net layer's connections on the uring
// driver): submits a recv of fd into [data, data + size) and suspends until it completes or
// limit ends the wait. Returns the recv's result (bytes, 0 at the peer's end, -errno).
//
// The recv never outlives the call, since data is the caller's buffer: when limit's deadline
// passes or the coroutine is cancelled first, the recv is cancelled and its completion waited
// for (protected: a second cancellation waits with it). Then what it brought wins over a
// deadline (bytes that came as the time ran out are returned, as a completed operation wins
// in await_operation), while a cancellation is stored in `early` for the caller to rethrow
// once it has taken those bytes; -ECANCELED comes back only with `early` set.
int ring_receive(ring_io& ring, int fd, void* data, std::size_t size, const timeout& limit,
                 std::exception_ptr& early);

}  // namespace weft::detail

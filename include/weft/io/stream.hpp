// weft::stream: a blocking-style, cancellable byte stream over a libuv stream handle (TCP,
// unix-domain socket or pipe, TTY).
//
// Blocking: every read, write, shutdown and connect suspends only the calling coroutine; the
// scheduler runs the others meanwhile. Each takes an optional weft::timeout (timeout_error when
// it passes first) and ends with cancelled_error when its coroutine is cancelled.
//
// Threads: a stream belongs to the scheduler whose coroutine made it; use, move and destroy it
// only on that scheduler's thread, and before run() returns (the loop then checks that no handle
// is left: destroy or close every stream inside the run).
//
// Ownership and lifetimes: the libuv handle lives on the heap in a state block that the stream
// owns; close() (idempotent, also run by the destructor) asks libuv to close the handle, and the
// block is freed once libuv's close callback has run AND the stream object let go of it, so
// neither libuv nor a coroutine still inside a call ever points at freed memory. read_some
// with nothing buffered reads straight from the socket into the caller's buffer (as Go does: no
// copy, no wait while data keeps coming; after 32 reads in a row that never waited it yields
// once, so a fast peer cannot starve the other coroutines); when it must wait it lends its
// buffer to libuv's next read only for as long as it is inside the call. Otherwise libuv reads
// into the stream's own buffer. A read that is abandoned (timeout, cancel) leaves nothing of the
// caller behind, and data that arrived is kept for the next read. Writes first try to write
// synchronously; what the kernel did not take is copied into the pending write, so an abandoned
// write never leaves libuv reading the caller's buffer.
//
// Reading: one reader at a time (a second concurrent read is a std::logic_error). Between reads
// the stream keeps reading ahead into its buffer up to a limit (so a request/response loop does
// not pay a start/stop per read); a read that times out or is cancelled stops reading.
// Writing: concurrent writers are served in the order they called; a write returns once libuv
// handed all its bytes to the kernel. A write that times out or is cancelled leaves its bytes
// queued: they are still sent, in order, unless the stream is closed first.
//
// Errors: weft::io_error with the libuv code, the operation and the peer or path
// ("read 127.0.0.1:8080: connection reset by peer").
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

#include "weft/io/detail/handle_owner.hpp"
#include "weft/sched/timeout.hpp"

namespace weft {
namespace detail {
struct stream_state;
struct stream_access;
}  // namespace detail

// What a listener's accept() does when accept(2) finds the process (EMFILE) or the system
// (ENFILE) out of file descriptors, or the kernel out of socket memory (ENOBUFS, ENOMEM). Either
// way the connection stays queued in the kernel's backlog: nothing is dropped, and the listener
// takes it as soon as a descriptor is free again, with no help from the program.
//   report: accept() throws io_error with that code, naming the cause ("accept 127.0.0.1:8080:
//     too many open files (EMFILE); close descriptors or raise ulimit -n"); the next accept()
//     tries again.
//   retry: accept() keeps waiting, retrying after 1 ms, doubling up to 100 ms, until it gets a
//     connection, its timeout passes, it is cancelled or the listener is closed.
enum class fd_exhaustion { report, retry };

class stream {
 public:
  stream() noexcept = default;
  // Assigning over a stream, or destroying it, closes it (as close()).
  stream(stream&& other) noexcept = default;
  stream& operator=(stream&& other) noexcept = default;
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;
  ~stream() = default;

  // False for a default-constructed or moved-from stream.
  bool is_open() const noexcept;
  explicit operator bool() const noexcept { return is_open(); }  // is_open()

  // Reads what is available, at least one byte, into buffer; returns how many. 0 means the
  // peer ended the stream (and every later read returns 0 at once), or buffer is empty.
  std::size_t read_some(std::span<char> buffer, const timeout& limit = timeout::never());

  // Zero-length calls (an empty buffer, n == 0, empty data) do nothing and return at once:
  // read_some returns 0, read_exactly and the writes return; nothing is read or sent.
  //
  // Reads exactly buffer.size() bytes, all or nothing: on an error, a timeout or a cancel
  // nothing is consumed (what arrived stays buffered for the next read). If the stream ends
  // first: io_error with code UV_EOF ("read_exactly PEER: end of stream after 3 of 10 bytes");
  // the 3 bytes stay readable.
  void read_exactly(std::span<char> buffer, const timeout& limit = timeout::never());
  // The same, into the first n bytes of buffer (which must hold n).
  void read_exactly(std::span<char> buffer, std::size_t n, const timeout& limit = timeout::never());

  // Reads up to and including the first occurrence of delimiter and appends it to out; returns
  // how many bytes were appended. 0 means the stream ended cleanly with nothing left. All or
  // nothing, like read_exactly: if the stream ends with bytes but no delimiter, io_error
  // UV_EOF; if max bytes (delimiter included) pass without the delimiter, io_error UV_ENOBUFS;
  // in both cases, and on a timeout or cancel, the bytes stay buffered for the next read.
  std::size_t read_until(std::string& out, std::string_view delimiter, std::size_t max = 64 * 1024,
                         const timeout& limit = timeout::never());

  // Writes every byte of data (libuv retries partial writes). io_error if the stream fails
  // (e.g. the peer reset it: UV_EPIPE / UV_ECONNRESET; SIGPIPE is ignored, see stream.cpp).
  void write_all(std::string_view data, const timeout& limit = timeout::never());
  // Gathers several buffers into one write, in order.
  void writev(std::span<const std::string_view> buffers, const timeout& limit = timeout::never());

  // Half close: waits until queued writes are flushed, then ends the sending direction (the
  // peer reads end of stream); reading goes on.
  void shutdown(const timeout& limit = timeout::never());

  // Closes the stream: a reader or writer still waiting in another coroutine gets io_error
  // UV_ECANCELED. Idempotent; never blocks.
  void close() noexcept;

  // "127.0.0.1:8080" or "[::1]:8080" for TCP; the socket path for a unix-domain socket (empty
  // when unnamed); empty for a TTY or a pipe. io_error if the OS cannot say.
  std::string local_address() const;
  std::string peer_address() const;

  // What errors name: the peer address or path given when the stream was made.
  const std::string& subject() const noexcept;

  // Bytes received and buffered in the stream, not yet read.
  std::size_t buffered() const noexcept;

 protected:
  friend struct detail::stream_access;
  explicit stream(detail::stream_state* state) noexcept : state_(state) {}
  detail::stream_state& state(const char* operation) const;

  detail::handle_owner<detail::stream_state> state_;
};

}  // namespace weft

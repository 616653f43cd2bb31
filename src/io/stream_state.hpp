// The state block behind weft::stream (see stream_handle.hpp for who owns it and when it is
// freed; the listeners have their own, listener_state.hpp).
//
// Reading: libuv reads into inbound (this block's buffer, never a caller's), and read_cb wakes the
// reader once it has what it waits for. While no reader waits the stream reads ahead until
// read_ahead_limit bytes are buffered, then stops; a reader that times out or is cancelled stops
// reading, so a stream nobody reads from is not polled.
#pragma once

#include <uv.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "io/stream_handle.hpp"

namespace weft::detail {

enum class stream_kind { tcp, pipe, tty };

struct stream_state final : handle_state {
  stream_state(stream_kind kind, std::string subject)
      : handle_state(std::move(subject)), kind(kind) {}

  uv_handle_t* handle() noexcept override { return &uv.handle; }
  uv_stream_t* stream() noexcept { return &uv.stream; }
  // Call right after the uv_*_init succeeded.
  void mark_initialized() noexcept { initialized(); }

  // --- reading ---
  std::size_t buffered() const noexcept { return end - begin; }
  const char* data() const noexcept { return inbound.get() + begin; }
  void consume(std::size_t bytes) noexcept {
    begin += bytes;
    if (begin == end) {
      begin = end = 0;
    }
  }
  // True when a reader waiting for want buffered bytes need not wait (any more).
  bool read_ready(std::size_t want) const noexcept {
    return buffered() >= want || direct_bytes > 0 || eof || read_error != 0 || closing();
  }
  // Waits until read_ready(want). Throws timeout_error / cancelled_error (stopping the read).
  void fill(std::size_t want, const timeout& limit, const char* operation);
  // After a fill that did not get want bytes: throws the stream's error, or returns (eof).
  void throw_if_failed(const char* operation) const;
  void start_reading();
  void stop_reading() noexcept;
  // With nothing buffered, reads straight from the socket into the caller's buffer, as Go's
  // netpoller does: no read-ahead copy and, while data keeps coming, no wait at all. Returns the
  // bytes read, 0 at end of stream (eof set), or -1 when the kernel has nothing yet (wait with
  // fill) or a direct read is not possible; a read error is recorded in read_error and returns 0.
  std::ptrdiff_t read_directly(std::span<char> buffer);

  // --- TTY ---
  bool raw_mode = false;

  // --- TCP ---
  bool reset_on_close = false;  // close with RST (uv_tcp_close_reset)

  stream_kind kind;
  union {
    uv_handle_t handle;
    uv_stream_t stream;
    uv_tcp_t tcp;
    uv_pipe_t pipe;
    uv_tty_t tty;
  } uv{};

  std::unique_ptr<char[]> inbound;
  std::size_t capacity = 0;
  std::size_t begin = 0;
  std::size_t end = 0;
  std::size_t want = 1;  // what the waiting reader waits for (bytes buffered)
  bool reading = false;  // uv_read_start is in effect
  // Direct reads since the reader last suspended: a reader that always finds data would never
  // give the other coroutines a turn (see read_directly).
  std::uint32_t direct_streak = 0;
  // A read_some that found nothing buffered and waits lends its buffer: libuv's next read lands
  // there (no copy), direct_bytes says how much, and further reads in the same poll are declined
  // (an empty buffer: libuv stops for this round, the socket stays level-triggered readable).
  // The loan ends before read_some returns or throws (direct_read_loan); libuv calls alloc and
  // read back to back, so the buffer is never written after that.
  // Whether the next read_some should try the socket before waiting: yes while the data
  // streams (the last read filled the caller's buffer), no in request/response traffic (the
  // last read drained the socket), where the attempt would be a wasted EAGAIN syscall.
  bool try_direct = true;
  std::span<char> direct_target{};
  std::size_t direct_bytes = 0;
  bool direct_allocated = false;  // the current alloc handed out direct_target
  bool declined = false;          // the current alloc handed out nothing (UV_ENOBUFS follows)
  bool eof = false;
  int read_error = 0;

  static constexpr std::size_t read_ahead_limit = 256 * 1024;

 protected:
  void on_close_requested() noexcept override;
  void close_handle(uv_close_cb on_closed) noexcept override;
};

// The loan of a waiting read_some's buffer to on_alloc (see stream_state::direct_target).
class direct_read_loan {
 public:
  direct_read_loan(stream_state& state, std::span<char> buffer) noexcept;
  direct_read_loan(const direct_read_loan&) = delete;
  direct_read_loan& operator=(const direct_read_loan&) = delete;
  // Ends the loan; returns how many bytes landed in the buffer.
  std::size_t take() noexcept;
  ~direct_read_loan();

 private:
  stream_state& state_;
};

// Makes the public stream types from their state (their constructor from a state is private).
struct stream_access {
  template <class Stream>
  static Stream make(stream_state* state) noexcept {
    return Stream(state);
  }
  template <class Stream>
  static stream_state* state_of(const Stream& stream) noexcept {
    return stream.state_.get();
  }
};

}  // namespace weft::detail

// weft::stream over a libuv stream handle: buffered reads, ordered writes, half close.
#include "weft/io/stream.hpp"

#include <unistd.h>
#include <uv.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "io/stream_state.hpp"
#include "weft/sched/this_coroutine.hpp"

namespace weft {
namespace detail {
namespace {

stream_state& state_of(uv_handle_t* handle) noexcept {
  return static_cast<stream_state&>(*static_cast<handle_state*>(handle->data));
}

void on_alloc(uv_handle_t* handle, std::size_t suggested, uv_buf_t* buffer) noexcept {
  // libuv calls alloc and read back to back within one poll, so the buffer handed out here is
  // used at once and never outlives the callback pair.
  stream_state& state = state_of(handle);
  if (!state.direct_target.empty() && state.buffered() == 0) {
    if (state.direct_bytes == 0) {
      state.direct_allocated = true;
      *buffer = uv_buf_init(state.direct_target.data(),
                            static_cast<unsigned int>(state.direct_target.size()));
    } else {
      state.declined = true;  // the reader has its bytes: the rest can wait in the kernel
      *buffer = uv_buf_init(nullptr, 0);
    }
    return;
  }
  if (state.begin == state.end) {
    state.begin = state.end = 0;
  }
  if (state.capacity - state.end < suggested && state.begin > 0) {
    std::memmove(state.inbound.get(), state.inbound.get() + state.begin, state.buffered());
    state.end -= state.begin;
    state.begin = 0;
  }
  if (state.capacity - state.end < suggested) {
    std::size_t grown = std::max(state.capacity * 2, state.end + suggested);
    std::unique_ptr<char[]> bigger(new (std::nothrow) char[grown]);
    if (bigger == nullptr) {
      *buffer = uv_buf_init(nullptr, 0);  // libuv reports UV_ENOBUFS to on_read
      return;
    }
    if (state.end > 0) {
      std::memcpy(bigger.get(), state.inbound.get(), state.end);
    }
    state.inbound = std::move(bigger);
    state.capacity = grown;
  }
  *buffer = uv_buf_init(state.inbound.get() + state.end,
                        static_cast<unsigned int>(state.capacity - state.end));
}

void on_read(uv_stream_t* handle, ssize_t nread, const uv_buf_t*) noexcept {
  stream_state& state = state_of(reinterpret_cast<uv_handle_t*>(handle));
  if (std::exchange(state.declined, false)) {
    return;  // UV_ENOBUFS for the buffer on_alloc declined to give
  }
  if (std::exchange(state.direct_allocated, false) && nread > 0) {
    state.direct_bytes = static_cast<std::size_t>(nread);
    state.wake_waiter();
    return;
  }
  if (nread > 0) {
    state.end += static_cast<std::size_t>(nread);
    if (state.waiter != nullptr) {
      if (state.buffered() >= state.want) {
        state.wake_waiter();
      }
    } else if (state.buffered() >= stream_state::read_ahead_limit) {
      state.stop_reading();  // nobody reads: let the kernel's buffer push back on the peer
    }
    return;
  }
  if (nread == 0) {
    return;  // EAGAIN: nothing this time
  }
  if (nread == UV_EOF) {
    state.eof = true;
  } else {
    state.read_error = static_cast<int>(nread);
  }
  state.stop_reading();
  state.wake_waiter();
}

using write_operation = request_operation<uv_write_t>;

// A write whose bytes did not all fit in the kernel at once: the rest is copied here, so the
// queued uv_write points at memory the operation owns (see stream.hpp on abandoned writes).
class buffered_write final : public write_operation {
 public:
  using write_operation::write_operation;
  std::string bytes;
};

using shutdown_operation = request_operation<uv_shutdown_t>;

std::string closed_message() { return "the stream is closed"; }

}  // namespace

void stream_state::start_reading() {
  if (reading || eof || read_error != 0 || closing()) {
    return;
  }
  int status = uv_read_start(stream(), &on_alloc, &on_read);
  if (status < 0) {
    throw_uv_error(status, "read", subject());
  }
  reading = true;
}

void stream_state::stop_reading() noexcept {
  if (reading) {
    uv_read_stop(stream());
    reading = false;
  }
}

std::ptrdiff_t stream_state::read_directly(std::span<char> buffer) {
  // Cooperative budget (Tokio's idea): after a run of reads that never had to wait, let every
  // other ready coroutine run once. yield() is a cancellation point like the read itself.
  constexpr std::uint32_t direct_budget = 32;
  if (++direct_streak > direct_budget) {
    direct_streak = 0;
    weft::yield();
    if (buffered() > 0 || eof || read_error != 0 || closing()) {
      return -1;  // the stream changed meanwhile: take the buffered path
    }
  }
  uv_os_fd_t fd = -1;
  if (uv_fileno(handle(), &fd) != 0) {
    return -1;
  }
  ssize_t got;
  do {
    got = ::read(fd, buffer.data(), buffer.size());
  } while (got < 0 && errno == EINTR);
  if (got > 0) {
    return got;
  }
  if (got == 0) {
    eof = true;
    stop_reading();
    return 0;
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK) {
    direct_streak = 0;  // the reader will wait: its budget starts over
    return -1;
  }
  read_error = uv_translate_sys_error(errno);
  stop_reading();
  return 0;
}

direct_read_loan::direct_read_loan(stream_state& state, std::span<char> buffer) noexcept
    : state_(state) {
  state_.direct_target = buffer;
  state_.direct_bytes = 0;
}

std::size_t direct_read_loan::take() noexcept {
  state_.direct_target = {};
  return std::exchange(state_.direct_bytes, 0);
}

direct_read_loan::~direct_read_loan() {
  if (state_.direct_bytes == 0) {
    state_.direct_target = {};
    return;
  }
  // Left by a timeout or cancel after bytes had landed in the caller's buffer: they move into
  // the stream's own buffer (empty: on_alloc declined every read after the direct one), so the
  // next read returns them and nothing is lost.
  std::size_t bytes = std::exchange(state_.direct_bytes, 0);
  if (state_.capacity < bytes) {
    state_.inbound.reset(new char[bytes]);
    state_.capacity = bytes;
  }
  std::memcpy(state_.inbound.get(), state_.direct_target.data(), bytes);
  state_.begin = 0;
  state_.end = bytes;
  state_.direct_target = {};
}

void stream_state::fill(std::size_t wanted, const timeout& limit, const char* operation) {
  want = wanted;
  while (!read_ready(want)) {
    start_reading();
    single_waiter until_readable(*this, "read from", [this] { return read_ready(want); });
    try {
      wait_on_handle(*this, until_readable, limit, operation);
    } catch (...) {
      // Timed out or cancelled: stop polling the socket; what arrived stays in the buffer.
      stop_reading();
      throw;
    }
  }
}

void stream_state::throw_if_failed(const char* operation) const {
  if (read_error != 0) {
    throw_uv_error(read_error, operation, subject());
  }
  if (closing()) {
    throw io_error(UV_ECANCELED, operation, subject(), closed_message());
  }
}

void stream_state::on_close_requested() noexcept {
  if (kind == stream_kind::tty && raw_mode) {
    // Leave the terminal as we found it: raw mode must not outlive the weft::tty.
    uv_tty_set_mode(&uv.tty, UV_TTY_MODE_NORMAL);
    raw_mode = false;
  }
}

void stream_state::close_handle(uv_close_cb on_closed) noexcept {
  if (kind == stream_kind::tcp && reset_on_close && uv_tcp_close_reset(&uv.tcp, on_closed) == 0) {
    return;
  }
  uv_close(handle(), on_closed);  // also when a reset is refused (after a shutdown, say)
}

void close_and_release_owner(stream_state* state) noexcept { state->close_and_release_owner(); }

}  // namespace detail

bool stream::is_open() const noexcept { return state_.is_open(); }

detail::stream_state& stream::state(const char* operation) const {
  return state_.get_or_throw(operation, "weft::stream");
}

const std::string& stream::subject() const noexcept {
  static const std::string none;
  return state_ != nullptr ? state_->subject() : none;
}

std::size_t stream::buffered() const noexcept { return state_ != nullptr ? state_->buffered() : 0; }

std::size_t stream::read_some(std::span<char> buffer, const timeout& limit) {
  detail::stream_state& state = this->state("read_some");
  detail::busy_guard guard(state, "stream", "a reader");
  if (buffer.empty()) {
    return 0;
  }
  if (state.buffered() == 0 && !state.eof && state.read_error == 0 && !state.closing()) {
    if (state.try_direct) {
      std::ptrdiff_t direct = state.read_directly(buffer);
      if (direct > 0) {
        state.try_direct = static_cast<std::size_t>(direct) == buffer.size();
        return static_cast<std::size_t>(direct);
      }
    }
    if (state.buffered() == 0) {
      detail::direct_read_loan loan(state, buffer);
      state.fill(1, limit, "read");
      if (std::size_t bytes = loan.take()) {
        state.try_direct = bytes == buffer.size();
        return bytes;
      }
    }
  } else {
    state.fill(1, limit, "read");
  }
  std::size_t bytes = std::min(buffer.size(), state.buffered());
  if (bytes > 0) {
    std::memcpy(buffer.data(), state.data(), bytes);
    state.consume(bytes);
    return bytes;
  }
  state.throw_if_failed("read");
  return 0;  // end of stream
}

void stream::read_exactly(std::span<char> buffer, const timeout& limit) {
  read_exactly(buffer, buffer.size(), limit);
}

void stream::read_exactly(std::span<char> buffer, std::size_t n, const timeout& limit) {
  detail::stream_state& state = this->state("read_exactly");
  if (n > buffer.size()) {
    throw std::logic_error("weft: read_exactly of " + std::to_string(n) +
                           " bytes into a buffer of " + std::to_string(buffer.size()));
  }
  detail::busy_guard guard(state, "stream", "a reader");
  if (n == 0) {
    // Nothing to read: no wait, and no memcpy from a buffer that may not exist yet (a null
    // source is undefined behaviour even for zero bytes).
    return;
  }
  state.fill(n, limit, "read_exactly");
  if (state.buffered() >= n) {
    std::memcpy(buffer.data(), state.data(), n);
    state.consume(n);
    return;
  }
  state.throw_if_failed("read_exactly");
  throw io_error(UV_EOF, "read_exactly", state.subject(),
                 "end of stream after " + std::to_string(state.buffered()) + " of " +
                     std::to_string(n) + " bytes");
}

std::size_t stream::read_until(std::string& out, std::string_view delimiter, std::size_t max,
                               const timeout& limit) {
  detail::stream_state& state = this->state("read_until");
  if (delimiter.empty() || max < delimiter.size()) {
    throw std::logic_error("weft: read_until needs a non-empty delimiter no longer than max");
  }
  detail::busy_guard guard(state, "stream", "a reader");
  std::size_t searched = 0;  // bytes already known to hold no complete delimiter start
  for (;;) {
    std::string_view window(state.data(), std::min(state.buffered(), max));
    std::size_t found = window.find(delimiter, searched);
    if (found != std::string_view::npos) {
      std::size_t bytes = found + delimiter.size();
      out.append(state.data(), bytes);
      state.consume(bytes);
      return bytes;
    }
    if (window.size() >= delimiter.size()) {
      searched = window.size() - delimiter.size() + 1;
    }
    if (state.buffered() >= max) {
      throw io_error(UV_ENOBUFS, "read_until", state.subject(),
                     "no delimiter within " + std::to_string(max) + " bytes");
    }
    if (state.eof || state.read_error != 0 || state.closing()) {
      state.throw_if_failed("read_until");
      if (state.buffered() == 0) {
        return 0;
      }
      throw io_error(UV_EOF, "read_until", state.subject(),
                     "end of stream after " + std::to_string(state.buffered()) +
                         " bytes without the delimiter");
    }
    state.fill(state.buffered() + 1, limit, "read_until");
  }
}

void stream::write_all(std::string_view data, const timeout& limit) {
  writev(std::span<const std::string_view>(&data, 1), limit);
}

void stream::writev(std::span<const std::string_view> buffers, const timeout& limit) {
  detail::stream_state& state = this->state("write");
  if (state.closing()) {
    throw io_error(UV_ECANCELED, "write", state.subject(), detail::closed_message());
  }
  std::vector<uv_buf_t> parts;
  parts.reserve(buffers.size());
  std::size_t total = 0;
  for (std::string_view buffer : buffers) {
    if (!buffer.empty()) {
      parts.push_back(
          uv_buf_init(const_cast<char*>(buffer.data()), static_cast<unsigned int>(buffer.size())));
      total += buffer.size();
    }
  }
  if (total == 0) {
    return;
  }
  // The common case: the kernel takes it all now, no request and no copy. uv_try_write refuses
  // (UV_EAGAIN) while earlier writes are still queued, which keeps concurrent writers in order.
  int written = uv_try_write(state.stream(), parts.data(), static_cast<unsigned int>(parts.size()));
  if (written < 0 && written != UV_EAGAIN && written != UV_ENOSYS) {
    detail::throw_uv_error(written, "write", state.subject());
  }
  std::size_t done = written > 0 ? static_cast<std::size_t>(written) : 0;
  if (done == total) {
    return;
  }
  auto operation = std::make_unique<detail::buffered_write>("write", state.subject());
  operation->bytes.reserve(total - done);
  for (const uv_buf_t& part : parts) {
    if (done >= part.len) {
      done -= part.len;
      continue;
    }
    operation->bytes.append(part.base + done, part.len - done);
    done = 0;
  }
  uv_buf_t rest =
      uv_buf_init(operation->bytes.data(), static_cast<unsigned int>(operation->bytes.size()));
  int status = uv_write(&operation->request, state.stream(), &rest, 1,
                        &detail::write_operation::on_done<uv_write_t>);
  if (status < 0) {
    detail::throw_uv_error(status, "write", state.subject());
  }
  std::unique_ptr<detail::pending_operation> pending(std::move(operation));
  detail::await_operation(pending, limit);
  int result = static_cast<detail::write_operation&>(*pending).status;
  if (result < 0) {
    detail::throw_uv_error(result, "write", state.subject());
  }
}

void stream::shutdown(const timeout& limit) {
  detail::stream_state& state = this->state("shutdown");
  if (state.closing()) {
    throw io_error(UV_ECANCELED, "shutdown", state.subject(), detail::closed_message());
  }
  auto operation = std::make_unique<detail::shutdown_operation>("shutdown", state.subject());
  int status = uv_shutdown(&operation->request, state.stream(),
                           &detail::shutdown_operation::on_done<uv_shutdown_t>);
  if (status < 0) {
    detail::throw_uv_error(status, "shutdown", state.subject());
  }
  std::unique_ptr<detail::pending_operation> pending(std::move(operation));
  detail::await_operation(pending, limit);
  int result = static_cast<detail::shutdown_operation&>(*pending).status;
  if (result < 0) {
    detail::throw_uv_error(result, "shutdown", state.subject());
  }
}

void stream::close() noexcept { state_.close(); }

namespace {

std::string socket_name(detail::stream_state& state, bool peer) {
  const char* operation = peer ? "getpeername" : "getsockname";
  if (state.kind == detail::stream_kind::tcp) {
    sockaddr_storage address{};
    int length = sizeof(address);
    int status =
        peer ? uv_tcp_getpeername(&state.uv.tcp, reinterpret_cast<sockaddr*>(&address), &length)
             : uv_tcp_getsockname(&state.uv.tcp, reinterpret_cast<sockaddr*>(&address), &length);
    if (status < 0) {
      detail::throw_uv_error(status, operation, state.subject());
    }
    return detail::format_address(reinterpret_cast<sockaddr*>(&address));
  }
  if (state.kind == detail::stream_kind::pipe) {
    char path[4096];
    std::size_t length = sizeof(path);
    int status = peer ? uv_pipe_getpeername(&state.uv.pipe, path, &length)
                      : uv_pipe_getsockname(&state.uv.pipe, path, &length);
    if (status == UV_ENOTSOCK || status == UV_EINVAL) {
      return "";  // an anonymous pipe, or a wrapped fd that is not a socket
    }
    if (status < 0) {
      detail::throw_uv_error(status, operation, state.subject());
    }
    return std::string(path, length);
  }
  return "";
}

}  // namespace

std::string stream::local_address() const { return socket_name(state("local_address"), false); }

std::string stream::peer_address() const { return socket_name(state("peer_address"), true); }

}  // namespace weft

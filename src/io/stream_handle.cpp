// Shared machinery of the I/O objects: the two-owner handle block, single-waiter checks, timed
// waits on a handle, address formatting, SIGPIPE.
#include "io/stream_handle.hpp"

#include <signal.h>

#include <cstring>
#include <mutex>
#include <stdexcept>

#include "io/stream_state.hpp"

namespace weft::detail {

handle_state::handle_state(std::string subject) : subject_(std::move(subject)) {
  core_ = current_core();
  if (core_ == nullptr || core_->current() == nullptr) {
    throw std::logic_error("weft: an I/O object (" + subject_ +
                           ") was made outside a coroutine; make it from weft::run's main or "
                           "from a coroutine started with weft::spawn");
  }
}

void handle_state::initialized() noexcept {
  initialized_ = true;
  handle()->data = this;  // callbacks find the block through the handle
  // Idle until a coroutine waits on it (see hold()).
  uv_unref(handle());
}

void handle_state::close() noexcept {
  if (closing_) {
    return;
  }
  closing_ = true;
  wake_waiter();
  if (!initialized_) {
    handle_closed_ = true;  // libuv never saw it
    return;
  }
  on_close_requested();
  core_->driver().operation_abandoned();
  close_handle(&handle_state::on_closed);
}

void handle_state::on_closed(uv_handle_t* handle) noexcept {
  auto* self = static_cast<handle_state*>(handle->data);
  self->core_->driver().abandoned_operation_completed();
  self->handle_closed_ = true;
  if (self->owner_gone_) {
    delete self;
  }
}

void handle_state::release_owner() noexcept {
  owner_gone_ = true;
  if (handle_closed_) {
    delete this;
  }
}

void handle_state::close_and_release_owner() noexcept {
  if (core_ != current_core()) {
    return;
  }
  close();
  release_owner();
}

void handle_state::hold() noexcept {
  if (holds_++ == 0 && initialized_) {
    uv_ref(handle());
  }
}

void handle_state::release() noexcept {
  if (--holds_ == 0 && initialized_) {
    uv_unref(handle());
  }
}

busy_guard::busy_guard(handle_state& state, const char* what, const char* role) : state_(state) {
  if (state.busy) {
    throw std::logic_error(std::string("weft: ") + what + " " + state.subject() + " already has " +
                           role +
                           "; only one coroutine at a time may wait on it (give each coroutine "
                           "its own, or hand results over through a channel)");
  }
  state.busy = true;
}

void wait_on_handle(handle_state& state, wait_source& ready_source, const timeout& limit,
                    const char* operation) {
  scheduler_core& core = state.core();
  coroutine& self = core.waiter_or_throw(operation);
  wait_source* sources[] = {&ready_source};
  wait_with_limit(core, self, sources, limit,
                  [&] { return std::string(operation) + " " + state.subject(); });
}

std::string format_address(const sockaddr* address) {
  char text[INET6_ADDRSTRLEN] = {};
  if (address->sa_family == AF_INET) {
    auto* ipv4 = reinterpret_cast<const sockaddr_in*>(address);
    uv_ip4_name(ipv4, text, sizeof(text));
    return std::string(text) + ":" + std::to_string(ntohs(ipv4->sin_port));
  }
  if (address->sa_family == AF_INET6) {
    auto* ipv6 = reinterpret_cast<const sockaddr_in6*>(address);
    uv_ip6_name(ipv6, text, sizeof(text));
    return "[" + std::string(text) + "]:" + std::to_string(ntohs(ipv6->sin6_port));
  }
  return "";
}

void ignore_sigpipe_once() noexcept {
  // libuv writes to sockets and pipes with write()/writev(), not send(MSG_NOSIGNAL), and does
  // not ignore SIGPIPE itself (Node.js does that in its own startup). A write to a connection
  // the peer reset would then kill the process instead of failing with EPIPE. So the first
  // stream made ignores SIGPIPE for the process, unless the program installed its own handler
  // (which we leave alone). Child processes need the same: a write to a child that has gone
  // is an EPIPE io_error (libuv resets every signal to its default in the child before exec).
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction current {};
    if (sigaction(SIGPIPE, nullptr, &current) == 0 && (current.sa_flags & SA_SIGINFO) == 0 &&
        current.sa_handler == SIG_DFL) {
      struct sigaction ignore {};
      ignore.sa_handler = SIG_IGN;
      sigemptyset(&ignore.sa_mask);
      sigaction(SIGPIPE, &ignore, nullptr);
    }
  });
}

}  // namespace weft::detail

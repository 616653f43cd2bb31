// weft::udp::socket over uv_udp_t. See stream_handle.hpp for the handle block's lifetime: the
// same two-owner rule applies, and libuv receives into the block's own scratch buffer, never a
// caller's, so an abandoned receive leaves nothing of the caller behind.
#include "weft/io/udp.hpp"

#include <netinet/in.h>
#include <uv.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "io/c_string.hpp"
#include "io/stream_handle.hpp"

namespace weft {
namespace detail {

struct udp_state final : handle_state {
  explicit udp_state(std::string subject) : handle_state(std::move(subject)) {}
  uv_handle_t* handle() noexcept override { return reinterpret_cast<uv_handle_t*>(&udp); }
  void mark_initialized() noexcept { initialized(); }

  bool receive_ready() const noexcept { return !queue.empty() || receive_error != 0 || closing(); }
  void start_receiving();
  void stop_receiving() noexcept {
    if (receiving) {
      uv_udp_recv_stop(&udp);
      receiving = false;
    }
  }

  struct received {
    std::string bytes;
    sockaddr_storage from{};
  };

  uv_udp_t udp{};
  std::deque<received> queue;
  int receive_error = 0;
  bool receiving = false;
  // One datagram at a most: libuv receives into it and recv_cb copies it out at once.
  std::unique_ptr<char[]> scratch;
};

namespace {

constexpr std::size_t scratch_size = 64 * 1024;  // larger than any UDP payload

udp_state& udp_of(uv_udp_t* handle) noexcept {
  return static_cast<udp_state&>(*static_cast<handle_state*>(handle->data));
}

void on_alloc(uv_handle_t* handle, std::size_t, uv_buf_t* buffer) noexcept {
  udp_state& state = udp_of(reinterpret_cast<uv_udp_t*>(handle));
  if (state.scratch == nullptr) {
    state.scratch.reset(new (std::nothrow) char[scratch_size]);
  }
  *buffer = state.scratch == nullptr ? uv_buf_init(nullptr, 0)
                                     : uv_buf_init(state.scratch.get(), scratch_size);
}

void on_receive(uv_udp_t* handle, ssize_t nread, const uv_buf_t* buffer, const sockaddr* from,
                unsigned) noexcept {
  udp_state& state = udp_of(handle);
  if (nread < 0) {
    state.receive_error = static_cast<int>(nread);
    state.stop_receiving();
    state.wake_waiter();
    return;
  }
  if (from == nullptr) {
    return;  // nothing more to read this time
  }
  udp_state::received datagram;
  datagram.bytes.assign(buffer->base, static_cast<std::size_t>(nread));
  std::memcpy(&datagram.from, from,
              from->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
  state.queue.push_back(std::move(datagram));
  if (state.waiter != nullptr) {
    state.wake_waiter();
  } else if (state.queue.size() >= weft::udp::socket::queue_limit) {
    state.stop_receiving();
  }
}

// A datagram the kernel could not take at once: the bytes are copied here so that the queued
// uv_udp_send never points at the caller's buffer.
class buffered_send final : public request_operation<uv_udp_send_t> {
 public:
  using request_operation::request_operation;
  std::string bytes;
};

sockaddr_storage address_of(const std::string& host, std::uint16_t port, const char* operation) {
  return resolve_host(host, port, SOCK_DGRAM, timeout::never(), operation).front();
}

}  // namespace

void udp_state::start_receiving() {
  if (receiving || receive_error != 0 || closing()) {
    return;
  }
  int status = uv_udp_recv_start(&udp, &on_alloc, &on_receive);
  if (status < 0) {
    throw_uv_error(status, "recv_from", subject());
  }
  receiving = true;
}

void close_and_release_owner(udp_state* state) noexcept { state->close_and_release_owner(); }

}  // namespace detail

namespace udp {

socket socket::bind(const std::string& host, std::uint16_t port, const bind_options& options) {
  uv_loop_t& loop = detail::current_uv_loop("weft::udp::socket::bind");
  sockaddr_storage address = detail::address_of(host, port, "bind");
  std::string subject = detail::format_address(reinterpret_cast<sockaddr*>(&address));
  detail::handle_owner<detail::udp_state> state(new detail::udp_state(subject));
  int status = uv_udp_init(&loop, &state->udp);
  if (status < 0) {
    detail::throw_uv_error(status, "bind", subject);
  }
  state->mark_initialized();
  unsigned flags =
      (options.reuse_address ? UV_UDP_REUSEADDR : 0) | (options.ipv6_only ? UV_UDP_IPV6ONLY : 0);
  status = uv_udp_bind(&state->udp, reinterpret_cast<sockaddr*>(&address), flags);
  if (status < 0) {
    detail::throw_uv_error(status, "bind", subject);
  }
  socket made;
  made.state_ = std::move(state);
  made.state_->set_subject(made.local_address());
  return made;
}

detail::udp_state& socket::state(const char* operation) const {
  detail::udp_state& state = state_.get_or_throw(operation, "udp::socket");
  if (state.closing()) {
    throw io_error(UV_ECANCELED, operation, state.subject(), "the socket is closed");
  }
  return state;
}

void socket::connect(const std::string& host, std::uint16_t port) {
  detail::udp_state& state = this->state("connect");
  sockaddr_storage address = detail::address_of(host, port, "connect");
  int status = uv_udp_connect(&state.udp, reinterpret_cast<sockaddr*>(&address));
  if (status < 0) {
    detail::throw_uv_error(status, "connect",
                           detail::format_address(reinterpret_cast<sockaddr*>(&address)));
  }
}

void socket::send_to(std::string_view data, const std::string& host, std::uint16_t port,
                     const timeout& limit) {
  sockaddr_storage address = detail::address_of(host, port, "send_to");
  send_to_address(data, &address, detail::format_address(reinterpret_cast<sockaddr*>(&address)),
                  "send_to", limit);
}

void socket::send(std::string_view data, const timeout& limit) {
  send_to_address(data, nullptr, state("send").subject(), "send", limit);
}

void socket::send_to_address(std::string_view data, const void* address, const std::string& subject,
                             const char* operation, const timeout& limit) {
  detail::udp_state& state = this->state(operation);
  const auto* target = static_cast<const sockaddr*>(address);
  uv_buf_t buffer = uv_buf_init(const_cast<char*>(data.data()), static_cast<unsigned>(data.size()));
  // uv_udp_try_send refuses (UV_EAGAIN) while earlier sends are queued: order is kept.
  int status = uv_udp_try_send(&state.udp, &buffer, 1, target);
  if (status >= 0) {
    return;
  }
  if (status != UV_EAGAIN && status != UV_ENOSYS) {
    detail::throw_uv_error(status, operation, subject);
  }
  auto pending_send = std::make_unique<detail::buffered_send>(operation, subject);
  pending_send->bytes.assign(data);
  uv_buf_t copy =
      uv_buf_init(pending_send->bytes.data(), static_cast<unsigned>(pending_send->bytes.size()));
  status = uv_udp_send(&pending_send->request, &state.udp, &copy, 1, target,
                       &detail::buffered_send::on_done<uv_udp_send_t>);
  if (status < 0) {
    detail::throw_uv_error(status, operation, subject);
  }
  std::unique_ptr<detail::pending_operation> pending(std::move(pending_send));
  detail::await_operation(pending, limit);
  status = static_cast<detail::buffered_send&>(*pending).status;
  if (status < 0) {
    detail::throw_uv_error(status, operation, subject);
  }
}

datagram socket::recv_from(std::span<char> buffer, const timeout& limit) {
  detail::udp_state& state = this->state("recv_from");
  detail::busy_guard guard(state, "udp socket", "a receiver");
  while (!state.receive_ready()) {
    state.start_receiving();
    detail::single_waiter until_received(state, "recv_from",
                                         [&state] { return state.receive_ready(); });
    try {
      detail::wait_on_handle(state, until_received, limit, "recv_from");
    } catch (...) {
      state.stop_receiving();  // nobody receives: stop polling; queued datagrams stay
      throw;
    }
  }
  if (state.queue.empty()) {
    if (state.receive_error != 0) {
      detail::throw_uv_error(std::exchange(state.receive_error, 0), "recv_from", state.subject());
    }
    throw io_error(UV_ECANCELED, "recv_from", state.subject(), "the socket is closed");
  }
  detail::udp_state::received& front = state.queue.front();
  datagram result;
  result.bytes = std::min(buffer.size(), front.bytes.size());
  result.truncated = result.bytes < front.bytes.size();
  if (result.bytes > 0) {
    // Not for zero bytes: an empty span's data() may be null, and memcpy with a null pointer is
    // undefined behaviour even for a length of 0.
    std::memcpy(buffer.data(), front.bytes.data(), result.bytes);
  }
  result.peer = detail::format_address(reinterpret_cast<sockaddr*>(&front.from));
  state.queue.pop_front();
  return result;
}

namespace {

void membership(detail::udp_state& state, const std::string& group, const std::string& interface,
                uv_membership which, const char* operation) {
  detail::refuse_nul(group, operation, "group address");
  detail::refuse_nul(interface, operation, "interface address");
  int status = uv_udp_set_membership(&state.udp, group.c_str(),
                                     interface.empty() ? nullptr : interface.c_str(), which);
  if (status < 0) {
    detail::throw_uv_error(status, operation, group);
  }
}

}  // namespace

void socket::join_group(const std::string& group, const std::string& interface_address) {
  membership(state("join_group"), group, interface_address, UV_JOIN_GROUP, "join_group");
}

void socket::leave_group(const std::string& group, const std::string& interface_address) {
  membership(state("leave_group"), group, interface_address, UV_LEAVE_GROUP, "leave_group");
}

void socket::set_multicast_ttl(int ttl) {
  detail::udp_state& state = this->state("set_multicast_ttl");
  int status = uv_udp_set_multicast_ttl(&state.udp, ttl);
  if (status < 0) {
    detail::throw_uv_error(status, "set_multicast_ttl", state.subject());
  }
}

void socket::set_multicast_loop(bool enabled) {
  detail::udp_state& state = this->state("set_multicast_loop");
  int status = uv_udp_set_multicast_loop(&state.udp, enabled ? 1 : 0);
  if (status < 0) {
    detail::throw_uv_error(status, "set_multicast_loop", state.subject());
  }
}

void socket::set_broadcast(bool enabled) {
  detail::udp_state& state = this->state("set_broadcast");
  int status = uv_udp_set_broadcast(&state.udp, enabled ? 1 : 0);
  if (status < 0) {
    detail::throw_uv_error(status, "set_broadcast", state.subject());
  }
}

std::string socket::local_address() const {
  detail::udp_state& state = state_.get_or_throw("local_address", "udp::socket");
  sockaddr_storage address{};
  int length = sizeof(address);
  int status = uv_udp_getsockname(&state.udp, reinterpret_cast<sockaddr*>(&address), &length);
  if (status < 0) {
    detail::throw_uv_error(status, "getsockname", state.subject());
  }
  return detail::format_address(reinterpret_cast<sockaddr*>(&address));
}

std::uint16_t socket::port() const {
  std::string address = local_address();
  return static_cast<std::uint16_t>(std::stoul(address.substr(address.rfind(':') + 1)));
}

bool socket::is_open() const noexcept { return state_.is_open(); }

void socket::close() noexcept { state_.close(); }

}  // namespace udp
}  // namespace weft

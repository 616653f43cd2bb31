// TCP: listener, connect, per-connection options, and host resolution (shared with UDP).
#include "weft/io/tcp.hpp"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "io/c_string.hpp"
#include "io/listener_state.hpp"
#include "io/stream_state.hpp"

namespace weft {
namespace detail {
namespace {

// uv_getaddrinfo as a pending operation: the request and its result live here, on the heap; an
// abandoned lookup is cancelled if still queued on the pool, else it completes and frees itself.
class getaddrinfo_operation final : public pending_operation {
 public:
  explicit getaddrinfo_operation(std::string what) : what_(std::move(what)) { request.data = this; }
  ~getaddrinfo_operation() override {
    if (result != nullptr) {
      uv_freeaddrinfo(result);
    }
  }
  void describe(std::string& out) const override { out += "getaddrinfo " + what_; }

  static void on_done(uv_getaddrinfo_t* done, int status, addrinfo* found) noexcept {
    auto* self = static_cast<getaddrinfo_operation*>(done->data);
    self->status = status;
    self->result = found;
    self->complete();  // last: frees self if its waiter left
  }

  uv_getaddrinfo_t request{};
  int status = 0;
  addrinfo* result = nullptr;

 protected:
  void abandon() noexcept override { uv_cancel(reinterpret_cast<uv_req_t*>(&request)); }

 private:
  std::string what_;
};

std::string strip_brackets(const std::string& host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    return host.substr(1, host.size() - 2);
  }
  return host;
}

bool parse_numeric(const std::string& host, std::uint16_t port, sockaddr_storage& out) {
  // host holds no NUL, which uv_ip4_addr would take for its end: resolve_host, which every
  // call comes through first (is_numeric_host too, in connect), refused it (refuse_nul).
  std::string bare = strip_brackets(host);
  out = {};
  if (uv_ip4_addr(bare.c_str(), port, reinterpret_cast<sockaddr_in*>(&out)) == 0) {
    return true;
  }
  out = {};
  return bare.find(':') != std::string::npos &&
         uv_ip6_addr(bare.c_str(), port, reinterpret_cast<sockaddr_in6*>(&out)) == 0;
}

using connect_operation = request_operation<uv_connect_t>;

// Binds the listening socket by hand rather than with uv_tcp_bind, which always sets
// SO_REUSEADDR: this way every listen option is honoured.
void bind_listener(int fd, const sockaddr_storage& address, const tcp::listen_options& options,
                   const std::string& subject) {
  auto set = [&](int level, int name, bool value, const char* what) {
    int flag = value ? 1 : 0;
    if (setsockopt(fd, level, name, &flag, sizeof(flag)) != 0) {
      throw io_error(uv_translate_sys_error(errno), "listen", subject,
                     std::string(what) + ": " + uv_strerror(uv_translate_sys_error(errno)));
    }
  };
  set(SOL_SOCKET, SO_REUSEADDR, options.reuse_address, "SO_REUSEADDR");
  if (options.reuse_port) {
    set(SOL_SOCKET, SO_REUSEPORT, true, "SO_REUSEPORT");
  }
  if (address.ss_family == AF_INET6) {
    set(IPPROTO_IPV6, IPV6_V6ONLY, options.ipv6_only, "IPV6_V6ONLY");
  }
  socklen_t length = address.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&address), length) != 0) {
    throw_uv_error(uv_translate_sys_error(errno), "listen", subject);
  }
}

}  // namespace

bool is_numeric_host(const std::string& host) {
  sockaddr_storage ignored;
  return parse_numeric(host, 0, ignored);
}

std::vector<sockaddr_storage> resolve_host(const std::string& host, std::uint16_t port,
                                           int socket_type, const timeout& limit,
                                           const char* operation) {
  refuse_nul(host, operation, "host");
  sockaddr_storage numeric;
  if (parse_numeric(host, port, numeric)) {
    return {numeric};
  }
  uv_loop_t& loop = current_uv_loop(operation);
  std::string what = host + ":" + std::to_string(port);
  auto lookup = std::make_unique<getaddrinfo_operation>(what);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = socket_type;
  std::string service = std::to_string(port);
  int status = uv_getaddrinfo(&loop, &lookup->request, &getaddrinfo_operation::on_done,
                              host.c_str(), service.c_str(), &hints);
  if (status < 0) {
    throw_uv_error(status, operation, what);
  }
  std::unique_ptr<pending_operation> pending(std::move(lookup));
  await_operation(pending, limit);
  auto& done = static_cast<getaddrinfo_operation&>(*pending);
  if (done.status < 0) {
    throw_uv_error(done.status, operation, what);
  }
  std::vector<sockaddr_storage> addresses;
  for (addrinfo* entry = done.result; entry != nullptr; entry = entry->ai_next) {
    if ((entry->ai_family == AF_INET || entry->ai_family == AF_INET6) &&
        entry->ai_addrlen <= sizeof(sockaddr_storage)) {
      sockaddr_storage address{};
      std::memcpy(&address, entry->ai_addr, entry->ai_addrlen);
      addresses.push_back(address);
    }
  }
  if (addresses.empty()) {
    throw io_error(UV_EAI_NONAME, operation, what, "no IPv4 or IPv6 address");
  }
  return addresses;
}

}  // namespace detail

namespace tcp {

void stream::set_nodelay(bool enabled) {
  detail::stream_state& state = this->state("set_nodelay");
  int status = uv_tcp_nodelay(&state.uv.tcp, enabled ? 1 : 0);
  if (status < 0) {
    detail::throw_uv_error(status, "set_nodelay", state.subject());
  }
}

void stream::set_keepalive(bool enabled, unsigned delay_seconds) {
  detail::stream_state& state = this->state("set_keepalive");
  int status = uv_tcp_keepalive(&state.uv.tcp, enabled ? 1 : 0, delay_seconds);
  if (status < 0) {
    detail::throw_uv_error(status, "set_keepalive", state.subject());
  }
}

void stream::close_reset() noexcept {
  if (state_ != nullptr && !state_->closing()) {
    state_->reset_on_close = true;
    state_->close();
  }
}

listener listener::listen(const std::string& host, std::uint16_t port,
                          const listen_options& options) {
  detail::current_uv_loop("weft::tcp::listener::listen");
  detail::ignore_sigpipe_once();
  std::vector<sockaddr_storage> addresses =
      detail::resolve_host(host, port, SOCK_STREAM, timeout::never(), "listen");
  const sockaddr_storage& address = addresses.front();
  std::string subject = detail::format_address(reinterpret_cast<const sockaddr*>(&address));
  int fd = ::socket(address.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    detail::throw_uv_error(uv_translate_sys_error(errno), "listen", subject);
  }
  try {
    detail::bind_listener(fd, address, options, subject);
  } catch (...) {
    ::close(fd);
    throw;
  }
  auto state = detail::start_listening(fd, options.backlog, subject, options.out_of_fds);
  listener made;
  made.state_ = std::move(state);
  // With port 0 the kernel picked the port: errors should name the real one.
  made.state_->set_subject(made.local_address());
  return made;
}

tcp::stream listener::accept(const timeout& limit) {
  detail::listener_state& server = state_.get_or_throw("accept", "tcp::listener");
  uv_loop_t& loop = detail::current_uv_loop("weft::tcp::listener::accept");
  int fd = detail::accept_connection(server, limit);
  detail::handle_owner<detail::stream_state> client;
  try {
    client.reset(
        new detail::stream_state(detail::stream_kind::tcp, "connection on " + server.subject()));
  } catch (...) {
    ::close(fd);
    throw;
  }
  int status = uv_tcp_init(&loop, &client->uv.tcp);
  if (status < 0) {
    ::close(fd);
    detail::throw_uv_error(status, "accept", server.subject());
  }
  client->mark_initialized();
  status = uv_tcp_open(&client->uv.tcp, fd);
  if (status < 0) {
    ::close(fd);
    detail::throw_uv_error(status, "accept", server.subject());
  }
  tcp::stream accepted = detail::stream_access::make<tcp::stream>(client.release());
  try {
    detail::stream_access::state_of(accepted)->set_subject(accepted.peer_address());
  } catch (const io_error&) {
    // The peer may already be gone (reset before we looked): keep the generic subject; its
    // first read or write reports what happened.
  }
  return accepted;
}

std::uint16_t listener::port() const {
  std::string address = local_address();
  return static_cast<std::uint16_t>(std::stoul(address.substr(address.rfind(':') + 1)));
}

std::string listener::local_address() const {
  detail::listener_state& server = state_.get_or_throw("local_address", "tcp::listener");
  if (server.closing()) {
    throw io_error(UV_EBADF, "getsockname", server.subject(), "the listener is closed");
  }
  sockaddr_storage address{};
  socklen_t length = sizeof(address);
  if (::getsockname(server.fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    detail::throw_uv_error(uv_translate_sys_error(errno), "getsockname", server.subject());
  }
  return detail::format_address(reinterpret_cast<sockaddr*>(&address));
}

bool listener::is_open() const noexcept { return state_.is_open(); }

void listener::close() noexcept { state_.close(); }

tcp::stream connect(const std::string& host, std::uint16_t port, const timeout& limit,
                    const connect_options& options) {
  uv_loop_t& loop = detail::current_uv_loop("weft::tcp::connect");
  detail::ignore_sigpipe_once();
  std::vector<sockaddr_storage> addresses =
      detail::resolve_host(host, port, SOCK_STREAM, limit, "connect");
  const bool named = !detail::is_numeric_host(host);
  int last_status = 0;
  std::string last_subject;
  for (const sockaddr_storage& address : addresses) {
    std::string subject = detail::format_address(reinterpret_cast<const sockaddr*>(&address));
    if (named) {
      subject = host + " (" + subject + ")";
    }
    // The handle lives in a state block of its own from the start: if the wait below ends
    // early, the block's deleter closes the handle, which makes libuv end the connect request
    // with UV_ECANCELED, and the abandoned request then frees itself.
    detail::handle_owner<detail::stream_state> state(
        new detail::stream_state(detail::stream_kind::tcp, subject));
    int status = uv_tcp_init(&loop, &state->uv.tcp);
    if (status < 0) {
      detail::throw_uv_error(status, "connect", subject);
    }
    state->mark_initialized();
    auto operation = std::make_unique<detail::connect_operation>("connect", subject);
    status = uv_tcp_connect(&operation->request, &state->uv.tcp,
                            reinterpret_cast<const sockaddr*>(&address),
                            &detail::connect_operation::on_done<uv_connect_t>);
    if (status < 0) {
      last_status = status;
      last_subject = subject;
      continue;
    }
    std::unique_ptr<detail::pending_operation> pending(std::move(operation));
    detail::await_operation(pending, limit);
    status = static_cast<detail::connect_operation&>(*pending).status;
    if (status < 0) {
      last_status = status;
      last_subject = subject;
      continue;
    }
    tcp::stream connected = detail::stream_access::make<tcp::stream>(state.release());
    if (options.nodelay) {
      connected.set_nodelay(true);
    }
    return connected;
  }
  detail::throw_uv_error(last_status, "connect", last_subject);
}

}  // namespace tcp
}  // namespace weft

// net::pipe and net::connect.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "net/address.hpp"
#include "net/keepalive.hpp"
#include "net/worker_state.hpp"
#include "weft/io/dns.hpp"
#include "weft/net/connection.hpp"
#include "weft/reactor/fd.hpp"

namespace weft::net {

std::uint64_t pipe(connection& a, connection& b) {
  std::shared_ptr<connection> keep_a = a.handle();
  std::shared_ptr<connection> keep_b = b.handle();
  connection_events& hooks = b.events();
  // b's own callbacks are borrowed for the pipe's duration and given back after.
  struct restore {
    connection_events& hooks;
    connection_events saved;
    ~restore() {
      hooks.on_buffer_full = std::move(saved.on_buffer_full);
      hooks.on_buffer_drain = std::move(saved.on_buffer_drain);
      hooks.on_close = std::move(saved.on_close);
    }
  } guard{hooks, {}};
  guard.saved.on_buffer_full = std::move(hooks.on_buffer_full);
  guard.saved.on_buffer_drain = std::move(hooks.on_buffer_drain);
  guard.saved.on_close = std::move(hooks.on_close);
  connection_events* saved = &guard.saved;
  hooks.on_buffer_full = [&a, saved](connection& full) {
    a.pause_recv();
    if (saved->on_buffer_full) {
      saved->on_buffer_full(full);
    }
  };
  hooks.on_buffer_drain = [&a, saved](connection& drained) {
    a.resume_recv();
    if (saved->on_buffer_drain) {
      saved->on_buffer_drain(drained);
    }
  };
  hooks.on_close = [&a, saved](connection& closed, close_reason reason) {
    a.close();  // nobody to forward to any more
    if (saved->on_close) {
      saved->on_close(closed, reason);
    }
  };
  std::uint64_t forwarded = 0;
  while (std::optional<message> received = a.receive()) {
    // b's buffer had room when a was last resumed (a pauses at b's full), so this is accepted
    // unless b closed meanwhile.
    if (!b.try_send(received->data, received->kind)) {
      a.close();
      break;
    }
    forwarded += received->data.size();
  }
  if (a.is_open() && a.input_ended()) {
    b.shutdown_write();  // half_close: a's peer ended its direction only; b's goes on
  } else {
    b.close();
  }
  return forwarded;
}

namespace detail {

namespace {

// One connect to one address within limit: the connected fd (non-blocking), or io_error naming
// the address (timeout_error or cancelled_error from limit); nothing is left open on failure.
int connect_to(const socket_address& to, const std::string& where, const timeout& limit) {
  const int fd = ::socket(to.storage.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    const int error_number = errno;
    throw io_error(-error_number, "socket", where, std::strerror(error_number));
  }
  try {
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&to.storage), to.length) != 0) {
      if (errno != EINPROGRESS) {
        const int error_number = errno;
        throw io_error(-error_number, "connect", where, std::strerror(error_number));
      }
      wait_writable(fd, limit);
      int error_number = 0;
      socklen_t size = sizeof error_number;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error_number, &size);
      if (error_number != 0) {
        throw io_error(-error_number, "connect", where, std::strerror(error_number));
      }
    }
  } catch (...) {
    ::close(fd);
    throw;
  }
  return fd;
}

}  // namespace

std::vector<socket_address> addresses_of(const std::string& host, std::uint16_t port,
                                         const timeout& limit, const std::string& where) {
  // "" and "*" parse as the wildcard a listener takes; to connect they are names.
  std::vector<socket_address> addresses(1);
  if (parse_numeric(host, port, addresses[0].storage, addresses[0].length) && !host.empty() &&
      host != "*") {
    return addresses;
  }
  addresses.clear();
  for (const dns::address& found : dns::resolve(host, port, limit)) {
    socket_address next;
    if (parse_numeric(found.ip, port, next.storage, next.length)) {
      addresses.push_back(next);
    }
  }
  if (addresses.empty()) {
    throw io_error(-EHOSTUNREACH, "connect", where, "the name resolved to no usable address");
  }
  return addresses;
}

int connect_first(const std::vector<socket_address>& addresses, const timeout& limit,
                  std::string& where) {
  for (std::size_t i = 0;; ++i) {
    const socket_address& to = addresses.at(i);
    where = format_address(reinterpret_cast<const sockaddr*>(&to.storage), to.length);
    try {
      return connect_to(to, where, limit);
    } catch (const io_error&) {
      if (i + 1 == addresses.size()) {
        throw;  // the last address's error, naming it
      }
    }
  }
}

}  // namespace detail

std::shared_ptr<connection> connect(const std::string& host, std::uint16_t port,
                                    const connection_options& options, const timeout& limit) {
  if (options.tls != nullptr && options.tls->is_server()) {
    throw std::invalid_argument("weft::net::connect " + host + ":" + std::to_string(port) +
                                ": tls is a server's context; connect needs tls_context::client");
  }
  if (const std::string problem = detail::keepalive_problem(options.keepalive); !problem.empty()) {
    throw std::invalid_argument("weft::net::connect " + host + ":" + std::to_string(port) +
                                ": connection_options: " + problem);  // before connecting
  }
  // Every address of a name, tried in turn; a numeric host is its one address.
  const std::vector<detail::socket_address> addresses =
      detail::addresses_of(host, port, limit, host + ":" + std::to_string(port));
  std::string where;
  const int fd = detail::connect_first(addresses, limit, where);
  std::shared_ptr<connection> made;
  try {
    made = detail::connection_access::make(fd, options, 0, nullptr, where);
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (options.tls != nullptr) {
    detail::connection_access::connect_tls(*made, host, limit);
  }
  return made;
}

}  // namespace weft::net

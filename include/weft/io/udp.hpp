// weft::udp::socket: UDP datagrams for coroutines, IPv4 and IPv6, with multicast basics.
//
// Blocking: recv_from and send_to suspend only the calling coroutine, take a weft::timeout and
// are cancellable. Datagrams that arrive while nobody receives are queued in the socket (up to
// queue_limit of them; beyond that the socket stops reading and the kernel's buffer, then the
// network, drops the rest, as UDP does). A receive that times out or is cancelled loses nothing.
// One receiver at a time (a second concurrent receive is a std::logic_error); sends are sent in
// the order they were called.
// Threads and lifetimes: as for weft::stream (see stream.hpp): close or destroy the socket
// before run() returns. Errors: weft::io_error naming the operation and the address
// ("send_to 127.0.0.1:9: message too long").
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "weft/io/detail/handle_owner.hpp"
#include "weft/sched/timeout.hpp"

namespace weft {
namespace detail {
struct udp_state;
}

namespace udp {

// What recv_from got.
struct datagram {
  std::size_t bytes = 0;   // bytes copied into the buffer
  std::string peer;        // "127.0.0.1:5353" / "[::1]:5353"
  bool truncated = false;  // the datagram was longer than the buffer; the rest is lost
};

// Options of socket::bind.
struct bind_options {
  bool reuse_address = false;  // SO_REUSEADDR: several sockets on one port (multicast receivers)
  bool ipv6_only = false;      // for "::": IPv6 only, no IPv4-mapped datagrams
};

class socket {
 public:
  socket() noexcept = default;
  // A socket bound to host:port (port 0: an ephemeral port).
  static socket bind(const std::string& host, std::uint16_t port, const bind_options& options = {});

  // Assigning over a socket, or destroying it, closes it (as close()).
  socket(socket&& other) noexcept = default;
  socket& operator=(socket&& other) noexcept = default;
  socket(const socket&) = delete;
  socket& operator=(const socket&) = delete;
  ~socket() = default;

  // Sets the default peer: send() goes there, and only its datagrams are received.
  void connect(const std::string& host, std::uint16_t port);

  // Empty data sends an empty datagram: a real one, which the peer's recv_from returns with
  // bytes == 0. recv_from into an empty buffer takes the next datagram all the same (truncated
  // unless it was empty).
  void send_to(std::string_view data, const std::string& host, std::uint16_t port,
               const timeout& limit = timeout::never());
  void send(std::string_view data, const timeout& limit = timeout::never());  // after connect
  // Waits for the next datagram and copies it into buffer (see datagram for what it says).
  datagram recv_from(std::span<char> buffer, const timeout& limit = timeout::never());

  // Multicast and broadcast options (setsockopt; io_error when the OS refuses): join or leave a
  // group on an interface (empty: the default one), the hop limit of sent multicast datagrams,
  // whether they loop back to this host, and SO_BROADCAST.
  void join_group(const std::string& group, const std::string& interface_address = "");
  void leave_group(const std::string& group, const std::string& interface_address = "");
  void set_multicast_ttl(int ttl);        // the hop limit of multicast datagrams sent
  void set_multicast_loop(bool enabled);  // whether multicast datagrams sent loop back to this host
  void set_broadcast(bool enabled);       // SO_BROADCAST: allow sending to a broadcast address

  // The bound address ("0.0.0.0:5353"), its port, and whether the socket is open.
  std::string local_address() const;
  std::uint16_t port() const;
  bool is_open() const noexcept;  // false once closed or moved from
  // Idempotent; a receiver still waiting gets io_error UV_ECANCELED.
  void close() noexcept;

  // The most datagrams held while no coroutine waits in recv_from (see above).
  static constexpr std::size_t queue_limit = 1024;

 private:
  detail::udp_state& state(const char* operation) const;
  void send_to_address(std::string_view data, const void* address, const std::string& subject,
                       const char* operation, const timeout& limit);
  detail::handle_owner<detail::udp_state> state_;
};

}  // namespace udp
}  // namespace weft

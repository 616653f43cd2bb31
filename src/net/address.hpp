// Socket addresses as text ("127.0.0.1:5000", "[::1]:5000") and parsing of a numeric host.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "weft/sched/timeout.hpp"

namespace weft::net::detail {

std::string format_address(const sockaddr* address, socklen_t length);
// The address part of what format_address writes: "127.0.0.1:5000" -> "127.0.0.1",
// "[::1]:5000" -> "::1" (nginx's $remote_addr); text without a port as it is.
inline std::string_view address_part(std::string_view peer) noexcept {
  if (!peer.empty() && peer.front() == '[') {
    const std::size_t end = peer.find(']');
    return end == std::string_view::npos ? peer : peer.substr(1, end - 1);
  }
  const std::size_t colon = peer.rfind(':');
  return colon == std::string_view::npos ? peer : peer.substr(0, colon);
}
std::string local_address_of(int fd);
std::string peer_address_of(int fd);
// inet_pton(family, text, address) for text that may hold any byte: inet_pton reads a C string,
// so "::1" followed by a NUL and anything else would parse as ::1 while the caller kept the rest
// (the HTTP client put it in the Host field: tests/http/fuzz/url_fuzz.cpp found it). Text with a
// NUL, or longer than any address of either family is written, is no address.
bool parse_ip_literal(int family, std::string_view text, void* address) noexcept;
// Fills storage from a numeric IPv4 or IPv6 host ("" and "*" mean every IPv4 address); false
// when host is not numeric.
bool parse_numeric(const std::string& host, std::uint16_t port, sockaddr_storage& storage,
                   socklen_t& length);

// One socket address, as parse_numeric fills it.
struct socket_address {
  sockaddr_storage storage{};
  socklen_t length = 0;
};
// Where to connect for host:port: the one address of a numeric host, else every address the
// name resolves to (dns::resolve within limit), in its order. io_error (EHOSTUNREACH, naming
// `where`) when a name resolves to no usable address. (net::connect and http::client; pipe.cpp.)
std::vector<socket_address> addresses_of(const std::string& host, std::uint16_t port,
                                         const timeout& limit, const std::string& where);
// Connects a non-blocking TCP socket to each address in turn until one answers (a name's
// addresses: localhost may be ::1 first while the server listens on 127.0.0.1 only): its fd,
// and in `where` the address it reached. The last address's io_error (naming it) when none
// does; timeout_error or cancelled_error from limit, which bounds them all, at once. Nothing is
// left open on failure. (net::connect; src/net/pipe.cpp.)
int connect_first(const std::vector<socket_address>& addresses, const timeout& limit,
                  std::string& where);

// An address block in CIDR notation ("10.0.0.0/8", "2001:db8::/32"), or one address ("127.0.0.1",
// "::1": the whole length). An IPv4 block also takes IPv4-mapped IPv6 peers (::ffff:10.1.2.3), as
// a dual-stack listener reports its IPv4 clients.
struct address_block {
  int family = 0;  // AF_INET or AF_INET6
  unsigned char bytes[16] = {};
  unsigned prefix = 0;  // leading bits that must match
};
// False when text is not such a block (bits set past the prefix are allowed and ignored).
bool parse_address_block(std::string_view text, address_block& block) noexcept;
// Whether the socket address is in the block.
bool in_block(const address_block& block, const sockaddr* address) noexcept;

}  // namespace weft::net::detail

// Socket addresses as text ("127.0.0.1:5000", "[::1]:5000") and parsing of a numeric host.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>

namespace weft::net::detail {

std::string format_address(const sockaddr* address, socklen_t length);
std::string local_address_of(int fd);
std::string peer_address_of(int fd);
// Fills storage from a numeric IPv4 or IPv6 host ("" and "*" mean every IPv4 address); false
// when host is not numeric.
bool parse_numeric(const std::string& host, std::uint16_t port, sockaddr_storage& storage,
                   socklen_t& length);

}  // namespace weft::net::detail

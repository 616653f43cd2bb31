// Socket addresses as text ("127.0.0.1:5000", "[::1]:5000") and parsing of a numeric host.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace weft::net::detail {

std::string format_address(const sockaddr* address, socklen_t length);
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

}  // namespace weft::net::detail

// The PROXY protocol header (HAProxy's "PROXY protocol", versions 1 and 2): what a proxy or load
// balancer in front of a server writes at the start of each connection it opens to the server,
// naming the client it accepted (the source) and the address the client connected to (the
// destination), so the server sees the client's address rather than the proxy's.
//
//   v1, text, at most 107 bytes:  "PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\n"
//                                 "PROXY TCP6 2001:db8::1 2001:db8::2 56324 443\r\n"
//                                 "PROXY UNKNOWN[ anything]\r\n"
//   v2, binary: the 12-byte signature "\r\n\r\n\0\r\nQUIT\n", a version and command byte (0x21
//     PROXY, 0x20 LOCAL: the proxy's own connection, a health check), an address family and
//     transport byte, a 16-bit big-endian length, then the addresses (IPv4: 12 bytes, IPv6:
//     36, UNIX: 216) and type-length-value extensions, which are skipped.
//
// parse_proxy_header is pure (no socket, no allocation unless a header is complete or refused),
// so the fuzzer (tests/net/fuzz) runs it alone.
#pragma once

#include <sys/socket.h>

#include <cstddef>
#include <string>

namespace weft::net::detail {

struct proxy_header {
  enum class outcome : unsigned char {
    incomplete,  // a prefix of a valid header: read more
    complete,    // size bytes are the header
    invalid,     // why says what is wrong
  };
  outcome result = outcome::incomplete;
  std::size_t size = 0;
  // Whether source and destination are known: false for v1 UNKNOWN, v2 LOCAL, and v2 families
  // other than TCP and UDP over IPv4 and IPv6 (the receiver keeps the socket's addresses).
  bool addresses = false;
  sockaddr_storage source{};
  socklen_t source_length = 0;
  sockaddr_storage destination{};
  socklen_t destination_length = 0;
  std::string why;
};

// The longest v2 header accepted (16 + addresses + extensions); HAProxy's own stay far below.
inline constexpr std::size_t max_proxy_header_v2 = 4096;

// Parses the header at the start of [bytes, bytes + size).
proxy_header parse_proxy_header(const char* bytes, std::size_t size);

}  // namespace weft::net::detail

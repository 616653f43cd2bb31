// The PROXY protocol header's parser (proxy_header.hpp), after HAProxy's specification
// (doc/proxy-protocol.txt: versions 1 and 2).
#include "net/proxy_header.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "net/address.hpp"

namespace weft::net::detail {

namespace {

constexpr std::string_view v1_prefix = "PROXY ";
constexpr std::size_t v1_max = 107;  // the longest v1 line, its CRLF included
constexpr char v2_signature[12] = {'\r', '\n', '\r', '\n', '\0', '\r',
                                   '\n', 'Q',  'U',  'I',  'T',  '\n'};

proxy_header refused(std::string why) {
  proxy_header header;
  header.result = proxy_header::outcome::invalid;
  header.why = std::move(why);
  return header;
}

// Whether the first size bytes could still begin `whole` (a header not yet complete).
bool prefix_of(const char* bytes, std::size_t size, std::string_view whole) {
  return std::string_view(bytes, std::min(size, whole.size())) ==
         whole.substr(0, std::min(size, whole.size()));
}

// "0".."65535", digits only, no sign, no leading zero.
bool parse_port(std::string_view text, std::uint16_t& port) {
  if (text.empty() || text.size() > 5 || (text.size() > 1 && text[0] == '0')) {
    return false;
  }
  unsigned value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') {
      return false;
    }
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  if (value > 65535) {
    return false;
  }
  port = static_cast<std::uint16_t>(value);
  return true;
}

bool fill_address(int family, std::string_view host, std::uint16_t port, sockaddr_storage& out,
                  socklen_t& length) {
  out = {};
  if (family == AF_INET) {
    auto* v4 = reinterpret_cast<sockaddr_in*>(&out);
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    length = sizeof(sockaddr_in);
    return parse_ip_literal(AF_INET, host, &v4->sin_addr);
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&out);
  v6->sin6_family = AF_INET6;
  v6->sin6_port = htons(port);
  length = sizeof(sockaddr_in6);
  return parse_ip_literal(AF_INET6, host, &v6->sin6_addr);
}

proxy_header parse_v1(const char* bytes, std::size_t size) {
  const std::string_view seen(bytes, std::min(size, v1_max));
  // The line ends at its first LF, which must follow a CR: deciding on the first LF, not the
  // first CRLF, gives the same answer however the bytes are split across reads.
  const std::size_t lf = seen.find('\n');
  if (lf == std::string_view::npos) {
    if (size >= v1_max) {
      return refused("a PROXY v1 header without its CRLF in the first 107 bytes");
    }
    return {};
  }
  if (seen[lf - 1] != '\r') {
    return refused("a PROXY v1 header ended by a bare LF, not CRLF");
  }
  const std::size_t end = lf - 1;
  std::string_view line = seen.substr(v1_prefix.size(), end - v1_prefix.size());
  proxy_header header;
  header.result = proxy_header::outcome::complete;
  header.size = end + 2;
  if (line == "UNKNOWN" || line.substr(0, 8) == "UNKNOWN ") {
    return header;  // the proxy does not know (or tell) the addresses
  }
  std::string_view fields[5];
  std::size_t count = 0;
  while (count < 5) {
    const std::size_t space = line.find(' ');
    fields[count++] = line.substr(0, space);
    if (space == std::string_view::npos) {
      line = {};
      break;
    }
    line.remove_prefix(space + 1);
  }
  if (count != 5 || !line.empty()) {
    return refused("a PROXY v1 header needs a protocol and four fields separated by single spaces");
  }
  int family = 0;
  if (fields[0] == "TCP4") {
    family = AF_INET;
  } else if (fields[0] == "TCP6") {
    family = AF_INET6;
  } else {
    return refused("a PROXY v1 header names the protocol '" + std::string(fields[0]) +
                   "' (TCP4, TCP6 or UNKNOWN)");
  }
  std::uint16_t source_port = 0;
  std::uint16_t destination_port = 0;
  if (!parse_port(fields[3], source_port) || !parse_port(fields[4], destination_port)) {
    return refused("a PROXY v1 header's ports must be decimal numbers from 0 to 65535");
  }
  if (!fill_address(family, fields[1], source_port, header.source, header.source_length) ||
      !fill_address(family, fields[2], destination_port, header.destination,
                    header.destination_length)) {
    return refused(std::string("a PROXY v1 header's addresses are not ") +
                   (family == AF_INET ? "IPv4" : "IPv6") + " addresses as " +
                   std::string(fields[0]) + " says");
  }
  header.addresses = true;
  return header;
}

proxy_header parse_v2(const char* bytes, std::size_t size) {
  if (size < 16) {
    return {};
  }
  const auto* raw = reinterpret_cast<const unsigned char*>(bytes);
  const unsigned version = raw[12] >> 4;
  const unsigned command = raw[12] & 0x0f;
  if (version != 2) {
    return refused("a PROXY v2 signature with version " + std::to_string(version) + ", not 2");
  }
  if (command > 1) {
    return refused("a PROXY v2 header with the command " + std::to_string(command) +
                   " (0 LOCAL or 1 PROXY)");
  }
  const std::size_t length = (std::size_t{raw[14]} << 8) | raw[15];
  if (16 + length > max_proxy_header_v2) {
    return refused("a PROXY v2 header of " + std::to_string(16 + length) +
                   " bytes, more than the " + std::to_string(max_proxy_header_v2) +
                   " weft accepts");
  }
  const unsigned family = raw[13] >> 4;
  const unsigned transport = raw[13] & 0x0f;
  if (family > 3 || transport > 2) {
    return refused("a PROXY v2 header with the unknown address family and transport 0x" +
                   std::string(1, "0123456789abcdef"[family]) +
                   std::string(1, "0123456789abcdef"[transport]));
  }
  // The addresses' size each family needs, checked even for a header whose addresses are not
  // used: a header shorter than its family says is malformed.
  static constexpr std::size_t needed[4] = {0, 12, 36, 216};
  if (length < needed[family]) {
    return refused("a PROXY v2 header of length " + std::to_string(length) +
                   ", too short for its addresses (" + std::to_string(needed[family]) + ")");
  }
  if (size < 16 + length) {
    return {};
  }
  proxy_header header;
  header.result = proxy_header::outcome::complete;
  header.size = 16 + length;
  if (command == 0 || transport == 0 || (family != 1 && family != 2)) {
    return header;  // LOCAL, UNSPEC, or UNIX sockets: the socket's own addresses stand
  }
  const unsigned char* at = raw + 16;
  if (family == 1) {
    auto* source = reinterpret_cast<sockaddr_in*>(&header.source);
    auto* destination = reinterpret_cast<sockaddr_in*>(&header.destination);
    source->sin_family = destination->sin_family = AF_INET;
    std::memcpy(&source->sin_addr, at, 4);
    std::memcpy(&destination->sin_addr, at + 4, 4);
    std::memcpy(&source->sin_port, at + 8, 2);  // network order on both sides
    std::memcpy(&destination->sin_port, at + 10, 2);
    header.source_length = header.destination_length = sizeof(sockaddr_in);
  } else {
    auto* source = reinterpret_cast<sockaddr_in6*>(&header.source);
    auto* destination = reinterpret_cast<sockaddr_in6*>(&header.destination);
    source->sin6_family = destination->sin6_family = AF_INET6;
    std::memcpy(&source->sin6_addr, at, 16);
    std::memcpy(&destination->sin6_addr, at + 16, 16);
    std::memcpy(&source->sin6_port, at + 32, 2);
    std::memcpy(&destination->sin6_port, at + 34, 2);
    header.source_length = header.destination_length = sizeof(sockaddr_in6);
  }
  header.addresses = true;
  return header;
}

}  // namespace

proxy_header parse_proxy_header(const char* bytes, std::size_t size) {
  if (size == 0) {
    return {};
  }
  if (bytes[0] == 'P') {
    if (size < v1_prefix.size()) {
      return prefix_of(bytes, size, v1_prefix)
                 ? proxy_header{}
                 : refused("the connection does not start with a PROXY protocol header");
    }
    if (std::string_view(bytes, v1_prefix.size()) == v1_prefix) {
      return parse_v1(bytes, size);
    }
  } else if (bytes[0] == '\r') {
    const std::string_view signature(v2_signature, sizeof v2_signature);
    if (prefix_of(bytes, size, signature)) {
      return size < signature.size() ? proxy_header{} : parse_v2(bytes, size);
    }
  }
  return refused("the connection does not start with a PROXY protocol header");
}

}  // namespace weft::net::detail

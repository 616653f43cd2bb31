#include "net/address.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

namespace weft::net::detail {

std::string format_address(const sockaddr* address, socklen_t length) {
  char text[INET6_ADDRSTRLEN] = {};
  if (address->sa_family == AF_INET && length >= static_cast<socklen_t>(sizeof(sockaddr_in))) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(address);
    ::inet_ntop(AF_INET, &v4->sin_addr, text, sizeof text);
    return std::string(text) + ":" + std::to_string(ntohs(v4->sin_port));
  }
  if (address->sa_family == AF_INET6 && length >= static_cast<socklen_t>(sizeof(sockaddr_in6))) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(address);
    ::inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof text);
    return "[" + std::string(text) + "]:" + std::to_string(ntohs(v6->sin6_port));
  }
  return {};
}

std::string local_address_of(int fd) {
  sockaddr_storage storage{};
  socklen_t length = sizeof storage;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&storage), &length) != 0) {
    return {};
  }
  return format_address(reinterpret_cast<sockaddr*>(&storage), length);
}

std::string peer_address_of(int fd) {
  sockaddr_storage storage{};
  socklen_t length = sizeof storage;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&storage), &length) != 0) {
    return {};
  }
  return format_address(reinterpret_cast<sockaddr*>(&storage), length);
}

bool parse_ip_literal(int family, std::string_view text, void* address) noexcept {
  char terminated[INET6_ADDRSTRLEN];  // the longest text of either family and its NUL
  if (text.size() >= sizeof terminated || text.find('\0') != std::string_view::npos) {
    return false;
  }
  std::memcpy(terminated, text.data(), text.size());
  terminated[text.size()] = '\0';
  return ::inet_pton(family, terminated, address) == 1;
}

bool parse_numeric(const std::string& host, std::uint16_t port, sockaddr_storage& storage,
                   socklen_t& length) {
  std::memset(&storage, 0, sizeof storage);
  auto* v4 = reinterpret_cast<sockaddr_in*>(&storage);
  if (host.empty() || host == "*" || host == "0.0.0.0") {
    v4->sin_family = AF_INET;
    v4->sin_addr.s_addr = htonl(INADDR_ANY);
    v4->sin_port = htons(port);
    length = sizeof(sockaddr_in);
    return true;
  }
  if (parse_ip_literal(AF_INET, host, &v4->sin_addr)) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    length = sizeof(sockaddr_in);
    return true;
  }
  std::string_view bare = host;
  if (bare.size() > 2 && bare.front() == '[' && bare.back() == ']') {
    bare = bare.substr(1, bare.size() - 2);
  }
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&storage);
  if (parse_ip_literal(AF_INET6, bare, &v6->sin6_addr)) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    length = sizeof(sockaddr_in6);
    return true;
  }
  return false;
}

bool parse_address_block(std::string_view text, address_block& block) noexcept {
  const std::size_t slash = text.find('/');
  const std::string_view address = text.substr(0, slash);
  block = address_block{};
  if (parse_ip_literal(AF_INET, address, block.bytes)) {
    block.family = AF_INET;
    block.prefix = 32;
  } else if (parse_ip_literal(AF_INET6, address, block.bytes)) {
    block.family = AF_INET6;
    block.prefix = 128;
  } else {
    return false;
  }
  if (slash == std::string_view::npos) {
    return true;
  }
  const std::string_view digits = text.substr(slash + 1);
  if (digits.empty() || digits.size() > 3) {
    return false;
  }
  unsigned prefix = 0;
  for (const char c : digits) {
    if (c < '0' || c > '9') {
      return false;
    }
    prefix = prefix * 10 + static_cast<unsigned>(c - '0');
  }
  if (prefix > block.prefix) {
    return false;
  }
  block.prefix = prefix;
  return true;
}

bool in_block(const address_block& block, const sockaddr* address) noexcept {
  const unsigned char* bytes = nullptr;
  if (address->sa_family == AF_INET) {
    if (block.family != AF_INET) {
      return false;
    }
    bytes = reinterpret_cast<const unsigned char*>(
        &reinterpret_cast<const sockaddr_in*>(address)->sin_addr);
  } else if (address->sa_family == AF_INET6) {
    const auto* v6 = &reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr;
    bytes = reinterpret_cast<const unsigned char*>(v6);
    if (block.family == AF_INET) {
      if (!IN6_IS_ADDR_V4MAPPED(v6)) {
        return false;
      }
      bytes += 12;  // the IPv4 address inside ::ffff:a.b.c.d
    }
  } else {
    return false;
  }
  const unsigned whole = block.prefix / 8;
  if (std::memcmp(bytes, block.bytes, whole) != 0) {
    return false;
  }
  const unsigned rest = block.prefix % 8;
  if (rest == 0) {
    return true;
  }
  const auto mask = static_cast<unsigned char>(0xFF << (8 - rest));
  return (bytes[whole] & mask) == (block.bytes[whole] & mask);
}

}  // namespace weft::net::detail

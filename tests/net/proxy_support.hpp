// PROXY protocol v2 headers for the tests (proxy_header_test.cpp, proxy_protocol_test.cpp).
#pragma once

#include <arpa/inet.h>

#include <cstdint>
#include <string>

namespace proxy_test {

inline const std::string v2_signature("\r\n\r\n\0\r\nQUIT\n", 12);

// A v2 header: command (0 LOCAL, 1 PROXY), family and transport, then `body` (addresses and
// extensions), its length written big-endian.
inline std::string v2(unsigned char command, unsigned char family, const std::string& body) {
  std::string header = v2_signature;
  header += static_cast<char>(0x20 | command);
  header += static_cast<char>(family);
  header += static_cast<char>(body.size() >> 8);
  header += static_cast<char>(body.size() & 0xff);
  return header + body;
}

inline std::string v2_tcp4_body(const char* source, const char* destination, std::uint16_t sport,
                                std::uint16_t dport) {
  std::string body(12, '\0');
  ::inet_pton(AF_INET, source, body.data());
  ::inet_pton(AF_INET, destination, body.data() + 4);
  body[8] = static_cast<char>(sport >> 8);
  body[9] = static_cast<char>(sport & 0xff);
  body[10] = static_cast<char>(dport >> 8);
  body[11] = static_cast<char>(dport & 0xff);
  return body;
}

}  // namespace proxy_test

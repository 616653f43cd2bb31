// Multipart boundaries for the http layer's own multipart bodies (static_files' byteranges,
// multipart_form). Internal to the library.
#pragma once

#include <stdlib.h>

#include <cstdint>
#include <string>

namespace weft::http::detail {

// A boundary (RFC 2046 5.1.1): "weft" and 24 hex digits from arc4random_buf (glibc's ChaCha20,
// seeded from getrandom per thread): unpredictable even to a client that has seen many of them,
// so that bytes a client had a hand in (an uploaded file, a form field) cannot be made to hold
// the boundary of the body they go out in.
inline std::string random_boundary() {
  unsigned char bits[12];
  ::arc4random_buf(bits, sizeof bits);
  constexpr char hex[] = "0123456789abcdef";
  std::string boundary = "weft";
  for (unsigned char b : bits) {
    boundary.push_back(hex[b >> 4]);
    boundary.push_back(hex[b & 15]);
  }
  return boundary;
}

}  // namespace weft::http::detail

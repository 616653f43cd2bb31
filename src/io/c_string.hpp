// Text that io hands to a C interface (a path, a host name, a service, a program's arguments and
// environment) goes as a C string, which ends at its first NUL: "/srv/a\0.txt" would open
// /srv/a, "127.0.0.1\0junk" would connect to 127.0.0.1, an argument "x\0y" would reach the child
// as "x", each while the caller believed the whole text was used. Such text is refused before
// anything is done, with io_error(UV_EINVAL) naming the call, what held the NUL and where
// (Go's os.Open and Rust's std::fs refuse it the same way, with EINVAL / InvalidInput).
#pragma once

#include <uv.h>

#include <cstddef>
#include <string>
#include <string_view>

#include "weft/error.hpp"

namespace weft::detail {

// text with each NUL written as the two characters \0, for a message or an io_error's subject.
inline std::string shown_with_nuls(std::string_view text) {
  std::string shown;
  shown.reserve(text.size() + 2);
  for (char c : text) {
    if (c == '\0') {
      shown += "\\0";
    } else {
      shown += c;
    }
  }
  return shown;
}

[[noreturn, gnu::cold, gnu::noinline]] inline void throw_nul_inside(std::string_view text,
                                                                    std::size_t at,
                                                                    const char* operation,
                                                                    const char* what) {
  throw io_error(UV_EINVAL, operation, shown_with_nuls(text),
                 std::string("the ") + what + " contains a NUL byte at offset " +
                     std::to_string(at) +
                     "; the system takes it as a C string and would cut it short there, so "
                     "nothing was done");
}

// Throws io_error(UV_EINVAL, operation, ...) when text holds a NUL. what: "path", "host", ...
inline void refuse_nul(std::string_view text, const char* operation, const char* what) {
  const std::size_t at = text.find('\0');
  if (at != std::string_view::npos) {
    throw_nul_inside(text, at, operation, what);
  }
}

}  // namespace weft::detail

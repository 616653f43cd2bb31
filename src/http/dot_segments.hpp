// Dot segments in a request's path. Internal to the http layer.
#pragma once

#include <cstddef>
#include <string_view>

namespace weft::http::detail {

// Whether a raw (still percent-encoded) path has a "." or ".." segment, written as dots or
// encoded (%2e, %2E, mixed). A client resolves them before it sends a path (RFC 3986 5.2.4:
// browsers, curl, Go and Python do); one that arrives with them would leave the prefix a route
// or a proxy matched it by ("/api/../admin" matched as /api/*, and passed on as such by a
// proxy, reaches /admin upstream). "..." and ".x" are ordinary names.
inline bool has_dot_segment(std::string_view path) noexcept {
  for (std::size_t at = path.find('/'); at != std::string_view::npos; at = path.find('/', at)) {
    ++at;  // the segment's first byte
    std::size_t dots = 0;
    std::size_t i = at;
    while (i < path.size() && dots <= 2) {
      if (path[i] == '.') {
        i += 1;
      } else if (path[i] == '%' && i + 2 < path.size() && path[i + 1] == '2' &&
                 (path[i + 2] == 'e' || path[i + 2] == 'E')) {
        i += 3;
      } else {
        break;
      }
      ++dots;
    }
    if (dots >= 1 && dots <= 2 && (i == path.size() || path[i] == '/')) {
      return true;
    }
  }
  return false;
}

// The 400's body for such a path (the router's and the reverse proxy's).
inline constexpr std::string_view dot_segment_refusal =
    "the path has a \".\" or \"..\" segment; resolve it before sending (RFC 3986 5.2.4)\n";

}  // namespace weft::http::detail

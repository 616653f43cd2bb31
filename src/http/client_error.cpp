// weft::http::error, the client's failures (client.hpp), on its own: the URL parser
// (client_url.cpp) throws it too, and the URL fuzzer (tests/http/fuzz/url_fuzz.cpp) links the two
// without the rest of the client.
#include <string>
#include <utility>

#include "weft/http/client.hpp"

namespace weft::http {

const char* to_string(error_kind kind) noexcept {
  switch (kind) {
    case error_kind::invalid_url:
      return "invalid URL";
    case error_kind::unsupported_scheme:
      return "unsupported scheme";
    case error_kind::malformed_response:
      return "malformed response";
    case error_kind::response_too_large:
      return "response too large";
    case error_kind::unexpected_response:
      return "unexpected response";
    case error_kind::too_many_redirects:
      return "too many redirects";
    case error_kind::redirect_loop:
      return "redirect loop";
    case error_kind::proxy_refused:
      return "proxy refused the tunnel";
  }
  return "unknown";
}

error::error(error_kind kind, std::string url, const std::string& message)
    : weft::error("http " + url + ": " + to_string(kind) + ": " + message),
      kind_(kind),
      url_(std::move(url)) {}

}  // namespace weft::http

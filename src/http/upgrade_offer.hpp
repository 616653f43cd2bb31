// Whether a 101's Upgrade field names only protocols the request offered (RFC 9110 7.8): the
// check of both sides of a protocol switch, the client's (client::upgrade) and the server's
// (exchange::switch_protocols). Internal to the http layer.
#pragma once

#include <algorithm>
#include <string_view>

#include "http/chars.hpp"
#include "weft/http/headers.hpp"

namespace weft::http::detail {

// True when the comma-separated list `chosen` names at least one protocol and every one it
// names is listed by request_fields' Upgrade fields (names and versions compared without
// regard to case).
inline bool upgrade_offered(const headers& request_fields, std::string_view chosen) {
  bool any = false;
  std::size_t at = 0;
  while (at <= chosen.size()) {
    const std::size_t comma = std::min(chosen.find(',', at), chosen.size());
    const std::string_view one = trim_ows(chosen.substr(at, comma - at));
    at = comma + 1;
    if (one.empty()) {
      continue;
    }
    if (!request_fields.has_token("Upgrade", one)) {
      return false;
    }
    any = true;
  }
  return any;
}

}  // namespace weft::http::detail

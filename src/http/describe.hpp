// How the http parsers name peer bytes in their error reasons: escaped, and cut at 64 bytes so
// that a reason never grows with the input. Internal to the http layer.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace weft::http::detail {

// "0x41 'A'" for a visible byte, "0x0A" for the others.
inline std::string byte_name(unsigned char c) {
  static constexpr char digits[] = "0123456789ABCDEF";
  std::string s = "0x";
  s.push_back(digits[c >> 4]);
  s.push_back(digits[c & 15]);
  if (c >= 0x21 && c < 0x7F) {
    s += " '";
    s.push_back(static_cast<char>(c));
    s += "'";
  }
  return s;
}

// At most 64 bytes of peer input in single quotes, controls and non-ASCII as \xHH.
inline std::string quoted(std::string_view text) {
  static constexpr char digits[] = "0123456789ABCDEF";
  std::string s = "'";
  for (unsigned char c : text.substr(0, 64)) {
    if (c >= 0x20 && c < 0x7F) {
      s.push_back(static_cast<char>(c));
    } else {
      s += "\\x";
      s.push_back(digits[c >> 4]);
      s.push_back(digits[c & 15]);
    }
  }
  if (text.size() > 64) s += "...";
  s += "'";
  return s;
}

inline bool is_space_or_tab(char c) noexcept { return c == ' ' || c == '\t'; }

// Why a host (a Host field, an absolute-form target's authority) is refused: "<what> '<value>'
// <after> is not a host[:port] (RFC <section>): <the byte> at offset <at>", or ": it is empty"
// when at is npos.
inline std::string host_fault_reason(std::string_view what, std::string_view value,
                                     std::string_view after, std::size_t at,
                                     std::string_view section) {
  std::string reason = std::string(what) + " " + quoted(value) + std::string(after) +
                       " is not a host[:port] (RFC " + std::string(section) + "): ";
  if (at == std::string_view::npos) return reason + "it is empty";
  return reason + byte_name(static_cast<unsigned char>(value[at])) + " at offset " +
         std::to_string(at);
}

}  // namespace weft::http::detail

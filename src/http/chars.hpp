// Character classes of RFC 9110 / RFC 9112 for the http layer's parser and message code.
// Internal to the library; pure functions on bytes, safe from any thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace weft::http::detail {

// tchar (RFC 9110 5.6.2): the characters of a token (method, field name, transfer coding).
constexpr std::array<bool, 256> make_token_table() {
  std::array<bool, 256> table{};
  for (int c = '0'; c <= '9'; ++c) table[c] = true;
  for (int c = 'a'; c <= 'z'; ++c) table[c] = true;
  for (int c = 'A'; c <= 'Z'; ++c) table[c] = true;
  for (char c : std::string_view("!#$%&'*+-.^_`|~")) table[static_cast<unsigned char>(c)] = true;
  return table;
}
inline constexpr std::array<bool, 256> token_table = make_token_table();

inline bool is_token_char(unsigned char c) noexcept { return token_table[c]; }

inline bool is_token(std::string_view s) noexcept {
  if (s.empty()) return false;
  for (unsigned char c : s) {
    if (!token_table[c]) return false;
  }
  return true;
}

// field-vchar / obs-text, SP and HTAB: what a field value may hold (RFC 9110 5.5). Everything
// but the controls (0x00-0x1F except HTAB) and DEL.
inline bool is_field_value_char(unsigned char c) noexcept {
  return (c >= 0x20 && c != 0x7F) || c == '\t';
}

inline bool is_hex_digit(unsigned char c) noexcept {
  return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f');
}

inline int hex_value(unsigned char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  return (c | 0x20) - 'a' + 10;
}

constexpr unsigned char ascii_lower(unsigned char c) noexcept {
  return (c >= 'A' && c <= 'Z') ? static_cast<unsigned char>(c | 0x20) : c;
}

// Case-insensitive comparison of ASCII names (field names, codings, connection options).
inline bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (ascii_lower(static_cast<unsigned char>(a[i])) !=
        ascii_lower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

// The key the header index filters on: the name's length and its first, middle and last
// bytes, case-folded, so "Host" and "host" key alike. Only a filter in front of iequals, never
// trusted alone. O(1) on purpose: a hash over every byte (FNV) is a serial multiply chain that
// cost the parser a sixth to a third of a request (bench/http/parser_bench.cpp, CPU time:
// hello 129 -> 105 ns, browser 298 -> 204 ns), and names that share their length and those
// three bytes are rare in one message.
constexpr std::uint32_t name_hash(std::string_view name) noexcept {
  std::size_t n = name.size();
  if (n == 0) return 0;
  auto at = [&](std::size_t i) {
    return static_cast<std::uint32_t>(ascii_lower(static_cast<unsigned char>(name[i])));
  };
  return static_cast<std::uint32_t>(n) << 24 ^ at(0) << 16 ^ at(n / 2) << 8 ^ at(n - 1);
}

// OWS (RFC 9110 5.6.3) trimmed from both ends.
inline std::string_view trim_ows(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace weft::http::detail

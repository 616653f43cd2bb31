// Character classes of RFC 9110 / RFC 9112 for the http layer's parser and message code.
// Internal to the library; pure functions on bytes, safe from any thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
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

// What a Host field value (RFC 9112 3.2: uri-host [ ":" port ]) may hold: RFC 3986's reg-name
// characters (unreserved, sub-delims, pct-encoded's '%'), the ':' before a port and inside an
// IPv6 literal, and an IP-literal's brackets. Not space, '@' (no userinfo in Host), '/', '?',
// '#', '\\', quotes or controls (Go's net/http refuses the same set).
constexpr std::array<bool, 256> make_host_table() {
  std::array<bool, 256> table{};
  for (int c = '0'; c <= '9'; ++c) table[c] = true;
  for (int c = 'a'; c <= 'z'; ++c) table[c] = true;
  for (int c = 'A'; c <= 'Z'; ++c) table[c] = true;
  for (char c : std::string_view("-._~!$&'()*+,;=:[]%"))
    table[static_cast<unsigned char>(c)] = true;
  return table;
}
inline constexpr std::array<bool, 256> host_table = make_host_table();

// Whether the n bytes at a and b are equal, compared in registers inline (for keys of a few
// dozen bytes, where memcmp's call costs more than the compare): eight at a time, the last
// eight overlapping the ones before; under eight, four and four.
[[gnu::hot]] inline bool equal_short_bytes(const char* a, const char* b, std::size_t n) noexcept {
  const auto load8 = [](const char* p) {
    std::uint64_t v = 0;
    std::memcpy(&v, p, 8);
    return v;
  };
  const auto load4 = [](const char* p) {
    std::uint32_t v = 0;
    std::memcpy(&v, p, 4);
    return v;
  };
  if (n >= 8) {
    for (std::size_t i = 0; i + 8 < n; i += 8) {
      if (load8(a + i) != load8(b + i)) return false;
    }
    return load8(a + n - 8) == load8(b + n - 8);
  }
  if (n >= 4) {
    return load4(a) == load4(b) && load4(a + n - 4) == load4(b + n - 4);
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

// The last Host value this thread found valid. A keep-alive connection sends the same Host
// with every request, and one worker's connections mostly the same few, so most checks are a
// compare with it instead of a table lookup per byte (which cost 95 instructions per request
// for "127.0.0.1:18082", 3% of a keep-alive request; callgrind, bench_http_weft).
struct verified_host {
  char bytes[64] = {};
  std::size_t size = 0;  // 0: none yet (an empty value needs no scan)
};
// Constant-initialised (constinit), so reaching it costs no call of a thread_local's init.
constinit inline thread_local verified_host last_verified_host{};

// The offset of the first byte of value a Host field may not hold, or npos.
[[gnu::hot]] inline std::size_t find_non_host_char(std::string_view value) noexcept {
  verified_host& last = last_verified_host;
  if (value.size() == last.size && equal_short_bytes(value.data(), last.bytes, value.size())) {
    return std::string_view::npos;
  }
  for (std::size_t at = 0; at < value.size(); ++at) {
    if (!host_table[static_cast<unsigned char>(value[at])]) return at;
  }
  if (value.size() <= sizeof last.bytes) {
    std::memcpy(last.bytes, value.data(), value.size());
    last.size = value.size();
  }
  return std::string_view::npos;
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

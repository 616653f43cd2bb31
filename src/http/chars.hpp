// Character classes of RFC 9110 / RFC 9112 for the http layer's parser and message code.
// Internal to the library; pure functions on bytes, safe from any thread.
#pragma once

#include <array>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace weft::http::detail {

// A field value that is one decimal number (Content-Length): nullopt when it is empty, holds any
// other byte, or does not fit in 64 bits.
inline std::optional<std::uint64_t> decimal_value(std::string_view s) noexcept {
  std::uint64_t n = 0;
  const auto [end, failure] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (s.empty() || failure != std::errc() || end != s.data() + s.size()) {
    return std::nullopt;
  }
  return n;
}

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

// Unaligned loads of 8 and 4 bytes (memcpy: no alignment or aliasing assumptions).
inline std::uint64_t load_u64(const char* p) noexcept {
  std::uint64_t v = 0;
  std::memcpy(&v, p, 8);
  return v;
}

inline std::uint32_t load_u32(const char* p) noexcept {
  std::uint32_t v = 0;
  std::memcpy(&v, p, 4);
  return v;
}

// Every byte of x in 'A'..'Z' turned into its lower case, the others unchanged, in one register:
// a byte's low seven bits plus 0x80 - 'A' carry into its top bit when it is at least 'A', plus
// 0x80 - 'Z' - 1 when it is past 'Z' (neither sum leaves the byte, so no byte disturbs its
// neighbour); a byte with its own top bit set is no letter. The 0x80 flag shifted right by two
// is 0x20, the case bit.
constexpr std::uint64_t ascii_lower_word(std::uint64_t x) noexcept {
  constexpr std::uint64_t ones = 0x0101010101010101u;
  const std::uint64_t low7 = x & (0x7F * ones);
  const std::uint64_t at_least_a = low7 + (0x80 - 'A') * ones;
  const std::uint64_t past_z = low7 + (0x80 - 'Z' - 1) * ones;
  const std::uint64_t upper = at_least_a & ~past_z & ~x & (0x80 * ones);
  return x | (upper >> 2);
}

// Whether the n bytes at a and b are equal once `fold` has mapped them, compared in registers
// inline (for keys of a few dozen bytes, where memcmp's call costs more than the compare): eight
// at a time, the last eight overlapping the ones before; from four to seven as two overlapping
// fours in one word; under four byte by byte. fold maps a word bytewise (a zero byte to zero).
template <class Fold>
[[gnu::always_inline]] inline bool equal_short_words(const char* a, const char* b, std::size_t n,
                                                     Fold fold) noexcept {
  if (n >= 8) {
    for (std::size_t i = 0; i + 8 < n; i += 8) {
      if (fold(load_u64(a + i)) != fold(load_u64(b + i))) return false;
    }
    return fold(load_u64(a + n - 8)) == fold(load_u64(b + n - 8));
  }
  if (n >= 4) {
    const auto fours = [n](const char* p) {
      return load_u32(p) | std::uint64_t{load_u32(p + n - 4)} << 32;
    };
    return fold(fours(a)) == fold(fours(b));
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (fold(static_cast<unsigned char>(a[i])) != fold(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

// Whether the n bytes at a and b are equal (equal_short_words without a fold).
[[gnu::hot]] inline bool equal_short_bytes(const char* a, const char* b, std::size_t n) noexcept {
  return equal_short_words(a, b, n, [](std::uint64_t word) { return word; });
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

// A copy of text with its ASCII letters in lower case (domains, parameter names).
inline std::string ascii_lowered(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(ascii_lower(static_cast<unsigned char>(c)));
  return out;
}

// Case-insensitive comparison of ASCII names (field names, codings, connection options), eight
// bytes at a time: against a literal, the literal's words fold at compile time ("host" against
// a received name was 85 instructions byte by byte, callgrind, bench_http_weft).
[[gnu::always_inline]] inline bool iequals(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() &&
         equal_short_words(a.data(), b.data(), a.size(),
                           [](std::uint64_t word) { return ascii_lower_word(word); });
}

// Whether a field name of the literal's length, made of token characters only (as the parser
// scanned it), is `lower`, a literal of lower-case letters and '-', ignoring case. ORing 0x20
// into a token character turns only 'A'..'Z' into lower-case letters and keeps '-' (the one
// other byte that ORs to '-' is CR, no token character), so one OR and one compare per word are
// exact for tokens. For the framing fields the parser looks for in every request.
template <std::size_t N>
[[gnu::always_inline]] inline bool token_is(const char* name, const char (&lower)[N]) noexcept {
  constexpr std::size_t n = N - 1;
  static_assert(n >= 4, "token_is compares words of four or eight bytes");
  if constexpr (n >= 8) {
    constexpr std::uint64_t case_bits = 0x2020202020202020u;
    for (std::size_t i = 0; i + 8 < n; i += 8) {
      if ((load_u64(name + i) | case_bits) != load_u64(lower + i)) return false;
    }
    return (load_u64(name + n - 8) | case_bits) == load_u64(lower + n - 8);
  } else {
    constexpr std::uint32_t case_bits = 0x20202020u;
    return (load_u32(name) | case_bits) == load_u32(lower) &&
           (load_u32(name + n - 4) | case_bits) == load_u32(lower + n - 4);
  }
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

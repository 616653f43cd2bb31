// Byte scans of the HTTP/1.1 parser, 16 bytes at a time with SSE2 where the CPU has it (every
// x86-64 does), byte by byte elsewhere. Never read outside [p, end): the vector loop runs only
// while 16 bytes remain; find_control takes the rest eight at a time in a register (on
// little-endian machines), the last few byte by byte. Internal to the http layer.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace weft::http::detail {

// The first byte in [p, end) that is a control (0x00-0x1F, HTAB, CR and LF included) or DEL,
// else end: where a field value (or a reason phrase) stops or turns invalid.
inline const char* find_control(const char* p, const char* end) noexcept {
#if defined(__SSE2__)
  const __m128i bias = _mm_set1_epi8(static_cast<char>(0x80));
  // x < 0x20 unsigned  <=>  (x ^ 0x80) < (0x20 ^ 0x80) signed
  const __m128i space = _mm_set1_epi8(static_cast<char>(0x20 ^ 0x80));
  const __m128i del = _mm_set1_epi8(0x7F);
  while (end - p >= 16) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    __m128i bad =
        _mm_or_si128(_mm_cmplt_epi8(_mm_xor_si128(v, bias), space), _mm_cmpeq_epi8(v, del));
    int mask = _mm_movemask_epi8(bad);
    if (mask != 0) return p + __builtin_ctz(static_cast<unsigned>(mask));
    p += 16;
  }
#endif
  // The tail (and short values, a Host or a Content-Type) eight bytes at a time in a register:
  // a byte below 0x20 borrows in x - 0x20..20 where its own top bit was clear, and a DEL is a
  // zero byte of x ^ 0x7F..7F. A borrow can only flag bytes above a true hit, so the lowest
  // flagged byte is the first control.
  if constexpr (std::endian::native == std::endian::little) {
    constexpr std::uint64_t ones = 0x0101010101010101u;
    constexpr std::uint64_t highs = 0x8080808080808080u;
    while (end - p >= 8) {
      std::uint64_t x = 0;
      std::memcpy(&x, p, 8);
      const std::uint64_t del = x ^ (0x7F * ones);
      const std::uint64_t hits = (((x - 0x20 * ones) & ~x) | ((del - ones) & ~del)) & highs;
      if (hits != 0) return p + (__builtin_ctzll(hits) >> 3);
      p += 8;
    }
  }
  for (; p < end; ++p) {
    unsigned char c = static_cast<unsigned char>(*p);
    if (c < 0x20 || c == 0x7F) return p;
  }
  return end;
}

// The first LF in [p, end), else end: memchr inline, for the short distances between line ends
// of a header section (a call to the library's memchr cost more than the search).
inline const char* find_lf(const char* p, const char* end) noexcept {
#if defined(__SSE2__)
  const __m128i lf = _mm_set1_epi8('\n');
  while (end - p >= 16) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    int mask = _mm_movemask_epi8(_mm_cmpeq_epi8(v, lf));
    if (mask != 0) return p + __builtin_ctz(static_cast<unsigned>(mask));
    p += 16;
  }
#endif
  for (; p < end; ++p) {
    if (*p == '\n') return p;
  }
  return end;
}

// Just past the first CR LF CR LF in [p, end) (the empty line that ends a field section whose
// lines end in CRLF), else null. Only an LF can end the pattern, so it tests the three bytes
// before each LF of the range; with SSE2, 16 bytes at a time, the last step's 16 ending at `end`
// (overlapping bytes already looked at, masked off: no byte loop for the tail of a range of 16
// bytes or more).
inline const char* find_blank_line(const char* p, const char* end) noexcept {
  const char* const begin = p;
  // Whether the LF at lf ends CR LF CR LF, reading only inside [begin, lf].
  auto ends_blank_line = [begin](const char* lf) {
    return lf - begin >= 3 && lf[-1] == '\r' && lf[-2] == '\n' && lf[-3] == '\r';
  };
#if defined(__SSE2__)
  if (end - p >= 16) {
    const __m128i lf = _mm_set1_epi8('\n');
    for (; p < end; p += 16) {
      const char* load = end - p >= 16 ? p : end - 16;
      auto mask = static_cast<unsigned>(_mm_movemask_epi8(
          _mm_cmpeq_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(load)), lf)));
      for (mask &= ~0u << (p - load); mask != 0; mask &= mask - 1) {
        const char* at = load + __builtin_ctz(mask);
        if (ends_blank_line(at)) return at + 1;
      }
    }
    return nullptr;
  }
#endif
  for (; p < end; ++p) {
    if (*p == '\n' && ends_blank_line(p)) return p + 1;
  }
  return nullptr;
}

// The first byte in [p, end) outside the visible ASCII range 0x21-0x7E (space, controls, DEL
// and every byte >= 0x80), else end: where a request target stops or turns invalid. It also
// says what it passed over: bit 0 of marks is set when a '%' lies in [p, the result), bit 1
// when a '#' does (the two the parser checks further), so a target without either is scanned
// once.
inline const char* scan_target(const char* p, const char* end, unsigned& marks) noexcept {
  marks = 0;
#if defined(__SSE2__)
  const __m128i bang = _mm_set1_epi8(0x21);
  const __m128i del = _mm_set1_epi8(0x7F);
  const __m128i percent = _mm_set1_epi8('%');
  const __m128i hash = _mm_set1_epi8('#');
  // Signed compare: the bytes >= 0x80 are negative, so "x < 0x21" catches them as well.
  while (end - p >= 16) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    unsigned bad = static_cast<unsigned>(
        _mm_movemask_epi8(_mm_or_si128(_mm_cmplt_epi8(v, bang), _mm_cmpeq_epi8(v, del))));
    // Only the bytes before the first bad one belong to the target.
    unsigned before = bad != 0 ? (1u << __builtin_ctz(bad)) - 1 : 0xFFFFu;
    if (static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, percent))) & before) marks |= 1;
    if (static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, hash))) & before) marks |= 2;
    if (bad != 0) return p + __builtin_ctz(bad);
    p += 16;
  }
#endif
  for (; p < end; ++p) {
    unsigned char c = static_cast<unsigned char>(*p);
    if (c <= 0x20 || c >= 0x7F) return p;
    if (c == '%') marks |= 1;
    if (c == '#') marks |= 2;
  }
  return end;
}

}  // namespace weft::http::detail

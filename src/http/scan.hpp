// Byte scans of the HTTP/1.1 parser, 16 bytes at a time with SSE2 where the CPU has it (every
// x86-64 does), byte by byte elsewhere. Never read outside [p, end): the vector loop runs only
// while 16 bytes remain, the tail is scalar. Internal to the http layer.
#pragma once

#include <cstddef>

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
  for (; p < end; ++p) {
    unsigned char c = static_cast<unsigned char>(*p);
    if (c < 0x20 || c == 0x7F) return p;
  }
  return end;
}

// The first byte in [p, end) outside the visible ASCII range 0x21-0x7E (space, controls, DEL
// and every byte >= 0x80), else end: where a request target stops or turns invalid.
inline const char* find_non_visible(const char* p, const char* end) noexcept {
#if defined(__SSE2__)
  // Signed compare: the bytes >= 0x80 are negative, so "x < 0x21" catches them as well.
  const __m128i bang = _mm_set1_epi8(0x21);
  const __m128i del = _mm_set1_epi8(0x7F);
  while (end - p >= 16) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    __m128i bad = _mm_or_si128(_mm_cmplt_epi8(v, bang), _mm_cmpeq_epi8(v, del));
    int mask = _mm_movemask_epi8(bad);
    if (mask != 0) return p + __builtin_ctz(static_cast<unsigned>(mask));
    p += 16;
  }
#endif
  for (; p < end; ++p) {
    unsigned char c = static_cast<unsigned char>(*p);
    if (c <= 0x20 || c >= 0x7F) return p;
  }
  return end;
}

}  // namespace weft::http::detail

// weft-test: driver-independent
// The parser's character helpers (src/http/chars.hpp) that compare words, not bytes:
// ascii_lower_word against a byte-by-byte lower case for every byte value at every position of a
// word, and iequals / equal_short_bytes against byte-by-byte references at every length from 0
// to 40 (the byte loop, the two overlapping fours, the eights and the overlapping last eight)
// with one byte changed to every value at every position; token_is against iequals for the
// framing fields' names with one token character changed at every position.
#include "http/chars.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace {

using weft::http::detail::ascii_lower_word;
using weft::http::detail::equal_short_bytes;
using weft::http::detail::iequals;
using weft::http::detail::is_token_char;
using weft::http::detail::token_is;

unsigned char lower(unsigned char c) { return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c; }

bool reference_iequals(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (lower(static_cast<unsigned char>(a[i])) != lower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

TEST(HttpChars, AsciiLowerWordLowersExactlyTheCapitalsOfEveryByte) {
  // Each byte value at each of the eight positions, beside neighbours that test the carries:
  // 0x40 and 0x5B sit just outside 'A'..'Z', 0xC1 is 'A' with its top bit set, 0xFF carries most.
  const unsigned char neighbours[] = {0x00, 0x40, 0x41, 0x5A, 0x5B, 0x7F, 0xC1, 0xFF};
  for (unsigned char neighbour : neighbours) {
    for (int at = 0; at < 8; ++at) {
      for (int byte = 0; byte < 256; ++byte) {
        unsigned char in[8];
        std::memset(in, neighbour, sizeof in);
        in[at] = static_cast<unsigned char>(byte);
        std::uint64_t word = 0;
        std::memcpy(&word, in, 8);
        const std::uint64_t folded = ascii_lower_word(word);
        unsigned char out[8];
        std::memcpy(out, &folded, 8);
        for (int i = 0; i < 8; ++i) {
          ASSERT_EQ(out[i], lower(in[i])) << "byte " << byte << " at " << at << ", neighbour "
                                          << int{neighbour} << ", position " << i;
        }
      }
    }
  }
}

TEST(HttpChars, IequalsAndEqualShortBytesAgreeWithByteByByteAtEveryLength) {
  for (std::size_t size = 0; size <= 40; ++size) {
    std::string base(size, 'x');
    for (std::size_t i = 0; i < size; ++i) base[i] = "Content-Length: hOsT"[i % 20];
    std::string upper = base;
    for (char& c : upper) {
      if (c >= 'a' && c <= 'z') c = static_cast<char>(c - ('a' - 'A'));
    }
    ASSERT_TRUE(iequals(base, upper)) << size;
    ASSERT_TRUE(equal_short_bytes(base.data(), base.data(), size));
    for (std::size_t at = 0; at < size; ++at) {
      for (int byte = 0; byte < 256; ++byte) {
        std::string changed = upper;
        changed[at] = static_cast<char>(byte);
        ASSERT_EQ(iequals(base, changed), reference_iequals(base, changed))
            << "size " << size << ", byte " << byte << " at " << at;
        ASSERT_EQ(iequals(changed, base), reference_iequals(changed, base));
        ASSERT_EQ(equal_short_bytes(upper.data(), changed.data(), size), upper == changed)
            << "size " << size << ", byte " << byte << " at " << at;
      }
    }
  }
  EXPECT_FALSE(iequals("host", "hos"));
  EXPECT_FALSE(iequals("", "a"));
  EXPECT_TRUE(iequals("", ""));
  // Bytes that differ only in the case bit but are no letters stay different.
  EXPECT_FALSE(iequals("@[`{", "`{@["));
  EXPECT_FALSE(iequals("\x01", "!"));
}

// token_is(name, literal) for a name of the literal's length made of token characters: the
// literal with each byte in turn replaced by every token character, upper-cased or not.
template <std::size_t N>
void check_token_is(const char (&literal)[N]) {
  const std::string lower(literal, N - 1);
  std::string upper = lower;
  for (char& c : upper) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - ('a' - 'A'));
  }
  for (const std::string& base : {lower, upper}) {
    ASSERT_TRUE(token_is(base.data(), literal)) << base;
    for (std::size_t at = 0; at < base.size(); ++at) {
      for (int byte = 0; byte < 256; ++byte) {
        if (!is_token_char(static_cast<unsigned char>(byte))) continue;
        std::string name = base;
        name[at] = static_cast<char>(byte);
        ASSERT_EQ(token_is(name.data(), literal), iequals(name, lower))
            << name << " against " << lower;
      }
    }
  }
}

TEST(HttpChars, TokenIsAgreesWithIequalsForEveryTokenName) {
  check_token_is("host");
  check_token_is("connection");
  check_token_is("content-length");
  check_token_is("transfer-encoding");
}

}  // namespace

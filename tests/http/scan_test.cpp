// weft-test: driver-independent
// The parser's byte scans (src/http/scan.hpp): find_control, scan_target, find_lf and
// find_blank_line against a byte-by-byte reference, for every byte value at every position of
// inputs from 0 to 40 bytes, so the vector loop, the eight-byte register step and the byte tail are
// each checked at their seams.
#include "http/scan.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <string>

namespace {

using weft::http::detail::find_blank_line;
using weft::http::detail::find_control;
using weft::http::detail::find_lf;
using weft::http::detail::scan_target;

std::size_t reference_control(const std::string& s) {
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7F) return i;
  }
  return s.size();
}

std::size_t reference_target(const std::string& s, unsigned& marks) {
  marks = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c <= 0x20 || c >= 0x7F) return i;
    if (c == '%') marks |= 1;
    if (c == '#') marks |= 2;
  }
  return s.size();
}

// A filler of visible bytes with the neighbours of the boundaries the scans test for.
std::string filler(std::size_t size, unsigned char base) {
  static const unsigned char visible[] = {'a', '!', '~', 'Z', '0', '/', '.', '-'};
  std::string s(size, 'x');
  for (std::size_t i = 0; i < size; ++i) {
    s[i] = static_cast<char>(visible[(i + base) % sizeof visible]);
  }
  return s;
}

// Runs check(s, size, at, byte) over every input of 0 to 40 visible bytes with a byte of every
// value at every position, followed where there is room by `next` and `then`; stops at the
// first check that returns false.
template <class Check>
void for_each_probe(char next, char then, Check check) {
  for (std::size_t size = 0; size <= 40; ++size) {
    for (std::size_t at = 0; at < size; ++at) {
      for (int byte = 0; byte < 256; ++byte) {
        std::string s = filler(size, static_cast<unsigned char>(at));
        s[at] = static_cast<char>(byte);
        if (at + 2 < size) {
          s[at + 1] = next;
          s[at + 2] = then;
        }
        if (!check(s, size, at, byte)) return;
      }
    }
  }
}

TEST(HttpScan, FindControlStopsAtTheFirstControlOrDelWherever) {
  // A byte that would borrow (0x20, space) and a second control after the probed byte: only
  // the first control may be reported.
  for_each_probe(' ', '\x01', [](const std::string& s, std::size_t size, std::size_t at, int byte) {
    const char* found = find_control(s.data(), s.data() + s.size());
    EXPECT_EQ(static_cast<std::size_t>(found - s.data()), reference_control(s))
        << "size " << size << ", byte " << byte << " at " << at;
    return static_cast<std::size_t>(found - s.data()) == reference_control(s);
  });
}

TEST(HttpScan, FindControlPassesObsTextAndStopsAtATab) {
  // Bytes from 0x80 up are allowed in a field value (obs-text) and are not controls.
  std::string s;
  for (int byte = 0x80; byte < 0x100; ++byte) s.push_back(static_cast<char>(byte));
  EXPECT_EQ(find_control(s.data(), s.data() + s.size()), s.data() + s.size());
  s += "\tend";
  EXPECT_EQ(find_control(s.data(), s.data() + s.size()), s.data() + 128);
  EXPECT_EQ(find_control(s.data(), s.data()), s.data());
}

TEST(HttpScan, ScanTargetStopsWhereTheTargetEndsAndMarksOnlyWhatItPassed) {
  // '%' and '#' after the probed byte count only when the byte did not end the target.
  for_each_probe('%', '#', [](const std::string& s, std::size_t size, std::size_t at, int byte) {
    unsigned marks = 7;
    unsigned expected_marks = 0;
    const char* found = scan_target(s.data(), s.data() + s.size(), marks);
    const std::size_t expected = reference_target(s, expected_marks);
    EXPECT_EQ(static_cast<std::size_t>(found - s.data()), expected)
        << "size " << size << ", byte " << byte << " at " << at;
    EXPECT_EQ(marks, expected_marks) << "size " << size << ", byte " << byte << " at " << at;
    return static_cast<std::size_t>(found - s.data()) == expected && marks == expected_marks;
  });
}

TEST(HttpScan, FindLfFindsTheFirstLineFeedWherever) {
  for (std::size_t size = 0; size <= 40; ++size) {
    const std::string plain = filler(size, 0);
    EXPECT_EQ(find_lf(plain.data(), plain.data() + size), plain.data() + size)
        << "no LF in " << size << " bytes";
    for (std::size_t at = 0; at < size; ++at) {
      std::string s = filler(size, static_cast<unsigned char>(at));
      s[at] = '\n';
      if (at + 1 < size) s[at + 1] = '\n';
      if (at > 0) s[at - 1] = '\r';
      const char* found = find_lf(s.data(), s.data() + s.size());
      ASSERT_EQ(static_cast<std::size_t>(found - s.data()), at) << "size " << size;
    }
  }
}

std::size_t reference_blank_line(const std::string& s) {
  const std::size_t at = s.find("\r\n\r\n");
  return at == std::string::npos ? 0 : at + 4;
}

// find_blank_line over s's first `size` bytes, as reference_blank_line counts it (0: none).
std::size_t blank_line_end(const std::string& s, std::size_t size) {
  const char* found = find_blank_line(s.data(), s.data() + size);
  return found == nullptr ? 0 : static_cast<std::size_t>(found - s.data());
}

TEST(HttpScan, FindBlankLineFindsTheFirstCrLfCrLfWherever) {
  // The pattern at every position of inputs from 4 to 40 bytes, after a lone LF, a CR LF and a
  // LF CR LF just before it (each almost the pattern) and with a second one after it; the
  // result is just past the first, null when there is none.
  const std::string decoys[] = {"", "\n", "\r\n", "\n\r\n", "\r\n\n"};
  for (std::size_t size = 0; size <= 40; ++size) {
    const std::string plain = filler(size, 0);
    EXPECT_EQ(find_blank_line(plain.data(), plain.data() + size), nullptr) << size << " bytes";
    for (std::size_t at = 0; at + 4 <= size; ++at) {
      for (const std::string& decoy : decoys) {
        for (int variant = 0; variant < 4; ++variant) {
          const bool second = (variant & 1) != 0;
          const std::size_t gap =
              variant >> 1;  // the decoy right before the pattern, or a byte off
          std::string s = filler(size, static_cast<unsigned char>(at));
          s.replace(at, 4, "\r\n\r\n");
          if (at >= decoy.size() + gap) s.replace(at - decoy.size() - gap, decoy.size(), decoy);
          if (second && at + 8 <= size) s.replace(at + 4, 4, "\r\n\r\n");
          ASSERT_EQ(blank_line_end(s, s.size()), reference_blank_line(s))
              << "size " << size << ", at " << at << ", decoy " << decoy.size();
          // Cut one byte short of the pattern's end: not found there (or found earlier).
          const std::size_t cut = at + 3;
          ASSERT_EQ(blank_line_end(s, cut), reference_blank_line(s.substr(0, cut)))
              << "size " << cut << " (cut), at " << at;
        }
      }
    }
  }
  // Patterns split across the 16-byte steps and the overlapping last load.
  for (std::size_t size = 16; size <= 48; ++size) {
    for (std::size_t at = 0; at + 4 <= size; ++at) {
      std::string s(size, '\n');  // every byte an LF: only the pattern's LF may match
      s.replace(at, 4, "\r\n\r\n");
      ASSERT_EQ(blank_line_end(s, s.size()), reference_blank_line(s))
          << "all-LF size " << size << ", at " << at;
    }
  }
}

}  // namespace

// Incremental UTF-8 validation (RFC 3629: no overlong forms, no surrogates, nothing past
// U+10FFFF), fed in pieces: a WebSocket text message is checked fragment by fragment, with a
// character allowed to straddle two fragments. Internal to net; a plain value, no threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace weft::net::detail {

class utf8_validator {
 public:
  // Feeds the next bytes. False as soon as the input so far can no longer be the start of valid
  // UTF-8 (the validator is then spent until reset()).
  bool feed(const char* data, std::size_t size) noexcept {
    const auto* bytes = reinterpret_cast<const unsigned char*>(data);
    std::size_t i = 0;
    while (i < size) {
      if (pending_ == 0) {
        // Text is mostly ASCII: skip it 8 bytes at a time while no byte has its top bit set.
        while (i + 8 <= size) {
          std::uint64_t word;
          std::memcpy(&word, bytes + i, sizeof word);
          if ((word & 0x8080808080808080ull) != 0) {
            break;
          }
          i += 8;
        }
        if (i == size) {
          break;
        }
        const unsigned char lead = bytes[i++];
        if (lead < 0x80) {
          continue;
        }
        // The second byte's range is narrower after E0 (no overlong 3-byte form), ED (no
        // surrogates), F0 (no overlong 4-byte form) and F4 (nothing past U+10FFFF).
        low_ = 0x80;
        high_ = 0xBF;
        if (lead < 0xC2) {  // a stray continuation byte, or an overlong 2-byte form
          return false;
        } else if (lead < 0xE0) {
          pending_ = 1;
        } else if (lead < 0xF0) {
          pending_ = 2;
          if (lead == 0xE0) {
            low_ = 0xA0;
          } else if (lead == 0xED) {
            high_ = 0x9F;
          }
        } else if (lead < 0xF5) {
          pending_ = 3;
          if (lead == 0xF0) {
            low_ = 0x90;
          } else if (lead == 0xF4) {
            high_ = 0x8F;
          }
        } else {
          return false;
        }
      } else {
        const unsigned char next = bytes[i++];
        if (next < low_ || next > high_) {
          return false;
        }
        --pending_;
        low_ = 0x80;
        high_ = 0xBF;
      }
    }
    return true;
  }

  // True when no character is cut short at the end of what was fed.
  bool complete() const noexcept { return pending_ == 0; }

  void reset() noexcept {
    pending_ = 0;
    low_ = 0x80;
    high_ = 0xBF;
  }

 private:
  std::uint8_t pending_ = 0;  // continuation bytes still expected
  unsigned char low_ = 0x80;  // the range the next continuation byte must fall in
  unsigned char high_ = 0xBF;
};

// True when data is complete, valid UTF-8.
inline bool valid_utf8(const char* data, std::size_t size) noexcept {
  utf8_validator validator;
  return validator.feed(data, size) && validator.complete();
}

}  // namespace weft::net::detail

// Test helpers for the WebSocket tests: a framer_link over strings, a measure/decode driver over
// a byte buffer, client frames (masked, any header bits) and a parser for the server's frames.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "weft/net/websocket.hpp"

namespace weft_ws_test {

// Collects what the framer sends raw and whether it finished the conversation.
class string_link final : public weft::net::framer_link {
 public:
  explicit string_link(std::size_t limit = 1 << 20) : limit_(limit) {}
  void send_raw(std::string_view bytes) override { sent.append(bytes); }
  void finish() override { ++finishes; }
  std::size_t max_message_size() const noexcept override { return limit_; }

  std::string sent;
  int finishes = 0;

 private:
  std::size_t limit_;
};

// Feeds bytes to a framer the way a connection does: appends them to what is buffered, then
// measures and decodes complete units, collecting the user's messages.
class framer_driver {
 public:
  explicit framer_driver(const weft::net::websocket& protocol, std::size_t limit = 1 << 20)
      : framer(protocol.make_framer()), link(limit) {}

  // Returns the messages completed by these bytes. Protocol errors propagate.
  std::vector<weft::net::message> feed(std::string_view bytes) {
    buffered.append(bytes);
    std::vector<weft::net::message> messages;
    while (true) {
      const std::size_t n = framer->measure(buffered, link);
      if (n == 0) {
        break;
      }
      if (framer->decode(std::string_view(buffered).substr(0, n), scratch, link)) {
        messages.push_back(scratch);
      }
      buffered.erase(0, n);
      ++units;
    }
    return messages;
  }

  std::unique_ptr<weft::net::framer> framer;
  string_link link;
  std::string buffered;
  weft::net::message scratch;
  int units = 0;
};

constexpr std::string_view rfc_key = "dGhlIHNhbXBsZSBub25jZQ==";  // RFC 6455 1.3's example
constexpr std::string_view rfc_accept = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";

// A valid handshake request; extra lines (each ending in \r\n) are added to its headers.
inline std::string handshake_request(std::string_view extra = {},
                                     std::string_view target = "/chat") {
  std::string request = "GET ";
  request.append(target);
  request +=
      " HTTP/1.1\r\nHost: server.example.com\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Key: ";
  request.append(rfc_key);
  request += "\r\nSec-WebSocket-Version: 13\r\n";
  request.append(extra);
  request += "\r\n";
  return request;
}

struct frame_bits {
  bool fin = true;
  std::uint8_t rsv = 0;  // the three RSV bits, RSV1 highest
  bool masked = true;
  std::array<unsigned char, 4> key{0x37, 0xfa, 0x21, 0x3d};
  // Forces the 64-bit length form (and its top bit) whatever the size.
  bool long_length = false;
  bool length_top_bit = false;
};

// A frame as a client sends it.
inline std::string client_frame(std::uint8_t opcode, std::string_view payload,
                                const frame_bits& bits = {}) {
  std::string frame;
  frame.push_back(static_cast<char>((bits.fin ? 0x80 : 0) | (bits.rsv << 4) | opcode));
  const char mask_bit = bits.masked ? static_cast<char>(0x80) : 0;
  const std::uint64_t size = payload.size();
  if (size < 126 && !bits.long_length) {
    frame.push_back(static_cast<char>(mask_bit | static_cast<char>(size)));
  } else if (size <= 0xFFFF && !bits.long_length) {
    frame.push_back(static_cast<char>(mask_bit | 126));
    frame.push_back(static_cast<char>(size >> 8));
    frame.push_back(static_cast<char>(size));
  } else {
    frame.push_back(static_cast<char>(mask_bit | 127));
    const std::uint64_t wire = size | (bits.length_top_bit ? (1ull << 63) : 0);
    for (int i = 7; i >= 0; --i) {
      frame.push_back(static_cast<char>(wire >> (8 * i)));
    }
  }
  if (bits.masked) {
    frame.append(reinterpret_cast<const char*>(bits.key.data()), 4);
    for (std::size_t i = 0; i < payload.size(); ++i) {
      frame.push_back(static_cast<char>(static_cast<unsigned char>(payload[i]) ^ bits.key[i % 4]));
    }
  } else {
    frame.append(payload);
  }
  return frame;
}

inline std::string close_payload(std::uint16_t code, std::string_view reason = {}) {
  std::string payload;
  payload.push_back(static_cast<char>(code >> 8));
  payload.push_back(static_cast<char>(code & 0xFF));
  payload.append(reason);
  return payload;
}

struct server_frame {
  bool fin = false;
  bool compressed = false;  // RSV1 (permessage-deflate)
  std::uint8_t opcode = 0;
  std::string payload;
  std::size_t header_size = 0;
};

// Parses the unmasked frames a server sent; a frame cut short or masked fails the test, and so
// does an RSV bit, but RSV1 where permessage-deflate was agreed (`deflate`).
inline std::vector<server_frame> parse_server_frames(std::string_view bytes, bool deflate = false) {
  std::vector<server_frame> frames;
  while (!bytes.empty()) {
    server_frame frame;
    if (bytes.size() < 2) {
      ADD_FAILURE() << "server frame cut short";
      break;
    }
    const auto first = static_cast<unsigned char>(bytes[0]);
    const auto second = static_cast<unsigned char>(bytes[1]);
    EXPECT_EQ(second & 0x80, 0) << "the server masked a frame";
    EXPECT_EQ(first & (deflate ? 0x30 : 0x70), 0) << "the server set an RSV bit";
    frame.compressed = (first & 0x40) != 0;
    frame.fin = (first & 0x80) != 0;
    frame.opcode = first & 0x0F;
    std::uint64_t size = second & 0x7F;
    std::size_t header = 2;
    if (size == 126 || size == 127) {
      const std::size_t extended = size == 126 ? 2 : 8;
      if (bytes.size() < 2 + extended) {
        ADD_FAILURE() << "server frame header cut short";
        break;
      }
      size = 0;
      for (std::size_t i = 0; i < extended; ++i) {
        size = (size << 8) | static_cast<unsigned char>(bytes[2 + i]);
      }
      header += extended;
    }
    if (bytes.size() < header + size) {
      ADD_FAILURE() << "server frame payload cut short";
      break;
    }
    frame.header_size = header;
    frame.payload = std::string(bytes.substr(header, size));
    frames.push_back(std::move(frame));
    bytes.remove_prefix(header + size);
  }
  return frames;
}

// The code of a close frame's payload (0 when it has none).
inline std::uint16_t close_code_of(const server_frame& frame) {
  if (frame.payload.size() < 2) {
    return 0;
  }
  return static_cast<std::uint16_t>((static_cast<unsigned char>(frame.payload[0]) << 8) |
                                    static_cast<unsigned char>(frame.payload[1]));
}

}  // namespace weft_ws_test

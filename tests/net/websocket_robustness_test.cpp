// weft-test: driver-independent
// The WebSocket framer against damaged input: seeded random frame sequences with bits flipped
// and bytes cut, fed whole and in random pieces. Whatever the bytes, the framer either delivers
// messages or raises protocol_error with a close code (never another exception, never a
// crash under ASan), the outcome does not depend on how the bytes were split, and every text
// message it delivers is valid UTF-8 by a decoder written independently here.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "net/websocket_wire.hpp"
#include "weft/net/websocket.hpp"

namespace {

using weft::net::message_kind;
using weft::net::protocol_error;
using weft::net::websocket;
using weft_ws_test::client_frame;
using weft_ws_test::close_payload;
using weft_ws_test::frame_bits;

// Decodes code points one by one and checks each is a scalar value in its shortest form.
bool is_utf8(const std::string& text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<unsigned char>(text[i]);
    int length = 0;
    std::uint32_t point = 0;
    if (lead < 0x80) {
      length = 1;
      point = lead;
    } else if ((lead & 0xE0) == 0xC0) {
      length = 2;
      point = lead & 0x1F;
    } else if ((lead & 0xF0) == 0xE0) {
      length = 3;
      point = lead & 0x0F;
    } else if ((lead & 0xF8) == 0xF0) {
      length = 4;
      point = lead & 0x07;
    } else {
      return false;
    }
    if (i + length > text.size()) {
      return false;
    }
    for (int k = 1; k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xC0) != 0x80) {
        return false;
      }
      point = (point << 6) | (next & 0x3F);
    }
    static constexpr std::uint32_t shortest[] = {0, 0, 0x80, 0x800, 0x10000};
    if (point < shortest[length] || point > 0x10FFFF || (point >= 0xD800 && point <= 0xDFFF)) {
      return false;
    }
    i += length;
  }
  return true;
}

struct outcome {
  std::vector<weft::net::message> messages;
  std::string sent;
  int finishes = 0;
  bool failed = false;
  std::uint16_t close_code = 0;
};

// Feeds bytes in the pieces cuts make, as a connection does, keeping every message delivered
// before an error.
outcome run(const websocket& protocol, const std::string& bytes, std::vector<std::size_t> cuts) {
  outcome result;
  weft_ws_test::string_link link(4096);
  const auto framer = protocol.make_framer();
  weft::net::message message;
  std::string buffered;
  std::size_t from = 0;
  cuts.push_back(bytes.size());
  try {
    for (const std::size_t cut : cuts) {
      buffered.append(bytes, from, cut - from);
      from = cut;
      while (const std::size_t n = framer->measure(buffered, link)) {
        if (framer->decode(std::string_view(buffered).substr(0, n), message, link)) {
          result.messages.push_back(message);
        }
        buffered.erase(0, n);
      }
    }
  } catch (const protocol_error& error) {
    result.failed = true;
    result.close_code = error.close_code();
  }
  result.sent = link.sent;
  result.finishes = link.finishes;
  return result;
}

// Mostly valid UTF-8 of every length, now and then a piece that breaks it.
std::string random_payload(std::mt19937& random, std::size_t size) {
  static const std::vector<std::string> valid = {"a", "Z", " ", "\x7f", "é", "€", "😀"};
  static const std::vector<std::string> invalid = {"\xC3", "\x80", "\xED\xA0\x80", "\xF4\x90",
                                                   "\xC0\xAF"};
  std::string payload;
  while (payload.size() < size) {
    if (random() % 400 == 0) {
      payload += invalid[random() % invalid.size()];
    } else {
      payload += valid[random() % valid.size()];
    }
  }
  return payload;
}

// A plausible client conversation after the handshake: messages, fragments, control frames.
std::string random_conversation(std::mt19937& random) {
  std::string bytes;
  const int frames = 1 + static_cast<int>(random() % 8);
  for (int i = 0; i < frames; ++i) {
    frame_bits bits;
    for (auto& byte : bits.key) {
      byte = static_cast<unsigned char>(random());
    }
    const std::size_t size = random() % 4 == 0 ? 200 + random() % 5000 : random() % 40;
    switch (random() % 7) {
      case 0:
      case 1:
        bytes += client_frame(0x1, random_payload(random, size), bits);
        break;
      case 2:
        bytes += client_frame(0x2, random_payload(random, size), bits);
        break;
      case 3: {
        frame_bits more = bits;
        more.fin = false;
        bytes += client_frame(random() % 2 ? 0x1 : 0x2, random_payload(random, size), more);
        bytes += client_frame(0x9, "p", bits);
        bytes += client_frame(0x0, random_payload(random, size), bits);
        break;
      }
      case 4:
        bytes += client_frame(0x9, random_payload(random, random() % 20), bits);
        break;
      case 5:
        bytes += client_frame(0xA, "", bits);
        break;
      default:
        bytes += client_frame(0x8, close_payload(1000 + random() % 4000, "r"), bits);
        break;
    }
  }
  return bytes;
}

TEST(NetRobustness, DamagedWebsocketInputFailsCleanlyTheSameWayHoweverItIsSplit) {
  const websocket protocol;
  std::mt19937 random(20261125);
  int failures = 0;
  int deliveries = 0;
  for (int round = 0; round < 3000; ++round) {
    std::string bytes = weft_ws_test::handshake_request() + random_conversation(random);
    const std::size_t head = weft_ws_test::handshake_request().size();
    // Damage the frames (not the handshake): flip bits, cut the tail, or leave them whole.
    const int damage = static_cast<int>(random() % 3);
    if (damage == 0) {
      const int flips = 1 + static_cast<int>(random() % 3);
      for (int i = 0; i < flips; ++i) {
        const std::size_t at = head + random() % (bytes.size() - head);
        bytes[at] = static_cast<char>(bytes[at] ^ (1 << (random() % 8)));
      }
    } else if (damage == 1) {
      bytes.resize(head + random() % (bytes.size() - head));
    }
    const outcome whole = run(protocol, bytes, {});
    std::vector<std::size_t> cuts;
    for (std::size_t at = random() % 64; at < bytes.size(); at += 1 + random() % 300) {
      cuts.push_back(at);
    }
    const outcome pieces = run(protocol, bytes, cuts);
    ASSERT_EQ(pieces.failed, whole.failed) << "round " << round;
    ASSERT_EQ(pieces.close_code, whole.close_code) << "round " << round;
    ASSERT_EQ(pieces.messages.size(), whole.messages.size()) << "round " << round;
    ASSERT_EQ(pieces.sent, whole.sent) << "round " << round;
    ASSERT_EQ(pieces.finishes, whole.finishes) << "round " << round;
    if (whole.failed) {
      ++failures;
      EXPECT_TRUE(whole.close_code == websocket::protocol_violation ||
                  whole.close_code == websocket::invalid_payload ||
                  whole.close_code == websocket::message_too_big)
          << "round " << round << ": close code " << whole.close_code;
    }
    for (std::size_t i = 0; i < whole.messages.size(); ++i) {
      ++deliveries;
      EXPECT_EQ(pieces.messages[i].data, whole.messages[i].data) << "round " << round;
      EXPECT_EQ(pieces.messages[i].kind, whole.messages[i].kind) << "round " << round;
      EXPECT_LE(whole.messages[i].data.size(), 4096u) << "over the link's limit";
      if (whole.messages[i].kind == message_kind::text) {
        EXPECT_TRUE(is_utf8(whole.messages[i].data)) << "round " << round;
      }
    }
  }
  RecordProperty("protocol_errors", failures);
  RecordProperty("messages", deliveries);
  // The generator exercised both sides: plenty of errors and plenty of messages.
  EXPECT_GT(failures, 500) << deliveries;
  EXPECT_GT(deliveries, 2000) << failures;
}

}  // namespace

// WebSocket frames (RFC 6455 section 5): the header rules checked by measure(), decoding with
// unmasking (and inflating, with permessage-deflate), control frames, and encoding. The contract is
// in include/weft/net/websocket.hpp.
#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <system_error>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "net/protocols/websocket_framer.hpp"

namespace weft::net {

namespace {

constexpr std::uint8_t op_continuation = 0x0;
constexpr std::uint8_t op_text = 0x1;
constexpr std::uint8_t op_binary = 0x2;
constexpr std::uint8_t op_close = 0x8;
constexpr std::uint8_t op_ping = 0x9;
constexpr std::uint8_t op_pong = 0xA;
constexpr std::size_t control_payload_limit = 125;

[[noreturn]] void fail(const std::string& reason, std::uint16_t code) {
  throw protocol_error("websocket: " + reason, code);
}

// Copies size bytes from source to target (which may be the same place), unmasking them with
// key, whose first byte applies to the first byte: a frame's payload always starts at key[0].
// 8 bytes per step: the key repeated twice is one 64-bit word, whatever the byte order, since
// both halves are the same 4 bytes in memory order. A null key (an unmasked frame, which is what
// a client receives) copies. Masking is the same operation.
void unmask(const char* source, char* target, std::size_t size, const unsigned char* key) {
  if (key == nullptr) {
    if (size != 0 && source != target) {
      std::memmove(target, source, size);
    }
    return;
  }
  std::uint32_t key32;
  std::memcpy(&key32, key, sizeof key32);
  const std::uint64_t key64 = (static_cast<std::uint64_t>(key32) << 32) | key32;
  std::size_t i = 0;
#if defined(__SSE2__)
  // 16 bytes per step where the CPU has SSE2 (every x86-64): a 64-byte message's payload took
  // 70 instructions eight bytes at a time (callgrind, websocket echo).
  const __m128i key128 = _mm_set1_epi64x(static_cast<long long>(key64));
  for (; i + 16 <= size; i += 16) {
    const __m128i block = _mm_loadu_si128(reinterpret_cast<const __m128i*>(source + i));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(target + i), _mm_xor_si128(block, key128));
  }
#endif
  for (; i + 8 <= size; i += 8) {
    std::uint64_t word;
    std::memcpy(&word, source + i, sizeof word);
    word ^= key64;
    std::memcpy(target + i, &word, sizeof word);
  }
  for (; i < size; ++i) {
    target[i] = static_cast<char>(static_cast<unsigned char>(source[i]) ^ key[i & 3]);
  }
}

// Appends a frame header: FIN set, opcode, the shortest length form, and the mask key when one
// is given (a client's frame).
void append_header(std::string& out, std::uint8_t opcode, std::uint64_t size,
                   const unsigned char* mask_key = nullptr, bool compressed = false) {
  char header[14];
  std::size_t length = 2;
  header[0] = static_cast<char>(0x80 | (compressed ? 0x40 : 0) | opcode);
  const char mask_bit = mask_key != nullptr ? static_cast<char>(0x80) : static_cast<char>(0);
  if (size < 126) {
    header[1] = static_cast<char>(mask_bit | static_cast<char>(size));
  } else if (size <= 0xFFFF) {
    header[1] = static_cast<char>(mask_bit | 126);
    header[2] = static_cast<char>(size >> 8);
    header[3] = static_cast<char>(size);
    length = 4;
  } else {
    header[1] = static_cast<char>(mask_bit | 127);
    for (int i = 0; i < 8; ++i) {
      header[2 + i] = static_cast<char>(size >> (56 - 8 * i));
    }
    length = 10;
  }
  if (mask_key != nullptr) {
    std::memcpy(header + length, mask_key, 4);
    length += 4;
  }
  out.append(header, length);
}

}  // namespace

namespace detail {

void websocket_random_bytes(unsigned char* bytes, std::size_t size, const char* what) {
  std::size_t filled = 0;
  while (filled < size) {
    const ssize_t got = ::getrandom(bytes + filled, size - filled, 0);
    if (got < 0) {
      if (errno == EINTR) {
        continue;
      }
      throw std::system_error(errno, std::generic_category(), std::string(what) + ": getrandom");
    }
    filled += static_cast<std::size_t>(got);
  }
}

bool websocket_close_code_allowed(std::uint16_t code) noexcept {
  return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
         (code >= 3000 && code <= 4999);
}

bool websocket_framer::parse_header(std::string_view input, frame_header& header,
                                    framer_link& link) const {
  if (input.size() < 2) {
    return false;
  }
  const auto first = static_cast<unsigned char>(input[0]);
  const auto second = static_cast<unsigned char>(input[1]);
  header.fin = (first & 0x80) != 0;
  header.opcode = first & 0x0F;
  header.compressed = false;
  if ((first & 0x70) != 0) {
    if ((first & 0x70) != 0x40 || deflate_ == nullptr) {
      fail(deflate_ == nullptr ? "frame with RSV bits set, but no extension was negotiated"
                               : "frame with RSV2 or RSV3 set (permessage-deflate uses RSV1 only)",
           websocket::protocol_violation);
    }
    if (header.opcode != op_text && header.opcode != op_binary) {
      // RFC 7692 6: RSV1 marks a message's first frame; control frames are never compressed.
      fail(header.opcode == op_continuation ? "continuation frame with RSV1 set"
                                            : "control or reserved frame with RSV1 set",
           websocket::protocol_violation);
    }
    header.compressed = true;
  }
  const bool control = (header.opcode & 0x08) != 0;
  if (header.opcode > op_binary && header.opcode != op_close && header.opcode != op_ping &&
      header.opcode != op_pong) {
    fail("frame with the reserved opcode " + std::to_string(header.opcode),
         websocket::protocol_violation);
  }
  header.masked = (second & 0x80) != 0;
  if (role_ == websocket_role::server && !header.masked) {
    fail("unmasked frame from the client (RFC 6455 5.1: clients must mask)",
         websocket::protocol_violation);
  }
  if (role_ == websocket_role::client && header.masked) {
    fail("masked frame from the server (RFC 6455 5.1: servers must not mask)",
         websocket::protocol_violation);
  }
  const std::uint8_t length7 = second & 0x7F;
  if (control) {
    if (!header.fin) {
      fail("fragmented control frame", websocket::protocol_violation);
    }
    if (length7 > control_payload_limit) {
      // 126 and 127 announce an extended length, which a control frame may not use whatever it
      // says (RFC 6455 5.5: at most 125 bytes, so always the 7-bit form).
      fail("control frame with an extended (" + std::to_string(length7 == 126 ? 16 : 64) +
               "-bit) length: control frames carry at most 125 bytes, in the 7-bit length",
           websocket::protocol_violation);
    }
  } else if (header.opcode == op_continuation) {
    if (!fragmented_) {
      fail("continuation frame without a fragmented message to continue",
           websocket::protocol_violation);
    }
  } else if (fragmented_) {
    fail("new data frame inside a fragmented message", websocket::protocol_violation);
  }

  std::size_t extended = 0;
  if (length7 == 126) {
    extended = 2;
  } else if (length7 == 127) {
    extended = 8;
  }
  if (input.size() < 2 + extended) {
    return false;
  }
  if (extended == 0) {
    header.payload_size = length7;
  } else {
    std::uint64_t size = 0;
    for (std::size_t i = 0; i < extended; ++i) {
      size = (size << 8) | static_cast<unsigned char>(input[2 + i]);
    }
    if (extended == 8 && (size >> 63) != 0) {
      fail("frame length with its most significant bit set", websocket::protocol_violation);
    }
    header.payload_size = size;
  }
  if (!control) {
    // Checked from the header alone, so an oversized frame is refused before its payload is
    // buffered.
    if (header.payload_size > options_->max_frame_size) {
      // Too big, as a message over max_message_size (close_reason::too_big), not broken bytes.
      const auto size =
          static_cast<std::size_t>(std::min<std::uint64_t>(header.payload_size, SIZE_MAX));
      throw message_too_big_error(
          "websocket frame of " + std::to_string(size) + " bytes is over the limit of " +
              std::to_string(options_->max_frame_size) + " bytes (max_frame_size)",
          size, options_->max_frame_size, websocket::message_too_big);
    }
    const std::uint64_t so_far = header.opcode == op_continuation ? fragments_.size() : 0;
    const std::size_t limit = link.max_message_size();
    if (header.payload_size > limit || so_far + header.payload_size > limit) {
      // message_too_big_error: the connection counts it as close_reason::too_big.
      throw message_too_big_error(
          "websocket",
          static_cast<std::size_t>(std::min<std::uint64_t>(so_far + header.payload_size, SIZE_MAX)),
          limit, websocket::message_too_big);
    }
  }
  header.header_size = 2 + extended + (header.masked ? 4 : 0);
  return input.size() >= header.header_size;
}

std::size_t websocket_framer::measure(std::string_view input, framer_link& link) {
  switch (phase_) {
    case phase::handshake:
      return measure_handshake(input, link);
    case phase::closed:
      return input.size();  // whatever follows a close frame is consumed and dropped
    case phase::open:
      break;
  }
  measured_at_ = nullptr;
  frame_header header;
  if (!parse_header(input, header, link)) {
    return 0;
  }
  // payload_size is at most the message limit here, or 125 for a control frame.
  const std::size_t frame_size = header.header_size + static_cast<std::size_t>(header.payload_size);
  if (input.size() < frame_size) {
    return 0;
  }
  measured_at_ = input.data();
  measured_ = header;
  return frame_size;
}

bool websocket_framer::decode(std::string_view unit, message& out, framer_link& link) {
  switch (phase_) {
    case phase::handshake:
      decode_handshake(unit, link);
      return false;
    case phase::closed:
      return false;
    case phase::open:
      break;
  }
  frame_header header;
  if (unit.data() == measured_at_ &&
      unit.size() == measured_.header_size + static_cast<std::size_t>(measured_.payload_size)) {
    header = measured_;  // the unit measure() just found and checked (nothing ran in between)
    measured_at_ = nullptr;
  } else if (!parse_header(unit, header, link) ||
             unit.size() != header.header_size + header.payload_size) {
    throw std::logic_error(
        "websocket framer: decode() was given " + std::to_string(unit.size()) +
        " bytes that are not the one frame measure() found; pass exactly the unit it measured");
  }
  const auto* key =
      header.masked ? reinterpret_cast<const unsigned char*>(unit.data() + header.header_size - 4)
                    : nullptr;
  const char* payload = unit.data() + header.header_size;
  const auto size = static_cast<std::size_t>(header.payload_size);

  switch (header.opcode) {
    case op_ping:
      on_ping(payload, size, key, link);
      return false;
    case op_pong:
      return false;
    case op_close:
      on_close_frame(payload, size, key, link);
      return false;
    case op_continuation: {
      const std::size_t offset = fragments_.size();
      fragments_.resize(offset + size);
      unmask(payload, fragments_.data() + offset, size, key);
      if (fragments_compressed_) {
        if (!header.fin) {
          return false;
        }
        fragmented_ = false;
        fragments_compressed_ = false;
        inflate_message(fragments_, fragmented_kind_, out, link);
        fragments_.clear();
        return true;
      }
      if (fragmented_kind_ == message_kind::text &&
          !fragments_utf8_.feed(fragments_.data() + offset, size)) {
        fail("text message that is not valid UTF-8", websocket::invalid_payload);
      }
      if (!header.fin) {
        return false;
      }
      if (fragmented_kind_ == message_kind::text && !fragments_utf8_.complete()) {
        fail("text message ending inside a UTF-8 sequence", websocket::invalid_payload);
      }
      // Swapped, not copied: out's old buffer becomes the next fragmented message's, so both
      // keep their capacity.
      out.data.swap(fragments_);
      out.kind = fragmented_kind_;
      fragments_.clear();
      fragmented_ = false;
      return true;
    }
    default:  // text or binary, the first frame of a message
      break;
  }
  const message_kind kind = header.opcode == op_text ? message_kind::text : message_kind::binary;
  if (!header.fin) {
    fragmented_ = true;
    fragmented_kind_ = kind;
    fragments_compressed_ = header.compressed;
    fragments_.resize(size);
    unmask(payload, fragments_.data(), size, key);
    fragments_utf8_.reset();
    if (!header.compressed && kind == message_kind::text &&
        !fragments_utf8_.feed(fragments_.data(), size)) {
      fail("text message that is not valid UTF-8", websocket::invalid_payload);
    }
    return false;
  }
  if (header.compressed) {
    if (key == nullptr) {
      inflate_message(std::string_view(payload, size), kind, out, link);
    } else {
      compressed_.resize(size);
      unmask(payload, compressed_.data(), size, key);
      inflate_message(compressed_, kind, out, link);
    }
    return true;
  }
  out.data.resize(size);
  unmask(payload, out.data.data(), size, key);
  out.kind = kind;
  if (kind == message_kind::text && !valid_utf8(out.data.data(), size)) {
    fail("text message that is not valid UTF-8", websocket::invalid_payload);
  }
  return true;
}

void websocket_framer::inflate_message(std::string_view payload, message_kind kind, message& out,
                                       framer_link& link) {
  deflate_->decompress(payload, out.data, link.max_message_size());
  out.kind = kind;
  if (kind == message_kind::text && !valid_utf8(out.data.data(), out.data.size())) {
    fail("text message that is not valid UTF-8", websocket::invalid_payload);
  }
}

void websocket_framer::on_ping(const char* payload, std::size_t size, const unsigned char* key,
                               framer_link& link) {
  if (close_sent_) {
    return;  // nothing but the closing handshake may follow our close frame
  }
  std::string pong;
  append_frame(pong, op_pong, payload, size, key);
  link.send_raw(pong);
}

void websocket_framer::encode_ping(std::string& out) {
  if (phase_ != phase::open || close_sent_) {
    return;  // no WebSocket yet, or closing: the closing handshake is the only traffic
  }
  append_frame(out, op_ping, "", 0);
}

void check_ping_options(std::chrono::milliseconds interval, std::chrono::milliseconds timeout,
                        const char* what) {
  if (interval.count() < 0 || timeout.count() < 0) {
    throw std::invalid_argument(std::string(what) + ": ping_interval and ping_timeout may not be " +
                                "negative (" + std::to_string(interval.count()) + " ms, " +
                                std::to_string(timeout.count()) + " ms; 0 turns pings off)");
  }
}

void websocket_framer::on_close_frame(const char* payload, std::size_t size,
                                      const unsigned char* key, framer_link& link) {
  char body[control_payload_limit];
  unmask(payload, body, size, key);
  if (size == 1) {
    fail("close frame with a 1-byte payload (a code takes 2)", websocket::protocol_violation);
  }
  std::uint16_t code = 0;
  if (size >= 2) {
    code = static_cast<std::uint16_t>((static_cast<unsigned char>(body[0]) << 8) |
                                      static_cast<unsigned char>(body[1]));
    if (!websocket_close_code_allowed(code)) {
      fail("close frame with the code " + std::to_string(code) + ", which may not be sent",
           websocket::protocol_violation);
    }
    if (!valid_utf8(body + 2, size - 2)) {
      fail("close frame whose reason is not valid UTF-8", websocket::invalid_payload);
    }
  }
  link.peer_closed(code, size >= 2 ? std::string_view(body + 2, size - 2) : std::string_view());
  phase_ = phase::closed;
  fragments_.clear();
  fragmented_ = false;
  fragments_compressed_ = false;
  if (!close_sent_) {
    // The echo carries the peer's own code and reason (RFC 6455 5.5.1: typically the code it
    // received), so the client sees its close acknowledged as it sent it.
    close_sent_ = true;
    std::string echo;
    append_frame(echo, op_close, body, size);
    link.send_raw(echo);
  }
  link.finish();
}

void websocket_framer::encode(std::string_view payload, message_kind kind, std::string& out) {
  if (close_sent_) {
    throw error(
        "websocket: a message was sent after the close frame; the connection is closing and "
        "takes no more messages (RFC 6455 5.5.1)");
  }
  const std::uint8_t opcode = kind == message_kind::text ? op_text : op_binary;
  if (deflate_ != nullptr && deflate_->compresses(payload.size()) &&
      deflate_->compress(payload, compressed_)) {
    append_frame(out, opcode, compressed_.data(), compressed_.size(), nullptr, true);
    return;
  }
  append_frame(out, opcode, payload.data(), payload.size());
}

void websocket_framer::append_frame(std::string& out, std::uint8_t opcode, const char* payload,
                                    std::size_t size, const unsigned char* key, bool compressed) {
  if (role_ == websocket_role::server) {
    append_header(out, opcode, size, nullptr, compressed);
    if (key == nullptr) {
      out.append(payload, size);
    } else {
      const std::size_t at = out.size();
      out.resize(at + size);
      unmask(payload, out.data() + at, size, key);
    }
    return;
  }
  unsigned char mask[4];
  next_mask_key(mask);
  append_header(out, opcode, size, mask, compressed);
  // One pass: a payload still masked with key (a ping's, echoed) is unmasked and masked again
  // with the key that combines both.
  for (int i = 0; key != nullptr && i < 4; ++i) {
    mask[i] = static_cast<unsigned char>(mask[i] ^ key[i]);
  }
  const std::size_t at = out.size();
  out.resize(at + size);
  unmask(payload, out.data() + at, size, mask);
}

void websocket_framer::next_mask_key(unsigned char key[4]) {
  if (random_used_ + 4 > random_.size()) {
    websocket_random_bytes(random_.data(), random_.size(), "websocket: a client frame's mask key");
    random_used_ = 0;
  }
  std::memcpy(key, random_.data() + random_used_, 4);
  random_used_ += 4;
}

void websocket_framer::encode_close(std::uint16_t code, std::string_view reason, std::string& out) {
  if (code != 0 && !websocket_close_code_allowed(code)) {
    throw std::invalid_argument("websocket close code " + std::to_string(code) +
                                " may not be sent; use 1000-1003, 1007-1014 or 3000-4999");
  }
  if (!valid_utf8(reason.data(), reason.size())) {
    throw std::invalid_argument("websocket close reason is not valid UTF-8");
  }
  if (code == 0 && !reason.empty()) {
    throw std::invalid_argument("websocket close reason given without a close code");
  }
  if (phase_ != phase::open || close_sent_) {
    return;  // no WebSocket yet (a failed handshake), or our close frame already went out
  }
  // A control frame holds 125 bytes: the code and at most 123 bytes of reason, cut before a
  // continuation byte so that the reason stays valid UTF-8.
  std::size_t keep = reason.size();
  if (keep > control_payload_limit - 2) {
    keep = control_payload_limit - 2;
    while (keep > 0 && (static_cast<unsigned char>(reason[keep]) & 0xC0) == 0x80) {
      --keep;
    }
  }
  char body[control_payload_limit];
  std::size_t size = 0;
  if (code != 0) {
    body[0] = static_cast<char>(code >> 8);
    body[1] = static_cast<char>(code & 0xFF);
    if (keep != 0) {
      std::memcpy(body + 2, reason.data(), keep);
    }
    size = 2 + keep;
  }
  append_frame(out, op_close, body, size);
  close_sent_ = true;
}

}  // namespace detail
}  // namespace weft::net

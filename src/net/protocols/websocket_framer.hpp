// The per-connection WebSocket framer behind weft::net::websocket (the contract is in
// include/weft/net/websocket_protocol.hpp). Internal to net: websocket_frames.cpp holds the frame
// parsing, control frames and encoding, websocket_handshake.cpp the opening handshake. One
// framer per connection, used only on that connection's thread.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

#include "net/protocols/utf8_validator.hpp"
#include "net/protocols/websocket_deflate.hpp"
#include "weft/net/websocket_protocol.hpp"

namespace weft::net::detail {

// Sec-WebSocket-Accept for a client's Sec-WebSocket-Key (RFC 6455 4.2.2: base64 of the SHA-1 of
// the key and the protocol's GUID).
std::string websocket_accept_key(std::string_view client_key);

// True for a close code a peer may put on the wire (RFC 6455 7.4): the assigned codes
// 1000-1003 and 1007-1014, and the registered and private ranges 3000-4999.
bool websocket_close_code_allowed(std::uint16_t code) noexcept;

// std::invalid_argument, what naming the options, for a negative ping_interval or ping_timeout.
void check_ping_options(std::chrono::milliseconds interval, std::chrono::milliseconds timeout,
                        const char* what);

// Fills size bytes from getrandom(2) (what: the caller, for the std::system_error it may throw).
void websocket_random_bytes(unsigned char* bytes, std::size_t size, const char* what);

class websocket_framer final : public framer {
 public:
  explicit websocket_framer(std::shared_ptr<const websocket_options> options,
                            websocket_role role = websocket_role::server)
      : options_(std::move(options)),
        role_(role),
        phase_(role == websocket_role::client ? phase::open : phase::handshake) {}

  std::size_t measure(std::string_view input, framer_link& link) override;
  bool decode(std::string_view unit, message& out, framer_link& link) override;
  void encode(std::string_view payload, message_kind kind, std::string& out) override;
  void encode_close(std::uint16_t code, std::string_view reason, std::string& out) override;
  void encode_going_away(std::string& out) override {
    encode_close(websocket::going_away, "server stopping", out);
  }
  bool handshaking() const noexcept override { return phase_ == phase::handshake; }
  bool awaits_peer_close() const noexcept override { return close_sent_ && phase_ == phase::open; }
  bool peer_closes_first() const noexcept override {
    return role_ == websocket_role::client && (close_sent_ || phase_ == phase::closed);
  }
  ping_schedule pings() const noexcept override {
    return {options_->ping_interval, options_->ping_timeout};
  }
  void encode_ping(std::string& out) override;

  // permessage-deflate agreed (by the server's handshake, or by connect_websocket's before the
  // client's framer is made): RSV1 frames are taken as compressed, and encode() compresses.
  void use_deflate(const deflate_agreement& agreed) {
    deflate_ = std::make_unique<deflate_session>(options_->deflate, agreed, role_);
  }

 private:
  enum class phase : std::uint8_t {
    handshake,  // waiting for the request head; nothing sent yet
    open,       // 101 sent: frames both ways
    closed,     // the peer's close frame arrived: everything after it is dropped
  };

  // What measure() learnt from a frame header. A frame is header_size + payload_size bytes.
  struct frame_header {
    bool fin = false;
    std::uint8_t opcode = 0;
    std::size_t header_size = 0;  // 2 + extended length (+ 4: the mask key, when masked)
    std::uint64_t payload_size = 0;
    bool masked = false;      // a mask key (the header's last 4 bytes) applies to the payload
    bool compressed = false;  // RSV1 on a message's first frame: permessage-deflate
  };

  // websocket_handshake.cpp
  std::size_t measure_handshake(std::string_view input, framer_link& link);
  void decode_handshake(std::string_view head, framer_link& link);

  // websocket_frames.cpp
  // False while the header is incomplete; protocol_error for a header breaking a rule.
  bool parse_header(std::string_view input, frame_header& header, framer_link& link) const;
  void on_close_frame(const char* payload, std::size_t size, const unsigned char* key,
                      framer_link& link);
  void on_ping(const char* payload, std::size_t size, const unsigned char* key, framer_link& link);
  // Appends one frame (FIN set): its header, then the payload, masked with a fresh key when this
  // framer is a client's. payload may be unmasked from `key` first (a ping's payload echoed).
  // compressed sets RSV1.
  void append_frame(std::string& out, std::uint8_t opcode, const char* payload, std::size_t size,
                    const unsigned char* key = nullptr, bool compressed = false);
  // A complete compressed message (its payload unmasked) inflated into out, text checked.
  void inflate_message(std::string_view payload, message_kind kind, message& out,
                       framer_link& link);
  // Four unpredictable bytes for a client frame's masking key (RFC 6455 5.3: from a strong source
  // of entropy), taken from a block refilled with getrandom(2) every 64 keys.
  void next_mask_key(unsigned char key[4]);

  std::shared_ptr<const websocket_options> options_;
  websocket_role role_;
  phase phase_;
  std::array<unsigned char, 256> random_{};
  std::size_t random_used_ = 256;  // random_ is refilled when all of it was used
  bool close_sent_ = false;        // a close frame went out (echoed, or from encode_close)
  // A fragmented message in progress: its kind, what arrived so far (unmasked) and, for text,
  // the UTF-8 state carried from fragment to fragment.
  bool fragmented_ = false;
  message_kind fragmented_kind_ = message_kind::binary;
  std::string fragments_;
  utf8_validator fragments_utf8_;
  // permessage-deflate, once agreed: the session, whether the fragmented message in progress
  // is compressed (its fragments_ then hold compressed bytes, checked as text once inflated),
  // and a buffer for a compressed payload, unmasked or about to be sent.
  std::unique_ptr<deflate_session> deflate_;
  bool fragments_compressed_ = false;
  std::string compressed_;
  // The frame the last measure() found (where it starts and its header, which gives its size),
  // so that decode() of that very unit, which the framer contract says comes next, need not
  // parse and check the header a second time (callgrind: 71 instructions per frame). Any other
  // unit is parsed.
  const char* measured_at_ = nullptr;
  frame_header measured_{};
};

}  // namespace weft::net::detail

// weft::net::websocket: the WebSocket protocol (RFC 6455), server side, as a weft::net::protocol
// (see protocol.hpp for how a connection drives a framer). connect_websocket, the client side,
// whose connections use the same framing with the client's rules, is in websocket.hpp, which
// includes this header. This one needs nothing of the runtime (no connection, no scheduler).
//
// What a framer does with the bytes a connection receives:
//   - The opening handshake: the first unit is the client's HTTP/1.1 request head (GET, Host,
//     "Upgrade: websocket", a "Connection" list holding "upgrade", Sec-WebSocket-Version 13 and a
//     Sec-WebSocket-Key of 16 base64 bytes, no body). A good one is answered "101 Switching
//     Protocols" with Sec-WebSocket-Accept (SHA-1 and base64 from nettle) through
//     link.send_raw(); handshaking() is true until then. A bad one is answered with a plain
//     HTTP error sent raw (400 bad request, 403 origin not allowed, 404 path not served, 426 for
//     a version other than 13, 431 for a head over max_handshake_size) and then protocol_error
//     (close code 0: there is no WebSocket yet, so encode_close() adds nothing).
//     With options.deflate.enabled, a permessage-deflate offer (RFC 7692) in the request's
//     Sec-WebSocket-Extensions is answered in the 101 (see websocket_deflate_options); offers
//     are otherwise declined by not answering them.
//   - Frames: client frames must be masked; no RSV bit but RSV1 on the first frame of a
//     compressed message, and only when permessage-deflate was agreed; no reserved opcode; control
//     frames of at most 125 bytes and never fragmented; continuation frames only inside a
//     fragmented message and no new data frame inside one; a 64-bit length with its top bit
//     clear. Each of these is protocol_error with close code 1002, raised by measure() as soon
//     as the frame header has arrived. A message (the sum of its fragments) over
//     link.max_message_size(), or a frame over max_frame_size, is 1009, also raised from the
//     header alone, before the payload is buffered. Text is validated as UTF-8 fragment by
//     fragment (1007 as soon as a byte can no longer be valid, or at the end for a truncated
//     sequence).
//   - Compressed messages (RSV1, permessage-deflate agreed) are inflated once their last frame
//     has arrived; the inflated size counts against link.max_message_size() as it grows, so a
//     small frame that inflates past the limit is 1009 without the whole of it ever being held,
//     and data that does not inflate is 1007. Text is validated after inflating.
//   - Control frames: a ping is answered with a pong carrying the same payload (send_raw; RFC
//     6455 5.5.2 requires it, so there is no option to turn it off); a pong is ignored. A close
//     frame's code is checked (1005, 1006, 1015, 1004, codes under 1000, unassigned 1016-2999 and
//     codes from 5000 up are 1002; its reason must be UTF-8, else 1007), the frame is echoed with
//     the same code and reason through send_raw (unless this side already sent its close), and
//     link.finish() ends the conversation. Bytes after a close frame are consumed and dropped.
//   - Pings, pongs and non-final fragments are the protocol's own units (decode() returns
//     false). A complete message is delivered in out.data, text or binary by its first frame's
//     opcode; fragments gather in the framer's own buffer, which is then swapped with out.data,
//     so both keep their capacity from message to message.
//
// Outgoing: encode() writes one unmasked, unfragmented frame (text or binary by message_kind,
// 7/16/64-bit length), compressed (RSV1) when permessage-deflate was agreed and the payload has
// at least deflate.min_size bytes. encode_close(code, reason) writes a close frame (code 0: one
// without a status) and records that this side has closed; afterwards encode() throws weft::error
// (RFC 6455 5.5.1: no data frame may follow a close frame). A code that may not be sent (1004-1006,
// 1015, unassigned or out of range) is std::invalid_argument; a reason is cut to the 123 bytes
// a control frame leaves, at a character boundary.
//
// Why the framing is written here and not taken from libwslay (Debian libwslay-dev, evaluated
// for this): wslay's frame and event APIs pull their input through a recv callback into the
// library's own buffer and keep the parse position inside their context, so they cannot answer
// measure() (which must look at the same bytes again without consuming them) and would copy
// every payload once more; its event API also queues and sends replies through its own send
// queue instead of the connection's, and it has no handshake. The framer here parses headers
// from the connection's buffer, unmasks 8 bytes at a time straight into out.data, and
// allocates nothing per frame once its buffers have grown.
//
// Threads and ownership: a websocket protocol object is immutable and may be shared by every
// worker; each framer belongs to one connection and is used only on that connection's thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "weft/net/protocol.hpp"

namespace weft::net {

// permessage-deflate (RFC 7692): messages compressed with DEFLATE (zlib), negotiated in the
// opening handshake. The same settings serve a server (websocket_options::deflate: how it
// answers a client's offer) and a client (websocket_client_options::deflate: what it offers).
//
// Memory is what decides the defaults. A compressor that keeps its window from message to
// message ("context takeover") makes repeated content compress far better, but it lives as long
// as the connection: zlib's deflate state is 2^(window_bits + 2) + 2^(mem_level + 9) bytes (256
// KiB with the defaults) and its inflate state about 2^window_bits + 7 KiB. So by default neither
// side keeps a context (the server's answer carries server_no_context_takeover and
// client_no_context_takeover), and then a connection holds no zlib state at all: each thread
// has one compressor and one decompressor per setting, reset after each message. Turn a
// takeover on where messages repeat each other and connections are few.
struct websocket_deflate_options {
  // Off: never negotiated (a server declines every offer by not answering it; a client offers
  // nothing).
  bool enabled = false;
  // zlib's level for outgoing messages: 1 (fastest) to 9 (smallest). 1 compresses typical JSON
  // and text nearly as well as 6 for a fraction of the time.
  int level = 1;
  // Outgoing messages shorter than this go uncompressed (each message's RSV1 says which, so the
  // two mix freely); below a few dozen bytes DEFLATE's own overhead outweighs what it saves.
  std::size_t min_size = 64;
  // Whether the server's and the client's compressor keep their window between messages.
  // A server honours a client that asks for server_no_context_takeover whatever this says, and
  // a client's offer asks for it when server_context_takeover is false.
  bool server_context_takeover = false;
  bool client_context_takeover = false;
  // log2 of the LZ77 window of the server's compressor and of the client's, 9 to 15. A server
  // uses at most what the client's offer allows (an offer of 8, which zlib cannot produce, is
  // accepted and then every message goes uncompressed); client_max_window_bits < 15 is asked of
  // a client only when its offer says it takes the parameter. A client offers
  // server_max_window_bits when it is below 15.
  int server_max_window_bits = 15;
  int client_max_window_bits = 15;
  // zlib's memLevel for compressing, 1 to 9: the size of its hash table (2^(mem_level + 9)
  // bytes with the window's).
  int mem_level = 8;
};

// The settings of the WebSocket protocol.
struct websocket_options {
  // The largest frame payload accepted, in bytes (1009 past it). The message limit, the sum of
  // a message's fragments, is the connection's (framer_link::max_message_size()).
  std::size_t max_frame_size = std::numeric_limits<std::size_t>::max();
  // The largest opening-handshake request head, in bytes (431 past it). The handshake has this
  // limit of its own, whatever the message limit. A frame unit is its payload plus at most 14
  // header bytes, so a connection buffers up to max_message_size() + 14 bytes for one frame.
  std::size_t max_handshake_size = 8192;
  // When not empty, the request's path (the target without its query) must be this one (404).
  std::string path{};
  // When not empty, a request that carries an Origin header must name one of these exactly
  // ("https://example.com"; 403 otherwise). Requests without Origin (non-browser clients) pass.
  std::vector<std::string> allowed_origins{};
  // The subprotocols this server speaks, in order of preference: the first one the client also
  // offers is named in the 101 reply. Empty, or none in common: no subprotocol is selected.
  std::vector<std::string> subprotocols{};
  // permessage-deflate: off unless enabled (see websocket_deflate_options).
  websocket_deflate_options deflate{};
  // Keep-alive pings. When the peer has sent nothing for ping_interval, a ping goes out; when
  // nothing at all (its pong, or any other byte) has come ping_timeout after it, the connection
  // closes with close_reason::ping_timeout. A peer that vanished without a FIN or a reset (a NAT
  // or a load balancer that dropped the flow, a machine switched off) otherwise holds an idle
  // WebSocket for ever, and a quiet one behind such a box is dropped by it (Go's gorilla and
  // Node's ws leave this to the application; uWebSockets pings on its idle timeout). The pings
  // go out while the connection is being received from (receive(), the callback style's
  // reader; a hibernating handler is woken for them). Zero ping_interval: off (the default);
  // zero ping_timeout: ping_interval. Negative: std::invalid_argument.
  std::chrono::milliseconds ping_interval{0};
  std::chrono::milliseconds ping_timeout{0};
};

class websocket : public protocol {
 public:
  // Close codes (RFC 6455 7.4.1) the framer sends or a server commonly uses.
  static constexpr std::uint16_t normal_closure = 1000;
  static constexpr std::uint16_t going_away = 1001;          // the peer goes away
  static constexpr std::uint16_t protocol_violation = 1002;  // a frame broke the protocol
  static constexpr std::uint16_t unsupported_data =
      1003;                                               // a message kind the endpoint cannot take
  static constexpr std::uint16_t invalid_payload = 1007;  // text that is not UTF-8
  static constexpr std::uint16_t policy_violation =
      1008;                                               // a message against the endpoint's policy
  static constexpr std::uint16_t message_too_big = 1009;  // a message over the size limit
  static constexpr std::uint16_t internal_failure = 1011;  // the server failed

  // std::invalid_argument when options make no sense (a zero frame or handshake limit, a path
  // not starting with '/', an empty or non-token subprotocol name, a deflate level, window or
  // memory level out of range).
  explicit websocket(websocket_options options = {});

  const char* name() const noexcept override { return "websocket"; }
  // A framer for a new connection (one per connection).
  std::unique_ptr<framer> make_framer() const override;

  const websocket_options& options() const noexcept { return *options_; }  // what it was made with

 private:
  // Shared with every framer made, so a framer stays valid if the protocol object goes first.
  std::shared_ptr<const websocket_options> options_;
};

}  // namespace weft::net

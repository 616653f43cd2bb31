// permessage-deflate (RFC 7692) for the WebSocket framer: the negotiation of its parameters in
// the opening handshake (a server answering offers, a client making one and checking the
// answer) and the compression of messages with zlib. The user's contract is
// websocket_deflate_options in include/weft/net/websocket_protocol.hpp. Internal to net.
//
// Threads: a deflate_session belongs to one connection and is used on its thread. Without
// context takeover a direction needs no state between messages, so its zlib stream is the
// thread's (one per setting, thread_local, reset after each message): connections then hold
// no zlib memory at all, and a worker holds one compressor and one decompressor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "weft/net/websocket_protocol.hpp"

namespace weft::net::detail {

// Which end of the conversation a framer speaks for. A server's framer starts with the opening
// handshake, takes only masked frames and sends unmasked ones; a client's (connect_websocket,
// websocket_client.cpp, which did the handshake before switching the connection to it) starts
// open, takes only unmasked frames and masks every frame it sends with a key from getrandom.
enum class websocket_role : std::uint8_t { server, client };

class zlib_deflater;
class zlib_inflater;

// What the two ends agreed on (RFC 7692 7.1), each direction named by the side that compresses.
struct deflate_agreement {
  bool server_no_context_takeover = false;
  bool client_no_context_takeover = false;
  // The most each side's compressor may use (15 when the answer set no limit).
  int server_max_window_bits = 15;
  int client_max_window_bits = 15;
};

// std::invalid_argument naming `where` for settings out of range (level 1-9, windows 9-15,
// mem_level 1-9).
void check_deflate_options(const websocket_deflate_options& options, const char* where);

// A server's answer to a client's Sec-WebSocket-Extensions (all its lines joined by ','): the
// first permessage-deflate offer it can accept, as the agreement and the value of the
// response's Sec-WebSocket-Extensions. nullopt when there is none: no offer of
// permessage-deflate, or each one declined as RFC 7692 5 says (a parameter it does not define,
// one given twice, a value out of its range).
struct deflate_answer {
  deflate_agreement agreed;
  std::string header_value;
};
std::optional<deflate_answer> answer_deflate_offers(std::string_view offers,
                                                    const websocket_deflate_options& options);

// A client's offer, the value of its Sec-WebSocket-Extensions.
std::string deflate_offer(const websocket_deflate_options& options);

// The agreement in a server's Sec-WebSocket-Extensions answer (all its lines joined by ',') to
// deflate_offer(options); nullopt with the reason in `why` when the answer breaks RFC 7692: an
// extension other than permessage-deflate, more than one, a parameter not defined or given
// twice or with a bad value, client_max_window_bits or the absence of a parameter the offer
// required (server_no_context_takeover, server_max_window_bits) that contradicts the offer.
std::optional<deflate_agreement> read_deflate_answer(std::string_view answer,
                                                     const websocket_deflate_options& options,
                                                     std::string& why);

// One connection's compression, both directions.
class deflate_session {
 public:
  deflate_session(const websocket_deflate_options& options, const deflate_agreement& agreed,
                  websocket_role role);
  ~deflate_session();
  deflate_session(const deflate_session&) = delete;
  deflate_session& operator=(const deflate_session&) = delete;

  // Whether an outgoing message of size bytes is worth compressing (and may be: a window of 8
  // bits, which zlib cannot produce, turns compression off).
  bool compresses(std::size_t size) const noexcept {
    return compress_bits_ >= 9 && size >= min_size_;
  }
  // Sets out to payload compressed as RFC 7692 7.2.1 says (a sync flush, its 4-byte tail cut).
  // False when out is no smaller than payload and nothing of it stays in a context (no
  // takeover): the caller then sends the payload uncompressed.
  bool compress(std::string_view payload, std::string& out);
  // Sets out to the message inflated from a compressed payload (7.2.2). More than limit bytes:
  // message_too_big_error (1009), raised as soon as the output passes it; data that does not
  // inflate: protocol_error (1007).
  void decompress(std::string_view payload, std::string& out, std::size_t limit);

 private:
  // The stream of each direction: the connection's own with takeover (made at first use), the
  // thread's shared one without (net/zlib_stream.hpp).
  zlib_deflater& deflater();
  zlib_inflater& inflater();

  int level_;
  int mem_level_;
  std::size_t min_size_;
  int compress_bits_;
  bool compress_takeover_;
  int inflate_bits_;
  bool inflate_takeover_;
  std::unique_ptr<zlib_deflater> own_deflater_;  // with takeover only
  std::unique_ptr<zlib_inflater> own_inflater_;
};

}  // namespace weft::net::detail

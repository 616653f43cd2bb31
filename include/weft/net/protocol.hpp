// weft::net::protocol: how a connection's byte stream is cut into messages and how replies are
// put on the wire. One small interface, the same for every protocol the TCP server speaks: the
// built-in line-delimited text, length-prefixed frame and WebSocket protocols, and the HTTP/1.1
// framer of the http layer.
//
// A protocol is shared, immutable configuration (thread-safe to share between workers); it makes
// one framer per connection, which holds that connection's protocol state (a WebSocket's
// handshake and fragments) and is only used from that connection's scheduler thread.
//
// How a connection drives its framer, every time bytes arrive:
//   1. n = measure(input, link) over all the bytes received and not yet consumed. 0: more bytes
//      are needed (read more, up to the message limit). n > 0: the first n bytes are one
//      complete unit: a message for the user or a protocol-internal frame (a handshake, a ping,
//      a fragment that is not the last one).
//   2. decode(first n bytes, out, link): true when a message for the user is complete in out;
//      false when the unit was consumed by the protocol itself. Either way the n bytes are
//      consumed, and the connection goes back to 1 with what remains.
//   3. Once the peer has ended its stream, bytes that measure() still leaves unframed go to
//      measure_at_end(): a last unit to decode (a last line without its newline: Go's
//      bufio.Scanner and Tokio's LinesCodec hand it over too), or 0, and the connection logs
//      them as a message cut short and drops them.
// Both may call link.send_raw() to answer the peer themselves (a handshake response, a pong,
// the echo of a close frame), which goes out in order with the user's sends, and link.finish()
// when the protocol has ended the conversation (after a close frame): the connection hands
// nothing more to the user, flushes what is queued and closes.
//
// Errors: measure and decode throw protocol_error for bytes that can never become valid, and
// for a unit larger than link.max_message_size() (the message names the size and the limit);
// the connection then sends encode_close(error.close_code()) when the protocol has one, closes,
// and logs the reason. Bytes after a protocol error are never handed to the user.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "weft/error.hpp"

namespace weft::net {

// What a message carries. The text and frame protocols always deliver binary (bytes as
// received); WebSocket tells text from binary, and validates text as UTF-8.
enum class message_kind : std::uint8_t { binary, text };

// One message of a protocol.
struct message {
  std::string data;                          // the payload
  message_kind kind = message_kind::binary;  // text or binary (WebSocket tells them apart)
};

// Bytes that break the protocol, or a message over the size limit. close_code() is the code the
// protocol closes with where it has codes (WebSocket: 1002 protocol error, 1007 invalid UTF-8,
// 1009 too big); 0 otherwise.
class protocol_error : public error {
 public:
  // reason: what was wrong; close_code: the protocol's close code, or 0.
  explicit protocol_error(const std::string& reason, std::uint16_t close_code = 0)
      : error(reason), close_code_(close_code) {}
  // The code the protocol closes with (0: none).
  std::uint16_t close_code() const noexcept { return close_code_; }

 private:
  std::uint16_t close_code_;
};

// A unit larger than link.max_message_size(): the protocol_error a framer throws for it, so that
// the connection closes with close_reason::too_big rather than protocol_error (stats and logs
// tell an oversized message from broken bytes). A framer may still throw a plain protocol_error
// for it; the connection then counts it as a protocol error.
class message_too_big_error : public protocol_error {
 public:
  // protocol_name, size and limit make the message; close_code as for protocol_error.
  message_too_big_error(const char* protocol_name, std::size_t size, std::size_t limit,
                        std::uint16_t close_code = 0)
      : protocol_error(std::string(protocol_name) + " message of " + std::to_string(size) +
                           " bytes is over the limit of " + std::to_string(limit) +
                           " bytes (max_message_size)",
                       close_code),
        size_(size),
        limit_(limit) {}
  // The same for a limit other than max_message_size (a WebSocket frame's), reason naming it.
  message_too_big_error(const std::string& reason, std::size_t size, std::size_t limit,
                        std::uint16_t close_code = 0)
      : protocol_error(reason, close_code), size_(size), limit_(limit) {}
  // The size seen so far (at least limit + 1; the whole size when the protocol announces it).
  std::size_t size() const noexcept { return size_; }
  std::size_t limit() const noexcept { return limit_; }

 private:
  std::size_t size_;
  std::size_t limit_;
};

// What a framer may ask of the connection it frames.
class framer_link {
 public:
  // Queues bytes the protocol itself produced, in order with the connection's other sends.
  // They bypass the send-buffer limit (they are small and answer the peer), never encode().
  virtual void send_raw(std::string_view bytes) = 0;
  // The protocol ended the conversation: hand nothing more to the user, flush, then close.
  virtual void finish() = 0;
  // The largest message this connection accepts, in bytes (the server's and the connection's
  // max_message_size).
  virtual std::size_t max_message_size() const noexcept = 0;
  // The peer's own closing message came (a WebSocket close frame): its code (0 when it had
  // none) and reason, kept for connection::peer_close(). Before finish(); nothing by default.
  virtual void peer_closed(std::uint16_t code, std::string_view reason) {
    static_cast<void>(code);
    static_cast<void>(reason);
  }

 protected:
  ~framer_link() = default;
};

// Cuts one connection's bytes into messages and encodes outgoing ones; one per connection.
class framer {
 public:
  virtual ~framer() = default;

  // The length of the first complete unit at the start of input, or 0 when more bytes are
  // needed. Must not consume anything: it may be called again with the same bytes and more.
  virtual std::size_t measure(std::string_view input, framer_link& link) = 0;
  // The peer ended its stream with `rest` (not empty) unframed, measure() having returned 0 for
  // it: the length of a last unit to decode from it, or 0 (the default) when those bytes are a
  // message cut short.
  virtual std::size_t measure_at_end(std::string_view rest, framer_link& link) {
    static_cast<void>(rest);
    static_cast<void>(link);
    return 0;
  }
  // Consumes one unit of exactly the length measure() (or measure_at_end()) returned. True: out
  // holds a message for the user (out.data is overwritten, its capacity may be reused). False:
  // the unit was the protocol's own.
  virtual bool decode(std::string_view unit, message& out, framer_link& link) = 0;
  // Appends the wire form of one outgoing message to out.
  virtual void encode(std::string_view payload, message_kind kind, std::string& out) = 0;
  // Appends what goes out before the server closes the connection gracefully (a WebSocket close
  // frame with code and reason); nothing for protocols without a closing handshake.
  virtual void encode_close(std::uint16_t code, std::string_view reason, std::string& out) {
    static_cast<void>(code);
    static_cast<void>(reason);
    static_cast<void>(out);
  }
  // Appends what goes out before a stopping server closes the connection between messages (a
  // WebSocket close frame 1001, "going away": RFC 6455 7.4.1); nothing by default.
  virtual void encode_going_away(std::string& out) { static_cast<void>(out); }
  // True while the connection is still in the protocol's opening handshake: the server's
  // handshake timeout applies until it turns false. Protocols without one: always false.
  virtual bool handshaking() const noexcept { return false; }
  // The closing handshake, for a protocol that has one (WebSocket, RFC 6455 7.1): true while
  // this side's closing message went out and the peer's has not come. A graceful close then
  // reads on after its last write, through this framer (the peer's messages dropped, its closing
  // message kept for connection::peer_close()), until that message, the peer's end of the
  // stream, close_timeout without a byte, or linger_time (close_timeout where linger_time is 0).
  // Always false by default.
  virtual bool awaits_peer_close() const noexcept { return false; }
  // True once a closing handshake is under way on a side that should let the peer end the
  // transport first (a WebSocket client, RFC 6455 7.1.1: the server closes the TCP connection
  // first, so that the TIME_WAIT is the server's). A graceful close then holds back its FIN
  // until the peer's arrives (close_timeout at most). Always false by default.
  virtual bool peer_closes_first() const noexcept { return false; }
  // Keep-alive probes, for a protocol that has them (WebSocket's pings): when the peer has sent
  // nothing for `interval`, the connection's reader, waiting for input, sends what encode_ping()
  // appends; when nothing at all has come `timeout` after it, the connection closes
  // (close_reason::ping_timeout).
  struct ping_schedule {
    std::chrono::milliseconds interval{0};  // quiet before a ping; zero: no pings
    std::chrono::milliseconds timeout{0};   // for anything to come after one; zero: interval
  };
  // This framer's keep-alive probes (none by default), asked once, when the framer is made.
  virtual ping_schedule pings() const noexcept { return {}; }
  // Appends one keep-alive probe (a WebSocket ping frame); nothing by default.
  virtual void encode_ping(std::string& out) { static_cast<void>(out); }
};

class protocol {
 public:
  virtual ~protocol() = default;
  // "text", "frame", "websocket", "http": what logs and stats call it (static lifetime).
  virtual const char* name() const noexcept = 0;
  // A framer for a new connection.
  virtual std::unique_ptr<framer> make_framer() const = 0;
};

}  // namespace weft::net

// weft::net::connect_websocket: the client side of the WebSocket protocol (RFC 6455), whose
// connections use the framing of the server side (websocket_protocol.hpp, included here: the
// websocket protocol object, its options, and what its framer does with the bytes it gets)
// with the client's rules: frames from the server are unmasked, frames to it masked.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "weft/error.hpp"
#include "weft/net/connection.hpp"
#include "weft/net/websocket_protocol.hpp"
#include "weft/sched/timeout.hpp"

namespace weft::net {

// The settings of connect_websocket.
struct websocket_client_options {
  // The request target: a path starting with '/', with its query if any ("/chat?room=1").
  std::string path = "/";
  // The Host header; empty: host:port as connect_websocket was given them (an IPv6 address in
  // brackets).
  std::string host_header{};
  // Sent as the Origin header when not empty (what a browser sends; servers may check it).
  std::string origin{};
  // Offered in Sec-WebSocket-Protocol, in order of preference; the server's pick, if any, must be
  // one of them and is returned in websocket_client_connection::subprotocol.
  std::vector<std::string> subprotocols{};
  // Further request headers (an Authorization, a Cookie). The handshake's own (Host, Upgrade,
  // Connection, Sec-WebSocket-*) may not be among them.
  std::vector<std::pair<std::string, std::string>> headers{};
  // The largest response head accepted, in bytes.
  std::size_t max_handshake_size = 8192;
  // The longest the connect, the TLS handshake (wss) and the opening handshake take together
  // when connect_websocket's limit is later or never (a server that accepts and never answers
  // cannot hold the caller for ever: Go's gorilla Dialer allows 45 s); timeout_error past it.
  // Zero: only limit bounds them.
  std::chrono::milliseconds handshake_timeout{30000};
  // Keep-alive pings to the server once connected, as websocket_options::ping_interval and
  // ping_timeout (off by default): a client behind a NAT keeps its flow alive, and finds out
  // (close_reason::ping_timeout) when the server is gone without a word.
  std::chrono::milliseconds ping_interval{0};
  std::chrono::milliseconds ping_timeout{0};
  // The largest frame payload accepted from the server (1009 past it); the message limit is
  // connection.max_message_size.
  std::size_t max_frame_size = std::numeric_limits<std::size_t>::max();
  // The connection's own options (send buffer, message size, idle timeout...); its protocol is
  // not used: the connection speaks WebSocket.
  connection_options connection{};
  // permessage-deflate (RFC 7692): offered when enabled (websocket_deflate_options says what
  // the offer asks for). The server may decline it; websocket_client_connection::extensions
  // says whether it did not.
  websocket_deflate_options deflate{};
};

// The opening handshake failed: the server answered something other than a valid 101, or it
// closed the connection first. status() is the response's status code: 404, 403..., or 101 for
// a 101 that breaks RFC 6455 4.2.2 (a wrong Sec-WebSocket-Accept, a subprotocol or extension
// that was not offered); 0 when no HTTP response came. The message names what was wrong.
class websocket_handshake_error : public error {
 public:
  // reason: what was wrong; status: the response's status code, or 0.
  websocket_handshake_error(const std::string& reason, unsigned status)
      : error(reason), status_(status) {}
  // The response's status code, or 0.
  unsigned status() const noexcept { return status_; }

 private:
  unsigned status_;
};

// What connect_websocket returns.
struct websocket_client_connection {
  // The connection, speaking WebSocket as the client: receive() returns the server's messages
  // (text or binary), send() sends one message as one masked frame, and pings are answered.
  // close(code, reason) sends a close frame and completes the closing handshake (the server's
  // answer in peer_close(), the server ending the TCP connection first); close() alone ends the
  // TCP connection without a close frame (as Go's Conn.Close), which the server sees as 1006.
  // A close frame from the server is answered and ends the input.
  std::shared_ptr<net::connection> connection;
  std::string subprotocol;  // the one the server selected; empty when none
  // The server's Sec-WebSocket-Extensions answer ("permessage-deflate; ..."): empty when no
  // extension is in use.
  std::string extensions;
};

// Connects to host:port (as net::connect: a numeric address or a name) from a coroutine and
// performs the WebSocket opening handshake (RFC 6455 4.1) for options.path: a GET with a random
// 16-byte Sec-WebSocket-Key, answered by a 101 whose Sec-WebSocket-Accept matches it. limit
// bounds the connect and the handshake together, and so does options.handshake_timeout (30 s)
// where it ends earlier. wss: a tls_context::client in
// options.connection.tls (the TLS handshake comes first, within limit too). Errors:
// std::invalid_argument for options that cannot make a valid request (a path not starting with '/',
// a control character in a header value, a header name that is not a token or is one of the
// handshake's own, a subprotocol that is not a token); io_error when the connection fails;
// timeout_error past limit; websocket_handshake_error when the server's answer is not a valid
// handshake. In each case the connection is closed. The one extension offered is
// permessage-deflate, when options.deflate.enabled; an answer that breaks RFC 7692 (a parameter not
// offered or not defined, a window larger than asked for) is websocket_handshake_error with status
// 101.
websocket_client_connection connect_websocket(const std::string& host, std::uint16_t port,
                                              const websocket_client_options& options = {},
                                              const timeout& limit = timeout::never());

}  // namespace weft::net

// weft::http::protocol(): HTTP/1.1 requests as a net::protocol, for a net::tcp_server or a
// net::connection that wants requests cut out of the byte stream without weft::http::server.
//
// Contract (net/protocol.hpp's framer contract):
//   - measure() returns the wire length of one complete request, head and body, chunked bodies
//     included (it runs the strict request parser of parser.hpp incrementally: bytes measured
//     once are not parsed again when more arrive); 0 while the request is incomplete.
//   - decode() hands that request's bytes as they came (message.data: the head, the body as
//     framed, chunked included), message_kind::binary; parse them with a request_parser.
//   - encode() appends the payload as it is: the user sends serialised responses
//     (http::serialize).
//   - A malformed request, or one over the parser limits or the connection's max_message_size,
//     is answered through the framer_link (400, 413, 414, 431, 501 or 505, with Connection:
//     close) and measure() throws protocol_error (message_too_big_error for 413 and for
//     max_message_size), so the connection flushes that answer and closes.
//   - The protocol object is immutable and shared by every worker; each connection's framer is
//     used by its thread only. Nothing blocks.
#pragma once

#include <memory>

#include "weft/http/parser.hpp"
#include "weft/net/protocol.hpp"

namespace weft::http {

// The HTTP/1.1 request framer with these parser limits.
std::shared_ptr<const net::protocol> protocol(const parser_limits& limits = {});

}  // namespace weft::http

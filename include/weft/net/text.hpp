// weft::net::text(): the line-delimited text protocol.
//
// A message is the bytes up to a '\n', without it and without one '\r' right before it (so
// "\r\n" and "\n" both end a line); an empty line is an empty message. A last line that the
// peer's end of the stream cut off before its '\n' is a message too. A line longer than the
// connection's max_message_size (delimiter excluded) is a message_too_big_error as soon as that
// many bytes came without a '\n'. Sending appends "\n" ("\r\n" to a payload that ends in '\r', so
// that the receiver, dropping one '\r', gets the payload whole); a payload containing '\n' cannot
// be sent as one line and is a std::invalid_argument. Messages are message_kind::binary (bytes as
// received, no encoding check). The protocol object is immutable and shared by any threads.
#pragma once

#include <memory>

#include "weft/net/protocol.hpp"

namespace weft::net {

// The line protocol (shared, immutable).
std::shared_ptr<const protocol> text();

}  // namespace weft::net

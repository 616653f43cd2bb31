// weft::net::frame(): the length-prefixed frame protocol.
//
// A message is a 4-byte big-endian unsigned length N followed by N payload bytes (the length
// does not count the prefix); N = 0 is an empty message. A prefix announcing more than the
// connection's max_message_size is a message_too_big_error at once, before the payload is
// buffered. Sending prefixes the payload's length; a payload of 2^32 bytes or more is a
// std::invalid_argument. Messages are message_kind::binary. The protocol object is immutable
// and shared by any threads.
#pragma once

#include <memory>

#include "weft/net/protocol.hpp"

namespace weft::net {

// The frame protocol (shared, immutable).
std::shared_ptr<const protocol> frame();

}  // namespace weft::net

// The Date field's value, cached per second per thread (http_date() in message.hpp is the
// public face). Internal to the http layer.
#pragma once

#include <ctime>
#include <string_view>

namespace weft::http::detail {

// The current IMF-fixdate, and in `second` the second it names: two calls that return the same
// second return the same text, so a caller may key what it built from the text on the second.
std::string_view http_date(std::time_t& second);

}  // namespace weft::http::detail

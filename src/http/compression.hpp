// gzip for response bodies (server_options::compression, whose comment is the contract): which
// requests take gzip, which responses qualify, and the compression itself. Internal to http.
#pragma once

#include <string>
#include <string_view>

#include "weft/http/message.hpp"
#include "weft/http/server.hpp"

namespace weft::http::detail {

// std::invalid_argument for settings out of range (a level outside 1-9, an empty type).
void check_compression_options(const compression_options& options);

// Whether an Accept-Encoding value (all its fields joined by ',') takes gzip: "gzip" or
// "x-gzip" with a q above 0, or else "*" with a q above 0 (RFC 9110 12.5.3). An absent field
// takes nothing here: a server may send any coding then, but clients that do not say they
// decode gzip mostly do not.
bool accepts_gzip(std::string_view accept_encoding) noexcept;

// Whether a Content-Type value names one of options.types.
bool compressible_type(std::string_view content_type, const compression_options& options) noexcept;

// Whether a request's Accept-Encoding fields (all of them, as one list) take gzip.
bool request_accepts_gzip(const headers& request_fields);

// Applies the rules to a response about to be serialized for a request with these fields:
// adds Vary, and compresses the body and sets Content-Encoding and the weakened ETag where
// gzip is taken and the body shrinks. Returns whether it compressed.
bool compress_response(http::response& r, const headers& request_fields,
                       const compression_options& options);

// The gzip member (RFC 1952) of data, with the thread's zlib stream at that level.
void gzip(std::string_view data, int level, std::string& out);

}  // namespace weft::http::detail

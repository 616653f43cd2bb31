// The body half of the HTTP/1.1 parsers (parser.hpp): Content-Length bodies, chunked bodies
// with their extensions and trailer sections, bodies that end with the connection, and the end
// of the input. The field sections are in parser_core.cpp.
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include "http/chars.hpp"
#include "http/describe.hpp"
#include "http/fields_builder.hpp"
#include "weft/http/parser.hpp"

namespace weft::http::detail {

namespace {
constexpr std::size_t npos = static_cast<std::size_t>(-1);
// The framing each chunk carries free of parser_limits::max_chunk_overhead, beside its size:
// "1\r\n" and the CRLF after a one-byte chunk's data take 5, a 64 KiB chunk's "10000\r\n" 9.
constexpr std::uint64_t chunk_allowance = 16;
}  // namespace

parse_result parser_core::parse_body(std::string_view input, headers& trailers) {
  std::size_t consumed = 0;
  while (true) {
    std::string_view rest = input.substr(consumed);
    switch (phase_) {
      case phase::headers_done:
        switch (body_) {
          case body_kind::none:
            phase_ = phase::complete;
            break;
          case body_kind::length:
            phase_ = phase::body_length;
            break;
          case body_kind::chunked:
            phase_ = phase::chunk_size;
            break;
          case body_kind::until_close:
            phase_ = phase::until_close;
            break;
        }
        continue;
      case phase::body_length: {
        if (rest.empty()) return {parse_event::need_more, consumed, {}};
        std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(remaining_, rest.size()));
        remaining_ -= n;
        if (remaining_ == 0) phase_ = phase::complete;
        return {parse_event::body, consumed + n, rest.substr(0, n)};
      }
      case phase::until_close: {
        if (rest.empty()) return {parse_event::need_more, consumed, {}};
        if (rest.size() > limits_.max_body_size - body_total_) {
          return fail(status::content_too_large,
                      "the body is larger than the limit " + std::to_string(limits_.max_body_size));
        }
        body_total_ += rest.size();
        return {parse_event::body, consumed + rest.size(), rest};
      }
      case phase::chunk_size: {
        std::size_t window = std::min(rest.size(), limits_.max_chunk_line_size);
        const void* found = std::memchr(rest.data(), '\n', window);
        if (found == nullptr) {
          if (rest.size() >= limits_.max_chunk_line_size) {
            return fail(status::bad_request, "a chunk-size line is longer than " +
                                                 std::to_string(limits_.max_chunk_line_size) +
                                                 " bytes");
          }
          // A CR, or anything but hex digits, ';' and BWS before the line is complete, can
          // be refused now; the rest waits for the line.
          return {parse_event::need_more, consumed, {}};
        }
        std::size_t lf = static_cast<std::size_t>(static_cast<const char*>(found) - rest.data());
        if (lf == 0 || rest[lf - 1] != '\r') {
          return fail(status::bad_request,
                      "a chunk-size line ends in a bare LF without CR (RFC 9112 7.1)");
        }
        std::string_view line = rest.substr(0, lf - 1);
        std::size_t i = 0;
        std::uint64_t size = 0;
        while (i < line.size() && is_hex_digit(static_cast<unsigned char>(line[i]))) {
          if (size > (std::numeric_limits<std::uint64_t>::max() >> 4)) {
            return fail(status::bad_request,
                        "the chunk size " + quoted(line) + " overflows 64 bits");
          }
          size = (size << 4) |
                 static_cast<std::uint64_t>(hex_value(static_cast<unsigned char>(line[i])));
          ++i;
        }
        if (i == 0) {
          return fail(status::bad_request,
                      "the chunk size " + quoted(line) + " is not a hexadecimal number");
        }
        // chunk-ext = *( BWS ";" BWS ext-name [ BWS "=" BWS ext-val ] ), RFC 9112 7.1.1
        while (i < line.size()) {
          while (i < line.size() && is_space_or_tab(line[i])) ++i;
          if (i == line.size() || line[i] != ';') {
            return fail(status::bad_request, "the chunk-size line " + quoted(line) +
                                                 " has something other than hex digits and "
                                                 "extensions");
          }
          ++i;
          while (i < line.size() && is_space_or_tab(line[i])) ++i;
          std::size_t name_start = i;
          while (i < line.size() && is_token_char(static_cast<unsigned char>(line[i]))) ++i;
          if (i == name_start) {
            return fail(status::bad_request, "a chunk extension without a name in " + quoted(line));
          }
          std::size_t after_name = i;
          while (i < line.size() && is_space_or_tab(line[i])) ++i;
          if (i < line.size() && line[i] == '=') {
            ++i;
            while (i < line.size() && is_space_or_tab(line[i])) ++i;
            if (i < line.size() && line[i] == '"') {
              ++i;
              bool closed = false;
              while (i < line.size()) {
                unsigned char c = static_cast<unsigned char>(line[i]);
                if (c == '"') {
                  closed = true;
                  ++i;
                  break;
                }
                if (c == '\\') {
                  if (i + 1 >= line.size() ||
                      !is_field_value_char(static_cast<unsigned char>(line[i + 1]))) {
                    break;
                  }
                  i += 2;
                  continue;
                }
                if (!is_field_value_char(c)) break;
                ++i;
              }
              if (!closed) {
                return fail(status::bad_request,
                            "a chunk extension has a malformed quoted value in " + quoted(line));
              }
            } else {
              std::size_t value_start = i;
              while (i < line.size() && is_token_char(static_cast<unsigned char>(line[i]))) ++i;
              if (i == value_start) {
                return fail(status::bad_request,
                            "a chunk extension has an empty value in " + quoted(line));
              }
            }
          } else {
            // No value: only BWS and the next ';' may follow (the loop's head checks it).
            i = after_name;
          }
        }
        if (size > limits_.max_body_size - body_total_) {
          return fail(status::content_too_large, "the chunked body is larger than the limit " +
                                                     std::to_string(limits_.max_body_size));
        }
        // This line and the CRLF after its data, less the chunk's allowance (parser_limits::
        // max_chunk_overhead). chunk_overhead_ stays below max_chunk_overhead plus a line, so
        // size + chunk_allowance is only added where size is smaller than that.
        chunk_overhead_ += lf + 1 + 2;
        chunk_overhead_ = size >= chunk_overhead_
                              ? 0
                              : chunk_overhead_ - std::min(chunk_overhead_, size + chunk_allowance);
        if (chunk_overhead_ > limits_.max_chunk_overhead) {
          return fail(status::bad_request,
                      "the chunk framing (chunk-size lines and their extensions) exceeds the "
                      "data it carries by more than " +
                          std::to_string(limits_.max_chunk_overhead) +
                          " bytes (max_chunk_overhead)");
        }
        body_total_ += size;
        consumed += lf + 1;
        if (size == 0) {
          phase_ = phase::trailers;
          line_start_ = scanned_ = lines_ = 0;
          fields_builder::reset(trailers);
        } else {
          remaining_ = size;
          phase_ = phase::chunk_data;
        }
        continue;
      }
      case phase::chunk_data: {
        if (rest.empty()) return {parse_event::need_more, consumed, {}};
        std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(remaining_, rest.size()));
        remaining_ -= n;
        if (remaining_ == 0) phase_ = phase::chunk_crlf;
        return {parse_event::body, consumed + n, rest.substr(0, n)};
      }
      case phase::chunk_crlf: {
        if (rest.empty()) return {parse_event::need_more, consumed, {}};
        if (rest[0] != '\r' || (rest.size() > 1 && rest[1] != '\n')) {
          return fail(status::bad_request, "chunk data is not followed by CRLF (RFC 9112 7.1)");
        }
        if (rest.size() < 2) return {parse_event::need_more, consumed, {}};
        consumed += 2;
        phase_ = phase::chunk_size;
        continue;
      }
      case phase::trailers: {
        std::size_t end = find_section_end(rest, 0, status::request_header_fields_too_large);
        if (end == npos) return {parse_event::error, consumed, {}};
        if (end == 0) {
          // The section's scan state is relative to rest, which starts here next time only
          // if nothing before it is kept: return what was consumed so the caller drops it.
          return {parse_event::need_more, consumed, {}};
        }
        if (lines_ > limits_.max_header_fields) {
          return fail(status::request_header_fields_too_large,
                      "more than " + std::to_string(limits_.max_header_fields) + " trailer fields");
        }
        if (!parse_fields(rest.substr(0, end), 0, trailers, false)) {
          return {parse_event::error, consumed, {}};
        }
        fields_builder::adopt(trailers, rest.substr(0, end));
        consumed += end;
        phase_ = phase::complete;
        continue;
      }
      case phase::complete:
        phase_ = phase::idle;
        return {parse_event::message_complete, consumed, {}};
      case phase::failed:
        return {parse_event::error, consumed, {}};
      case phase::start:
      case phase::idle:
        return {parse_event::need_more, consumed, {}};
    }
  }
}

parse_result parser_core::finish_input() {
  switch (phase_) {
    case phase::until_close:
      phase_ = phase::idle;
      return {parse_event::message_complete, 0, {}};
    case phase::idle:
      return {parse_event::need_more, 0, {}};
    case phase::start:
      if (!started_) return {parse_event::need_more, 0, {}};
      return fail(status::bad_request, "the connection closed inside a header section");
    case phase::failed:
      return {parse_event::error, 0, {}};
    case phase::complete:
    case phase::headers_done:
      if (body_ == body_kind::none || body_ == body_kind::until_close) {
        phase_ = phase::idle;
        return {parse_event::message_complete, 0, {}};
      }
      [[fallthrough]];
    default:
      return fail(status::bad_request, "the connection closed before the body was complete");
  }
}

}  // namespace weft::http::detail

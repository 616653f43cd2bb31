// The parts of the HTTP/1.1 parsers shared by requests and responses (parser.hpp): field
// sections and the framing fields that choose how the body is read (parser_body.cpp reads it).
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include "http/chars.hpp"
#include "http/describe.hpp"
#include "http/fields_builder.hpp"
#include "http/scan.hpp"
#include "weft/http/parser.hpp"

namespace weft::http::detail {

namespace {

constexpr std::size_t npos = static_cast<std::size_t>(-1);
// Sections are indexed with 32-bit offsets (headers.hpp); bound them well below that.
constexpr std::size_t section_cap = 64u * 1024 * 1024;

}  // namespace

parser_core::parser_core(const parser_limits& limits) noexcept : limits_(limits) {
  limits_.max_header_size = std::min(limits_.max_header_size, section_cap);
}

[[gnu::hot]] void parser_core::begin_message() noexcept {
  phase_ = phase::start;
  body_ = body_kind::none;
  line_start_ = scanned_ = lines_ = 0;
  started_ = false;
  remaining_ = body_total_ = chunk_overhead_ = 0;
  forget_framing();
}

void parser_core::forget_framing() noexcept {
  content_length_fields_ = host_fields_ = 0;
  content_length_ = 0;
  transfer_encoding_ = te_chunked_ = te_chunked_last_ = false;
  connection_close_ = connection_keep_alive_ = expect_ = false;
  te_unknown_.clear();
  host_fault_.clear();
}

[[gnu::hot]] std::string_view parser_core::whole_head(std::string_view input) const noexcept {
  const char* const data = input.data();
  const std::size_t size = input.size();
  if (size <= limits_.max_header_size && size >= 4 &&
      std::memcmp(data + size - 4, "\r\n\r\n", 4) == 0) {
    return input;
  }
  // Every line before the first CR LF CR LF ends in CRLF in a section the field parser accepts,
  // so that is where find_section_end's walk would stop too.
  const char* end = find_blank_line(data, data + std::min(size, limits_.max_header_size));
  return end != nullptr ? input.substr(0, static_cast<std::size_t>(end - data))
                        : std::string_view();
}

void parser_core::restart_section(headers& fields) noexcept {
  phase_ = phase::start;
  forget_framing();
  fields_builder::reset(fields);
  error_status_ = status::ok;
  error_reason_.clear();
}

parse_result parser_core::fail(status s, std::string reason) {
  phase_ = phase::failed;
  error_status_ = s;
  error_reason_ = std::move(reason);
  return {parse_event::error, 0, {}};
}

// find_section_end's refusals of a first line or a section past its bound (the same when the
// section arrives whole or in pieces), out of line. Both return npos after fail().
std::size_t parser_core::fail_first_line(std::size_t first_line_limit, status first_line_status) {
  fail(first_line_status,
       first_line_status == status::uri_too_long
           ? "the request target is longer than " + std::to_string(limits_.max_target_size) +
                 " bytes"
           : "the start line is longer than " + std::to_string(first_line_limit) + " bytes");
  return npos;
}

std::size_t parser_core::fail_section_size() {
  fail(status::request_header_fields_too_large,
       "the header section is larger than " + std::to_string(limits_.max_header_size) + " bytes");
  return npos;
}

[[gnu::hot]] std::size_t parser_core::find_section_end(std::string_view input,
                                                       std::size_t first_line_limit,
                                                       status first_line_status) {
  const char* data = input.data();
  const char* const end = data + input.size();
  while (true) {
    const char* found = scanned_ < input.size() ? find_lf(data + scanned_, end) : end;
    if (found == end) {
      scanned_ = input.size();
      if (lines_ == 0 && first_line_limit != 0 && input.size() > first_line_limit) {
        return fail_first_line(first_line_limit, first_line_status);
      }
      if (input.size() > limits_.max_header_size) {
        return fail_section_size();
      }
      return 0;
    }
    std::size_t lf = static_cast<std::size_t>(found - data);
    // The bounds are checked before the line's own syntax, in the order of the not-found case
    // above, so that a section refused when it arrives in pieces is refused with the same
    // status when it arrives whole.
    if (lines_ == 0 && first_line_limit != 0 && lf + 1 > first_line_limit) {
      return fail_first_line(first_line_limit, first_line_status);
    }
    if (lf + 1 > limits_.max_header_size) {
      return fail_section_size();
    }
    if (lf == line_start_ || data[lf - 1] != '\r') {
      fail_with(status::bad_request, [&] {
        return std::string("a line ends in a bare LF without CR (line " +
                           std::to_string(lines_ + 1) +
                           "); weft requires CRLF line ends (RFC 9112 2.2)");
      });
      return npos;
    }
    if (lf == line_start_ + 1) return lf + 1;  // the empty line: the section ends
    ++lines_;
    // The start line of a header section is one of the lines; a trailer section has none, so
    // it gets one line fewer (checked again by its caller with its own count).
    if (lines_ > limits_.max_header_fields + 1) {
      fail_with(status::request_header_fields_too_large, [&] {
        return std::string("more than " + std::to_string(limits_.max_header_fields) +
                           " header fields");
      });
      return npos;
    }
    line_start_ = scanned_ = lf + 1;
  }
}

[[gnu::hot]] bool parser_core::parse_fields(std::string_view section, std::size_t from,
                                            headers& fields, bool framing,
                                            std::size_t* section_end) {
  const char* base = section.data();
  const char* p = base + from;
  const char* end = base + section.size();
  std::size_t count = 0;
  while (true) {
    if (*p == '\r') {
      // The empty line (find_section_end checked that its LF ends the section, or the caller
      // asked for the first one); a CR that starts any other line is a CR without LF.
      if (section_end != nullptr && p[1] == '\n') {
        *section_end = static_cast<std::size_t>(p + 2 - base);
        break;
      }
      if (p + 2 != end) {
        fail_with(status::bad_request,
                  [&] { return std::string("a field line starts with a CR not followed by LF"); });
        return false;
      }
      break;
    }
    if (is_space_or_tab(*p)) {
      fail_with(status::bad_request, [&] {
        return std::string(
            "a field line starts with whitespace (obs-fold, rejected per RFC 9112 5.2)");
      });
      return false;
    }
    const char* name = p;
    while (is_token_char(static_cast<unsigned char>(*p))) ++p;
    std::size_t name_size = static_cast<std::size_t>(p - name);
    if (*p != ':') {
      if (name_size == 0) {
        fail_with(status::bad_request, [&] {
          return std::string("a field line has no name (it starts with " +
                             byte_name(static_cast<unsigned char>(*p)) + ")");
        });
      } else if (is_space_or_tab(*p)) {
        fail_with(status::bad_request, [&] {
          return std::string("whitespace between the field name " +
                             quoted(std::string_view(name, name_size)) +
                             " and its colon (RFC 9112 5.1)");
        });
      } else {
        fail_with(status::bad_request, [&] {
          return std::string("the field name " + quoted(std::string_view(name, name_size)) +
                             " is followed by " + byte_name(static_cast<unsigned char>(*p)) +
                             ", which is neither a token character nor ':'");
        });
      }
      return false;
    }
    if (name_size == 0) {
      fail_with(status::bad_request,
                [&] { return std::string("a field line has no name before its colon"); });
      return false;
    }
    if (name_size > std::numeric_limits<std::uint16_t>::max()) {
      fail_with(status::request_header_fields_too_large,
                [&] { return std::string("a field name is longer than 65535 bytes"); });
      return false;
    }
    ++p;
    while (is_space_or_tab(*p)) ++p;
    const char* value = p;
    while (true) {
      p = find_control(p, end);
      if (*p == '\t') {
        ++p;
        continue;
      }
      break;
    }
    // find_section_end saw this line's LF after a CR, so the scan stopped inside the section.
    if (*p != '\r' || p[1] != '\n') {
      fail_with(status::bad_request, [&] {
        return std::string(
            (*p == '\r' ? std::string("a CR not followed by LF")
                        : "the control character " + byte_name(static_cast<unsigned char>(*p))) +
            " in the value of field " + quoted(std::string_view(name, name_size)));
      });
      return false;
    }
    const char* value_end = p;
    while (value_end > value && is_space_or_tab(value_end[-1])) --value_end;
    std::string_view field_name(name, name_size);
    std::string_view field_value(value, static_cast<std::size_t>(value_end - value));
    if (++count > limits_.max_header_fields) {
      fail_with(status::request_header_fields_too_large, [&] {
        return std::string("more than " + std::to_string(limits_.max_header_fields) +
                           " fields in a section");
      });
      return false;
    }
    fields_builder::index(fields, name_hash(field_name), static_cast<std::size_t>(name - base),
                          name_size, static_cast<std::size_t>(value - base), field_value.size());
    p += 2;
    if (!framing) continue;
    switch (name_size) {
      case 6:
        if (token_is(name, "expect")) {
          expect_ = true;
        }
        break;
      case 4:
        if (token_is(name, "host")) {
          ++host_fields_;
          const std::size_t bad = find_non_host_char(field_value);
          if (bad != std::string_view::npos) [[unlikely]] {
            note_host_fault(field_value, bad);
          }
        }
        break;
      case 10:
        if (token_is(name, "connection")) {
          std::string_view list = field_value;
          while (!list.empty()) {
            std::size_t comma = list.find(',');
            std::string_view option = trim_ows(list.substr(0, comma));
            list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
            if (iequals(option, "close")) connection_close_ = true;
            if (iequals(option, "keep-alive")) connection_keep_alive_ = true;
          }
        }
        break;
      case 14:
        if (token_is(name, "content-length")) {
          if (++content_length_fields_ > 1) {
            fail_with(status::bad_request, [&] {
              return std::string(
                  "Content-Length appears more than once (rejected even when the values agree: "
                  "RFC 9112 6.3 makes differing ones unrecoverable)");
            });
            return false;
          }
          if (field_value.empty()) {
            fail_with(status::bad_request, [&] { return std::string("Content-Length is empty"); });
            return false;
          }
          std::uint64_t n = 0;
          bool saturated = false;
          for (char c : field_value) {
            if (c < '0' || c > '9') {
              fail_with(status::bad_request, [&] {
                return std::string("Content-Length " + quoted(field_value) +
                                   " is not a decimal number (1*DIGIT)");
              });
              return false;
            }
            unsigned digit = static_cast<unsigned>(c - '0');
            if (n > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) {
              saturated = true;
            } else {
              n = n * 10 + digit;
            }
          }
          content_length_ = saturated ? std::numeric_limits<std::uint64_t>::max() : n;
        }
        break;
      case 17:
        if (token_is(name, "transfer-encoding")) {
          transfer_encoding_ = true;
          std::string_view list = field_value;
          while (true) {
            std::size_t comma = list.find(',');
            std::string_view element = trim_ows(list.substr(0, comma));
            if (!element.empty()) {
              std::size_t semicolon = element.find(';');
              std::string_view coding = trim_ows(element.substr(0, semicolon));
              if (!is_token(coding)) {
                fail_with(status::bad_request, [&] {
                  return std::string("Transfer-Encoding " + quoted(field_value) +
                                     " has an invalid coding");
                });
                return false;
              }
              if (iequals(coding, "chunked")) {
                if (te_chunked_) {
                  fail_with(status::bad_request, [&] {
                    return std::string("Transfer-Encoding applies chunked more than once");
                  });
                  return false;
                }
                if (semicolon != std::string_view::npos) {
                  fail_with(status::bad_request, [&] {
                    return std::string("Transfer-Encoding: chunked takes no parameters");
                  });
                  return false;
                }
                te_chunked_ = te_chunked_last_ = true;
              } else {
                te_chunked_last_ = false;
                if (te_unknown_.empty()) te_unknown_ = std::string(coding.substr(0, 64));
              }
            }
            if (comma == std::string_view::npos) break;
            list.remove_prefix(comma + 1);
          }
        }
        break;
      default:
        break;
    }
  }
  return true;
}

bool parser_core::refuse_unknown_coding() {
  // 501 (RFC 9110 15.6.2): a coding weft has no decoder for; the reason phrase says so.
  fail(status::not_implemented, "the transfer coding " + quoted(te_unknown_) +
                                    " is not implemented (weft decodes chunked only)");
  return false;
}

bool parser_core::choose_length_body() {
  if (content_length_ > limits_.max_body_size) {
    fail(status::content_too_large, "Content-Length " + std::to_string(content_length_) +
                                        " is larger than the limit " +
                                        std::to_string(limits_.max_body_size));
    return false;
  }
  body_ = content_length_ > 0 ? body_kind::length : body_kind::none;
  remaining_ = content_length_;
  return true;
}

// Noted while the fields are parsed and reported by choose_request_body, the one place that
// knows the section is a request's (a response's Host field means nothing and is not checked).
void parser_core::note_host_fault(std::string_view value, std::size_t at) {
  host_fault_ = host_fault_reason("the Host field", value, "", at, "9112 3.2");
}

[[gnu::hot]] bool parser_core::choose_request_body(int version_minor) {
  if (version_minor >= 1 && host_fields_ != 1) {
    fail(status::bad_request, host_fields_ == 0
                                  ? "an HTTP/1.1 request without a Host field (RFC 9112 3.2)"
                                  : "Host appears more than once (RFC 9112 3.2)");
    return false;
  }
  if (version_minor == 0 && host_fields_ > 1) {
    fail(status::bad_request, "Host appears more than once (RFC 9112 3.2)");
    return false;
  }
  if (!host_fault_.empty()) [[unlikely]] {
    fail(status::bad_request, host_fault_);
    return false;
  }
  if (transfer_encoding_) {
    if (version_minor == 0) {
      fail(status::bad_request,
           "Transfer-Encoding in an HTTP/1.0 request (HTTP/1.0 has no chunked coding; RFC "
           "9112 6.1 calls its framing faulty)");
      return false;
    }
    if (content_length_fields_ > 0) {
      fail(status::bad_request,
           "both Content-Length and Transfer-Encoding (RFC 9112 6.1: a request smuggling "
           "vector)");
      return false;
    }
    if (!te_chunked_last_) {
      fail(status::bad_request,
           "Transfer-Encoding does not end with chunked, so the body's length cannot be "
           "determined (RFC 9112 6.3)");
      return false;
    }
    if (!te_unknown_.empty()) {
      return refuse_unknown_coding();
    }
    body_ = body_kind::chunked;
    return true;
  }
  if (content_length_fields_ > 0) {
    return choose_length_body();
  }
  body_ = body_kind::none;
  return true;
}

bool parser_core::choose_response_body(int version_minor, std::uint16_t code, bool head_request,
                                       bool connect_request) {
  if (transfer_encoding_ && version_minor == 0) {
    fail(status::bad_request, "Transfer-Encoding in an HTTP/1.0 response (RFC 9112 6.1)");
    return false;
  }
  if (transfer_encoding_ && content_length_fields_ > 0) {
    fail(status::bad_request, "a response with both Content-Length and Transfer-Encoding");
    return false;
  }
  // RFC 9112 6.3, in its order: no content for HEAD, 1xx, 204, 304 and a 2xx to CONNECT.
  if (head_request || code / 100 == 1 || code == 204 || code == 304 ||
      (connect_request && code / 100 == 2)) {
    body_ = body_kind::none;
    return true;
  }
  if (transfer_encoding_) {
    if (te_chunked_last_) {
      if (!te_unknown_.empty()) {
        return refuse_unknown_coding();
      }
      body_ = body_kind::chunked;
    } else {
      body_ = body_kind::until_close;  // 6.3 item 4: the body ends when the connection does
    }
    return true;
  }
  if (content_length_fields_ > 0) {
    return choose_length_body();
  }
  body_ = body_kind::until_close;
  return true;
}

[[gnu::hot]] bool parser_core::keep_alive_of(int version_minor) const noexcept {
  if (connection_close_) return false;
  return version_minor >= 1 || connection_keep_alive_;
}

}  // namespace weft::http::detail

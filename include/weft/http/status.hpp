// weft::http::status: HTTP status codes (RFC 9110 section 15) and their reason phrases.
//
// Contract: plain values and pure functions; nothing blocks, any thread may call, nothing is
// owned. A status is any three-digit code: the enumerators name the common ones, and
// static_cast<http::status>(n) makes any other (reason_phrase() then gives the class's
// generic phrase, "Unknown" outside 100-599). Nothing here throws.
#pragma once

#include <cstdint>
#include <string_view>

namespace weft::http {

// The HTTP status codes of RFC 9110 and the common extensions.
enum class status : std::uint16_t {
  continue_ = 100,  // trailing underscore: `continue` is a keyword
  switching_protocols = 101,
  ok = 200,
  created = 201,
  accepted = 202,
  non_authoritative_information = 203,
  no_content = 204,
  reset_content = 205,
  partial_content = 206,
  multiple_choices = 300,
  moved_permanently = 301,
  found = 302,
  see_other = 303,
  not_modified = 304,
  temporary_redirect = 307,
  permanent_redirect = 308,
  bad_request = 400,
  unauthorized = 401,
  payment_required = 402,
  forbidden = 403,
  not_found = 404,
  method_not_allowed = 405,
  not_acceptable = 406,
  proxy_authentication_required = 407,
  request_timeout = 408,
  conflict = 409,
  gone = 410,
  length_required = 411,
  precondition_failed = 412,
  content_too_large = 413,
  uri_too_long = 414,
  unsupported_media_type = 415,
  range_not_satisfiable = 416,
  expectation_failed = 417,
  misdirected_request = 421,
  unprocessable_content = 422,
  upgrade_required = 426,
  precondition_required = 428,
  too_many_requests = 429,
  request_header_fields_too_large = 431,
  internal_server_error = 500,
  not_implemented = 501,
  bad_gateway = 502,
  service_unavailable = 503,
  gateway_timeout = 504,
  http_version_not_supported = 505,
};

// The reason phrase RFC 9110 gives the code ("Not Found"), or the generic one of its class
// ("Client Error" for an unlisted 4xx); "Unknown" outside 100-599. Static storage.
std::string_view reason_phrase(status code) noexcept;

// The status as its number.
constexpr std::uint16_t code_of(status s) noexcept { return static_cast<std::uint16_t>(s); }

// RFC 9110 15: 1xx informational; a response that may not carry content (1xx, 204, 304) is
// what the serialiser and the response parser need to know.
constexpr bool is_informational(status s) noexcept { return code_of(s) / 100 == 1; }
// Whether a response with this status may not carry content (1xx, 204, 304).
constexpr bool forbids_content(status s) noexcept {
  return is_informational(s) || s == status::no_content || s == status::not_modified;
}

}  // namespace weft::http

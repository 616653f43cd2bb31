// weft::http::response_parser: the status line and the order of the steps (parser.hpp); the
// field sections are in parser_core.cpp, the bodies in parser_body.cpp.
#include <cstring>
#include <string>

#include "http/chars.hpp"
#include "http/describe.hpp"
#include "http/fields_builder.hpp"
#include "http/scan.hpp"
#include "weft/http/parser.hpp"

namespace weft::http {

namespace {

constexpr std::size_t npos = static_cast<std::size_t>(-1);

bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

}  // namespace

void response_parser::reset() noexcept {
  phase_ = phase::idle;
  error_status_ = status::ok;
  error_reason_.clear();
}

bool response_parser::body_expected() const noexcept {
  return body_ == body_kind::length || body_ == body_kind::chunked ||
         body_ == body_kind::until_close;
}

parse_result response_parser::parse(std::string_view input) {
  if (phase_ == phase::failed) return {parse_event::error, 0, {}};
  if (phase_ == phase::idle) {
    begin_message();
    message_.status = status::ok;
    message_.reason.clear();
    detail::fields_builder::reset_message(message_);
  }
  if (phase_ == phase::start) return parse_head(input);
  return parse_body(input, message_.trailers);
}

parse_result response_parser::parse_head(std::string_view input) {
  if (!input.empty()) started_ = true;
  std::size_t end = find_section_end(input, 0, status::bad_request);
  if (end == npos) return {parse_event::error, 0, {}};
  if (end == 0) return {parse_event::need_more, 0, {}};
  std::string_view section = input.substr(0, end);
  std::size_t line_end = 0;
  if (!parse_status_line(section, line_end)) return {parse_event::error, 0, {}};
  if (!parse_fields(section, line_end, message_.headers, true)) {
    return {parse_event::error, 0, {}};
  }
  detail::fields_builder::adopt(message_.headers, section);
  if (!choose_response_body(message_.version_minor, code_of(message_.status),
                            request_method_ == method::head, request_method_ == method::connect)) {
    return {parse_event::error, 0, {}};
  }
  phase_ = phase::headers_done;
  return {parse_event::headers_complete, end, {}};
}

bool response_parser::parse_status_line(std::string_view section, std::size_t& line_end) {
  const char* p = section.data();
  const char* end = p + section.size();
  // HTTP-version SP 3DIGIT [ SP reason-phrase ] CRLF; the section's final CRLF CRLF makes the
  // first 12 bytes readable.
  if (end - p < 14 || std::memcmp(p, "HTTP/", 5) != 0 || !is_digit(p[5]) || p[6] != '.' ||
      !is_digit(p[7]) || p[8] != ' ' || !is_digit(p[9]) || !is_digit(p[10]) || !is_digit(p[11]) ||
      p[9] == '0') {
    std::string_view line = section.substr(0, section.find('\r'));
    fail(status::bad_request,
         "the status line " + detail::quoted(line) + " is not HTTP/<d>.<d> <3 digits> <reason>");
    return false;
  }
  if (p[5] != '1') {
    fail(status::http_version_not_supported,
         "HTTP/" + std::string(1, p[5]) + "." + std::string(1, p[7]) + " is not supported");
    return false;
  }
  int code = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
  const char* reason = p + 12;
  if (*reason == ' ') {
    ++reason;
  } else if (*reason != '\r') {
    fail(status::bad_request, "the status code is not followed by a space or the line end");
    return false;
  }
  const char* q = reason;
  while (true) {
    q = detail::find_control(q, end);
    if (*q == '\t') {
      ++q;
      continue;
    }
    break;
  }
  if (*q != '\r' || q[1] != '\n') {
    fail(status::bad_request,
         "the reason phrase has the control character " + detail::quoted(std::string_view(q, 1)));
    return false;
  }
  message_.version_minor = p[7] - '0';
  message_.status = static_cast<status>(code);
  message_.reason.assign(reason, static_cast<std::size_t>(q - reason));
  line_end = static_cast<std::size_t>(q + 2 - section.data());
  return true;
}

}  // namespace weft::http

// weft::http::request_parser: the request line and the order of the steps (parser.hpp); the
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
// What a request line may hold besides its target: the longest method (weft's are at most 7
// bytes, an unknown one up to this is still answered 501 rather than 414), two spaces,
// "HTTP/1.1" and CRLF.
constexpr std::size_t request_line_overhead = 64;

bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

// Skips the empty lines allowed before a start line (RFC 9112 2.2). Returns how many bytes
// they took; sets bad when a CR is followed by something other than LF or a LF comes alone.
std::size_t skip_empty_lines(std::string_view input, bool& complete, bool& bad) noexcept {
  std::size_t i = 0;
  complete = false;
  bad = false;
  while (i < input.size()) {
    if (input[i] == '\n') {
      bad = true;
      return i;
    }
    if (input[i] != '\r') {
      complete = true;
      return i;
    }
    if (i + 1 == input.size()) return i;
    if (input[i + 1] != '\n') {
      bad = true;
      return i;
    }
    i += 2;
  }
  return i;
}

}  // namespace

// --- request_parser ---

void request_parser::reset() noexcept {
  phase_ = phase::idle;
  error_status_ = status::ok;
  error_reason_.clear();
}

[[gnu::hot]] bool request_parser::body_expected() const noexcept {
  return body_ == body_kind::length || body_ == body_kind::chunked;
}

[[gnu::hot]] parse_result request_parser::parse(std::string_view input) {
  if (phase_ == phase::failed) return {parse_event::error, 0, {}};
  if (phase_ == phase::idle) {
    begin_message();
    message_.method = method::get;
    message_.target.clear();
    detail::fields_builder::reset_message(message_);
  }
  if (phase_ == phase::start) return parse_head(input);
  if (phase_ == phase::headers_done && body_ == body_kind::none) {
    // The call after the head of a request without a body (nearly every one a server gets):
    // message_complete at once, without parse_body's walk through the phases.
    phase_ = phase::idle;
    return {parse_event::message_complete, 0, {}};
  }
  return parse_body(input, message_.trailers);
}

[[gnu::hot]] parse_result request_parser::parse_head(std::string_view input) {
  std::size_t skipped = 0;
  if (!started_) {
    bool complete = false;
    bool bad = false;
    skipped = skip_empty_lines(input, complete, bad);
    if (bad) {
      return fail_with(status::bad_request, [&] {
        return std::string(
            "a line before the request line is not an empty CRLF line (bare LF or CR)");
      });
    }
    if (!complete) return {parse_event::need_more, skipped, {}};
    started_ = true;
  }
  const std::size_t first_line_limit = limits_.max_target_size + request_line_overhead;
  std::string_view section = input.substr(skipped);
  std::size_t line_end = 0;
  // A head seen whole at its first look (nearly every request a server gets) is parsed in one
  // pass (whole_head says where). Anything refused there is parsed again the long way below,
  // which refuses it with the status and reason a head arriving in pieces gets (the fuzzer
  // compares the two: tests/http/fuzz).
  if (scanned_ == 0) {
    if (std::string_view head = whole_head(section); !head.empty()) {
      std::size_t head_end = 0;
      if (parse_request_line(head, line_end) && line_end <= first_line_limit &&
          parse_fields(head, line_end, message_.headers, true, &head_end)) {
        return finish_head(head.substr(0, head_end), skipped);
      }
      restart_section(message_.headers);
    }
  }
  std::size_t end = find_section_end(section, first_line_limit, status::uri_too_long);
  if (end == npos) return {parse_event::error, 0, {}};
  if (end == 0) return {parse_event::need_more, skipped, {}};
  section = section.substr(0, end);
  if (!parse_request_line(section, line_end)) return {parse_event::error, 0, {}};
  if (!parse_fields(section, line_end, message_.headers, true)) {
    return {parse_event::error, 0, {}};
  }
  return finish_head(section, skipped);
}

// The head's section parsed: its bytes kept for the fields, the body's framing chosen.
[[gnu::hot]] parse_result request_parser::finish_head(std::string_view section,
                                                      std::size_t skipped) {
  const std::size_t end = section.size();
  detail::fields_builder::adopt(message_.headers, section);
  if (!choose_request_body(message_.version_minor)) return {parse_event::error, 0, {}};
  phase_ = phase::headers_done;
  return {parse_event::headers_complete, skipped + end, {}};
}

[[gnu::hot]] bool request_parser::parse_request_line(std::string_view section,
                                                     std::size_t& line_end) {
  const char* base = section.data();
  const char* end = base + section.size();
  const char* p = base;
  // GET (nearly every request a server gets) is known by one compare of its four bytes with the
  // space after it; every other method is scanned as a token and looked up below. A section
  // always has its final empty line after the start line, so four bytes are there to read.
  std::optional<method> m;
  if (end - base >= 4 && detail::load_u32(base) == detail::load_u32("GET ")) {
    p = base + 3;
    m = method::get;
  } else {
    while (detail::is_token_char(static_cast<unsigned char>(*p))) ++p;
  }
  std::string_view method_token(base, static_cast<std::size_t>(p - base));
  if (method_token.empty() || *p != ' ') {
    fail_with(status::bad_request, [&] {
      return std::string(method_token.empty()
                             ? "the request line does not start with a method token"
                             : "the method " + detail::quoted(method_token) +
                                   " is not followed by a single space");
    });
    return false;
  }
  ++p;
  const char* target = p;
  unsigned marks = 0;  // '%' (1) and '#' (2) seen in the target
  p = detail::scan_target(p, end, marks);
  std::string_view target_text(target, static_cast<std::size_t>(p - target));
  if (*p != ' ') {
    if (*p == '\r') {
      fail_with(status::bad_request, [&] {
        return std::string(
            "the request line has no HTTP version after its target (HTTP/0.9 is not supported)");
      });
    } else {
      fail_with(status::bad_request, [&] {
        return std::string("the request target has the byte " +
                           detail::quoted(std::string_view(p, 1)) +
                           " (only visible ASCII is allowed; percent-encode the rest)");
      });
    }
    return false;
  }
  if (target_text.empty()) {
    fail_with(status::bad_request, [&] {
      return std::string("the request line has more than one space after the method");
    });
    return false;
  }
  if (target_text.size() > limits_.max_target_size) {
    fail_with(status::uri_too_long, [&] {
      return std::string("the request target is longer than " +
                         std::to_string(limits_.max_target_size) + " bytes");
    });
    return false;
  }
  ++p;
  // HTTP-version CRLF: the section ends with an empty line, so 10 bytes are there to read.
  // "HTTP/1.1" CRLF is two compares; anything else goes through the checks one by one.
  const bool http11 = end - p >= 10 && detail::load_u64(p) == detail::load_u64("HTTP/1.1") &&
                      p[8] == '\r' && p[9] == '\n';
  if (!http11) {
    if (end - p < 10 || std::memcmp(p, "HTTP/", 5) != 0 || !is_digit(p[5]) || p[6] != '.' ||
        !is_digit(p[7])) {
      std::string_view rest(p, static_cast<std::size_t>(end - p));
      fail_with(status::bad_request, [&] {
        return std::string("the request line's version " +
                           detail::quoted(rest.substr(0, rest.find('\r'))) +
                           " is not HTTP/<digit>.<digit> (or a space is doubled)");
      });
      return false;
    }
    if (p[8] != '\r' || p[9] != '\n') {
      fail_with(status::bad_request, [&] {
        return std::string("the request line has something after its version (" +
                           detail::quoted(std::string_view(p + 8, 1)) + ")");
      });
      return false;
    }
    if (p[5] != '1') {
      fail_with(status::http_version_not_supported, [&] {
        return std::string("HTTP/" + std::string(1, p[5]) + "." + std::string(1, p[7]) +
                           " is not supported (HTTP/1.0 and HTTP/1.1 are)");
      });
      return false;
    }
  }
  int minor = p[7] - '0';
  line_end = static_cast<std::size_t>(p + 10 - base);

  if (!m) m = parse_method(method_token);
  if (!m) {
    fail_with(status::not_implemented, [&] {
      return std::string("the method " + detail::quoted(method_token) + " is not implemented");
    });
    return false;
  }
  // Stored before the target is judged: a target refused below still names the request in the
  // access log and the error log ("GET /a%zz HTTP/1.1" 400, as nginx logs it). clear() and
  // append(), not assign(): the same bytes without the general replace's overlap checks (as
  // fields_builder::adopt does for the section).
  message_.method = *m;
  message_.target.clear();
  message_.target.append(target_text);
  message_.version_minor = minor;
  // The target's form must fit the method (RFC 9112 3.2).
  if (target_text.front() == '/') {
    if (*m == method::connect) {
      fail_with(status::bad_request, [&] {
        return std::string("CONNECT needs an authority-form target (host:port), not " +
                           detail::quoted(target_text));
      });
      return false;
    }
  } else if (target_text == "*") {
    if (*m != method::options) {
      fail_with(status::bad_request,
                [&] { return std::string("the asterisk-form target '*' is only for OPTIONS"); });
      return false;
    }
  } else if (*m == method::connect) {
    if (target_text.find(':') == std::string_view::npos ||
        detail::find_non_host_char(target_text) != std::string_view::npos) {
      fail_with(status::bad_request, [&] {
        return std::string("the CONNECT target " + detail::quoted(target_text) +
                           " is not host:port (authority-form)");
      });
      return false;
    }
  } else {
    // absolute-form: scheme "://" ... (scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ))
    std::size_t colon = target_text.find("://");
    bool scheme_ok = colon != std::string_view::npos && colon > 0 &&
                     ((target_text[0] | 0x20) >= 'a' && (target_text[0] | 0x20) <= 'z');
    for (std::size_t i = 0; scheme_ok && i < colon; ++i) {
      char c = target_text[i];
      scheme_ok = ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || is_digit(c) || c == '+' || c == '-' ||
                  c == '.';
    }
    if (!scheme_ok) {
      fail_with(status::bad_request, [&] {
        return std::string("the request target " + detail::quoted(target_text) +
                           " is neither a path (/...) nor an absolute URI");
      });
      return false;
    }
    // Its authority is the request's host (RFC 9112 3.2.2; request::host()), held to what a
    // Host field may hold: no userinfo, and not empty (RFC 9110 4.2.1).
    std::string_view authority = target_text.substr(colon + 3);
    authority = authority.substr(0, authority.find_first_of("/?"));
    const std::size_t bad = detail::find_non_host_char(authority);
    if (authority.empty() || bad != std::string_view::npos) {
      fail_with(status::bad_request, [&] {
        return detail::host_fault_reason("the authority", authority, " of the absolute-form target",
                                         bad, "9112 3.2.2");
      });
      return false;
    }
  }
  if ((marks & 2) != 0) {
    fail_with(status::bad_request, [&] {
      return std::string("the request target " + detail::quoted(target_text) +
                         " has a fragment ('#'), which clients "
                         "never send");
    });
    return false;
  }
  for (const char* q = (marks & 1) != 0 ? static_cast<const char*>(std::memchr(
                                              target_text.data(), '%', target_text.size()))
                                        : nullptr;
       q != nullptr;) {
    std::size_t at = static_cast<std::size_t>(q - target_text.data());
    if (at + 2 >= target_text.size() || !detail::is_hex_digit(static_cast<unsigned char>(q[1])) ||
        !detail::is_hex_digit(static_cast<unsigned char>(q[2]))) {
      fail_with(status::bad_request, [&] {
        return std::string("the request target " + detail::quoted(target_text) +
                           " has a malformed percent escape at offset " + std::to_string(at));
      });
      return false;
    }
    q = static_cast<const char*>(std::memchr(q + 3, '%', target_text.size() - at - 3));
  }
  return true;
}

}  // namespace weft::http

// Serialisation of requests and responses (message.hpp), and the per-second Date cache.
#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

#include "http/chars.hpp"
#include "http/date.hpp"
#include "http/describe.hpp"
#include "http/fields_builder.hpp"
#include "weft/http/message.hpp"

namespace weft::http {

namespace detail {

void append_fields(std::string& out, const headers& fields) {
  for (headers::field f : fields) {
    out.append(f.name);
    out.append(": ", 2);
    out.append(f.value);
    out.append("\r\n", 2);
  }
}

}  // namespace detail

namespace {

using detail::append_fields;

void append_number(std::string& out, std::uint64_t n) {
  char digits[24];
  auto [end, ec] = std::to_chars(digits, digits + sizeof digits, n);
  static_cast<void>(ec);
  out.append(digits, end);
}

// How a message's own fields frame its body.
struct framing {
  bool chunked = false;
  std::optional<std::uint64_t> content_length;
};

framing framing_of(const headers& fields, std::string_view what) {
  framing f;
  std::vector<std::string_view> te = fields.get_all("Transfer-Encoding");
  if (!te.empty()) {
    // The codings over every Transfer-Encoding field, empty list elements skipped (RFC 9110
    // 5.6.1): exactly one, chunked, is what weft can encode.
    std::size_t codings = 0;
    bool only_chunked = true;
    for (std::string_view value : te) {
      while (true) {
        std::size_t comma = value.find(',');
        std::string_view element = detail::trim_ows(value.substr(0, comma));
        if (!element.empty()) {
          ++codings;
          if (!detail::iequals(element, "chunked")) only_chunked = false;
        }
        if (comma == std::string_view::npos) break;
        value.remove_prefix(comma + 1);
      }
    }
    if (codings != 1 || !only_chunked) {
      throw std::invalid_argument(std::string(what) +
                                  ": Transfer-Encoding must be exactly 'chunked' (weft encodes "
                                  "no other coding); it is '" +
                                  std::string(te.front()) + "'");
    }
    f.chunked = true;
  }
  std::size_t cl = fields.count("Content-Length");
  if (cl > 0) {
    if (f.chunked) {
      throw std::invalid_argument(std::string(what) +
                                  ": both Content-Length and Transfer-Encoding are set; a "
                                  "message is framed by one of them (RFC 9112 6.2)");
    }
    std::string_view value = *fields.get("Content-Length");
    f.content_length = detail::decimal_value(value);
    if (cl != 1 || !f.content_length) {
      throw std::invalid_argument(std::string(what) + ": Content-Length '" + std::string(value) +
                                  "' is not one decimal number");
    }
  }
  return f;
}

void check_trailers(const headers& trailers, const framing& f, std::string_view what) {
  if (!trailers.empty() && !f.chunked) {
    throw std::invalid_argument(std::string(what) +
                                ": trailer fields need a chunked body (set "
                                "'Transfer-Encoding: chunked')");
  }
}

bool write_response_head(const response& r, std::string& out, const response_context& context,
                         bool with_body) {
  framing f = framing_of(r.headers, "http::serialize(response)");
  check_trailers(r.trailers, f, "http::serialize(response)");
  bool forbidden = forbids_content(r.status);
  if (forbidden) {
    if (with_body && !r.body.empty()) {
      throw std::invalid_argument(
          "http::serialize(response): status " + std::to_string(code_of(r.status)) +
          " may not carry content, but the body has " + std::to_string(r.body.size()) + " bytes");
    }
    if (f.chunked || (f.content_length && r.status != status::not_modified)) {
      throw std::invalid_argument("http::serialize(response): status " +
                                  std::to_string(code_of(r.status)) +
                                  " may not carry Content-Length or Transfer-Encoding");
    }
  }
  if (f.content_length && with_body && !context.head_request &&
      *f.content_length != r.body.size()) {
    throw std::invalid_argument("http::serialize(response): Content-Length " +
                                std::to_string(*f.content_length) + " but the body has " +
                                std::to_string(r.body.size()) + " bytes");
  }
  if (f.chunked && context.request_version_minor == 0) {
    throw std::invalid_argument(
        "http::serialize(response): an HTTP/1.0 client cannot receive a chunked body; leave "
        "Transfer-Encoding out (the serialiser then sends Content-Length)");
  }
  bool keep_alive = context.keep_alive && !r.headers.has_token("Connection", "close");

  std::uint16_t code = code_of(r.status);
  if (code < 100 || code > 999) {
    throw std::invalid_argument("http::serialize(response): status " + std::to_string(code) +
                                " is not a three-digit code");
  }
  out.append("HTTP/1.1 ", 9);
  out.push_back(static_cast<char>('0' + code / 100 % 10));
  out.push_back(static_cast<char>('0' + code / 10 % 10));
  out.push_back(static_cast<char>('0' + code % 10));
  out.push_back(' ');
  if (r.reason.empty()) {
    out.append(reason_phrase(r.status));
  } else {
    for (unsigned char c : r.reason) {
      if (!detail::is_field_value_char(c)) {
        throw std::invalid_argument(
            "http::serialize(response): the reason phrase has the "
            "control character " +
            std::to_string(c));
      }
    }
    out.append(r.reason);
  }
  out.append("\r\n", 2);
  append_fields(out, r.headers);
  if (!r.headers.contains("Date")) {
    out.append("Date: ", 6);
    out.append(http_date());
    out.append("\r\n", 2);
  }
  if (!forbidden && !f.chunked && !f.content_length) {
    out.append("Content-Length: ", 16);
    append_number(out, r.body.size());
    out.append("\r\n", 2);
  }
  if (!keep_alive) {
    if (!r.headers.has_token("Connection", "close")) out.append("Connection: close\r\n", 19);
  } else if (context.request_version_minor == 0 &&
             !r.headers.has_token("Connection", "keep-alive")) {
    out.append("Connection: keep-alive\r\n", 24);
  }
  out.append("\r\n", 2);
  if (with_body && !context.head_request) {
    if (f.chunked) {
      append_chunk(out, r.body);
      append_last_chunk(out, r.trailers);
    } else {
      out.append(r.body);
    }
  }
  return keep_alive;
}

}  // namespace

bool serialize(const response& r, std::string& out, const response_context& context) {
  return write_response_head(r, out, context, true);
}

bool serialize_head(const response& r, std::string& out, const response_context& context) {
  return write_response_head(r, out, context, false);
}

namespace {

// serialize(request) with its body, or serialize_head(request) without it.
void write_request(const request& r, std::string& out, bool with_body) {
  if (r.target.empty()) {
    throw std::invalid_argument("http::serialize(request): the target is empty (use \"/\")");
  }
  for (unsigned char c : r.target) {
    if (c <= 0x20 || c >= 0x7F) {
      throw std::invalid_argument("http::serialize(request): the target '" + r.target +
                                  "' has a space, a control or a non-ASCII byte; "
                                  "percent-encode it (http::percent_encode)");
    }
  }
  if (r.version_minor < 0 || r.version_minor > 9) {
    throw std::invalid_argument("http::serialize(request): version 1." +
                                std::to_string(r.version_minor) + " is not HTTP/1.x");
  }
  if (r.version_minor >= 1 && r.headers.count("Host") != 1) {
    throw std::invalid_argument(
        "http::serialize(request): an HTTP/1.1 request needs exactly one Host field "
        "(RFC 9112 3.2)");
  }
  if (std::optional<std::string_view> host = r.headers.get("Host")) {
    const std::size_t bad = detail::find_non_host_char(*host);
    if (bad != std::string_view::npos) {
      throw std::invalid_argument(
          "http::serialize(request): " +
          detail::host_fault_reason("the Host field", *host, "", bad, "9112 3.2") +
          "; a server answers it with 400");
    }
  }
  framing f = framing_of(r.headers, "http::serialize(request)");
  check_trailers(r.trailers, f, "http::serialize(request)");
  if (f.chunked && r.version_minor == 0) {
    throw std::invalid_argument(
        "http::serialize(request): HTTP/1.0 has no chunked coding; leave Transfer-Encoding out");
  }
  if (f.content_length && with_body && *f.content_length != r.body.size()) {
    throw std::invalid_argument("http::serialize(request): Content-Length " +
                                std::to_string(*f.content_length) + " but the body has " +
                                std::to_string(r.body.size()) + " bytes");
  }
  // The head's size, known before a byte goes out: one allocation for a fresh `out` instead of
  // one per doubling (a client serialises each request into a new buffer).
  std::size_t head_bytes = 64 + r.target.size();  // request line, Content-Length, blank line
  for (headers::field field : r.headers) {
    head_bytes += field.name.size() + field.value.size() + 4;
  }
  out.reserve(out.size() + head_bytes + (f.chunked || !with_body ? 0 : r.body.size()));
  out.append(method_name(r.method));
  out.push_back(' ');
  out.append(r.target);
  out.append(" HTTP/1.", 8);
  out.push_back(static_cast<char>('0' + r.version_minor));
  out.append("\r\n", 2);
  append_fields(out, r.headers);
  bool wants_length = !r.body.empty() || r.method == method::post || r.method == method::put ||
                      r.method == method::patch;
  if (!f.chunked && !f.content_length && wants_length) {
    out.append("Content-Length: ", 16);
    append_number(out, r.body.size());
    out.append("\r\n", 2);
  }
  out.append("\r\n", 2);
  if (!with_body) {
    return;
  }
  if (f.chunked) {
    append_chunk(out, r.body);
    append_last_chunk(out, r.trailers);
  } else {
    out.append(r.body);
  }
}

}  // namespace

void serialize(const request& r, std::string& out) { write_request(r, out, true); }

void serialize_head(const request& r, std::string& out) { write_request(r, out, false); }

void append_chunk(std::string& out, std::string_view data) {
  if (data.empty()) return;
  char digits[20];
  auto [end, ec] = std::to_chars(digits, digits + sizeof digits, data.size(), 16);
  static_cast<void>(ec);
  out.append(digits, end);
  out.append("\r\n", 2);
  out.append(data);
  out.append("\r\n", 2);
}

void append_last_chunk(std::string& out, const headers& trailers) {
  out.append("0\r\n", 3);
  append_fields(out, trailers);
  out.append("\r\n", 2);
}

}  // namespace weft::http

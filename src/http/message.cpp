// weft::http::request / response: methods, target splitting and percent-decoding.
#include "weft/http/message.hpp"

#include <stdexcept>

#include "http/chars.hpp"

namespace weft::http {

std::string_view method_name(method m) noexcept {
  switch (m) {
    case method::get:
      return "GET";
    case method::head:
      return "HEAD";
    case method::post:
      return "POST";
    case method::put:
      return "PUT";
    case method::delete_:
      return "DELETE";
    case method::connect:
      return "CONNECT";
    case method::options:
      return "OPTIONS";
    case method::trace:
      return "TRACE";
    case method::patch:
      return "PATCH";
  }
  return "GET";
}

[[gnu::hot]] std::optional<method> parse_method(std::string_view name) noexcept {
  switch (name.size()) {
    case 3:
      if (name == "GET") return method::get;
      if (name == "PUT") return method::put;
      break;
    case 4:
      if (name == "HEAD") return method::head;
      if (name == "POST") return method::post;
      break;
    case 5:
      if (name == "PATCH") return method::patch;
      if (name == "TRACE") return method::trace;
      break;
    case 6:
      if (name == "DELETE") return method::delete_;
      break;
    case 7:
      if (name == "OPTIONS") return method::options;
      if (name == "CONNECT") return method::connect;
      break;
    default:
      break;
  }
  return std::nullopt;
}

std::string percent_decode(std::string_view text, bool plus_is_space) {
  // Most paths and names hold no escape: they are copied whole (a byte-by-byte push_back was a
  // path's 160 instructions per request in the static file server, callgrind).
  const std::size_t first =
      text.find_first_of(plus_is_space ? std::string_view("%+", 2) : std::string_view("%", 1));
  if (first == std::string_view::npos) return std::string(text);
  std::string out;
  out.reserve(text.size());
  out.append(text.substr(0, first));
  for (std::size_t i = first; i < text.size(); ++i) {
    char c = text[i];
    if (c == '%') {
      if (i + 2 >= text.size()) {
        throw std::invalid_argument("http: malformed percent escape at offset " +
                                    std::to_string(i) + " of '" + std::string(text) +
                                    "' ('%' must be followed by two hex digits)");
      }
      unsigned char h = static_cast<unsigned char>(text[i + 1]);
      unsigned char l = static_cast<unsigned char>(text[i + 2]);
      if (!detail::is_hex_digit(h) || !detail::is_hex_digit(l)) {
        throw std::invalid_argument("http: malformed percent escape at offset " +
                                    std::to_string(i) + " of '" + std::string(text) +
                                    "' ('%' must be followed by two hex digits)");
      }
      out.push_back(static_cast<char>(detail::hex_value(h) * 16 + detail::hex_value(l)));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string percent_encode(std::string_view text, bool keep_slash) {
  static constexpr char digits[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    bool unreserved = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '.' || c == '_' || c == '~' || (keep_slash && c == '/');
    if (unreserved) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(digits[c >> 4]);
      out.push_back(digits[c & 15]);
    }
  }
  return out;
}

namespace {

bool origin_or_asterisk(std::string_view target) noexcept {
  return target.empty() || target.front() == '/' || target == "*";
}

// A target that is neither origin-form nor '*', split at the end of its authority: absolute-form
// "http://h:8080/a?x" -> {"h:8080", "/a?x"}; authority-form (CONNECT "h:443", no "://") ->
// {"h:443", ""}.
struct authority_split {
  std::string_view authority;
  std::string_view rest;
};
authority_split split_authority(std::string_view target) noexcept {
  std::size_t scheme_end = target.find("://");
  if (scheme_end == std::string_view::npos) return {target, {}};
  std::string_view after = target.substr(scheme_end + 3);
  std::size_t end = after.find_first_of("/?");
  if (end == std::string_view::npos) return {after, {}};
  return {after.substr(0, end), after.substr(end)};
}

// The path-and-query part of a target: origin-form as is, absolute-form after its authority.
[[gnu::hot]] std::string_view path_and_query(std::string_view target) noexcept {
  if (origin_or_asterisk(target)) return target;
  return split_authority(target).rest;
}

}  // namespace

[[gnu::hot]] std::string_view request::raw_path() const noexcept {
  std::string_view pq = path_and_query(target);
  std::string_view path = pq.substr(0, pq.find('?'));
  if (path.empty() && !pq.empty()) return "/";  // "http://h?x": the path of an empty path is /
  if (path.empty() && target.find("://") != std::string_view::npos) return "/";
  return path;
}

std::string_view request::host() const noexcept {
  if (origin_or_asterisk(target)) return headers.get("Host").value_or(std::string_view());
  std::string_view authority = split_authority(target).authority;
  return authority.substr(0, authority.find('#'));  // a built request's fragment is no host
}

std::string request::path() const { return percent_decode(raw_path()); }

std::vector<std::string> request::path_segments() const {
  std::string_view path = raw_path();
  std::vector<std::string> segments;
  if (path.empty() || path.front() != '/') return segments;
  path.remove_prefix(1);
  while (true) {
    std::size_t slash = path.find('/');
    segments.push_back(percent_decode(path.substr(0, slash)));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return segments;
}

std::string_view request::raw_query() const noexcept {
  std::string_view pq = path_and_query(target);
  std::size_t mark = pq.find('?');
  return mark == std::string_view::npos ? std::string_view() : pq.substr(mark + 1);
}

std::vector<std::pair<std::string, std::string>> parse_urlencoded(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> pairs;
  while (!text.empty()) {
    std::size_t amp = text.find('&');
    std::string_view element = text.substr(0, amp);
    text = amp == std::string_view::npos ? std::string_view() : text.substr(amp + 1);
    if (element.empty()) continue;
    std::size_t eq = element.find('=');
    std::string_view name = element.substr(0, eq);
    std::string_view value =
        eq == std::string_view::npos ? std::string_view() : element.substr(eq + 1);
    pairs.emplace_back(percent_decode(name, true), percent_decode(value, true));
  }
  return pairs;
}

std::vector<std::pair<std::string, std::string>> request::query() const {
  return parse_urlencoded(raw_query());
}

std::optional<std::string> request::query(std::string_view name) const {
  for (auto& [n, v] : query()) {
    if (n == name) return std::move(v);
  }
  return std::nullopt;
}

namespace {

bool keep_alive_of(int version_minor, const headers& fields) noexcept {
  if (fields.has_token("Connection", "close")) return false;
  if (version_minor >= 1) return true;
  return fields.has_token("Connection", "keep-alive");
}

}  // namespace

bool request::keep_alive() const noexcept { return keep_alive_of(version_minor, headers); }

bool request::expects_continue() const noexcept {
  // A member of any Expect field's list (RFC 9110 10.1.1 makes Expect a list): "100-continue,
  // x-foo" and a repeated field ask for it as much as the field alone.
  return headers.has_token("Expect", "100-continue");
}

bool response::keep_alive() const noexcept { return keep_alive_of(version_minor, headers); }

}  // namespace weft::http

// weft::http cookies (cookies.hpp): the Cookie field read leniently, Set-Cookie written strictly
// (RFC 6265 4.1's grammar).
#include "weft/http/cookies.hpp"

#include <stdexcept>
#include <string>
#include <string_view>

#include "http/chars.hpp"

namespace weft::http {

namespace {

// cookie-octet (RFC 6265 4.1.1): US-ASCII without controls, space, DQUOTE, ',', ';' and '\'.
bool is_cookie_octet(unsigned char c) noexcept {
  return c >= 0x21 && c <= 0x7E && c != '"' && c != ',' && c != ';' && c != '\\';
}

[[noreturn]] void refuse(const set_cookie& c, const std::string& what) {
  throw std::invalid_argument("weft::http::format_set_cookie: cookie '" + c.name + "': " + what);
}

// The first byte of `s` that fails `ok`, as "'x' (0xNN) at N" for a message; "" when none does.
template <class Ok>
std::string first_bad_byte(std::string_view s, Ok ok) {
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (!ok(c)) {
      static constexpr char hex[] = "0123456789abcdef";
      std::string shown = c >= 0x20 && c < 0x7F ? std::string("'") + s[i] + "' " : std::string();
      return shown + "(0x" + hex[c >> 4] + hex[c & 15] + ") at byte " + std::to_string(i);
    }
  }
  return {};
}

// A Domain attribute's value: a host name (letters, digits, '-' and '.'), one leading '.'
// allowed (browsers ignore it).
bool is_domain(std::string_view d) noexcept {
  if (!d.empty() && d.front() == '.') d.remove_prefix(1);
  if (d.empty() || d.size() > 253) return false;
  for (unsigned char c : d) {
    if (!(c == '-' || c == '.' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
          (c >= 'A' && c <= 'Z'))) {
      return false;
    }
  }
  return d.front() != '.' && d.back() != '.' && d.find("..") == std::string_view::npos;
}

}  // namespace

std::vector<std::pair<std::string_view, std::string_view>> cookies(const headers& request_fields) {
  std::vector<std::pair<std::string_view, std::string_view>> found;
  for (std::string_view field : request_fields.get_all("Cookie")) {
    while (!field.empty()) {
      const std::size_t semicolon = field.find(';');
      const std::string_view pair = detail::trim_ows(field.substr(0, semicolon));
      field =
          semicolon == std::string_view::npos ? std::string_view() : field.substr(semicolon + 1);
      const std::size_t equals = pair.find('=');
      if (equals == std::string_view::npos) continue;
      const std::string_view name = detail::trim_ows(pair.substr(0, equals));
      std::string_view value = detail::trim_ows(pair.substr(equals + 1));
      if (name.empty()) continue;
      if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
        value = value.substr(1, value.size() - 2);
      }
      found.emplace_back(name, value);
    }
  }
  return found;
}

std::optional<std::string_view> cookie(const headers& request_fields, std::string_view name) {
  for (const auto& [n, v] : cookies(request_fields)) {
    if (n == name) return v;
  }
  return std::nullopt;
}

std::string format_set_cookie(const set_cookie& c) {
  if (!detail::is_token(c.name)) {
    refuse(c, c.name.empty()
                  ? std::string("the name is empty")
                  : "the name is not a token: " + first_bad_byte(c.name, detail::is_token_char));
  }
  std::string_view value = c.value;
  if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
    value = value.substr(1, value.size() - 2);
  }
  if (std::string bad = first_bad_byte(value, is_cookie_octet); !bad.empty()) {
    refuse(c, "the value holds a byte a cookie cannot: " + bad +
                  " (percent-encode it, as encodeURIComponent does)");
  }
  std::string out = c.name;
  out += '=';
  out += c.value;
  if (!c.path.empty()) {
    if (std::string bad = first_bad_byte(
            c.path, [](unsigned char b) { return b >= 0x20 && b != 0x7F && b != ';'; });
        !bad.empty()) {
      refuse(c, "the path holds a control byte or ';': " + bad);
    }
    out += "; Path=" + c.path;
  }
  if (!c.domain.empty()) {
    if (!is_domain(c.domain)) refuse(c, "the domain '" + c.domain + "' is not a host name");
    out += "; Domain=" + c.domain;
  }
  if (c.expires) {
    out += "; Expires=" + format_http_date(*c.expires);
  }
  if (c.max_age) {
    if (c.max_age->count() < 0) {
      refuse(c, "Max-Age is negative (" + std::to_string(c.max_age->count()) +
                    " s); use 0 to delete the cookie");
    }
    out += "; Max-Age=" + std::to_string(c.max_age->count());
  }
  if (c.secure) out += "; Secure";
  if (c.http_only) out += "; HttpOnly";
  switch (c.same_site) {
    case same_site::unset:
      break;
    case same_site::lax:
      out += "; SameSite=Lax";
      break;
    case same_site::strict:
      out += "; SameSite=Strict";
      break;
    case same_site::none:
      if (!c.secure) refuse(c, "SameSite=None needs Secure (browsers drop the cookie otherwise)");
      out += "; SameSite=None";
      break;
  }
  if (c.partitioned) {
    if (!c.secure) refuse(c, "Partitioned needs Secure (browsers drop the cookie otherwise)");
    out += "; Partitioned";
  }
  return out;
}

void add_cookie(response& r, const set_cookie& c) {
  r.headers.add("Set-Cookie", format_set_cookie(c));
}

}  // namespace weft::http

// Parsing http:// and https:// URLs and resolving redirect targets for weft::http::client
// (client_url.hpp).
#include "http/client_url.hpp"

#include <netinet/in.h>

#include <cctype>
#include <string>

#include "net/address.hpp"
#include "weft/http/client.hpp"

namespace weft::http::detail {

namespace {

bool is_alpha(char c) noexcept { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

char lower(char c) noexcept { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c; }

std::string lowered(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    c = lower(c);
  }
  return out;
}

// The scheme of text ("http", "HTTPS", ...) when it starts with one (RFC 3986 3.1: ALPHA
// *(ALPHA / DIGIT / "+" / "-" / ".") ":"), else empty.
std::string_view scheme_of(std::string_view text) noexcept {
  if (text.empty() || !is_alpha(text[0])) {
    return {};
  }
  for (std::size_t i = 1; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ':') {
      return text.substr(0, i);
    }
    if (!is_alpha(c) && !is_digit(c) && c != '+' && c != '-' && c != '.') {
      return {};
    }
  }
  return {};
}

[[noreturn]] void refuse(error_kind kind, std::string_view url, const std::string& why) {
  throw error(kind, std::string(url), why);
}

[[noreturn]] void refuse_scheme(std::string_view url, std::string_view scheme) {
  refuse(error_kind::unsupported_scheme, url,
         "the scheme \"" + std::string(scheme) +
             "\" is not supported: this client speaks http:// and https:// only");
}

bool known_scheme(std::string_view scheme) {
  const std::string lower_scheme = lowered(scheme);
  return lower_scheme == "http" || lower_scheme == "https";
}

// Removes "." and ".." segments from an absolute path (RFC 3986 5.2.4).
std::string remove_dot_segments(std::string_view path) {
  std::string out;
  std::size_t i = 0;
  while (i < path.size()) {
    std::size_t next = path.find('/', i + 1);
    if (next == std::string_view::npos) {
      next = path.size();
    }
    std::string_view segment = path.substr(i, next - i);  // "/name", "/", "/." or "/.."
    if (segment == "/.") {
      if (next == path.size()) {
        out += '/';
      }
    } else if (segment == "/..") {
      std::size_t cut = out.rfind('/');
      out.erase(cut == std::string::npos ? 0 : cut);
      if (next == path.size()) {
        out += '/';
      }
    } else {
      out += segment;
    }
    i = next;
  }
  return out.empty() ? std::string("/") : out;
}

// Checks the bytes of a path and query: no space or control character (they would break the
// request line), and percent-encodes bytes outside ASCII as browsers do.
std::string checked_target(std::string_view url, std::string_view target) {
  std::string out;
  out.reserve(target.size());
  static constexpr char hex[] = "0123456789ABCDEF";
  for (char c : target) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte <= 0x20 || byte == 0x7f) {
      refuse(error_kind::invalid_url, url,
             "the path or query has a space or a control character; percent-encode it");
    }
    if (byte >= 0x80) {
      out += '%';
      out += hex[byte >> 4];
      out += hex[byte & 15];
    } else {
      out += c;
    }
  }
  return out;
}

// The last URL this thread parsed whole, as far as its authority ("http://host:port"), and the
// parts that prefix decides (host, port, secure, authority, origin; text and target empty). A
// client sends most requests to the origin of the one before (a proxy to its upstream, an API
// client to its API), and parsing that again was a tenth of the instructions of a proxied
// request (callgrind, bench_http_weft --upstream). Only a prefix that parsed without error is
// kept, and a URL reuses it only when it starts with those very bytes followed by '/', '?' or
// its end: where this parse would have ended the authority too.
struct parsed_authority {
  std::string prefix;
  client_url parts;
};
thread_local parsed_authority last_authority;

// `parsed`'s target and text from `text` (the URL without its fragment), `target` its path and
// query as they stand in it.
void finish_url(client_url& parsed, std::string_view url, std::string_view text,
                std::string_view target) {
  parsed.target = checked_target(url, target);
  if (parsed.target.empty() || parsed.target[0] == '?') {
    parsed.target.insert(0, "/");
  }
  parsed.text = std::string(text);
}

}  // namespace

client_url parse_client_url(std::string_view url) {
  const std::string_view text = url.substr(0, url.find('#'));
  if (const std::string_view known = last_authority.prefix;
      !known.empty() && text.substr(0, known.size()) == known &&
      (text.size() == known.size() || text[known.size()] == '/' || text[known.size()] == '?')) {
    client_url parsed = last_authority.parts;
    finish_url(parsed, url, text, text.substr(known.size()));
    return parsed;
  }
  std::size_t prefix = 0;
  client_url parsed = parse_whole_client_url(url, &prefix);
  // Kept once the whole URL parsed: a bad target leaves the last good authority in place.
  last_authority.prefix.assign(text.substr(0, prefix));
  last_authority.parts = parsed;
  last_authority.parts.text.clear();
  last_authority.parts.target.clear();
  return parsed;
}

client_url parse_whole_client_url(std::string_view url, std::size_t* prefix) {
  std::string_view text = url.substr(0, url.find('#'));
  client_url parsed;
  const std::string_view scheme = scheme_of(text);
  if (scheme.empty()) {
    refuse(error_kind::invalid_url, url, "not an absolute URL (expected http://host[:port]/path)");
  }
  if (!known_scheme(scheme)) {
    refuse_scheme(url, scheme);
  }
  parsed.secure = lowered(scheme) == "https";
  parsed.port = parsed.secure ? 443 : 80;
  std::string_view rest = text.substr(scheme.size() + 1);
  if (rest.substr(0, 2) != "//") {
    refuse(error_kind::invalid_url, url,
           std::string("no \"//\" and host after \"") + parsed.scheme() + ":\"");
  }
  rest.remove_prefix(2);
  const std::size_t authority_end = rest.find_first_of("/?");
  std::string_view authority = rest.substr(0, authority_end);
  std::string_view target =
      authority_end == std::string_view::npos ? std::string_view() : rest.substr(authority_end);
  if (authority.find('@') != std::string_view::npos) {
    refuse(error_kind::invalid_url, url,
           "user credentials in the URL are not supported; send an Authorization field");
  }
  std::string_view port_text;
  if (!authority.empty() && authority[0] == '[') {
    const std::size_t close = authority.find(']');
    if (close == std::string_view::npos) {
      refuse(error_kind::invalid_url, url, "an IPv6 address without its closing ']'");
    }
    parsed.host = std::string(authority.substr(1, close - 1));
    in6_addr probe{};
    if (!net::detail::parse_ip_literal(AF_INET6, parsed.host, &probe)) {
      refuse(error_kind::invalid_url, url,
             "\"" + parsed.host + "\" in brackets is not an IPv6 address");
    }
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') {
        refuse(error_kind::invalid_url, url, "unexpected characters after the IPv6 address");
      }
      port_text = after.substr(1);
    }
  } else {
    const std::size_t colon = authority.find(':');
    std::string_view host = authority.substr(0, colon);
    if (colon != std::string_view::npos) {
      port_text = authority.substr(colon + 1);
    }
    for (char c : host) {
      if (!is_alpha(c) && !is_digit(c) && c != '-' && c != '.' && c != '_') {
        refuse(error_kind::invalid_url, url,
               "the host has the character '" + std::string(1, c) +
                   "' (a host is a name, an IPv4 address or an IPv6 address in brackets)");
      }
    }
    parsed.host = lowered(host);
  }
  if (parsed.host.empty()) {
    refuse(error_kind::invalid_url, url, "no host");
  }
  if (!port_text.empty()) {
    unsigned long port = 0;
    for (char c : port_text) {
      if (!is_digit(c) || port > 65535) {
        refuse(error_kind::invalid_url, url,
               "the port \"" + std::string(port_text) + "\" is not a number from 1 to 65535");
      }
      port = port * 10 + static_cast<unsigned long>(c - '0');
    }
    if (port == 0 || port > 65535) {
      refuse(error_kind::invalid_url, url,
             "the port \"" + std::string(port_text) + "\" is not a number from 1 to 65535");
    }
    parsed.port = static_cast<std::uint16_t>(port);
  }
  const bool v6 = parsed.host.find(':') != std::string::npos;
  const std::string bracketed = v6 ? "[" + parsed.host + "]" : parsed.host;
  const std::string host_port = bracketed + ":" + std::to_string(parsed.port);
  parsed.origin = parsed.secure ? "https://" + host_port : host_port;
  parsed.authority = parsed.port == (parsed.secure ? 443 : 80) ? bracketed : host_port;
  finish_url(parsed, url, text, target);
  if (prefix != nullptr) {
    *prefix = text.size() - target.size();  // the target is text's tail
  }
  return parsed;
}

std::string resolve_location(const client_url& base, std::string_view location) {
  while (!location.empty() && (location.front() == ' ' || location.front() == '\t')) {
    location.remove_prefix(1);
  }
  while (!location.empty() && (location.back() == ' ' || location.back() == '\t')) {
    location.remove_suffix(1);
  }
  location = location.substr(0, location.find('#'));
  const std::string_view scheme = scheme_of(location);
  if (!scheme.empty()) {
    if (!known_scheme(scheme)) {
      refuse_scheme(location, scheme);
    }
    return std::string(location);
  }
  if (location.substr(0, 2) == "//") {
    return std::string(base.scheme()) + ":" + std::string(location);
  }
  const std::string prefix = std::string(base.scheme()) + "://" + base.authority;
  if (location.empty()) {
    return prefix + base.target;
  }
  const std::size_t base_query = base.target.find('?');
  const std::string_view base_path = std::string_view(base.target).substr(0, base_query);
  if (location[0] == '?') {
    return prefix + std::string(base_path) + std::string(location);
  }
  const std::size_t query = location.find('?');
  std::string_view path = location.substr(0, query);
  std::string_view tail =
      query == std::string_view::npos ? std::string_view() : location.substr(query);
  std::string merged;
  if (path[0] == '/') {
    merged = std::string(path);
  } else {
    merged = std::string(base_path.substr(0, base_path.rfind('/') + 1)) + std::string(path);
  }
  return prefix + remove_dot_segments(merged) + std::string(tail);
}

}  // namespace weft::http::detail

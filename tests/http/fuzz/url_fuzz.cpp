// libFuzzer target over weft::http::client's URLs (src/http/client_url.hpp): parse_client_url,
// which every request's URL goes through, and resolve_location, which turns a redirect's
// Location field (bytes a server chose) into the next URL.
//
// Input layout: the base URL, a NUL byte, then the Location value. Without a NUL the whole input
// is a URL to parse and there is no redirect.
//
// Invariants (a violation aborts; http::error is the only failure either call may raise):
//   - parse_client_url, which reuses the parts of the last authority it parsed whole (the
//     inputs run one after another in one process, so that reuse is exercised across them),
//     gives exactly what parse_whole_client_url gives, parts or error kind, the first time and
//     the second;
//   - a URL that parses yields a request target that starts with '/' and has no space, control
//     or non-ASCII byte (it is written into the request line as it is: a CR, LF or space there
//     would let a URL inject header lines), a host of name characters or a valid IPv6 address, a
//     port from 1 to 65535, and authority and origin spelled from them; parsing
//     "http://" + authority + target again gives the same parts;
//   - a redirect resolves to a URL or an http::error; one that parses keeps the base's origin
//     unless the Location names a host itself (an absolute URL or a network-path "//host"):
//     a relative Location never moves the client to another server, whatever dot segments,
//     backslashes or encoded bytes it holds; and the path it resolves to holds no "." or ".."
//     segment.
//
// Build and run: the http fuzz project (tests/http/fuzz/CMakeLists.txt) builds it as
// http_url_fuzz beside http_parser_fuzz;
//   build/fuzz/http_url_fuzz -dict=tests/http/fuzz/url.dict -max_total_time=3600 \
//       build/fuzz/url-corpus tests/http/fuzz/url-corpus
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "http/client_url.hpp"
#include "weft/http/client.hpp"

namespace http = weft::http;

namespace {

[[noreturn]] void violated(const char* what, std::string_view detail) {
  std::fprintf(stderr, "http_url_fuzz: invariant violated: %s [%.*s]\n", what,
               static_cast<int>(detail.size()), detail.data());
  std::abort();
}

void check(bool ok, const char* what, std::string_view detail) {
  if (!ok) violated(what, detail);
}

bool host_byte(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
}

bool hex_or_colon(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == ':' ||
         c == '.';
}

bool same_parts(const http::detail::client_url& a, const http::detail::client_url& b) {
  return a.text == b.text && a.host == b.host && a.port == b.port && a.secure == b.secure &&
         a.authority == b.authority && a.target == b.target && a.origin == b.origin;
}

// parse_client_url, checked against parse_whole_client_url twice (the second call may reuse
// what the first kept). Throws the http::error both raise.
http::detail::client_url parse(const std::string& url) {
  std::optional<http::error_kind> whole_failure;
  http::detail::client_url whole;
  try {
    whole = http::detail::parse_whole_client_url(url);
  } catch (const http::error& e) {
    whole_failure = e.kind();
  }
  for (int round = 0; round < 2; ++round) {
    try {
      const http::detail::client_url reused = http::detail::parse_client_url(url);
      check(!whole_failure, "a URL parse_whole_client_url refuses taken by parse_client_url", url);
      check(same_parts(reused, whole), "parse_client_url's parts differ from a whole parse's", url);
    } catch (const http::error& e) {
      check(whole_failure && *whole_failure == e.kind(),
            "parse_client_url refused a URL a whole parse takes (or with another kind)", url);
      if (round == 1) throw;
    }
  }
  return whole;
}

void check_parsed(const http::detail::client_url& u) {
  check(!u.target.empty() && u.target[0] == '/', "a target that does not start with '/'", u.target);
  for (char c : u.target) {
    const auto byte = static_cast<unsigned char>(c);
    check(byte > 0x20 && byte < 0x7f, "a space, control or non-ASCII byte in the target", u.target);
  }
  check(!u.host.empty(), "an empty host", u.text);
  const bool v6 = u.host.find(':') != std::string::npos;
  for (char c : u.host) {
    check(v6 ? hex_or_colon(c) : host_byte(c), "a host byte outside its grammar", u.host);
  }
  check(u.port != 0, "port 0", u.text);
  const std::string bracketed = v6 ? "[" + u.host + "]" : u.host;
  const std::string host_port = bracketed + ":" + std::to_string(u.port);
  check(u.origin == (u.secure ? "https://" + host_port : host_port),
        "an origin not made of its parts", u.origin);
  check(u.authority == (u.port == (u.secure ? 443 : 80) ? bracketed : host_port),
        "an authority not made of its parts", u.authority);
  const http::detail::client_url again =
      parse(std::string(u.scheme()) + "://" + u.authority + u.target);
  check(again.host == u.host && again.port == u.port && again.target == u.target &&
            again.authority == u.authority && again.origin == u.origin && again.secure == u.secure,
        "a parsed URL that parses differently when spelled from its parts", u.text);
}

// The path of an origin-form target, without its query.
std::string_view path_of(std::string_view target) { return target.substr(0, target.find('?')); }

bool has_dot_segment(std::string_view path) {
  std::size_t at = 0;
  while (at < path.size()) {
    std::size_t next = path.find('/', at + 1);
    if (next == std::string_view::npos) next = path.size();
    const std::string_view segment = path.substr(at, next - at);
    if (segment == "/." || segment == "/..") return true;
    at = next;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t nul = input.find('\0');
  // Exact-size copies: a read past either is a heap-buffer-overflow under ASan.
  const std::string url(input.substr(0, nul));
  http::detail::client_url base;
  try {
    base = parse(url);
  } catch (const http::error&) {
    return 0;
  }
  check_parsed(base);
  if (nul == std::string_view::npos) return 0;

  const std::string location(input.substr(nul + 1));
  std::string next;
  try {
    next = http::detail::resolve_location(base, location);
  } catch (const http::error&) {
    return 0;
  }
  http::detail::client_url moved;
  try {
    moved = parse(next);
  } catch (const http::error&) {
    return 0;  // a Location that resolves to no valid URL: the client reports it
  }
  check_parsed(moved);
  // Whether the Location names a host: a scheme ("http:", after the OWS it may start with) or a
  // network-path. Anything else stays on the base's server.
  std::string_view trimmed = location;
  while (!trimmed.empty() && (trimmed.front() == ' ' || trimmed.front() == '\t')) {
    trimmed.remove_prefix(1);
  }
  const std::size_t colon = trimmed.find(':');
  const std::size_t stop = trimmed.find_first_of("/?#");
  const bool names_host =
      trimmed.substr(0, 2) == "//" || (colon != std::string_view::npos && colon != 0 &&
                                       (stop == std::string_view::npos || colon < stop));
  if (!names_host) {
    check(moved.origin == base.origin, "a relative Location moved to another server", next);
    // A Location with a path of its own is merged and cleaned; an empty one or a bare query
    // keeps the base's path as it was given.
    std::string_view own = trimmed.substr(0, trimmed.find('#'));
    while (!own.empty() && (own.back() == ' ' || own.back() == '\t')) own.remove_suffix(1);
    if (!own.empty() && own.front() != '?') {
      check(!has_dot_segment(path_of(moved.target)), "a dot segment left after resolution",
            moved.target);
    }
  }
  return 0;
}

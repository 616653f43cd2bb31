// The http:// and https:// URLs of weft::http::client: parsing one into what a connection and a
// request need, and resolving a redirect's Location against the URL it answered (RFC 3986 5.2).
// Internal to the client (client.hpp states what is accepted); failures are http::error.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace weft::http::detail {

struct client_url {
  std::string text;  // the URL as given, without a fragment (what errors name)
  std::string host;  // a name, a numeric IPv4 address or an IPv6 address without brackets
  std::uint16_t port = 80;
  bool secure = false;  // https: TLS (default port 443)
  // For Host: "host", "host:8080", "[::1]:8080" (no port when it is the scheme's default).
  std::string authority;
  std::string target;  // origin-form: "/a/b?x=1", at least "/"
  // The pool key: "host:port", "[::1]:8080"; "https://host:port" for https (a TLS connection
  // never serves a plain URL of the same host and port, nor the other way round).
  std::string origin;
  const char* scheme() const noexcept { return secure ? "https" : "http"; }
};

// Parses an absolute http or https URL. http::error (invalid_url or unsupported_scheme) naming it.
// When the URL starts with the scheme and authority of the last URL this thread parsed whole
// (followed by '/', '?' or nothing), their parts are taken from that parse and only the target
// is read (a client's requests mostly go to the origin of the one before).
client_url parse_client_url(std::string_view url);
// The same, always parsing the whole URL: what parse_client_url's reuse must equal (the URL
// fuzzer checks it). `prefix`, when given, receives the length of its "scheme://authority".
client_url parse_whole_client_url(std::string_view url, std::size_t* prefix = nullptr);

// The absolute URL a Location field points to from base: an absolute http or https URL as it
// is, a network-path ("//host/p", base's scheme), an absolute path, a query, or a relative path
// merged with base's directory, with dot segments removed. Another scheme is an http::error
// (unsupported_scheme) naming the redirect.
std::string resolve_location(const client_url& base, std::string_view location);

}  // namespace weft::http::detail

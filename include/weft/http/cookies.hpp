// weft::http cookies (RFC 6265): reading a request's Cookie fields, writing Set-Cookie.
//
// Contract:
//   - Pure functions over values: nothing blocks, nothing is shared, safe from any thread.
//   - Reading is as lenient as the clients are (RFC 6265 5.4 is what browsers send, not what
//     every client keeps to): every Cookie field of the request counts, in order; pairs are
//     split on ';', spaces and tabs around them trimmed; a pair without '=' or with an empty
//     name is skipped; a value in double quotes comes without them. Nothing is decoded: a
//     value is the bytes the client sent (percent-encode your own values when they need bytes
//     that a cookie cannot hold, and decode them yourself).
//   - Writing is strict (RFC 6265 4.1): a name that is not a token; a value with a byte outside
//     cookie-octet (controls, space, '"', ',', ';', '\\', non-ASCII), unless the whole value is
//     such bytes in double quotes; a Path with a control byte or ';'; a Domain that is not a
//     host name; a negative Max-Age; and SameSite=None or Partitioned without Secure (browsers
//     drop those) are std::invalid_argument naming the cookie and what is wrong. A cookie a
//     browser would drop or read differently is never sent silently.
#pragma once

#include <chrono>
#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "weft/http/headers.hpp"
#include "weft/http/message.hpp"

namespace weft::http {

// The cookies of a request's Cookie fields, in order, as views into `request_fields`
// ("a=1; b=2" -> {"a", "1"}, {"b", "2"}).
std::vector<std::pair<std::string_view, std::string_view>> cookies(const headers& request_fields);
// The value of the first cookie of that exact (case-sensitive) name.
std::optional<std::string_view> cookie(const headers& request_fields, std::string_view name);

// A cookie's SameSite attribute; unset leaves it out (browsers then take Lax).
enum class same_site : std::uint8_t { unset, lax, strict, none };

// A cookie to set, and its attributes (each left out when empty, unset or false).
struct set_cookie {
  std::string name{};    // a token
  std::string value{};   // cookie-octets, or cookie-octets in double quotes
  std::string path{};    // Path=; "" leaves it to the browser (the request's directory)
  std::string domain{};  // Domain=; "" keeps the cookie to the host that set it
  // Max-Age=; zero deletes the cookie now (with its name, path and domain as set).
  std::optional<std::chrono::seconds> max_age{};
  std::optional<std::time_t> expires{};          // Expires=, as an IMF-fixdate
  bool secure = false;                           // Secure: sent over HTTPS only
  bool http_only = false;                        // HttpOnly: hidden from scripts
  http::same_site same_site = same_site::unset;  // SameSite=Lax, Strict or None
  bool partitioned = false;                      // CHIPS: kept per top-level site; needs secure
};

// The Set-Cookie field value for `c` ("id=42; Path=/; Max-Age=3600; Secure; HttpOnly;
// SameSite=Lax"); std::invalid_argument as the contract says.
std::string format_set_cookie(const set_cookie& c);
// Adds a Set-Cookie field for `c` to the response: one field per cookie, never joined into one
// (RFC 6265 3).
void add_cookie(response& r, const set_cookie& c);

}  // namespace weft::http

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
#include <memory>
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

// A client's cookie store, as RFC 6265 5.3 and 5.4 say a user agent keeps one (Go's
// net/http/cookiejar, curl's cookie engine): client_options::cookies hands one to a client,
// which stores every response's Set-Cookie fields (a redirect's included) and sends the
// matching cookies with every request that has no Cookie field of its own.
//
// Contract:
//   - Threads: every member locks the jar's mutex, so one jar may serve clients on several
//     threads; nothing in it suspends or blocks beyond that lock.
//   - Storing (RFC 6265 5.2 and 5.3): Expires in any form of RFC 6265 5.1.1's cookie-date
//     (Netscape's "Wed, 09-Jun-2021 10:18:14 GMT" included); Max-Age over Expires, and zero or
//     less deletes; Domain must domain-match the request's host (a cookie for another site is
//     dropped) and, lacking a public suffix list, must hold a dot unless it is the host itself
//     (so "com" is refused, but a server under "example.co.uk" can still set a cookie for
//     "co.uk", as Go's jar without a PublicSuffixList allows); no Domain keeps the cookie to
//     the host alone; a missing or relative Path takes the request path's directory. A Secure
//     cookie is not taken from plain http, nor may plain http replace one. A cookie with the
//     same name, domain and path replaces the one stored (keeping its creation time).
//   - Bounds: a cookie whose name and value pass max_cookie_size is dropped; past
//     max_per_domain for its domain, or max_cookies in all, the least recently used goes.
//   - Sending (RFC 6265 5.4): cookies whose domain and path match and that have not expired,
//     Secure ones only over https (which this client does not speak: never), longer paths
//     first, then older ones; "a=1; b=2".
class cookie_jar {
 public:
  // How much the jar keeps (RFC 6265 6.1's minimums are 3000, 50 and 4096).
  struct limits {
    std::size_t max_cookies = 3000;      // in all
    std::size_t max_per_domain = 50;     // per domain a cookie is stored under
    std::size_t max_cookie_size = 4096;  // name and value, in bytes
  };
  // An empty jar with the default limits.
  cookie_jar();
  // An empty jar with these limits.
  explicit cookie_jar(limits bounds);
  cookie_jar(const cookie_jar&) = delete;
  cookie_jar& operator=(const cookie_jar&) = delete;
  ~cookie_jar();

  // Stores the Set-Cookie fields of a response to a request for `path` (the target's path,
  // without its query) on `host` (a name or an IP address, lower case), over https when
  // `secure`.
  void store(std::string_view host, std::string_view path, bool secure,
             const headers& response_fields);
  // The Cookie field value for a request for `path` on `host` ("" when no cookie matches).
  std::string cookie_header(std::string_view host, std::string_view path, bool secure);
  // The cookies stored and not expired.
  std::size_t size();
  // Forgets every cookie.
  void clear();

 private:
  struct state;
  std::unique_ptr<state> state_;
};

}  // namespace weft::http

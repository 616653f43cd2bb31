// weft::http cookies (cookies.hpp): the Cookie field read leniently, Set-Cookie written strictly
// (RFC 6265 4.1's grammar).
#include "weft/http/cookies.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "http/chars.hpp"
#include "net/address.hpp"

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

// ---------------------------------------------------------------------------------------------
// cookie_jar

namespace {

using wall_clock = std::chrono::system_clock;

// RFC 6265bis caps a cookie's life at 400 days, as browsers do: no date past it overflows.
constexpr std::chrono::seconds longest_life{400LL * 24 * 3600};

// RFC 6265 5.1.1's delimiter.
bool is_date_delimiter(unsigned char c) noexcept {
  return c == 0x09 || (c >= 0x20 && c <= 0x2F) || (c >= 0x3B && c <= 0x40) ||
         (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E);
}

bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

// min to max digits at the front of `token`, not followed by another digit; their value.
bool leading_number(std::string_view token, std::size_t min, std::size_t max, int& out) noexcept {
  std::size_t n = 0;
  int value = 0;
  while (n < token.size() && is_digit(token[n])) {
    if (++n > max) return false;
    value = value * 10 + (token[n - 1] - '0');
  }
  if (n < min) return false;
  out = value;
  return true;
}

// hms-time: 1*2DIGIT ":" 1*2DIGIT ":" 1*2DIGIT, then anything but a digit.
bool time_token(std::string_view token, int& hour, int& minute, int& second) noexcept {
  int fields[3] = {};
  for (int i = 0; i < 3; ++i) {
    std::size_t n = 0;
    while (n < token.size() && is_digit(token[n])) ++n;
    if (n < 1 || n > 2) return false;
    leading_number(token, 1, 2, fields[i]);
    token.remove_prefix(n);
    if (i < 2) {
      if (token.empty() || token.front() != ':') return false;
      token.remove_prefix(1);
    }
  }
  hour = fields[0];
  minute = fields[1];
  second = fields[2];
  return true;
}

bool month_token(std::string_view token, int& month) noexcept {
  static constexpr std::string_view names[] = {"jan", "feb", "mar", "apr", "may", "jun",
                                               "jul", "aug", "sep", "oct", "nov", "dec"};
  if (token.size() < 3) return false;
  for (int i = 0; i < 12; ++i) {
    if (detail::iequals(token.substr(0, 3), names[i])) {
      month = i + 1;
      return true;
    }
  }
  return false;
}

// RFC 6265 5.1.1's cookie-date, which takes every form servers send: IMF-fixdate, RFC 850,
// asctime, Netscape's "Wed, 09-Jun-2021 10:18:14 GMT" and the like.
std::optional<wall_clock::time_point> parse_cookie_date(std::string_view text) {
  bool have_time = false, have_day = false, have_month = false, have_year = false;
  int hour = 0, minute = 0, second = 0, day = 0, month = 0, year = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_date_delimiter(static_cast<unsigned char>(text[i]))) ++i;
    const std::size_t start = i;
    while (i < text.size() && !is_date_delimiter(static_cast<unsigned char>(text[i]))) ++i;
    const std::string_view token = text.substr(start, i - start);
    if (token.empty()) continue;
    if (!have_time && time_token(token, hour, minute, second)) {
      have_time = true;
    } else if (!have_day && leading_number(token, 1, 2, day)) {
      have_day = true;
    } else if (!have_month && month_token(token, month)) {
      have_month = true;
    } else if (!have_year && leading_number(token, 2, 4, year)) {
      have_year = true;
    }
  }
  if (!(have_time && have_day && have_month && have_year)) return std::nullopt;
  if (year >= 70 && year <= 99) year += 1900;
  if (year >= 0 && year <= 69) year += 2000;
  if (day < 1 || day > 31 || year < 1601 || hour > 23 || minute > 59 || second > 59) {
    return std::nullopt;
  }
  const std::chrono::year_month_day date{std::chrono::year{year},
                                         std::chrono::month{static_cast<unsigned>(month)},
                                         std::chrono::day{static_cast<unsigned>(day)}};
  if (!date.ok()) return std::nullopt;
  return std::chrono::time_point_cast<wall_clock::duration>(
      std::chrono::sys_days{date} + std::chrono::hours{hour} + std::chrono::minutes{minute} +
      std::chrono::seconds{second});
}

// An IPv4 or IPv6 address, as net's address parsing reads one (a host that is one never
// domain-matches anything but itself).
bool is_ip_address(std::string_view host) noexcept {
  in6_addr probe{};
  return net::detail::parse_ip_literal(AF_INET, host, &probe) ||
         net::detail::parse_ip_literal(AF_INET6, host, &probe);
}

// RFC 6265 5.1.3.
bool domain_matches(std::string_view host, std::string_view domain) noexcept {
  if (host == domain) return true;
  return host.size() > domain.size() && host.ends_with(domain) &&
         host[host.size() - domain.size() - 1] == '.' && !is_ip_address(host);
}

// RFC 6265 5.1.4: the directory of the request's path.
std::string default_path(std::string_view path) {
  if (path.empty() || path.front() != '/') return "/";
  const std::size_t last = path.rfind('/');
  return last == 0 ? std::string("/") : std::string(path.substr(0, last));
}

bool path_matches(std::string_view request_path, std::string_view cookie_path) noexcept {
  if (request_path == cookie_path) return true;
  return request_path.starts_with(cookie_path) &&
         (cookie_path.ends_with('/') || request_path[cookie_path.size()] == '/');
}

}  // namespace

struct cookie_jar::state {
  struct stored {
    std::string name;
    std::string value;
    std::string domain;
    std::string path;
    std::optional<wall_clock::time_point> expires;  // nothing: ends with the session
    bool host_only = true;
    bool secure = false;
    bool http_only = false;
    std::uint64_t created = 0;
    std::uint64_t used = 0;
  };

  std::mutex mutex;
  limits bounds;
  std::vector<stored> cookies;
  std::uint64_t tick = 0;

  void drop_expired(wall_clock::time_point now) {
    std::erase_if(cookies, [now](const stored& c) { return c.expires && *c.expires <= now; });
  }

  // Drops the least recently used cookie among those `pick` selects.
  template <class Pick>
  void drop_least_used(Pick pick) {
    auto victim = cookies.end();
    for (auto it = cookies.begin(); it != cookies.end(); ++it) {
      if (pick(*it) && (victim == cookies.end() || it->used < victim->used)) victim = it;
    }
    if (victim != cookies.end()) cookies.erase(victim);
  }

  void store_one(std::string_view host, std::string_view request_path, bool secure_scheme,
                 std::string_view line, wall_clock::time_point now);
};

void cookie_jar::state::store_one(std::string_view host, std::string_view request_path,
                                  bool secure_scheme, std::string_view line,
                                  wall_clock::time_point now) {
  // RFC 6265 5.2: the name-value pair, then the attributes.
  const std::size_t semicolon = line.find(';');
  const std::string_view pair = line.substr(0, semicolon);
  const std::size_t equals = pair.find('=');
  if (equals == std::string_view::npos) return;
  const std::string_view name = detail::trim_ows(pair.substr(0, equals));
  const std::string_view value = detail::trim_ows(pair.substr(equals + 1));
  if (name.empty() || name.size() + value.size() > bounds.max_cookie_size) return;

  std::optional<wall_clock::time_point> expires;
  std::optional<long long> max_age;
  std::optional<std::string> domain_attribute;
  std::string path = default_path(request_path);
  bool secure = false;
  bool http_only = false;
  std::string_view rest =
      semicolon == std::string_view::npos ? std::string_view() : line.substr(semicolon + 1);
  while (!rest.empty()) {
    const std::size_t next = rest.find(';');
    const std::string_view attribute = rest.substr(0, next);
    rest = next == std::string_view::npos ? std::string_view() : rest.substr(next + 1);
    const std::size_t eq = attribute.find('=');
    const std::string key = detail::ascii_lowered(detail::trim_ows(attribute.substr(0, eq)));
    const std::string_view val = eq == std::string_view::npos
                                     ? std::string_view()
                                     : detail::trim_ows(attribute.substr(eq + 1));
    if (key == "expires") {
      if (std::optional<wall_clock::time_point> date = parse_cookie_date(val)) expires = date;
    } else if (key == "max-age") {
      const bool negative = !val.empty() && val.front() == '-';
      const std::string_view digits = negative ? val.substr(1) : val;
      if (digits.empty() || digits.find_first_not_of("0123456789") != std::string_view::npos) {
        continue;  // not a number: ignored (RFC 6265 5.2.2)
      }
      long long seconds = 0;
      for (char c : digits) {
        seconds = seconds > longest_life.count() ? seconds : seconds * 10 + (c - '0');
      }
      max_age = negative ? -seconds : seconds;
    } else if (key == "domain") {
      std::string_view d = val;
      if (!d.empty() && d.front() == '.') d.remove_prefix(1);
      if (!d.empty()) domain_attribute = detail::ascii_lowered(d);
    } else if (key == "path") {
      path = !val.empty() && val.front() == '/' ? std::string(val) : default_path(request_path);
    } else if (key == "secure") {
      secure = true;
    } else if (key == "httponly") {
      http_only = true;
    }
  }

  // RFC 6265 5.3.
  stored made;
  made.name.assign(name);
  made.value.assign(value);
  made.path = std::move(path);
  made.secure = secure;
  made.http_only = http_only;
  if (domain_attribute) {
    // Without a public suffix list: a domain of one label ("com", "localhost") only for that
    // very host.
    if (domain_attribute->find('.') == std::string::npos && *domain_attribute != host) return;
    if (!domain_matches(host, *domain_attribute)) return;  // another site's cookie
    made.domain = std::move(*domain_attribute);
    made.host_only = false;
  } else {
    made.domain.assign(host);
  }
  if (secure && !secure_scheme) return;
  bool expired = false;
  if (max_age) {
    expired = *max_age <= 0;
    made.expires = now + std::min(std::chrono::seconds{*max_age}, longest_life);
  } else if (expires) {
    expired = *expires <= now;
    made.expires = std::min(*expires, now + longest_life);
  }

  auto same = std::find_if(cookies.begin(), cookies.end(), [&made](const stored& c) {
    return c.name == made.name && c.domain == made.domain && c.path == made.path;
  });
  if (same != cookies.end()) {
    if (same->secure && !secure_scheme) return;  // plain http never replaces a Secure cookie
    if (expired) {
      cookies.erase(same);
      return;
    }
    made.created = same->created;
    made.used = ++tick;
    *same = std::move(made);
    return;
  }
  if (expired) return;
  made.created = made.used = ++tick;
  const std::string domain = made.domain;
  cookies.push_back(std::move(made));
  drop_expired(now);
  if (static_cast<std::size_t>(std::count_if(cookies.begin(), cookies.end(), [&](const stored& c) {
        return c.domain == domain;
      })) > bounds.max_per_domain) {
    drop_least_used([&](const stored& c) { return c.domain == domain; });
  }
  if (cookies.size() > bounds.max_cookies) {
    drop_least_used([](const stored&) { return true; });
  }
}

cookie_jar::cookie_jar() : cookie_jar(limits{}) {}

cookie_jar::cookie_jar(limits bounds) : state_(std::make_unique<state>()) {
  state_->bounds = bounds;
}

cookie_jar::~cookie_jar() = default;

void cookie_jar::store(std::string_view host, std::string_view path, bool secure,
                       const headers& response_fields) {
  const std::vector<std::string_view> lines = response_fields.get_all("Set-Cookie");
  if (lines.empty()) return;
  const std::string host_lower = detail::ascii_lowered(host);
  const wall_clock::time_point now = wall_clock::now();
  std::lock_guard<std::mutex> hold(state_->mutex);
  for (std::string_view line : lines) {
    state_->store_one(host_lower, path, secure, line, now);
  }
}

std::string cookie_jar::cookie_header(std::string_view host, std::string_view path, bool secure) {
  const std::string host_lower = detail::ascii_lowered(host);
  std::lock_guard<std::mutex> hold(state_->mutex);
  state_->drop_expired(wall_clock::now());
  std::vector<state::stored*> matching;
  for (state::stored& c : state_->cookies) {
    const bool domain_ok =
        c.host_only ? c.domain == host_lower : domain_matches(host_lower, c.domain);
    if (domain_ok && path_matches(path, c.path) && (!c.secure || secure)) matching.push_back(&c);
  }
  // RFC 6265 5.4: longer paths first, then the older.
  std::sort(matching.begin(), matching.end(), [](const state::stored* a, const state::stored* b) {
    return a->path.size() != b->path.size() ? a->path.size() > b->path.size()
                                            : a->created < b->created;
  });
  std::string header;
  for (state::stored* c : matching) {
    if (!header.empty()) header += "; ";
    header += c->name;
    header += '=';
    header += c->value;
    c->used = ++state_->tick;
  }
  return header;
}

std::size_t cookie_jar::size() {
  std::lock_guard<std::mutex> hold(state_->mutex);
  state_->drop_expired(wall_clock::now());
  return state_->cookies.size();
}

void cookie_jar::clear() {
  std::lock_guard<std::mutex> hold(state_->mutex);
  state_->cookies.clear();
}

}  // namespace weft::http

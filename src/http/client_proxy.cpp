// weft::http::client's forward proxies (client_proxy.hpp): proxy URLs, the no_proxy list, and
// forward_proxy_options::from_environment.
#include "http/client_proxy.hpp"

#include <nettle/base64.h>
#include <sys/socket.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>

#include "http/chars.hpp"
#include "http/client_url.hpp"
#include "weft/http/message.hpp"

namespace weft::http {

namespace detail {

namespace {

[[noreturn]] void refuse(std::string_view field, std::string_view value, const std::string& why) {
  throw std::invalid_argument("weft::http::client: " + std::string(field) + " \"" +
                              std::string(value) + "\" " + why);
}

std::string base64(std::string_view bytes) {
  std::string out(BASE64_ENCODE_RAW_LENGTH(bytes.size()), '\0');
  base64_encode_raw(reinterpret_cast<char*>(out.data()), bytes.size(),
                    reinterpret_cast<const std::uint8_t*>(bytes.data()));
  return out;
}

// Whether an authority ("host", "host:1", "[::1]", "[::1]:1") names a port.
bool names_port(std::string_view authority) noexcept {
  const std::size_t colon = authority.rfind(':');
  if (colon == std::string_view::npos) {
    return false;
  }
  const std::size_t close = authority.rfind(']');
  return authority.front() != '[' || (close != std::string_view::npos && colon > close);
}

// "http://[user[:password]@]host[:port][/]", or socks5:// or socks5h:// in its place.
client_proxy parse_proxy(std::string_view field, std::string_view text) {
  const std::size_t scheme_end = text.find("://");
  if (scheme_end == std::string_view::npos) {
    refuse(field, text,
           "is not a proxy URL (expected http://, socks5:// or socks5h://, then "
           "[user[:password]@]host[:port])");
  }
  const std::string_view scheme = text.substr(0, scheme_end);
  client_proxy proxy;
  proxy.remote_names = iequals(scheme, "socks5h");
  proxy.socks = proxy.remote_names || iequals(scheme, "socks5");
  if (!proxy.socks && !iequals(scheme, "http")) {
    refuse(field, text,
           "has the scheme \"" + std::string(scheme) +
               "\"; a proxy is reached with http://, socks5:// or socks5h:// (TLS to the proxy, "
               "and SOCKS4, are not supported)");
  }
  std::string_view rest = text.substr(scheme_end + 3);
  const std::string_view authority = rest.substr(0, rest.find_first_of("/?#"));
  const std::size_t at = authority.rfind('@');
  if (at != std::string_view::npos) {
    const std::string_view userinfo = authority.substr(0, at);
    const std::size_t colon = userinfo.find(':');
    try {
      proxy.user = percent_decode(userinfo.substr(0, colon));
      if (colon != std::string_view::npos) {
        proxy.password = percent_decode(userinfo.substr(colon + 1));
      }
    } catch (const std::invalid_argument&) {
      refuse(field, text, "has a user or password with a malformed percent escape");
    }
    if (!proxy.socks) {
      proxy.authorization = "Basic " + base64(proxy.user + ":" + proxy.password);
      proxy.user.clear();
      proxy.password.clear();
    } else if (proxy.user.size() > 255 || proxy.password.size() > 255) {
      refuse(field, text, "has a user or password longer than the 255 bytes SOCKS5 carries");
    }
    rest.remove_prefix(at + 1);
  }
  client_url parsed;
  try {
    parsed = parse_whole_client_url("http://" + std::string(rest));
  } catch (const error& failure) {
    refuse(field, text, std::string("is not a proxy URL: ") + failure.what());
  }
  if (parsed.target != "/" || rest.find_first_of("?#") != std::string_view::npos) {
    refuse(field, text, "has a path or query; a proxy URL is http://[user[:password]@]host[:port]");
  }
  proxy.host = std::move(parsed.host);
  proxy.port = parsed.port;
  if (proxy.socks && !names_port(rest.substr(0, rest.find_first_of("/?#")))) {
    proxy.port = 1080;  // SOCKS's own (RFC 1928 3)
    parsed.origin =
        (proxy.host.find(':') != std::string::npos ? "[" + proxy.host + "]" : proxy.host) + ":1080";
  }
  proxy.where = std::string(proxy.socks ? (proxy.remote_names ? "socks5h " : "socks5 ") : "") +
                "proxy " + parsed.origin;
  return proxy;
}

// An address ("192.0.2.7", "::1", "[::1]") or a CIDR block ("10.0.0.0/8") into block.
bool parse_block(std::string_view text, net::detail::address_block& block) noexcept {
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') {
    text = text.substr(1, text.size() - 2);
  }
  return net::detail::parse_address_block(text, block);
}

bool parse_port(std::string_view text, std::uint16_t& port) {
  if (text.empty() || text.size() > 5) {
    return false;
  }
  unsigned value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') {
      return false;
    }
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  if (value == 0 || value > 65535) {
    return false;
  }
  port = static_cast<std::uint16_t>(value);
  return true;
}

no_proxy_entry parse_entry(std::string_view entry) {
  const auto bad = [&](const std::string& why) {
    throw std::invalid_argument("weft::http::client: proxy.no_proxy: the entry \"" +
                                std::string(entry) + "\" " + why);
  };
  no_proxy_entry parsed;
  if (entry == "*") {
    return parsed;  // kind::all
  }
  if (entry.find('/') != std::string_view::npos) {
    parsed.what = no_proxy_entry::kind::block;
    if (!parse_block(entry, parsed.block)) {
      bad("is not a CIDR block (an IPv4 or IPv6 address, '/', a prefix of at most 32 or 128 "
          "bits)");
    }
    return parsed;
  }
  std::string_view host = entry;
  // A port: after "]" of a bracketed IPv6 address, or after the one ':' of a name or IPv4.
  const std::size_t close = entry.rfind(']');
  const std::size_t colon = entry.rfind(':');
  const bool bracketed = !entry.empty() && entry.front() == '[';
  if (colon != std::string_view::npos &&
      (bracketed ? close != std::string_view::npos && colon == close + 1
                 : entry.find(':') == colon)) {
    if (!parse_port(entry.substr(colon + 1), parsed.port)) {
      bad("has a port that is not 1 to 65535");
    }
    host = entry.substr(0, colon);
  }
  if (parse_block(host, parsed.block)) {
    parsed.what = no_proxy_entry::kind::block;
    return parsed;
  }
  if (bracketed) {
    bad("is not an IPv6 address in brackets");
  }
  if (host.starts_with("*.")) {
    host.remove_prefix(2);
  } else if (host.starts_with(".")) {
    host.remove_prefix(1);
  }
  if (host.empty() || host.find_first_of("*/[]@") != std::string_view::npos) {
    bad("is not a host name, an address or a CIDR block");
  }
  parsed.what = no_proxy_entry::kind::name;
  parsed.name.reserve(host.size());
  for (const char c : host) {
    parsed.name.push_back((c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c);
  }
  return parsed;
}

}  // namespace

no_proxy_list::no_proxy_list(std::string_view text) {
  while (!text.empty()) {
    const std::size_t end = text.find_first_of(", \t");
    const std::string_view entry = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    if (!entry.empty()) {
      entries_.push_back(parse_entry(entry));
    }
  }
}

bool no_proxy_list::matches(std::string_view host, std::uint16_t port) const noexcept {
  if (entries_.empty()) {
    return false;
  }
  sockaddr_storage address{};
  socklen_t length = 0;
  bool is_address = false;
  try {
    is_address = net::detail::parse_numeric(std::string(host), port, address, length);
  } catch (...) {
    return false;  // out of memory for the copy: proxied, as without no_proxy
  }
  for (const no_proxy_entry& entry : entries_) {
    if (entry.port != 0 && entry.port != port) {
      continue;
    }
    switch (entry.what) {
      case no_proxy_entry::kind::all:
        return true;
      case no_proxy_entry::kind::name: {
        const std::size_t n = entry.name.size();
        if (!is_address &&
            (iequals(host, entry.name) || (host.size() > n && host[host.size() - n - 1] == '.' &&
                                           iequals(host.substr(host.size() - n), entry.name)))) {
          return true;
        }
        break;
      }
      case no_proxy_entry::kind::block:
        if (is_address &&
            net::detail::in_block(entry.block, reinterpret_cast<const sockaddr*>(&address))) {
          return true;
        }
        break;
    }
  }
  return false;
}

const client_proxy* client_proxies::for_url(const client_url& url) const noexcept {
  const std::optional<client_proxy>& proxy = url.secure ? https : http;
  if (!proxy || direct.matches(url.host, url.port)) {
    return nullptr;
  }
  return &*proxy;
}

std::shared_ptr<const client_proxies> parse_proxies(const forward_proxy_options& options) {
  no_proxy_list direct(options.no_proxy);  // checked even when no proxy is set
  if (options.http.empty() && options.https.empty()) {
    return nullptr;
  }
  auto parsed = std::make_shared<client_proxies>(client_proxies{{}, {}, std::move(direct)});
  if (!options.http.empty()) {
    parsed->http = parse_proxy("proxy.http", options.http);
  }
  if (!options.https.empty()) {
    parsed->https = parse_proxy("proxy.https", options.https);
  }
  return parsed;
}

}  // namespace detail

namespace {

// The first of the variables that is set and not empty; empty if none.
std::string first_set(std::initializer_list<const char*> names) {
  for (const char* name : names) {
    const char* value = std::getenv(name);
    if (value != nullptr && value[0] != '\0') {
      return value;
    }
  }
  return {};
}

std::string with_scheme(std::string value) {
  if (!value.empty() && value.find("://") == std::string::npos) {
    value.insert(0, "http://");
  }
  return value;
}

}  // namespace

forward_proxy_options forward_proxy_options::from_environment() {
  forward_proxy_options options;
  // In a CGI program HTTP_PROXY is the request's Proxy field, set by whoever sent it.
  const bool cgi = std::getenv("REQUEST_METHOD") != nullptr;
  options.http =
      with_scheme(cgi ? first_set({"http_proxy", "all_proxy", "ALL_PROXY"})
                      : first_set({"http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"}));
  options.https = with_scheme(first_set({"https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"}));
  options.no_proxy = first_set({"no_proxy", "NO_PROXY"});
  if (!options.no_proxy.empty()) {
    options.no_proxy += ',';
  }
  options.no_proxy += "localhost,127.0.0.0/8,::1";
  return options;
}

bool forward_proxy_options::bypasses(std::string_view host, std::uint16_t port) const {
  return detail::no_proxy_list(no_proxy).matches(host, port);
}

}  // namespace weft::http

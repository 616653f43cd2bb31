// weft::http::client's forward proxies (client.hpp's forward_proxy_options): the proxy URLs parsed
// once by the client's constructor, and the no_proxy list that sends some hosts direct. Internal to
// the client; failures are std::invalid_argument naming the field or the entry.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "net/address.hpp"
#include "weft/http/client.hpp"

namespace weft::http::detail {

struct client_url;

// One proxy: where it listens, what it speaks and what it is told of the user.
struct client_proxy {
  std::string host;  // a name, an IPv4 address, or an IPv6 address without brackets
  std::uint16_t port = 80;
  std::string where;          // "proxy host:port": what connect errors and pool keys name
  bool socks = false;         // socks5:// or socks5h:// (every request tunnels); else http://
  bool remote_names = false;  // socks5h://: the proxy resolves the origin's name
  // http://: "Basic dXNlcjpwYXNz" for a proxy URL with a user; else empty.
  std::string authorization;
  // socks5(h)://: the user name and password (decoded, at most 255 bytes each); empty: none.
  std::string user;
  std::string password;
};

// One entry of no_proxy.
struct no_proxy_entry {
  enum class kind : std::uint8_t { all, name, block };
  kind what = kind::all;
  std::string name;                  // kind::name: lower-case, without a leading "." or "*."
  net::detail::address_block block;  // kind::block: an address, or a CIDR block
  std::uint16_t port = 0;            // 0: any port
};

// no_proxy parsed: whether a host goes direct.
class no_proxy_list {
 public:
  // std::invalid_argument naming the entry that is malformed.
  explicit no_proxy_list(std::string_view text);
  bool matches(std::string_view host, std::uint16_t port) const noexcept;
  bool empty() const noexcept { return entries_.empty(); }

 private:
  std::vector<no_proxy_entry> entries_;
};

// forward_proxy_options parsed.
struct client_proxies {
  std::optional<client_proxy> http;
  std::optional<client_proxy> https;
  no_proxy_list direct;
  // The proxy a request to url goes through; null: direct.
  const client_proxy* for_url(const client_url& url) const noexcept;
};

// Null when neither proxy is set. std::invalid_argument naming the field (proxy.http,
// proxy.https, proxy.no_proxy) and what is wrong with it.
std::shared_ptr<const client_proxies> parse_proxies(const forward_proxy_options& options);

}  // namespace weft::http::detail

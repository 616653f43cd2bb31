// weft::http::client through a SOCKS5 proxy (RFC 1928, with RFC 1929's user name and password):
// the handshake that turns a fresh connection to the proxy into a tunnel to the origin, after
// which the connection is the origin's, as after an http proxy's CONNECT (client_connection.hpp).
//
// Three exchanges, each waited for before the next is sent, as curl makes them (a proxy may
// drop bytes sent ahead of its answer): the methods offered (no authentication, and user name
// and password when the proxy URL has a user), the login when the proxy chose it, and the
// CONNECT with the origin as an address (socks5://, the name resolved here, as curl's socks5)
// or as the name itself (socks5h://, resolved by the proxy: what reaches hosts only the proxy's
// network knows). Any refusal is http::error proxy_refused naming the proxy, the origin and the
// reason; bytes that are not SOCKS5 are malformed_response.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "http/client_connection.hpp"
#include "http/client_proxy.hpp"
#include "net/address.hpp"
#include "weft/http/client.hpp"

namespace weft::http::detail {

namespace {

constexpr char socks_version = 5;
constexpr unsigned char no_authentication = 0x00;
constexpr unsigned char user_password = 0x02;
constexpr unsigned char no_acceptable_method = 0xFF;
constexpr char connect_command = 1;
constexpr char ipv4_address = 1;
constexpr char domain_name = 3;
constexpr char ipv6_address = 4;

// RFC 1928 6's replies.
std::string reply_reason(unsigned char code) {
  switch (code) {
    case 1:
      return "general SOCKS server failure";
    case 2:
      return "connection not allowed by ruleset";
    case 3:
      return "network unreachable";
    case 4:
      return "host unreachable";
    case 5:
      return "connection refused";
    case 6:
      return "TTL expired";
    case 7:
      return "command not supported";
    case 8:
      return "address type not supported";
    default:
      return "reply " + std::to_string(code);
  }
}

void append_port(std::string& out, std::uint16_t port) {
  out += static_cast<char>(port >> 8);
  out += static_cast<char>(port & 0xFF);
}

}  // namespace

void client_connection::socks_connect(const std::string& host, std::uint16_t port,
                                      const std::string& authority, const client_proxy& via,
                                      const timeout& limit, const std::string& subject) {
  const std::string name = "the " + via.where;
  // Waits until `size` bytes are buffered; the proxy's end of the stream refuses.
  const auto need = [&](std::size_t size) {
    while (input().size() < size) {
      if (fill(limit, subject) == 0) {
        throw error(error_kind::proxy_refused, subject,
                    name + " closed the connection during the SOCKS5 handshake for " + authority);
      }
    }
  };
  const auto not_socks = [&](const char* what) {
    throw error(error_kind::malformed_response, subject,
                name + "'s " + what + " is not SOCKS5 (is it a SOCKS5 proxy?)");
  };

  const bool login = !via.user.empty() || !via.password.empty();
  std::string out{socks_version, static_cast<char>(login ? 2 : 1),
                  static_cast<char>(no_authentication)};
  if (login) {
    out += static_cast<char>(user_password);
  }
  write_all(out, limit, subject);
  need(2);
  const auto method = static_cast<unsigned char>(input()[1]);
  if (input()[0] != socks_version) {
    not_socks("answer to the methods offered");
  }
  consume(2);
  if (method == no_acceptable_method) {
    throw error(error_kind::proxy_refused, subject,
                name + " accepts none of the authentication methods offered (no authentication" +
                    (login ? ", user name and password)"
                           : "; it may want a user name and "
                             "password in the proxy URL)"));
  }
  if (method == user_password && login) {
    // RFC 1929: version 1, then the user name and the password, each behind its length (the
    // parser kept both within 255 bytes).
    out.assign(1, '\x01');
    out += static_cast<char>(via.user.size());
    out += via.user;
    out += static_cast<char>(via.password.size());
    out += via.password;
    write_all(out, limit, subject);
    need(2);
    const bool accepted = input()[1] == 0;
    consume(2);
    if (!accepted) {
      throw error(error_kind::proxy_refused, subject,
                  name + " refused the user name and password of the proxy URL");
    }
  } else if (method != no_authentication) {
    not_socks("choice of authentication method");
  }

  out.assign({socks_version, connect_command, 0});
  net::detail::address_block literal;
  const bool numeric = net::detail::parse_address_block(host, literal);
  if (numeric) {
    out += literal.family == AF_INET6 ? ipv6_address : ipv4_address;
    out.append(reinterpret_cast<const char*>(literal.bytes), literal.family == AF_INET6 ? 16 : 4);
  } else if (!via.remote_names) {
    // socks5://: the name is resolved here and its first address sent (curl's socks5).
    const std::vector<net::detail::socket_address> addresses =
        net::detail::addresses_of(host, port, limit, authority);
    const sockaddr_storage& first = addresses.front().storage;
    if (first.ss_family == AF_INET6) {
      const auto& address = reinterpret_cast<const sockaddr_in6&>(first);
      out += ipv6_address;
      out.append(reinterpret_cast<const char*>(&address.sin6_addr), 16);
    } else {
      const auto& address = reinterpret_cast<const sockaddr_in&>(first);
      out += ipv4_address;
      out.append(reinterpret_cast<const char*>(&address.sin_addr), 4);
    }
  } else {
    if (host.size() > 255) {
      throw error(error_kind::invalid_url, subject,
                  "the host name is longer than the 255 bytes a SOCKS5 request can carry");
    }
    out += domain_name;
    out += static_cast<char>(host.size());
    out += host;
  }
  append_port(out, port);
  write_all(out, limit, subject);
  // The reply: version, code, a reserved byte, and the address the proxy bound (its length by
  // its type), then a port; nothing of the origin comes before it.
  need(5);
  if (input()[0] != socks_version) {
    not_socks("answer to CONNECT");
  }
  const auto code = static_cast<unsigned char>(input()[1]);
  std::size_t size = 0;
  switch (input()[3]) {
    case ipv4_address:
      size = 4 + 4 + 2;
      break;
    case ipv6_address:
      size = 4 + 16 + 2;
      break;
    case domain_name:
      size = 4 + 1 + static_cast<unsigned char>(input()[4]) + 2;
      break;
    default:
      not_socks("answer to CONNECT");
  }
  if (code != 0) {
    throw error(error_kind::proxy_refused, subject,
                name + " could not connect to " + authority + ": " + reply_reason(code) +
                    " (SOCKS5 reply " + std::to_string(code) + ")");
  }
  need(size);
  consume(size);
}

}  // namespace weft::http::detail

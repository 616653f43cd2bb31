// The client side of WebSocket (RFC 6455 4.1 and 4.2.2): connect_websocket's opening handshake,
// then the connection switched to a client's framer (websocket_frames.cpp: unmasked frames in,
// masked frames out). The contract is in include/weft/net/websocket.hpp.
#include <nettle/base64.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include "net/protocols/header_text.hpp"
#include "net/protocols/websocket_framer.hpp"
#include "weft/net/websocket.hpp"

namespace weft::net {

namespace {

using detail::header_text::iequals;
using detail::header_text::is_ows;
using detail::header_text::is_token;
using detail::header_text::list_has;
using detail::header_text::trim;

// The protocol a client's connection is switched to once its handshake is done: framers in the
// client's role, which start open.
class websocket_client_protocol final : public protocol {
 public:
  websocket_client_protocol(std::shared_ptr<const websocket_options> options,
                            std::optional<detail::deflate_agreement> deflate)
      : options_(std::move(options)), deflate_(deflate) {}
  const char* name() const noexcept override { return "websocket"; }
  std::unique_ptr<framer> make_framer() const override {
    auto made =
        std::make_unique<detail::websocket_framer>(options_, detail::websocket_role::client);
    if (deflate_) {
      made->use_deflate(*deflate_);
    }
    return made;
  }

 private:
  std::shared_ptr<const websocket_options> options_;
  std::optional<detail::deflate_agreement> deflate_;  // permessage-deflate, when agreed
};

[[noreturn]] void invalid(const std::string& what) {
  throw std::invalid_argument("weft::net::connect_websocket: " + what);
}

// Visible ASCII, spaces and tabs only: what a header value may hold without breaking the head.
void check_value(std::string_view value, const std::string& what) {
  for (const char c : value) {
    const auto byte = static_cast<unsigned char>(c);
    if ((byte < 0x20 && c != '\t') || byte == 0x7F) {
      invalid(what + " holds the control character " + std::to_string(byte));
    }
  }
}

void check_options(const websocket_client_options& options) {
  if (options.path.empty() || options.path.front() != '/') {
    invalid("the path must start with '/', not '" + options.path + "'");
  }
  for (const char c : options.path) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte <= 0x20 || byte >= 0x7F) {
      invalid("the path holds the byte " + std::to_string(byte) +
              " (only visible ASCII; percent-encode the rest)");
    }
  }
  check_value(options.host_header, "the Host header");
  check_value(options.origin, "the Origin");
  for (const std::string& subprotocol : options.subprotocols) {
    if (!is_token(subprotocol)) {
      invalid("the subprotocol '" + subprotocol + "' is not a token");
    }
  }
  constexpr std::string_view own[] = {"host",
                                      "upgrade",
                                      "connection",
                                      "sec-websocket-key",
                                      "sec-websocket-version",
                                      "sec-websocket-protocol",
                                      "sec-websocket-extensions",
                                      "content-length",
                                      "transfer-encoding"};
  for (const auto& [name, value] : options.headers) {
    if (!is_token(name)) {
      invalid("the header name '" + name + "' is not a token");
    }
    for (std::string_view taken : own) {
      if (iequals(name, taken)) {
        invalid("the header " + name + " is the handshake's own; it cannot be set");
      }
    }
    check_value(value, "the value of " + name);
  }
  if (options.max_handshake_size < 64) {
    invalid("max_handshake_size must be at least 64 bytes, not " +
            std::to_string(options.max_handshake_size));
  }
  if (options.max_frame_size == 0) {
    invalid("max_frame_size must be at least 1 byte");
  }
  if (options.handshake_timeout.count() < 0) {
    invalid("handshake_timeout may not be negative (" +
            std::to_string(options.handshake_timeout.count()) + " ms; 0 turns it off)");
  }
  detail::check_deflate_options(options.deflate, "weft::net::connect_websocket: options");
  detail::check_ping_options(options.ping_interval, options.ping_timeout,
                             "weft::net::connect_websocket: options");
}

// 16 bytes from getrandom, in base64 (RFC 6455 4.1: a nonce randomly selected for each
// connection).
std::string random_key() {
  std::array<std::uint8_t, 16> nonce{};
  detail::websocket_random_bytes(nonce.data(), nonce.size(),
                                 "weft::net::connect_websocket: the handshake key");
  std::string key(BASE64_ENCODE_RAW_LENGTH(16), '\0');
  base64_encode_raw(key.data(), nonce.size(), nonce.data());
  return key;
}

std::string host_header_of(const std::string& host, std::uint16_t port,
                           const websocket_client_options& options) {
  if (!options.host_header.empty()) {
    return options.host_header;
  }
  const bool ipv6 = host.find(':') != std::string::npos;
  return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::string request_of(const std::string& host, std::uint16_t port,
                       const websocket_client_options& options, const std::string& key) {
  std::string request = "GET " + options.path + " HTTP/1.1\r\nHost: ";
  request += host_header_of(host, port, options);
  request +=
      "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
      "Sec-WebSocket-Key: ";
  request += key;
  request += "\r\n";
  if (!options.origin.empty()) {
    request += "Origin: " + options.origin + "\r\n";
  }
  if (!options.subprotocols.empty()) {
    request += "Sec-WebSocket-Protocol: ";
    for (std::size_t i = 0; i < options.subprotocols.size(); ++i) {
      request += (i == 0 ? "" : ", ") + options.subprotocols[i];
    }
    request += "\r\n";
  }
  if (options.deflate.enabled) {
    request += "Sec-WebSocket-Extensions: " + detail::deflate_offer(options.deflate) + "\r\n";
  }
  for (const auto& [name, value] : options.headers) {
    request += name + ": " + value + "\r\n";
  }
  request += "\r\n";
  return request;
}

[[noreturn]] void refused(const std::string& reason, unsigned status = 0) {
  throw websocket_handshake_error("weft::net::connect_websocket: " + reason, status);
}

// What a valid 101 selected.
struct handshake_outcome {
  std::string subprotocol;
  std::string extensions;  // the Sec-WebSocket-Extensions answer, lines joined by ", "
  std::optional<detail::deflate_agreement> deflate;
};

// Checks the response head (without its empty line) against RFC 6455 4.2.2 and RFC 7692 and
// returns what it selected.
handshake_outcome check_response(std::string_view head, const std::string& key,
                                 const websocket_client_options& options) {
  const std::size_t line_end = head.find("\r\n");
  const std::string_view status_line = head.substr(0, line_end);
  // HTTP/DIGIT.DIGIT SP 3DIGIT [SP reason] (RFC 9112 4): "HTTP/1.1 1010" is no 101.
  const auto digit = [&](std::size_t at) {
    return status_line[at] >= '0' && status_line[at] <= '9';
  };
  if (status_line.size() < 12 || status_line.substr(0, 5) != "HTTP/" || !digit(5) ||
      status_line[6] != '.' || !digit(7) || status_line[8] != ' ' || status_line[9] < '1' ||
      status_line[9] > '5' || !digit(10) || !digit(11) ||
      (status_line.size() > 12 && status_line[12] != ' ')) {
    refused("the server's answer is not an HTTP response (it starts '" +
            std::string(status_line.substr(0, 40)) + "')");
  }
  const unsigned status = static_cast<unsigned>(
      (status_line[9] - '0') * 100 + (status_line[10] - '0') * 10 + (status_line[11] - '0'));
  if (status != 101) {
    refused("the server answered " + std::string(status_line.substr(9)) +
                " instead of 101 Switching Protocols",
            status);
  }
  // RFC 6455 4.1: the handshake is HTTP/1.1's; a 101 of another version switches nothing.
  if (status_line.substr(0, 9) != "HTTP/1.1 ") {
    refused("the server's 101 is not HTTP/1.1 (it starts '" +
                std::string(status_line.substr(0, 40)) + "')",
            status);
  }
  std::string upgrade;
  std::string connection;
  int accepts = 0;
  std::string_view accept;
  int protocols = 0;
  std::string_view selected;
  std::string extensions;
  std::string_view rest =
      line_end == std::string_view::npos ? std::string_view() : head.substr(line_end + 2);
  while (!rest.empty()) {
    const std::size_t end = rest.find("\r\n");
    const std::string_view line = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 2);
    if (line.empty()) {
      continue;
    }
    const std::size_t colon = line.find(':');
    const std::string_view name = line.substr(0, colon);
    if (is_ows(line.front()) || colon == std::string_view::npos || !is_token(name)) {
      refused("the 101 response has a malformed header line", status);
    }
    const std::string_view value = trim(line.substr(colon + 1));
    if (iequals(name, "upgrade")) {
      upgrade.append(value).push_back(',');
    } else if (iequals(name, "connection")) {
      connection.append(value).push_back(',');
    } else if (iequals(name, "sec-websocket-accept")) {
      ++accepts;
      accept = value;
    } else if (iequals(name, "sec-websocket-protocol")) {
      ++protocols;
      selected = value;
    } else if (iequals(name, "sec-websocket-extensions")) {
      extensions.append(extensions.empty() ? "" : ", ").append(value);
    }
  }
  if (!list_has(upgrade, "websocket")) {
    refused("the 101 response's Upgrade header does not name websocket", status);
  }
  if (!list_has(connection, "upgrade")) {
    refused("the 101 response's Connection header does not name upgrade", status);
  }
  if (accepts != 1 || accept != detail::websocket_accept_key(key)) {
    refused(accepts == 0  ? "the 101 response has no Sec-WebSocket-Accept"
            : accepts > 1 ? "the 101 response has more than one Sec-WebSocket-Accept"
                          : "the 101 response's Sec-WebSocket-Accept '" + std::string(accept) +
                                "' does not answer the key sent",
            status);
  }
  handshake_outcome outcome;
  if (!extensions.empty()) {
    if (!options.deflate.enabled) {
      refused("the server selected an extension (Sec-WebSocket-Extensions), but none was offered",
              status);
    }
    std::string why;
    outcome.deflate = detail::read_deflate_answer(extensions, options.deflate, why);
    if (!outcome.deflate) {
      refused("the server's Sec-WebSocket-Extensions '" + extensions + "' breaks RFC 7692: " + why,
              status);
    }
    outcome.extensions = extensions;
  }
  if (protocols > 1) {
    refused("the 101 response selects more than one subprotocol", status);
  }
  if (protocols == 1) {
    bool offered = false;
    for (const std::string& mine : options.subprotocols) {
      offered = offered || selected == mine;
    }
    if (!offered) {
      refused("the server selected the subprotocol '" + std::string(selected) +
                  "', which was not offered",
              status);
    }
  }
  outcome.subprotocol = std::string(selected);
  return outcome;
}

}  // namespace

websocket_client_connection connect_websocket(const std::string& host, std::uint16_t port,
                                              const websocket_client_options& options,
                                              const timeout& given) {
  check_options(options);
  const timeout limit =
      options.handshake_timeout.count() > 0 ? given.capped(options.handshake_timeout) : given;
  websocket_options framing;
  framing.max_frame_size = options.max_frame_size;
  framing.deflate = options.deflate;
  framing.ping_interval = options.ping_interval;
  framing.ping_timeout = options.ping_timeout;
  auto framing_options = std::make_shared<const websocket_options>(std::move(framing));
  connection_options plain = options.connection;
  plain.protocol = nullptr;  // bytes until the handshake is done; then the client's framer
  const std::string key = random_key();
  std::shared_ptr<connection> c = connect(host, port, plain, limit);
  try {
    c->send(request_of(host, port, options, key), message_kind::binary, limit);
    std::size_t searched = 0;
    std::size_t head_end = std::string_view::npos;
    for (;;) {
      const std::string_view input = c->input();
      // Resumed 3 bytes back, so a "\r\n\r\n" split across reads is found.
      head_end = input.find("\r\n\r\n", searched >= 3 ? searched - 3 : 0);
      if (head_end != std::string_view::npos) {
        break;
      }
      if (input.find("\n\n", searched >= 1 ? searched - 1 : 0) != std::string_view::npos) {
        // An empty line without its CRs: this head will never end as RFC 9112 2.2 asks.
        refused("the server's response head ends its lines in a bare LF, not CRLF (it starts '" +
                std::string(input.substr(0, std::min<std::size_t>(input.find('\n'), 40))) + "')");
      }
      if (input.size() > options.max_handshake_size) {
        refused("the server's response head is larger than " +
                std::to_string(options.max_handshake_size) + " bytes (max_handshake_size)");
      }
      searched = input.size();
      if (!c->read_input(limit, true)) {
        refused(searched == 0 ? "the server closed the connection without answering the handshake"
                              : "the server closed the connection inside its response head");
      }
    }
    if (head_end + 4 > options.max_handshake_size) {
      refused("the server's response head is larger than " +
              std::to_string(options.max_handshake_size) + " bytes (max_handshake_size)");
    }
    handshake_outcome outcome = check_response(c->input().substr(0, head_end + 2), key, options);
    websocket_client_connection made;
    made.subprotocol = std::move(outcome.subprotocol);
    made.extensions = std::move(outcome.extensions);
    c->consume_input(head_end + 4);
    // Frames the server sent right after its 101 stay in the input, for the framer to read first.
    c->switch_protocol(std::make_shared<const websocket_client_protocol>(std::move(framing_options),
                                                                         outcome.deflate));
    made.connection = std::move(c);
    return made;
  } catch (...) {
    c->destroy();
    throw;
  }
}

}  // namespace weft::net

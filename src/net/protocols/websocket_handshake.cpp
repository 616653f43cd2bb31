// The server side of the WebSocket opening handshake (RFC 6455 section 4.2) over HTTP/1.1, and
// the websocket protocol object. The contract is in include/weft/net/websocket.hpp.
#include <nettle/base64.h>
#include <nettle/sha1.h>

#include <algorithm>
#include <array>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "net/protocols/header_text.hpp"
#include "net/protocols/websocket_framer.hpp"
#include "weft/http/message.hpp"

namespace weft::net {

namespace {

constexpr std::string_view accept_guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

using detail::header_text::for_each_token;
using detail::header_text::iequals;
using detail::header_text::is_ows;
using detail::header_text::is_token;
using detail::header_text::list_has;
using detail::header_text::trim;

// A key is 16 random bytes in base64: 24 characters ending in "==".
bool valid_client_key(std::string_view key) {
  if (key.size() != 24 || key.substr(22) != "==") {
    return false;
  }
  base64_decode_ctx context;
  base64_decode_init(&context);
  std::array<std::uint8_t, BASE64_DECODE_LENGTH(24)> decoded{};
  std::size_t decoded_size = decoded.size();
  return base64_decode_update(&context, &decoded_size, decoded.data(), key.size(), key.data()) ==
             1 &&
         base64_decode_final(&context) == 1 && decoded_size == 16;
}

// Sends a plain HTTP error reply through the link, then ends the handshake with protocol_error
// (close code 0: no WebSocket was opened, so there is no close frame to send). The answer to a
// HEAD has the fields a GET's would and no content (RFC 9110 9.3.2). Date, as RFC 9110 6.6.1
// asks of every 4xx from a server with a clock.
[[noreturn]] void refuse(framer_link& link, int status, std::string_view status_text,
                         const std::string& reason, std::string_view extra_headers = {},
                         bool head = false) {
  const std::string body = reason + "\n";
  std::string reply = "HTTP/1.1 " + std::to_string(status) + " ";
  reply.append(status_text);
  reply += "\r\nDate: ";
  reply += http::http_date();
  reply += "\r\nConnection: close\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ";
  reply += std::to_string(body.size());
  reply += "\r\n";
  reply.append(extra_headers);
  reply += "\r\n";
  if (!head) {
    reply += body;
  }
  link.send_raw(reply);
  throw protocol_error("websocket handshake refused with " + std::to_string(status) + ": " +
                       reason);
}

[[noreturn]] void bad_request(framer_link& link, const std::string& reason) {
  refuse(link, 400, "Bad Request", reason);
}

}  // namespace

namespace detail {

std::string websocket_accept_key(std::string_view client_key) {
  sha1_ctx context;
  sha1_init(&context);
  sha1_update(&context, client_key.size(),
              reinterpret_cast<const std::uint8_t*>(client_key.data()));
  sha1_update(&context, accept_guid.size(),
              reinterpret_cast<const std::uint8_t*>(accept_guid.data()));
  std::array<std::uint8_t, SHA1_DIGEST_SIZE> digest{};
  sha1_digest(&context, digest.size(), digest.data());
  std::string encoded(BASE64_ENCODE_RAW_LENGTH(SHA1_DIGEST_SIZE), '\0');
  base64_encode_raw(encoded.data(), digest.size(), digest.data());
  return encoded;
}

std::size_t websocket_framer::measure_handshake(std::string_view input, framer_link& link) {
  const std::size_t limit = options_->max_handshake_size;
  const std::size_t end = input.substr(0, limit).find("\r\n\r\n");
  if (end != std::string_view::npos && end + 4 <= limit) {
    return end + 4;
  }
  if (input.size() >= limit) {
    refuse(link, 431, "Request Header Fields Too Large",
           "the handshake request head is longer than " + std::to_string(limit) + " bytes");
  }
  return 0;
}

void websocket_framer::decode_handshake(std::string_view head, framer_link& link) {
  // The request line: GET origin-form HTTP/1.1.
  const std::size_t line_end = head.find("\r\n");
  const std::string_view request_line = head.substr(0, line_end);
  const std::size_t first_space = request_line.find(' ');
  const std::size_t last_space = request_line.rfind(' ');
  if (first_space == std::string_view::npos || first_space == last_space) {
    bad_request(link, "malformed request line (want: GET /path HTTP/1.1)");
  }
  const std::string_view method = request_line.substr(0, first_space);
  const std::string_view target =
      request_line.substr(first_space + 1, last_space - first_space - 1);
  const std::string_view version = request_line.substr(last_space + 1);
  if (version != "HTTP/1.1") {
    bad_request(link, "a WebSocket handshake needs HTTP/1.1, not '" + std::string(version) + "'");
  }
  if (method != "GET") {
    refuse(link, 400, "Bad Request",
           "a WebSocket handshake is a GET request, not " + std::string(method), {},
           method == "HEAD");
  }
  if (target.empty() || target.front() != '/' || target.find(' ') != std::string_view::npos) {
    bad_request(link, "the request target must be a path starting with '/'");
  }

  // The header fields this handshake depends on; list fields may come in several lines.
  int hosts = 0;
  int keys = 0;
  int versions = 0;
  std::string upgrade;
  std::string connection;
  std::string offered_protocols;
  std::string offered_extensions;
  std::string_view key;
  std::string_view version_value;
  std::string_view origin;
  bool has_origin = false;
  std::string_view rest = head.substr(line_end + 2);
  while (true) {
    const std::size_t end = rest.find("\r\n");
    if (end == std::string_view::npos) {
      bad_request(link, "the request head does not end with an empty line");
    }
    const std::string_view line = rest.substr(0, end);
    rest.remove_prefix(end + 2);
    if (line.empty()) {
      break;
    }
    if (is_ows(line.front())) {
      bad_request(link, "folded header lines are not allowed (RFC 9112 5.2)");
    }
    const std::size_t colon = line.find(':');
    const std::string_view name = line.substr(0, colon);
    if (colon == std::string_view::npos || !is_token(name)) {
      bad_request(link, "malformed header line (want: Name: value)");
    }
    const std::string_view value = trim(line.substr(colon + 1));
    if (iequals(name, "host")) {
      ++hosts;
    } else if (iequals(name, "upgrade")) {
      upgrade.append(value).push_back(',');
    } else if (iequals(name, "connection")) {
      connection.append(value).push_back(',');
    } else if (iequals(name, "sec-websocket-key")) {
      ++keys;
      key = value;
    } else if (iequals(name, "sec-websocket-version")) {
      ++versions;
      version_value = value;
    } else if (iequals(name, "sec-websocket-protocol")) {
      offered_protocols.append(value).push_back(',');
    } else if (iequals(name, "sec-websocket-extensions")) {
      offered_extensions.append(value).push_back(',');
    } else if (iequals(name, "origin")) {
      has_origin = true;
      origin = value;
    } else if (iequals(name, "content-length")) {
      if (value != "0") {
        bad_request(link, "a WebSocket handshake carries no body (Content-Length " +
                              std::string(value) + ")");
      }
    } else if (iequals(name, "transfer-encoding")) {
      bad_request(link, "a WebSocket handshake carries no body (Transfer-Encoding)");
    }
  }

  if (hosts != 1) {
    bad_request(link, hosts == 0 ? "the Host header is missing" : "more than one Host header");
  }
  if (!list_has(upgrade, "websocket")) {
    bad_request(link, "the Upgrade header does not name websocket");
  }
  if (!list_has(connection, "upgrade")) {
    bad_request(link, "the Connection header does not name upgrade");
  }
  if (versions != 1) {
    bad_request(link, versions == 0 ? "the Sec-WebSocket-Version header is missing"
                                    : "more than one Sec-WebSocket-Version header");
  }
  if (version_value != "13") {
    refuse(link, 426, "Upgrade Required",
           "Sec-WebSocket-Version " + std::string(version_value) + " is not supported (only 13)",
           "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n");
  }
  if (keys != 1 || !valid_client_key(key)) {
    bad_request(link, keys == 0  ? "the Sec-WebSocket-Key header is missing"
                      : keys > 1 ? "more than one Sec-WebSocket-Key header"
                                 : "Sec-WebSocket-Key is not 16 bytes in base64");
  }
  if (!options_->path.empty() && target.substr(0, target.find('?')) != options_->path) {
    refuse(link, 404, "Not Found", "no WebSocket is served at this path");
  }
  if (has_origin && !options_->allowed_origins.empty() &&
      std::find(options_->allowed_origins.begin(), options_->allowed_origins.end(), origin) ==
          options_->allowed_origins.end()) {
    refuse(link, 403, "Forbidden", "the origin is not allowed");
  }

  std::string reply =
      "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Accept: ";
  reply += websocket_accept_key(key);
  reply += "\r\n";
  for (const std::string& supported : options_->subprotocols) {
    bool offered = false;
    for_each_token(offered_protocols,
                   [&](std::string_view token) { offered = offered || token == supported; });
    if (offered) {
      reply += "Sec-WebSocket-Protocol: " + supported + "\r\n";
      break;
    }
  }
  std::optional<deflate_answer> deflate;
  if (options_->deflate.enabled && !offered_extensions.empty()) {
    deflate = answer_deflate_offers(offered_extensions, options_->deflate);
    if (deflate) {
      reply += "Sec-WebSocket-Extensions: " + deflate->header_value + "\r\n";
    }
  }
  reply += "\r\n";
  link.send_raw(reply);
  if (deflate) {
    use_deflate(deflate->agreed);
  }
  phase_ = phase::open;
}

}  // namespace detail

websocket::websocket(websocket_options options) {
  if (options.max_frame_size == 0) {
    throw std::invalid_argument("websocket_options::max_frame_size must be at least 1 byte");
  }
  if (options.max_handshake_size < 64) {
    throw std::invalid_argument(
        "websocket_options::max_handshake_size must be at least 64 bytes (a request head is "
        "longer), not " +
        std::to_string(options.max_handshake_size));
  }
  if (!options.path.empty() && options.path.front() != '/') {
    throw std::invalid_argument("websocket_options::path must start with '/', not '" +
                                options.path + "'");
  }
  for (const std::string& subprotocol : options.subprotocols) {
    if (!is_token(subprotocol)) {
      throw std::invalid_argument("websocket_options::subprotocols: '" + subprotocol +
                                  "' is not a valid subprotocol name (an HTTP token)");
    }
  }
  for (const std::string& origin : options.allowed_origins) {
    if (origin.empty()) {
      throw std::invalid_argument("websocket_options::allowed_origins holds an empty origin");
    }
  }
  detail::check_deflate_options(options.deflate, "websocket_options");
  detail::check_ping_options(options.ping_interval, options.ping_timeout, "websocket_options");
  options_ = std::make_shared<const websocket_options>(std::move(options));
}

std::unique_ptr<framer> websocket::make_framer() const {
  return std::make_unique<detail::websocket_framer>(options_);
}

}  // namespace weft::net

// weft-test: driver-independent
// The WebSocket opening handshake (RFC 6455 4.2), driven through the framer with a fake link:
// the 101 reply and its accept key, and every refusal with its HTTP status.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "net/websocket_wire.hpp"
#include "weft/net/websocket.hpp"

namespace {

using weft::net::protocol_error;
using weft::net::websocket;
using weft::net::websocket_options;
using weft_ws_test::framer_driver;
using weft_ws_test::handshake_request;

// Feeds a request that must be refused; returns the status line sent back and checks that the
// error carries no close code (there is no WebSocket to close yet) and names the status.
std::string refused_status(const websocket& protocol, const std::string& request) {
  framer_driver driver(protocol);
  try {
    driver.feed(request);
  } catch (const protocol_error& error) {
    EXPECT_EQ(error.close_code(), 0);
    EXPECT_NE(std::string(error.what()).find("websocket handshake refused with"), std::string::npos)
        << error.what();
    std::string more;
    driver.framer->encode_close(0, {}, more);
    EXPECT_TRUE(more.empty()) << "a close frame after a refused handshake";
    EXPECT_TRUE(driver.framer->handshaking());
    EXPECT_NE(driver.link.sent.find("Connection: close\r\n"), std::string::npos);
    // RFC 9110 6.6.1: a 4xx from a server with a clock has a Date ("Sun, 06 Nov 1994 ...").
    const std::size_t date = driver.link.sent.find("\r\nDate: ");
    EXPECT_NE(date, std::string::npos) << driver.link.sent;
    if (date != std::string::npos) {
      EXPECT_EQ(driver.link.sent.substr(date + 8 + 25, 6), " GMT\r\n") << driver.link.sent;
    }
    return driver.link.sent.substr(0, driver.link.sent.find("\r\n"));
  }
  ADD_FAILURE() << "the handshake was accepted: " << driver.link.sent;
  return {};
}

TEST(WebsocketHandshake, GoodRequestIsAnswered101WithTheRfcAcceptKey) {
  websocket protocol;
  framer_driver driver(protocol);
  EXPECT_TRUE(driver.framer->handshaking());
  const std::string request = handshake_request();
  // Nothing is measured until the head is complete.
  EXPECT_TRUE(driver.feed(request.substr(0, request.size() - 1)).empty());
  EXPECT_EQ(driver.units, 0);
  EXPECT_TRUE(driver.link.sent.empty());
  EXPECT_TRUE(driver.feed(request.substr(request.size() - 1)).empty());
  EXPECT_EQ(driver.units, 1);
  EXPECT_FALSE(driver.framer->handshaking());
  EXPECT_EQ(driver.link.sent,
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n");
  EXPECT_EQ(driver.link.finishes, 0);
}

TEST(WebsocketHandshake, HeaderNamesAndListTokensAreCaseInsensitive) {
  websocket protocol;
  framer_driver driver(protocol);
  driver.feed(
      "GET /x?y=1 HTTP/1.1\r\nhost: a\r\nUPGRADE: WebSocket\r\nconnection: keep-alive\r\n"
      "Connection:  Upgrade \r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
      "SEC-WEBSOCKET-VERSION: 13\r\nSec-WebSocket-Extensions: permessage-deflate\r\n\r\n");
  EXPECT_FALSE(driver.framer->handshaking());
  EXPECT_EQ(driver.link.sent.rfind("HTTP/1.1 101 ", 0), 0u);
  // No extension is negotiated: the deflate offer gets no answer.
  EXPECT_EQ(driver.link.sent.find("Extensions"), std::string::npos);
}

TEST(WebsocketHandshake, FramesSentRightAfterTheRequestAreDecoded) {
  websocket protocol;
  framer_driver driver(protocol);
  const auto messages =
      driver.feed(handshake_request() + weft_ws_test::client_frame(0x1, "right behind"));
  ASSERT_EQ(messages.size(), 1u);
  EXPECT_EQ(messages[0].data, "right behind");
}

TEST(WebsocketHandshake, BadKeyIsRefusedWith400) {
  websocket protocol;
  std::string request = handshake_request();
  request.replace(request.find(weft_ws_test::rfc_key), weft_ws_test::rfc_key.size(),
                  "dGhlIHNhbXBsZSBub25j");  // 15 bytes of base64-decoded key
  EXPECT_EQ(refused_status(protocol, request), "HTTP/1.1 400 Bad Request");
  request = handshake_request();
  request.replace(request.find(weft_ws_test::rfc_key), weft_ws_test::rfc_key.size(),
                  "dGhlIHNhbXBsZSBub25j!!==");  // not base64
  EXPECT_EQ(refused_status(protocol, request), "HTTP/1.1 400 Bad Request");
  EXPECT_EQ(refused_status(protocol,
                           handshake_request("Sec-WebSocket-Key: AAAAAAAAAAAAAAAAAAAAAA==\r\n")),
            "HTTP/1.1 400 Bad Request");  // two keys
}

TEST(WebsocketHandshake, WrongVersionIsRefusedWith426NamingVersion13) {
  websocket protocol;
  std::string request = handshake_request();
  request.replace(request.find("Version: 13"), 11, "Version: 8");
  framer_driver driver(protocol);
  try {
    driver.feed(request);
    FAIL() << "version 8 was accepted";
  } catch (const protocol_error& error) {
    EXPECT_NE(std::string(error.what()).find("426"), std::string::npos) << error.what();
  }
  EXPECT_EQ(driver.link.sent.rfind("HTTP/1.1 426 Upgrade Required\r\n", 0), 0u);
  EXPECT_NE(driver.link.sent.find("\r\nSec-WebSocket-Version: 13\r\n"), std::string::npos);
}

TEST(WebsocketHandshake, MissingUpgradeOrConnectionIsRefusedWith400) {
  websocket protocol;
  std::string request = handshake_request();
  request.erase(request.find("Upgrade: websocket\r\n"), 20);
  EXPECT_EQ(refused_status(protocol, request), "HTTP/1.1 400 Bad Request");
  request = handshake_request();
  request.replace(request.find("Connection: Upgrade"), 19, "Connection: keep-alive");
  EXPECT_EQ(refused_status(protocol, request), "HTTP/1.1 400 Bad Request");
  request = handshake_request();
  request.replace(request.find("Upgrade: websocket"), 18, "Upgrade: h2c");
  EXPECT_EQ(refused_status(protocol, request), "HTTP/1.1 400 Bad Request");
}

TEST(WebsocketHandshake, NonGetOldHttpMissingHostAndBodiesAreRefusedWith400) {
  websocket protocol;
  std::string request = handshake_request();
  request.replace(0, 3, "POST");
  EXPECT_EQ(refused_status(protocol, request), "HTTP/1.1 400 Bad Request");
  request = handshake_request();
  request.replace(request.find("HTTP/1.1"), 8, "HTTP/1.0");
  EXPECT_EQ(refused_status(protocol, request), "HTTP/1.1 400 Bad Request");
  request = handshake_request();
  request.erase(request.find("Host: server.example.com\r\n"), 26);
  EXPECT_EQ(refused_status(protocol, request), "HTTP/1.1 400 Bad Request");
  EXPECT_EQ(refused_status(protocol, handshake_request("Content-Length: 5\r\n")),
            "HTTP/1.1 400 Bad Request");
  EXPECT_EQ(refused_status(protocol, handshake_request(" folded: line\r\n")),
            "HTTP/1.1 400 Bad Request");
  EXPECT_EQ(refused_status(protocol, handshake_request("no colon here\r\n")),
            "HTTP/1.1 400 Bad Request");
  EXPECT_EQ(refused_status(protocol, "garbage\r\n\r\n"), "HTTP/1.1 400 Bad Request");
}

TEST(WebsocketHandshake, HeadLongerThanTheLimitIsRefusedWith431BeforeItEnds) {
  websocket_options options;
  options.max_handshake_size = 256;
  websocket protocol(options);
  // No empty line yet: refused as soon as the limit is reached, not when the head ends.
  const std::string request =
      handshake_request().substr(0, 120) + "X-Filler: " + std::string(200, 'a') + "\r\n";
  EXPECT_EQ(refused_status(protocol, request), "HTTP/1.1 431 Request Header Fields Too Large");
}

TEST(WebsocketHandshake, PathAndOriginAreCheckedWhenConfigured) {
  websocket_options options;
  options.path = "/chat";
  options.allowed_origins = {"https://good.example"};
  websocket protocol(options);
  EXPECT_EQ(refused_status(protocol, handshake_request({}, "/other")), "HTTP/1.1 404 Not Found");
  EXPECT_EQ(refused_status(protocol, handshake_request("Origin: https://evil.example\r\n")),
            "HTTP/1.1 403 Forbidden");
  for (const std::string extra : {"Origin: https://good.example\r\n", ""}) {
    framer_driver driver(protocol);
    driver.feed(handshake_request(extra, "/chat?room=1"));
    EXPECT_FALSE(driver.framer->handshaking()) << extra;
  }
}

TEST(WebsocketHandshake, TheServersPreferredSubprotocolAmongTheOfferedIsSelected) {
  websocket_options options;
  options.subprotocols = {"v2.chat", "v1.chat"};
  websocket protocol(options);
  framer_driver driver(protocol);
  driver.feed(
      handshake_request("Sec-WebSocket-Protocol: v1.chat, other\r\n"
                        "Sec-WebSocket-Protocol: v2.chat\r\n"));
  EXPECT_NE(driver.link.sent.find("\r\nSec-WebSocket-Protocol: v2.chat\r\n"), std::string::npos);
  framer_driver none(protocol);
  none.feed(handshake_request("Sec-WebSocket-Protocol: other\r\n"));
  EXPECT_FALSE(none.framer->handshaking());
  EXPECT_EQ(none.link.sent.find("Sec-WebSocket-Protocol"), std::string::npos);
}

TEST(WebsocketHandshake, OptionsThatMakeNoSenseAreRefusedNamingTheField) {
  const auto message_of = [](websocket_options options) -> std::string {
    try {
      websocket protocol(std::move(options));
    } catch (const std::invalid_argument& error) {
      return error.what();
    }
    return "accepted";
  };
  websocket_options frame;
  frame.max_frame_size = 0;
  EXPECT_NE(message_of(frame).find("max_frame_size"), std::string::npos);
  websocket_options head;
  head.max_handshake_size = 10;
  EXPECT_NE(message_of(head).find("max_handshake_size"), std::string::npos);
  websocket_options path;
  path.path = "chat";
  EXPECT_NE(message_of(path).find("path"), std::string::npos);
  websocket_options subprotocol;
  subprotocol.subprotocols = {"has space"};
  EXPECT_NE(message_of(subprotocol).find("'has space'"), std::string::npos);
  websocket_options origin;
  origin.allowed_origins = {""};
  EXPECT_NE(message_of(origin).find("allowed_origins"), std::string::npos);
  websocket_options pings;
  pings.ping_timeout = std::chrono::milliseconds(-1);
  EXPECT_NE(message_of(pings).find("ping_timeout may not be negative"), std::string::npos);
  EXPECT_STREQ(websocket().name(), "websocket");
}

}  // namespace

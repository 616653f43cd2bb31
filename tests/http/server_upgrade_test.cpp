// exchange::upgrade: an HTTP request handed over to WebSocket on the same connection, after
// the answers to the requests pipelined before it; and the misuses it refuses.
#include <memory>
#include <stdexcept>
#include <string>

#include "http/server_support.hpp"
#include "net/websocket_wire.hpp"
#include "weft/net/websocket.hpp"

namespace {

using namespace http_test;
using weft_ws_test::client_frame;
using weft_ws_test::close_payload;
using weft_ws_test::handshake_request;
using weft_ws_test::parse_server_frames;

weft::http::router echo_routes() {
  weft::http::router routes;
  routes.get("/before", [](exchange& ex) { ex.respond(status::ok, "before"); });
  routes.get("/chat", [ws = std::make_shared<weft::net::websocket>()](exchange& ex) {
    weft::net::connection& c = ex.upgrade(ws);
    weft::net::message m;
    while (c.receive(m)) {
      c.send("echo " + m.data, m.kind);
    }
  });
  return routes;
}

TEST(HttpServerUpgrade, WebSocketTakesOverAfterTheEarlierPipelinedAnswers) {
  running_http server(local_http(), echo_routes());
  client c(server.port());
  // One write: a plain request, the upgrade, and a frame the client sends before the 101.
  c.send("GET /before HTTP/1.1\r\nHost: x\r\n\r\n" + handshake_request() + client_frame(0x1, "hi"));
  auto first = c.response();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->body, "before");
  c.send(client_frame(0x8, close_payload(1000, "bye")));
  const std::string rest = c.rest();
  ASSERT_EQ(rest.rfind("HTTP/1.1 101 Switching Protocols\r\n", 0), 0u) << rest;
  EXPECT_NE(rest.find("Sec-WebSocket-Accept: " + std::string(weft_ws_test::rfc_accept)),
            std::string::npos)
      << rest;
  const auto frames = parse_server_frames(rest.substr(rest.find("\r\n\r\n") + 4));
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].opcode, 0x1);
  EXPECT_EQ(frames[0].payload, "echo hi");
  EXPECT_EQ(frames[1].opcode, 0x8);
  EXPECT_EQ(frames[1].payload, close_payload(1000, "bye"));
  auto stats = server.server().stats();
  EXPECT_EQ(stats.total.requests, 2u);
}

TEST(HttpServerUpgrade, ABadHandshakeIsAnsweredByTheWebSocketFramerAndTheConnectionEnds) {
  running_http server(local_http(), echo_routes());
  client c(server.port());
  // Version 8: the WebSocket framer answers 426 and the connection ends.
  std::string request = handshake_request();
  request.replace(request.find("Version: 13"), 11, "Version: 8");
  c.send(request);
  const std::string rest = c.rest();
  EXPECT_EQ(rest.rfind("HTTP/1.1 426 ", 0), 0u) << rest;
}

TEST(HttpServerUpgrade, UpgradingAfterARespondIsALogicErrorAndThe500IsNotSent) {
  std::string failure;
  weft::http::router routes;
  routes.get("/chat", [&failure, ws = std::make_shared<weft::net::websocket>()](exchange& ex) {
    ex.respond(status::ok, "answered");
    try {
      ex.upgrade(ws);
    } catch (const std::logic_error& e) {
      failure = e.what();
    }
  });
  running_http server(local_http(), std::move(routes));
  client c(server.port());
  c.send(handshake_request());
  auto r = c.response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "answered");
  EXPECT_NE(failure.find("already responded"), std::string::npos) << failure;
}

// A body on an upgrade request is the client's mistake: upgrade() answers 400 itself (no 500)
// and throws body_error, as read_body() does for a body it cannot read.
TEST(HttpServerUpgrade, ARequestWithABodyIsAnswered400AndNotUpgraded) {
  std::string failure;
  weft::http::router routes;
  routes.post("/chat", [&failure, ws = std::make_shared<weft::net::websocket>()](exchange& ex) {
    try {
      ex.upgrade(ws);
    } catch (const weft::http::body_error& e) {
      EXPECT_EQ(e.status(), status::bad_request);
      failure = e.what();
      throw;
    }
  });
  running_http server(local_http(), std::move(routes));
  client c(server.port());
  c.send("POST /chat HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc");
  auto r = c.response(weft::http::method::post);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, status::bad_request);
  EXPECT_NE(r->body.find("an upgrade request has no body"), std::string::npos) << r->body;
  EXPECT_NE(failure.find("POST /chat"), std::string::npos) << failure;
  EXPECT_EQ(server.server().stats().total.responses_of_class(5), 0u);
}

// An absolute-form target (RFC 9112 3.2.2: a server accepts it) is upgraded like its path: the
// WebSocket framer gets the request in origin form.
TEST(HttpServerUpgrade, AnAbsoluteFormHandshakeIsUpgraded) {
  running_http server(local_http(), echo_routes());
  client c(server.port());
  std::string request = handshake_request();
  request.replace(0, request.find(' ', 4), "GET http://x/chat?room=1");
  c.send(request + client_frame(0x1, "hi") + client_frame(0x8, close_payload(1000)));
  const std::string rest = c.rest();
  ASSERT_EQ(rest.rfind("HTTP/1.1 101 Switching Protocols\r\n", 0), 0u) << rest;
  const auto frames = parse_server_frames(rest.substr(rest.find("\r\n\r\n") + 4));
  ASSERT_GE(frames.size(), 1u);
  EXPECT_EQ(frames[0].payload, "echo hi");
}

// A HEAD to a WebSocket route: the framer's 400 has the fields a GET's would, and no body.
TEST(HttpServerUpgrade, AHeadHandshakeGetsA400WithoutABody) {
  running_http server(local_http(), echo_routes());
  client c(server.port());
  std::string request = handshake_request();
  request.replace(0, 3, "HEAD");
  c.send(request);
  const std::string rest = c.rest();
  ASSERT_EQ(rest.rfind("HTTP/1.1 400 ", 0), 0u) << rest;
  EXPECT_NE(rest.find("Content-Length: "), std::string::npos) << rest;
  EXPECT_EQ(rest.size(), rest.find("\r\n\r\n") + 4)
      << "a body followed the HEAD's answer: " << rest;
}

}  // namespace

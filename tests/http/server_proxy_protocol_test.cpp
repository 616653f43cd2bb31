// The HTTP server behind a proxy that sends the PROXY protocol (server_options::proxy_protocol):
// curl's --haproxy-protocol (a v1 header from a client no one here wrote) is served and the
// handler sees the address it names; a raw v1 header naming another client reaches the handler
// as that client; a request without a header is closed unanswered.
#include <string>

#include "http/server_support.hpp"

namespace {

using namespace http_test;

weft::http::router addresses() {
  weft::http::router r;
  r.get("/ip", [](exchange& ex) {
    ex.respond(status::ok,
               ex.connection().peer_address() + " via " + ex.connection().proxy_address());
  });
  return r;
}

weft::http::server_options proxied() {
  auto options = local_http();
  options.proxy_protocol = true;
  return options;
}

TEST(HttpServerProxyProtocol, CurlsHaproxyProtocolHeaderIsReadBeforeTheRequest) {
  running_http server(proxied(), addresses());
  // curl names its own socket's address in the header: the same address on both sides here.
  const std::string out = run_command("curl -sS --haproxy-protocol " + url(server.port(), "/ip") +
                                      " " + url(server.port(), "/ip"));
  const std::size_t via = out.find(" via ");
  ASSERT_NE(via, std::string::npos) << out;
  const std::string peer = out.substr(0, via);
  EXPECT_EQ(peer.rfind("127.0.0.1:", 0), 0u) << out;
  // Two requests over the one connection (keep-alive): the header came once, before the first.
  EXPECT_EQ(out, peer + " via " + peer + peer + " via " + peer) << out;
}

TEST(HttpServerProxyProtocol, TheHandlerSeesTheClientTheHeaderNames) {
  running_http server(proxied(), addresses());
  const int fd = net_test::connect_to(server.port());
  net_test::send_all(fd,
                     "PROXY TCP6 2001:db8::5 2001:db8::1 61000 80\r\n"
                     "GET /ip HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  const std::string reply = net_test::read_to_end(fd);
  ::close(fd);
  EXPECT_EQ(reply.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << reply;
  EXPECT_NE(reply.find("\r\n\r\n[2001:db8::5]:61000 via 127.0.0.1:"), std::string::npos) << reply;
}

TEST(HttpServerProxyProtocol, ARequestWithoutAHeaderIsClosedUnanswered) {
  running_http server(proxied(), addresses());
  const std::string out = run_command("curl -sS " + url(server.port(), "/ip"));
  EXPECT_NE(out.find("Empty reply from server"), std::string::npos) << out;
  EXPECT_TRUE(net_test::eventually([&] {
    return server.server().stats().total.net.closed_by(weft::net::close_reason::protocol_error) ==
           1;
  }));
}

}  // namespace

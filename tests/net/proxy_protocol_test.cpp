// The PROXY protocol (tcp_server_options::proxy_protocol): a server reading v1 and v2 headers
// from a raw socket, whole and byte by byte, refusing a connection without one and cutting a
// silent one at the timeout; and HAProxy itself (a proxy no one here wrote) in front of a plain
// and of a TLS server, sending v1 and v2; proxy_protocol_from's trusted proxies. The parser alone:
// proxy_header_test.cpp.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "net/listening_child.hpp"
#include "net/net_support.hpp"
#include "net/proxy_support.hpp"
#include "net/tls_support.hpp"

namespace {

using namespace net_test;
using proxy_test::v2;
using proxy_test::v2_tcp4_body;
using weft::net::close_reason;
using weft::net::connection;

// A line server that answers each line with the connection's addresses as the handler sees
// them: "<peer> via <proxy>: <line>".
weft::net::tcp_server_options proxied_options() {
  auto options = local_options();
  options.protocol = weft::net::text();
  options.proxy_protocol = true;
  return options;
}

void serve_addresses(weft::net::tcp_server& s, std::atomic<int>& handled) {
  s.serve([&](connection& c) {
    ++handled;
    while (auto m = c.receive()) {
      c.send(c.peer_address() + " via " + c.proxy_address() + ": " + m->data);
    }
  });
}

// The socket's own address as weft writes addresses ("127.0.0.1:5000"; IPv4 only here).
std::string local_of(int fd) {
  sockaddr_in address{};
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &address.sin_addr, text, sizeof text);
  return std::string(text) + ":" + std::to_string(ntohs(address.sin_port));
}

TEST(NetProxyProtocol, TheHandlerSeesTheClientTheHeaderNames) {
  std::atomic<int> handled{0};
  running_server server(proxied_options(),
                        [&](weft::net::tcp_server& s) { serve_addresses(s, handled); });
  // v1 and the first line in one write.
  int fd = connect_to(server.port());
  const std::string proxy = local_of(fd);
  send_all(fd, "PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\nhello\n");
  const std::string first = "192.0.2.1:56324 via " + proxy + ": hello\n";
  EXPECT_EQ(read_bytes(fd, first.size()), first);
  ::close(fd);
  // v2 byte by byte, then a line.
  fd = connect_to(server.port());
  const std::string header = v2(1, 0x11, v2_tcp4_body("203.0.113.9", "10.0.0.1", 5000, 80));
  for (char byte : header) {
    send_all(fd, std::string(1, byte));
  }
  send_all(fd, "again\n");
  const std::string expected = "203.0.113.9:5000 via " + local_of(fd) + ": again\n";
  EXPECT_EQ(read_bytes(fd, expected.size()), expected);
  ::close(fd);
  // LOCAL: the proxy's own connection keeps its address.
  fd = connect_to(server.port());
  send_all(fd, v2(0, 0x00, "") + "local\n");
  const std::string self = local_of(fd) + " via " + local_of(fd) + ": local\n";
  EXPECT_EQ(read_bytes(fd, self.size()), self);
  ::close(fd);
  EXPECT_EQ(handled.load(), 3);
}

TEST(NetProxyProtocol, AConnectionWithoutAHeaderIsClosedUnserved) {
  std::atomic<int> handled{0};
  log_lines log;
  auto options = proxied_options();
  options.log = log.sink();
  running_server server(options, [&](weft::net::tcp_server& s) { serve_addresses(s, handled); });
  const int fd = connect_to(server.port());
  send_all(fd, "hello\nPROXY TCP4 192.0.2.1 198.51.100.2 1 2\r\n");
  EXPECT_EQ(read_to_end(fd), "");  // nothing of it reached a handler
  ::close(fd);
  EXPECT_TRUE(eventually(
      [&] { return server.server().stats().total.closed_by(close_reason::protocol_error) == 1; }));
  EXPECT_TRUE(
      log.contains("PROXY protocol: the connection does not start with a PROXY "
                   "protocol header"))
      << log.all();
  EXPECT_EQ(handled.load(), 0);
}

TEST(NetProxyProtocol, OnlyTrustedProxiesSendAHeaderOthersAreDirectClients) {
  // 127.0.0.1 is not among the proxies: its connection is served as a direct client, and the
  // PROXY line it sends is a line like any other, naming nobody.
  std::atomic<int> handled{0};
  auto untrusting = proxied_options();
  untrusting.proxy_protocol_from = {"10.0.0.0/8", "2001:db8::/32"};
  {
    running_server server(untrusting,
                          [&](weft::net::tcp_server& s) { serve_addresses(s, handled); });
    const int fd = connect_to(server.port());
    const std::string self = local_of(fd);
    send_all(fd, "PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\nhello\n");
    const std::string expected =
        self + " via : PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\n" + self + " via : hello\n";
    EXPECT_EQ(read_bytes(fd, expected.size()), expected);
    ::close(fd);
  }
  // Among them (a block, and an address alone): the header is required and names the client.
  for (const char* trusted : {"127.0.0.0/8", "127.0.0.1"}) {
    auto trusting = proxied_options();
    trusting.proxy_protocol_from = {"10.0.0.0/8", trusted};
    running_server server(trusting, [&](weft::net::tcp_server& s) { serve_addresses(s, handled); });
    int fd = connect_to(server.port());
    send_all(fd, "PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\nhello\n");
    const std::string first = "192.0.2.1:56324 via " + local_of(fd) + ": hello\n";
    EXPECT_EQ(read_bytes(fd, first.size()), first) << trusted;
    ::close(fd);
    fd = connect_to(server.port());
    send_all(fd, "hello\n");
    EXPECT_EQ(read_to_end(fd), "") << trusted;  // no header: closed unserved
    ::close(fd);
  }
  EXPECT_EQ(handled.load(), 3);
}

TEST(NetProxyProtocol, AnUntrustworthyProxyListIsRefusedByName) {
  auto options = proxied_options();
  options.proxy_protocol_from = {"10.0.0.0/8", "10.0.0.0/33"};
  try {
    weft::net::tcp_server server(options);
    ADD_FAILURE() << "a /33 block was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("proxy_protocol_from: '10.0.0.0/33' is not an address"),
              std::string::npos)
        << e.what();
  }
  options.proxy_protocol_from = {"10.0.0.0/8"};
  options.proxy_protocol = false;
  try {
    weft::net::tcp_server server(options);
    ADD_FAILURE() << "proxy_protocol_from was taken without proxy_protocol";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("proxy_protocol is off"), std::string::npos) << e.what();
  }
}

TEST(NetProxyProtocol, ASilentProxyIsCutAtTheTimeoutWhileOthersAreServed) {
  std::atomic<int> handled{0};
  log_lines log;
  auto options = proxied_options();
  options.log = log.sink();
  options.proxy_protocol_timeout = std::chrono::milliseconds(300);
  running_server server(options, [&](weft::net::tcp_server& s) { serve_addresses(s, handled); });
  const auto started = std::chrono::steady_clock::now();
  const int silent = connect_to(server.port());
  send_all(silent, "PROXY TCP4 192.0.");  // and no more
  const int served = connect_to(server.port());
  send_all(served, "PROXY UNKNOWN\r\nok\n");
  const std::string expected = local_of(served) + " via " + local_of(served) + ": ok\n";
  EXPECT_EQ(read_bytes(served, expected.size()), expected);
  EXPECT_EQ(read_to_end(silent), "");
  EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(250));
  ::close(silent);
  ::close(served);
  EXPECT_TRUE(eventually([&] {
    return server.server().stats().total.closed_by(close_reason::handshake_timeout) == 1;
  }));
  EXPECT_TRUE(log.contains("no complete PROXY protocol header within 300 ms")) << log.all();
}

// HAProxy (Debian's haproxy) in TCP mode on a free loopback port, its one backend the weft
// server at `port` with `server_options` ("send-proxy", "send-proxy-v2"); stopped on
// destruction.
class haproxy {
 public:
  haproxy(std::uint16_t port, const std::string& server_options)
      : port_(free_loopback_port()),
        config_(write_config(port_, port, server_options)),
        child_({"haproxy", "-db", "-q", "-f", config_}, "/usr/sbin/haproxy", port_) {}
  ~haproxy() { ::unlink(config_.c_str()); }  // read at its start
  std::uint16_t port() const noexcept { return port_; }

 private:
  static std::string write_config(std::uint16_t listen, std::uint16_t backend,
                                  const std::string& server_options) {
    std::string path = tls_test::certs().dir + "/haproxy-" + std::to_string(listen) + ".cfg";
    std::ofstream(path) << "global\n  maxconn 100\n"
                        << "defaults\n  mode tcp\n  timeout connect 5s\n"
                        << "  timeout client 30s\n  timeout server 30s\n"
                        << "frontend in\n  bind 127.0.0.1:" << listen << "\n"
                        << "  default_backend weft\n"
                        << "backend weft\n  server weft 127.0.0.1:" << backend << " "
                        << server_options << "\n";
    return path;
  }
  std::uint16_t port_;
  std::string config_;
  listening_child child_;
};

TEST(NetProxyProtocol, HaproxySendProxyNamesTheClientsOwnAddress) {
  for (const std::string version : {"send-proxy", "send-proxy-v2"}) {
    std::atomic<int> handled{0};
    running_server server(proxied_options(),
                          [&](weft::net::tcp_server& s) { serve_addresses(s, handled); });
    haproxy proxy(server.port(), version);
    const int fd = connect_to(proxy.port());
    const std::string client = local_of(fd);
    send_all(fd, "through haproxy\n");
    std::string reply;
    while (reply.empty() || reply.back() != '\n') {
      const std::string more = read_bytes(fd, 1);
      ASSERT_FALSE(more.empty()) << version << ": " << reply;
      reply += more;
    }
    ::close(fd);
    // "<client> via 127.0.0.1:<haproxy's own port>: through haproxy"
    EXPECT_EQ(reply.rfind(client + " via 127.0.0.1:", 0), 0u) << version << ": " << reply;
    EXPECT_EQ(reply.find(client + " via " + client), std::string::npos) << reply;
    EXPECT_NE(reply.find(": through haproxy\n"), std::string::npos) << reply;
    EXPECT_EQ(handled.load(), 1);
  }
}

TEST(NetProxyProtocol, HaproxyV2InFrontOfATlsServerPassesTheHandshakeThrough) {
  auto options = proxied_options();
  options.protocol = weft::net::frame();
  options.tls = tls_test::server_context();
  std::mutex mutex;
  std::string seen_peer;
  running_server server(options, [&](weft::net::tcp_server& s) {
    s.serve([&](connection& c) {
      {
        std::lock_guard lock(mutex);
        seen_peer = c.peer_address();
      }
      while (auto m = c.receive()) {
        c.send(m->data + " over " + c.tls_version());
      }
    });
  });
  haproxy proxy(server.port(), "send-proxy-v2");
  std::string client;
  weft::run([&] {
    weft::net::connection_options tls;
    tls.protocol = weft::net::frame();
    tls.tls = tls_test::client_context();
    auto c = weft::net::connect("127.0.0.1", proxy.port(), tls, weft::timeout(10s));
    client = c->local_address();
    c->send("sealed");
    auto m = c->receive(weft::timeout(10s));
    ASSERT_TRUE(m.has_value());
    EXPECT_EQ(m->data, "sealed over TLSv1.3");
    c->close();
    c->wait_closed(weft::timeout(5s));
  });
  std::lock_guard lock(mutex);
  EXPECT_EQ(seen_peer, client);
}

}  // namespace

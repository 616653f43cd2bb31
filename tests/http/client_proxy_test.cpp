// weft::http::client through forward proxies (client_options::proxy): http URLs in absolute
// form with the proxy's credentials, https URLs through a CONNECT tunnel, no_proxy, the
// environment's settings, and misuse refused by name. The proxy is a scripted one where the
// exact bytes matter, and tinyproxy (Debian's, started by the test) for a real one.
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "http/client_support.hpp"
#include "http/server_support.hpp"
#include "net/listening_child.hpp"
#include "net/tls_support.hpp"

namespace {

using namespace std::chrono_literals;
using http_client_test::ok;
using http_client_test::received;
using http_client_test::script_server;
using weft::http::forward_proxy_options;
using weft_test::run_clean;

// Proxy settings, every field given.
forward_proxy_options proxies(std::string http, std::string https, std::string no_proxy = {}) {
  forward_proxy_options options;
  options.http = std::move(http);
  options.https = std::move(https);
  options.no_proxy = std::move(no_proxy);
  return options;
}

// "user:pass" in base64, as the proxy URLs below carry it.
constexpr const char* user_pass = "Basic dXNlcjpwYXNz";

// tinyproxy (Debian's) on a free loopback port, in the foreground, asking for user:pass;
// stopped on destruction.
class tinyproxy {
 public:
  tinyproxy()
      : port_(net_test::free_loopback_port()),
        config_(write_config(port_)),
        child_({"tinyproxy", "-d", "-c", config_}, "/usr/bin/tinyproxy", port_) {}
  ~tinyproxy() { ::unlink(config_.c_str()); }  // read at its start
  std::string url(std::string_view credentials = {}) const {
    return "http://" + std::string(credentials) + "127.0.0.1:" + std::to_string(port_);
  }

 private:
  static std::string write_config(std::uint16_t port) {
    std::string path = tls_test::certs().dir + "/tinyproxy-" + std::to_string(port) + ".conf";
    std::ofstream(path) << "Port " << port << "\nListen 127.0.0.1\nTimeout 30\n"
                        << "MaxClients 50\nAllow 127.0.0.1\nBasicAuth user pass\n"
                        << "LogLevel Critical\n";
    return path;
  }
  std::uint16_t port_;
  std::string config_;
  net_test::listening_child child_;
};

// The origin needs no name that resolves: only the proxy is connected to.
TEST(HttpClientProxy, PlainRequestsGoToTheProxyInAbsoluteFormWithItsCredentials) {
  run_clean([] {
    script_server proxy([](weft::tcp::stream& s, const received& r) {
      s.write_all(ok(r.target + " " + r.field("Host") + " " + r.field("Proxy-Authorization")));
    });
    script_server direct([](weft::tcp::stream& s, const received& r) {
      s.write_all(ok(r.target + " direct " + r.field("Proxy-Authorization")));
    });
    weft::http::client_options options;
    options.proxy.http = "http://user:pass@127.0.0.1:" + std::to_string(proxy.port());
    options.proxy.no_proxy = "127.0.0.1:" + std::to_string(direct.port());
    weft::http::client web(options);
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(web.get("http://origin.example:81/a?b=1").body,
                std::string("http://origin.example:81/a?b=1 origin.example:81 ") + user_pass);
    }
    EXPECT_EQ(web.get("http://Other.Example/").body,
              std::string("http://other.example/ other.example ") + user_pass);
    // no_proxy: direct, in origin form, without the proxy's credentials.
    EXPECT_EQ(web.get(direct.url("/d")).body, "/d direct ");
    // Both origins through the proxy share its pool, as Go's and curl's do: one connection to
    // the proxy, kept alive, carries the three requests.
    EXPECT_EQ(proxy.connections(), 1);
    ASSERT_EQ(proxy.requests().size(), 3u);
    EXPECT_EQ(proxy.requests()[2].connection, 0);
    EXPECT_EQ(proxy.requests()[2].on_connection, 2);
    EXPECT_EQ(direct.connections(), 1);
    EXPECT_EQ(web.stats().connections_opened, 2u);
    EXPECT_EQ(web.stats().connections_reused, 2u);
    EXPECT_EQ(web.stats().origins, 2u);
    web.close();
    proxy.close();
    direct.close();
  });
}

// A redirect from a proxied URL to a direct one drops the proxy's credentials and the
// absolute form; the caller's own Proxy-Authorization does not survive another origin either.
TEST(HttpClientProxy, ARedirectPastNoProxyGoesDirectWithoutTheProxysCredentials) {
  run_clean([] {
    script_server direct([](weft::tcp::stream& s, const received& r) {
      s.write_all(ok(r.target + " " + r.field("Proxy-Authorization")));
    });
    script_server proxy([&](weft::tcp::stream& s, const received&) {
      s.write_all("HTTP/1.1 302 Found\r\nLocation: " + direct.url("/landed") +
                  "\r\nContent-Length: 0\r\n\r\n");
    });
    weft::http::client_options options;
    options.max_redirects = 2;
    options.proxy.http = "http://user:pass@127.0.0.1:" + std::to_string(proxy.port());
    options.proxy.no_proxy = "127.0.0.1:" + std::to_string(direct.port());
    weft::http::client web(options);
    EXPECT_EQ(web.get("http://origin.example/start").body, "/landed ");
    ASSERT_EQ(proxy.requests().size(), 1u);
    EXPECT_EQ(proxy.requests()[0].field("Proxy-Authorization"), user_pass);
    web.close();
    proxy.close();
    direct.close();
  });
}

// The CONNECT as sent (authority in the target and in Host, the credentials), and a refusal:
// an http::error of kind proxy_refused naming the status; a proxy that closes without an
// answer is one too; nothing reaches the origin and the connection is not pooled.
TEST(HttpClientProxy, ATunnelTheProxyRefusesIsAnErrorNamingItsStatus) {
  run_clean([] {
    int seen = 0;
    script_server proxy([&](weft::tcp::stream& s, const received&) {
      if (seen++ == 0) {
        s.write_all(
            "HTTP/1.1 407 Proxy Authentication Required\r\n"
            "Proxy-Authenticate: Basic realm=\"p\"\r\nContent-Length: 6\r\n\r\ndenied");
      } else {
        s.close();
      }
    });
    weft::http::client_options options;
    options.proxy.https = "http://user:pass@127.0.0.1:" + std::to_string(proxy.port());
    weft::http::client web(options);
    for (const char* expected :
         {"answered CONNECT origin.example:8443 with 407 Proxy Authentication Required",
          "closed the connection without answering CONNECT origin.example:8443"}) {
      try {
        web.get("https://origin.example:8443/secret");
        ADD_FAILURE() << "no error";
      } catch (const weft::http::error& failure) {
        EXPECT_EQ(failure.kind(), weft::http::error_kind::proxy_refused);
        EXPECT_EQ(failure.url(), "https://origin.example:8443/secret");
        EXPECT_NE(std::string(failure.what()).find(expected), std::string::npos) << failure.what();
        EXPECT_NE(std::string(failure.what()).find("proxy 127.0.0.1:"), std::string::npos)
            << failure.what();
      }
    }
    ASSERT_EQ(proxy.requests().size(), 2u);
    const received& connect = proxy.requests()[0];
    EXPECT_EQ(connect.method, "CONNECT");
    EXPECT_EQ(connect.target, "origin.example:8443");
    EXPECT_EQ(connect.field("Host"), "origin.example:8443");
    EXPECT_EQ(connect.field("Proxy-Authorization"), user_pass);
    EXPECT_EQ(web.stats().idle_connections, 0u);
    EXPECT_EQ(proxy.connections(), 2);
    web.close();
    proxy.close();
  });
}

// RFC 6455 4.1: an upgrade of an http URL through the http proxy asks the proxy to CONNECT and
// sends its request through the tunnel in origin form, the credentials on the CONNECT alone;
// the 101's connection is the tunnel. A plain request to the same origin still goes in
// absolute form, over a connection of its own.
TEST(HttpClientProxy, AnUpgradeOfAnHttpUrlGoesThroughATunnel) {
  run_clean([] {
    script_server proxy([](weft::tcp::stream& s, const received& r) {
      if (r.method == "CONNECT") {
        s.write_all("HTTP/1.1 200 Connection established\r\n\r\n");
      } else if (r.field("Upgrade") == "echo/1") {
        s.write_all(
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo/1\r\nConnection: Upgrade\r\n\r\n"
            "through " +
            r.target + " " + r.field("Host") + " [" + r.field("Proxy-Authorization") + "]");
        s.close();
      } else {
        s.write_all(ok(r.target + " " + r.field("Proxy-Authorization")));
      }
    });
    weft::http::client_options options;
    options.proxy.http = "http://user:pass@127.0.0.1:" + std::to_string(proxy.port());
    weft::http::client web(options);
    weft::http::request offer;
    offer.headers.add("Upgrade", "echo/1");
    weft::http::upgrade_result up = web.upgrade(offer, "http://origin.example:81/ws?a=1");
    ASSERT_TRUE(up.switched());
    std::string greeting;
    while (auto piece = up.connection->read(weft::timeout(10s))) {
      greeting.append(*piece);
    }
    EXPECT_EQ(greeting, "through /ws?a=1 origin.example:81 []");
    up.connection->close();
    EXPECT_EQ(web.get("http://origin.example:81/plain").body,
              std::string("http://origin.example:81/plain ") + user_pass);
    ASSERT_EQ(proxy.requests().size(), 3u);
    const received& connect = proxy.requests()[0];
    EXPECT_EQ(connect.method, "CONNECT");
    EXPECT_EQ(connect.target, "origin.example:81");
    EXPECT_EQ(connect.field("Host"), "origin.example:81");
    EXPECT_EQ(connect.field("Proxy-Authorization"), user_pass);
    EXPECT_EQ(proxy.requests()[1].connection, 0);  // the upgrade, inside the tunnel
    EXPECT_EQ(proxy.requests()[2].connection, 1);  // the plain request: the proxy's pool
    EXPECT_EQ(web.stats().upgrades, 1u);
    EXPECT_EQ(web.stats().connections_opened, 2u);
    EXPECT_EQ(web.stats().origins, 2u);
    web.close();
    proxy.close();
  });
}

// A proxy that does not listen: io_error naming the proxy, not the origin.
TEST(HttpClientProxy, AnUnreachableProxyIsAnIoErrorNamingIt) {
  run_clean([] {
    const std::uint16_t port = net_test::free_loopback_port();
    weft::http::client_options options;
    options.proxy.http = "http://127.0.0.1:" + std::to_string(port);
    weft::http::client web(options);
    try {
      web.get("http://origin.example/");
      ADD_FAILURE() << "no error";
    } catch (const weft::io_error& failure) {
      EXPECT_NE(std::string(failure.what()).find("proxy 127.0.0.1:" + std::to_string(port)),
                std::string::npos)
          << failure.what();
    }
    web.close();
  });
}

// A real proxy: plain requests relayed (tinyproxy adds its Via field), https through its
// CONNECT tunnel with the certificate checked against the origin's name; without credentials
// its 407 is the response for http, and proxy_refused for https.
TEST(HttpClientProxy, TinyproxyRelaysPlainRequestsAndTunnelsTls) {
  tinyproxy real;
  const auto handler = [](http_test::exchange& ex) {
    ex.respond(http_test::status::ok,
               ex.request().target + " via " +
                   std::string(ex.request().headers.get("Via").value_or("-")) + " auth " +
                   std::string(ex.request().headers.get("Proxy-Authorization").value_or("-")));
  };
  http_test::running_http plain(http_test::local_http(), handler);
  auto tls_options = http_test::local_http();
  weft::net::tls_server_options tls;
  tls.alpn = {"http/1.1"};
  tls_options.tls = tls_test::server_context(tls);
  http_test::running_http secure(tls_options, handler);
  run_clean([&] {
    weft::http::client_options options;
    options.tls = tls_test::client_context();
    options.proxy.http = real.url("user:pass@");
    options.proxy.https = real.url("user:pass@");
    weft::http::client web(options);
    const std::string plain_url = "http://localhost:" + std::to_string(plain.port()) + "/p?q=1";
    const weft::http::response relayed = web.get(plain_url);
    EXPECT_EQ(relayed.status, weft::http::status::ok);
    EXPECT_TRUE(relayed.body.starts_with("/p?q=1 via ")) << relayed.body;
    EXPECT_NE(relayed.body.find("tinyproxy"), std::string::npos) << relayed.body;
    EXPECT_TRUE(relayed.body.ends_with(" auth -")) << relayed.body;  // not passed on
    const std::string secure_url = "https://localhost:" + std::to_string(secure.port()) + "/s";
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(web.get(secure_url).body, "/s via - auth -");  // the proxy sees no request
    }
    EXPECT_EQ(web.stats().connections_opened, 2u);  // the tunnel is kept alive and reused
    web.close();

    options.proxy.http = real.url();
    options.proxy.https = real.url();
    weft::http::client refused(options);
    EXPECT_EQ(refused.get(plain_url).status, weft::http::status::proxy_authentication_required);
    try {
      refused.get(secure_url);
      ADD_FAILURE() << "no error";
    } catch (const weft::http::error& failure) {
      EXPECT_EQ(failure.kind(), weft::http::error_kind::proxy_refused) << failure.what();
      EXPECT_NE(std::string(failure.what()).find("with 407"), std::string::npos) << failure.what();
    }
    refused.close();
  });
}

// A real proxy relays no Upgrade in absolute form; through its CONNECT tunnel the switch is
// the origin's own, and both directions carry the protocol (an echo) until the client ends its.
TEST(HttpClientProxy, TinyproxyTunnelsAnUpgrade) {
  tinyproxy real;
  weft::http::router routes;
  routes.get("/echo", [](http_test::exchange& ex) {
    weft::http::response head;
    head.headers.add("Upgrade", "echo/1");
    weft::net::connection& c = ex.switch_protocols(head);
    c.send(ex.request().target + " " +
           std::string(ex.request().headers.get("Via").value_or("no via")) + "\n");
    weft::net::message m;
    while (c.receive(m)) {
      c.send(m.data);
    }
  });
  http_test::running_http origin(http_test::local_http(), std::move(routes));
  run_clean([&] {
    weft::http::client_options options;
    options.proxy.http = real.url("user:pass@");
    weft::http::client web(options);
    weft::http::request offer;
    offer.headers.add("Upgrade", "echo/1");
    weft::http::upgrade_result up =
        web.upgrade(offer, "http://localhost:" + std::to_string(origin.port()) + "/echo");
    ASSERT_TRUE(up.switched()) << up.response.body;
    weft::http::upgraded_connection& c = *up.connection;
    const std::string expected = "/echo no via\nping 1ping 2";
    c.write("ping 1");
    c.write("ping 2");
    std::string got;
    while (got.size() < expected.size()) {
      auto piece = c.read(weft::timeout(10s));
      ASSERT_TRUE(piece.has_value()) << got;
      got.append(*piece);
    }
    EXPECT_EQ(got, expected);
    c.shutdown_write(weft::timeout(5s));
    EXPECT_FALSE(c.read(weft::timeout(10s)).has_value());  // the handler returned
    c.close();
    web.close();
  });
  EXPECT_EQ(origin.server().stats().total.responses_of_class(1), 1u);
}

TEST(HttpClientProxy, BadSettingsAreRefusedByTheConstructorNamingTheField) {
  const auto refused = [](const forward_proxy_options& proxy, const std::string& expected) {
    weft::http::client_options options;
    options.proxy = proxy;
    try {
      weft::http::client web(options);
      ADD_FAILURE() << "accepted; expected " << expected;
    } catch (const std::invalid_argument& failure) {
      EXPECT_NE(std::string(failure.what()).find(expected), std::string::npos) << failure.what();
    }
  };
  refused(proxies("https://p:3128", ""), "proxy.http \"https://p:3128\" has the scheme \"https\"");
  refused(proxies("", "socks4://p:1080"), "proxy.https \"socks4://p:1080\" has the scheme");
  refused(proxies("socks5://" + std::string(256, 'u') + "@p", ""), "longer than the 255 bytes");
  refused(proxies("p:3128", ""), "is not a proxy URL");
  refused(proxies("http://p:3128/path", ""), "has a path or query");
  refused(proxies("http://p:99999", ""), "is not a proxy URL");
  refused(proxies("http://us%zzer@p:1", ""), "malformed percent escape");
  refused(proxies("http://p:1", "", "10.0.0.0/33"), "\"10.0.0.0/33\" is not a CIDR block");
  refused(proxies("", "", "[zz]"), "\"[zz]\" is not an IPv6 address in brackets");
  refused(proxies("", "", "a.example:0"), "has a port that is not 1 to 65535");
  weft::http::client_options fine;
  fine.proxy = proxies("http://u:p%40ss@[::1]:3128/", "SOCKS5H://[::1]");
  weft::http::client accepted(fine);
}

TEST(HttpClientProxy, NoProxyMatchesNamesSubdomainsAddressesBlocksAndPorts) {
  const forward_proxy_options p = proxies("", "",
                                          "Example.com, .dot.test *.star.test,10.1.0.0/16 "
                                          "192.0.2.7,[2001:db8::1],fd00::/8,only.port:8080");
  EXPECT_TRUE(p.bypasses("example.com", 80));
  EXPECT_TRUE(p.bypasses("a.b.EXAMPLE.com", 443));
  EXPECT_FALSE(p.bypasses("notexample.com", 80));
  EXPECT_FALSE(p.bypasses("example.com.evil", 80));
  EXPECT_TRUE(p.bypasses("dot.test", 80));
  EXPECT_TRUE(p.bypasses("x.dot.test", 80));
  EXPECT_TRUE(p.bypasses("y.star.test", 80));
  EXPECT_TRUE(p.bypasses("10.1.200.3", 80));
  EXPECT_FALSE(p.bypasses("10.2.0.1", 80));
  EXPECT_TRUE(p.bypasses("192.0.2.7", 80));
  EXPECT_FALSE(p.bypasses("192.0.2.8", 80));
  EXPECT_TRUE(p.bypasses("2001:db8::1", 80));
  EXPECT_TRUE(p.bypasses("fd12::5", 80));
  EXPECT_FALSE(p.bypasses("fe80::1", 80));
  EXPECT_TRUE(p.bypasses("only.port", 8080));
  EXPECT_FALSE(p.bypasses("only.port", 80));
  EXPECT_TRUE(proxies("", "", "*").bypasses("anything", 1));
  EXPECT_FALSE(forward_proxy_options{}.bypasses("anything", 1));
}

// Sets or clears environment variables for the test's duration, restoring them after.
class environment {
 public:
  void set(const char* name, const char* value) {
    const char* before = std::getenv(name);
    saved_.push_back({name, before != nullptr, before != nullptr ? before : ""});
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~environment() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->was_set) {
        ::setenv(it->name.c_str(), it->value.c_str(), 1);
      } else {
        ::unsetenv(it->name.c_str());
      }
    }
  }

 private:
  struct saved {
    std::string name;
    bool was_set;
    std::string value;
  };
  std::vector<saved> saved_;
};

TEST(HttpClientProxy, FromEnvironmentReadsTheVariablesAsCurlAndGoDo) {
  environment env;
  env.set("http_proxy", nullptr);
  env.set("HTTP_PROXY", "proxy.corp:3128");
  env.set("https_proxy", "http://secure.corp:3129");
  env.set("HTTPS_PROXY", "http://ignored:1");
  env.set("no_proxy", nullptr);
  env.set("NO_PROXY", "internal.corp");
  env.set("REQUEST_METHOD", nullptr);
  forward_proxy_options p = forward_proxy_options::from_environment();
  EXPECT_EQ(p.http, "http://proxy.corp:3128");    // no scheme: http://
  EXPECT_EQ(p.https, "http://secure.corp:3129");  // the lower-case name first
  EXPECT_EQ(p.no_proxy, "internal.corp,localhost,127.0.0.0/8,::1");
  EXPECT_TRUE(p.bypasses("a.internal.corp", 80));
  EXPECT_TRUE(p.bypasses("localhost", 8080));
  EXPECT_TRUE(p.bypasses("127.0.0.1", 8080));
  EXPECT_TRUE(p.bypasses("::1", 8080));
  EXPECT_FALSE(p.bypasses("example.com", 80));
  weft::http::client_options options;
  options.proxy = p;
  weft::http::client accepted(options);  // what it reads, the client takes
  // ALL_PROXY stands in for a proxy not set, as curl reads it.
  env.set("HTTPS_PROXY", nullptr);
  env.set("https_proxy", nullptr);
  env.set("all_proxy", nullptr);
  env.set("ALL_PROXY", "socks5h://tunnel:1080");
  p = forward_proxy_options::from_environment();
  EXPECT_EQ(p.http, "http://proxy.corp:3128");
  EXPECT_EQ(p.https, "socks5h://tunnel:1080");
  env.set("ALL_PROXY", nullptr);
  // In a CGI program HTTP_PROXY came from a request's Proxy field ("httpoxy"): ignored.
  env.set("REQUEST_METHOD", "GET");
  EXPECT_EQ(forward_proxy_options::from_environment().http, "");
  env.set("http_proxy", "http://lower:1");
  EXPECT_EQ(forward_proxy_options::from_environment().http, "http://lower:1");
}

}  // namespace

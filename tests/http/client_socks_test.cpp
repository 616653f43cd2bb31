// weft::http::client through SOCKS5 proxies (forward_proxy_options with socks5:// and
// socks5h:// URLs, RFC 1928 and RFC 1929): the handshake's bytes as a scripted proxy reads
// them, every refusal named, and a real proxy (Debian's microsocks, started by the test)
// carrying plain and TLS requests with a login.
#include <arpa/inet.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "http/client_support.hpp"
#include "http/server_support.hpp"
#include "net/listening_child.hpp"
#include "net/tls_support.hpp"

namespace {

using namespace std::chrono_literals;
using http_client_test::ok;
using weft_test::run_clean;

// How the scripted proxy answers, and what it read.
struct socks_script {
  unsigned char method = 0x00;  // its choice among the methods offered (0xFF: none)
  bool login_accepted = true;   // the answer to a login (RFC 1929)
  unsigned char reply = 0;      // the answer to CONNECT (0: granted)
  std::string raw_answer;       // when set: written instead of the method choice, then closed
  // What the client sent: the methods offered, the login, the CONNECT's destination ("name
  // origin.example:81", "ipv4 127.0.0.1:81", "ipv6 ::1:81").
  std::vector<std::string> methods;
  std::vector<std::string> logins;
  std::vector<std::string> destinations;
  int connections = 0;
};

std::string read_string(weft::tcp::stream& s, std::size_t size) {
  std::string bytes(size, '\0');
  s.read_exactly(std::span<char>(bytes.data(), size), weft::timeout(10s));
  return bytes;
}

unsigned byte_of(weft::tcp::stream& s) { return static_cast<unsigned char>(read_string(s, 1)[0]); }

std::string address_text(int family, const std::string& bytes) {
  char text[64];
  ::inet_ntop(family, bytes.data(), text, sizeof text);
  return text;
}

// One client connection: the handshake as the script says, then, once CONNECT was granted, the
// origin itself: each request's line and Host come back as the body.
void serve_socks(weft::tcp::stream s, socks_script& script) {
  ++script.connections;
  const unsigned version = byte_of(s);
  std::string offered = read_string(s, byte_of(s));
  std::string methods = std::to_string(version) + ":";
  for (const char m : offered) {
    methods += " " + std::to_string(static_cast<unsigned char>(m));
  }
  script.methods.push_back(methods);
  if (!script.raw_answer.empty()) {
    s.write_all(script.raw_answer);
    return;
  }
  s.write_all(std::string{'\x05', static_cast<char>(script.method)});
  if (script.method == 0xFF) {
    return;
  }
  if (script.method == 0x02) {
    const unsigned login_version = byte_of(s);
    const std::string user = read_string(s, byte_of(s));
    const std::string password = read_string(s, byte_of(s));
    script.logins.push_back(std::to_string(login_version) + " " + user + " " + password);
    s.write_all(std::string{'\x01', script.login_accepted ? '\x00' : '\x01'});
    if (!script.login_accepted) {
      return;
    }
  }
  const std::string head = read_string(s, 4);  // version, command, reserved, address type
  std::string destination = std::to_string(static_cast<unsigned char>(head[1])) + " ";
  if (head[3] == 1) {
    destination += "ipv4 " + address_text(AF_INET, read_string(s, 4));
  } else if (head[3] == 4) {
    destination += "ipv6 " + address_text(AF_INET6, read_string(s, 16));
  } else {
    destination += "name " + read_string(s, byte_of(s));
  }
  const std::string port = read_string(s, 2);
  destination += ":" + std::to_string(static_cast<unsigned char>(port[0]) * 256 +
                                      static_cast<unsigned char>(port[1]));
  script.destinations.push_back(destination);
  s.write_all(std::string{'\x05', static_cast<char>(script.reply), '\x00', '\x01', '\x0a', '\x00',
                          '\x00', '\x01', '\x04', '\x38'});
  if (script.reply != 0) {
    return;
  }
  for (;;) {
    std::string request;
    if (s.read_until(request, "\r\n\r\n") == 0) {
      return;
    }
    const std::size_t line_end = request.find("\r\n");
    const std::size_t host = request.find("\r\nHost: ");
    s.write_all(ok(request.substr(0, line_end) + " | " +
                   request.substr(host + 8, request.find("\r\n", host + 2) - host - 8)));
  }
}

// A listener on 127.0.0.1 serving each connection by serve_socks, until close().
class socks_server {
 public:
  explicit socks_server(socks_script& script)
      : listener_(weft::tcp::listener::listen("127.0.0.1", 0)) {
    acceptor_ = weft::spawn([this, &script] {
      for (;;) {
        weft::tcp::stream s;
        try {
          s = listener_.accept();
        } catch (const weft::io_error&) {
          return;
        }
        tasks_.push_back(weft::spawn([&script, s = std::move(s)]() mutable {
          try {
            serve_socks(std::move(s), script);
          } catch (const weft::io_error&) {
            // The client closed the connection.
          }
        }));
      }
    });
  }
  std::string url(const std::string& scheme, const std::string& credentials = {}) const {
    return scheme + "://" + credentials + "127.0.0.1:" + std::to_string(listener_.port());
  }
  void close() {
    listener_.close();
    acceptor_.await();
    for (auto& task : tasks_) {
      task.await();
    }
  }

 private:
  weft::tcp::listener listener_;
  weft::task<void> acceptor_;
  std::vector<weft::task<void>> tasks_;
};

weft::http::client_options through(const std::string& proxy) {
  weft::http::client_options options;
  options.proxy.http = proxy;
  options.proxy.https = proxy;
  return options;
}

// socks5h://: the name goes to the proxy as it is, a numeric host as an address; the login is
// sent when the proxy chooses it; requests go in origin form through the tunnel, which is kept
// alive and reused; a tunnel per origin.
TEST(HttpClientSocks, Socks5hHandsTheNameToTheProxyAndTheRequestGoesInOriginForm) {
  run_clean([] {
    socks_script script;
    script.method = 0x02;
    socks_server proxy(script);
    weft::http::client web(through(proxy.url("socks5h", "us%65r:p%40ss@")));
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(web.get("http://origin.example:81/a?b=1").body,
                "GET /a?b=1 HTTP/1.1 | origin.example:81");
    }
    EXPECT_EQ(web.get("http://[::1]:82/six").body, "GET /six HTTP/1.1 | [::1]:82");
    EXPECT_EQ(web.get("http://192.0.2.7/four").body, "GET /four HTTP/1.1 | 192.0.2.7");
    EXPECT_EQ(script.methods, (std::vector<std::string>(3, "5: 0 2")));
    EXPECT_EQ(script.logins, (std::vector<std::string>(3, "1 user p@ss")));
    EXPECT_EQ(script.destinations,
              (std::vector<std::string>{"1 name origin.example:81", "1 ipv6 ::1:82",
                                        "1 ipv4 192.0.2.7:80"}));
    EXPECT_EQ(web.stats().connections_opened, 3u);
    EXPECT_EQ(web.stats().connections_reused, 1u);
    web.close();
    proxy.close();
  });
}

// socks5://: the name is resolved here and its address sent; without a user only "no
// authentication" is offered.
TEST(HttpClientSocks, Socks5ResolvesTheNameHere) {
  run_clean([] {
    socks_script script;
    socks_server proxy(script);
    weft::http::client web(through(proxy.url("socks5")));
    EXPECT_EQ(web.get("http://localhost:8123/").body, "GET / HTTP/1.1 | localhost:8123");
    ASSERT_EQ(script.destinations.size(), 1u);
    EXPECT_TRUE(script.destinations[0] == "1 ipv4 127.0.0.1:8123" ||
                script.destinations[0] == "1 ipv6 ::1:8123")
        << script.destinations[0];
    EXPECT_EQ(script.methods, (std::vector<std::string>{"5: 0"}));
    EXPECT_TRUE(script.logins.empty());
    web.close();
    proxy.close();
  });
}

// Every refusal is proxy_refused naming the proxy, and what it refused; an answer in another
// protocol is malformed_response. Nothing is pooled.
TEST(HttpClientSocks, RefusalsAreErrorsNamingTheReason) {
  run_clean([] {
    const auto refused = [](socks_script& script, const std::string& credentials,
                            weft::http::error_kind kind, const std::string& expected) {
      socks_server proxy(script);
      weft::http::client web(through(proxy.url("socks5h", credentials)));
      try {
        web.get("http://origin.example:81/");
        ADD_FAILURE() << "no error; expected " << expected;
      } catch (const weft::http::error& failure) {
        EXPECT_EQ(failure.kind(), kind) << failure.what();
        EXPECT_EQ(failure.url(), "http://origin.example:81/");
        EXPECT_NE(std::string(failure.what()).find(expected), std::string::npos) << failure.what();
        EXPECT_NE(std::string(failure.what()).find("socks5h proxy 127.0.0.1:"), std::string::npos)
            << failure.what();
      }
      EXPECT_EQ(web.stats().idle_connections, 0u);
      web.close();
      proxy.close();
    };
    socks_script no_method;
    no_method.method = 0xFF;
    refused(no_method, "", weft::http::error_kind::proxy_refused,
            "accepts none of the authentication methods offered (no authentication; it may want "
            "a user name and password");
    socks_script bad_login;
    bad_login.method = 0x02;
    bad_login.login_accepted = false;
    refused(bad_login, "user:wrong@", weft::http::error_kind::proxy_refused,
            "refused the user name and password");
    EXPECT_EQ(bad_login.logins, (std::vector<std::string>{"1 user wrong"}));
    socks_script unreachable;
    unreachable.reply = 5;
    refused(unreachable, "", weft::http::error_kind::proxy_refused,
            "could not connect to origin.example:81: connection refused (SOCKS5 reply 5)");
    socks_script http_proxy;
    http_proxy.raw_answer = "HTTP/1.1 400 Bad Request\r\n\r\n";
    refused(http_proxy, "", weft::http::error_kind::malformed_response,
            "answer to the methods offered is not SOCKS5");
    socks_script silent;
    silent.raw_answer = "\x05";  // half an answer, then the end
    refused(silent, "", weft::http::error_kind::proxy_refused,
            "closed the connection during the SOCKS5 handshake for origin.example:81");
  });
}

// microsocks (Debian's) asking for a login: http and https through it, the TLS certificate
// checked inside the tunnel, tunnels kept alive; a wrong password is refused by name. (Numeric
// origins: microsocks tries only the first address a name resolves to.)
TEST(HttpClientSocks, MicrosocksCarriesPlainAndTlsRequests) {
  const std::uint16_t port = net_test::free_loopback_port();
  net_test::listening_child microsocks(
      {"microsocks", "-i", "127.0.0.1", "-p", std::to_string(port), "-u", "user", "-P", "pass"},
      "/usr/bin/microsocks", port);
  const auto handler = [](http_test::exchange& ex) {
    ex.respond(http_test::status::ok,
               ex.request().target + " " +
                   std::string(ex.request().headers.get("Proxy-Authorization").value_or("-")));
  };
  http_test::running_http plain(http_test::local_http(), handler);
  auto tls_options = http_test::local_http();
  weft::net::tls_server_options tls;
  tls.alpn = {"http/1.1"};
  tls_options.tls = tls_test::server_context(tls);
  http_test::running_http secure(tls_options, handler);
  run_clean([&] {
    for (const char* scheme : {"socks5h", "socks5"}) {
      weft::http::client_options options =
          through(std::string(scheme) + "://user:pass@127.0.0.1:" + std::to_string(port));
      options.tls = tls_test::client_context();
      weft::http::client web(options);
      EXPECT_EQ(web.get("http://127.0.0.1:" + std::to_string(plain.port()) + "/p?q=1").body,
                "/p?q=1 -");
      for (int i = 0; i < 2; ++i) {
        EXPECT_EQ(web.get("https://127.0.0.1:" + std::to_string(secure.port()) + "/s").body,
                  "/s -");
      }
      EXPECT_EQ(web.stats().connections_opened, 2u) << scheme;
      web.close();
    }
    weft::http::client wrong(through("socks5://user:nope@127.0.0.1:" + std::to_string(port)));
    try {
      wrong.get("http://127.0.0.1:" + std::to_string(plain.port()) + "/");
      ADD_FAILURE() << "no error";
    } catch (const weft::http::error& failure) {
      EXPECT_EQ(failure.kind(), weft::http::error_kind::proxy_refused) << failure.what();
      EXPECT_NE(std::string(failure.what()).find("refused the user name and password"),
                std::string::npos)
          << failure.what();
    }
    wrong.close();
  });
}

}  // namespace

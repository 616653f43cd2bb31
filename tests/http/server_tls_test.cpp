// The HTTP server over TLS (server_options::tls): curl, a client no one here wrote, over HTTPS
// with keep-alive reuse, HEAD, a range, a chunked upload with 100-continue, a 2 MiB static file
// (which goes through memory, not sendfile); a plaintext request to the HTTPS port answered 400;
// a stalled TLS handshake cut at the header timeout while others are served; a certificate
// replaced on the running server (set_tls); the certificate curl's SNI name picks; sessions
// weft's client resumes.
#include <string>

#include "http/server_support.hpp"
#include "http/static_tree.hpp"
#include "net/tls_support.hpp"

namespace {

using namespace http_test;

weft::http::server_options https_options() {
  auto options = local_http();
  weft::net::tls_server_options tls;
  tls.alpn = {"http/1.1"};
  options.tls = tls_test::server_context(tls);
  return options;
}

std::string https_url(std::uint16_t port, std::string_view path) {
  return "https://localhost:" + std::to_string(port) + std::string(path);
}

std::string curl() { return "curl -sS --cacert " + tls_test::certs().ca + " "; }

// Options of a weft::http::client that trusts the test authority.
weft::http::client_options trusting_client() {
  weft::net::tls_client_options tls;
  tls.ca_file = tls_test::certs().ca;
  weft::http::client_options options;
  options.tls = weft::net::tls_context::client(tls);
  return options;
}

struct served {
  weft_static_test::tree files;
  std::string big;
  weft::http::router routes() {
    big.resize(2u << 20);
    for (std::size_t i = 0; i < big.size(); ++i) {
      big[i] = static_cast<char>('a' + i * 7 % 26);
    }
    files.file("big.txt", big);
    weft::http::router r;
    r.files("/static", weft::http::static_options{.root = files.root().string()});
    r.get("/hello", [](exchange& ex) {
      ex.respond(status::ok, ex.connection().secure()
                                 ? "hello over " + ex.connection().tls_version()
                                 : std::string("hello in the clear"));
    });
    r.get("/session", [](exchange& ex) {
      ex.respond(status::ok, "[" + ex.connection().tls_server_name() + "] " +
                                 (ex.connection().tls_resumed() ? "resumed" : "full"));
    });
    r.get("/whoami", [](exchange& ex) {
      ex.respond(status::ok, "[" + ex.connection().peer_certificate() + "]");
    });
    r.post("/count", [](exchange& ex) {
      ex.respond(status::ok, std::to_string(ex.read_body().size()) + " bytes");
    });
    return r;
  }
};

TEST(HttpServerTls, CurlGetsReusesHeadsRangesAndUploadsOverHttps) {
  served site;
  running_http server(https_options(), site.routes());
  const std::uint16_t port = server.port();

  std::string out =
      run_command(curl() + "-v " + https_url(port, "/hello") + " " + https_url(port, "/hello"));
  const std::size_t first = out.find("hello over TLSv1.3");
  ASSERT_NE(first, std::string::npos) << out;
  EXPECT_NE(out.find("hello over TLSv1.3", first + 1), std::string::npos) << out;
  EXPECT_NE(out.find("Re-using existing connection"), std::string::npos) << out;
  EXPECT_NE(out.find("ALPN: server accepted http/1.1"), std::string::npos) << out;

  std::string head = run_command(curl() + "-I " + https_url(port, "/static/big.txt"));
  EXPECT_NE(head.find("Content-Length: 2097152"), std::string::npos) << head;

  EXPECT_EQ(run_command(curl() + "-r 100-109 " + https_url(port, "/static/big.txt")),
            site.big.substr(100, 10));

  // 2 MiB: past the cache, a file range the connection reads and encrypts piece by piece.
  const std::string whole = run_command(curl() + https_url(port, "/static/big.txt"));
  EXPECT_EQ(whole.size(), site.big.size());
  EXPECT_TRUE(whole == site.big) << "the file came back different";

  // A chunked upload that waits for 100 Continue.
  std::string upload =
      run_command("head -c 300000 /dev/zero | " + curl() +
                  "-v -H 'Transfer-Encoding: chunked' -H 'Expect: 100-continue' --data-binary @- " +
                  https_url(port, "/count"));
  EXPECT_NE(upload.find("HTTP/1.1 100 Continue"), std::string::npos) << upload;
  EXPECT_NE(upload.find("300000 bytes"), std::string::npos) << upload;
}

TEST(HttpServerTls, APlainRequestToTheHttpsPortIsAnswered400AndClosed) {
  served site;
  running_http server(https_options(), site.routes());
  const std::string out =
      run_command("curl -sS -i http://127.0.0.1:" + std::to_string(server.port()) + "/hello");
  EXPECT_EQ(out.rfind("HTTP/1.1 400 Bad Request\r\n", 0), 0u) << out;
  EXPECT_NE(out.find("a plain HTTP request was sent to an HTTPS port"), std::string::npos) << out;
  EXPECT_NE(out.find("Connection: close"), std::string::npos) << out;
}

TEST(HttpServerTls, AStalledHandshakeIsCutAtTheHeaderTimeoutWhileOthersAreServed) {
  served site;
  auto options = https_options();
  options.header_timeout = std::chrono::milliseconds(300);
  running_http server(options, site.routes());
  const auto started = std::chrono::steady_clock::now();
  const int stalled = connect_to(server.port());
  send_all(stalled, std::string("\x16\x03\x01\x02\x00\x01", 6));  // a ClientHello's first bytes
  const std::string out = run_command(curl() + https_url(server.port(), "/hello"));
  EXPECT_EQ(out, "hello over TLSv1.3");
  EXPECT_EQ(read_to_end(stalled), "");
  EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(250));
  ::close(stalled);
  EXPECT_TRUE(eventually([&] {
    return server.server().stats().total.net.closed_by(
               weft::net::close_reason::handshake_timeout) == 1;
  }));
}

// weft's own client over TLS 1.3 to the same server: one connection for every request, a
// 1 MiB body up, the 2 MiB file down in pieces, a cookie kept for https.
TEST(HttpServerTls, WeftsClientPostsAndStreamsOverOneConnection) {
  served site;
  running_http server(https_options(), site.routes());
  weft::run([&] {
    weft::http::client_options options = trusting_client();
    options.limits.max_body_size = 4u << 20;
    weft::http::client web(options);
    EXPECT_EQ(web.get(https_url(server.port(), "/hello")).body, "hello over TLSv1.3");
    const weft::http::response posted =
        web.post(https_url(server.port(), "/count"), std::string(1u << 20, 'p'), "text/plain");
    EXPECT_EQ(posted.body, "1048576 bytes");
    std::string streamed;
    std::size_t pieces = 0;
    weft::http::request get;
    web.request_streaming(
        get, https_url(server.port(), "/static/big.txt"), [](const weft::http::response&) {},
        [&](std::string_view piece) {
          streamed += piece;
          ++pieces;
        });
    EXPECT_TRUE(streamed == site.big) << streamed.size() << " bytes";
    EXPECT_GT(pieces, 1u);
    EXPECT_EQ(web.stats().connections_opened, 1u);
    web.close();
  });
}

// An early answer over TLS: a handler's 401 given without reading a 32 MiB upload. The client
// looks for it as it writes (RFC 9112 9.5), through the records the server sent first (TLS 1.3
// session tickets make the socket readable before any answer): it stops sending, streamed or
// buffered, and the 401 is the call's response. It used to send the whole body first.
TEST(HttpServerTls, WeftsClientStopsAnUploadTheServerAnsweredEarly) {
  constexpr std::uint64_t total = 32u << 20;
  auto options = https_options();
  options.limits.max_body_size = total;
  running_http server(options,
                      [](exchange& ex) { ex.respond(status::unauthorized, "who are you\n"); });
  weft::run([&] {
    weft::http::client web(trusting_client());
    const std::string url = https_url(server.port(), "/up");
    weft::http::request put;
    put.method = weft::http::method::put;
    put.headers.add("Content-Length", std::to_string(total));
    const std::string piece(64 << 10, 'u');
    std::uint64_t given = 0;
    const weft::http::response streamed =
        web.request(put, url, repeated_piece(piece, total, given));
    EXPECT_EQ(streamed.status, status::unauthorized);
    EXPECT_EQ(streamed.body, "who are you\n");
    EXPECT_LT(given, total / 4);  // stopped soon after the answer, not at the body's end
    weft::http::request buffered;
    buffered.method = weft::http::method::put;
    buffered.body.assign(total, 'b');
    const weft::http::response whole = web.request(std::move(buffered), url);
    EXPECT_EQ(whole.status, status::unauthorized);
    EXPECT_EQ(whole.body, "who are you\n");
    EXPECT_EQ(web.stats().connections_opened, 2u);  // a request cut short is not reused
    EXPECT_EQ(web.stats().idle_connections, 0u);
    web.close();
  });
}

// Mutual TLS with an optional client certificate: curl presenting one is named by its subject;
// without one it is served anonymously.
TEST(HttpServerTls, CurlsClientCertificateIsNamedAndNoneIsAnonymous) {
  served site;
  auto options = local_http();
  weft::net::tls_server_options tls;
  tls.client_ca_file = tls_test::certs().ca;
  options.tls = tls_test::server_context(tls);
  running_http server(options, site.routes());
  EXPECT_EQ(run_command(curl() + "--cert " + tls_test::certs().client_cert + " --key " +
                        tls_test::certs().client_key + " " + https_url(server.port(), "/whoami")),
            "[CN=weft test client]");
  EXPECT_EQ(run_command(curl() + https_url(server.port(), "/whoami")), "[]");
}

// A renewed certificate on the running server: curl trusting the old authority is refused, one
// trusting the new one is served, and a plaintext request still gets the 400.
TEST(HttpServerTls, SetTlsServesTheRenewedCertificateAndKeepsThe400) {
  served site;
  running_http server(https_options(), site.routes());
  const std::string url = https_url(server.port(), "/hello");
  EXPECT_EQ(run_command(curl() + url), "hello over TLSv1.3");
  weft::net::tls_server_options renewed;
  renewed.certificate_file = tls_test::certs().renewed_cert;
  renewed.private_key_file = tls_test::certs().renewed_key;
  server.server().set_tls(weft::net::tls_context::server(renewed));
  const std::string refused = run_command(curl() + url);
  EXPECT_NE(refused.find("SSL certificate problem"), std::string::npos) << refused;
  EXPECT_EQ(run_command("curl -sS --cacert " + tls_test::certs().other_ca + " " + url),
            "hello over TLSv1.3");
  const std::string plain =
      run_command("curl -sS -i http://127.0.0.1:" + std::to_string(server.port()) + "/hello");
  EXPECT_EQ(plain.rfind("HTTP/1.1 400 Bad Request\r\n", 0), 0u) << plain;
}

// Virtual hosts: curl's SNI name picks the certificate it verifies (--resolve sends the name
// to 127.0.0.1), and the handler sees the name.
TEST(HttpServerTls, CurlsServerNamePicksTheCertificate) {
  served site;
  auto options = local_http();
  weft::net::tls_server_options tls;
  tls.more_certificates = {{tls_test::certs().named_cert, tls_test::certs().named_key}};
  options.tls = tls_test::server_context(tls);
  running_http server(options, site.routes());
  const std::string port = std::to_string(server.port());
  EXPECT_EQ(run_command(curl() + "--resolve other.example:" + port +
                        ":127.0.0.1 https://other.example:" + port + "/session"),
            "[other.example] full");
  EXPECT_EQ(run_command(curl() + https_url(server.port(), "/session")), "[localhost] full");
  const std::string refused =
      run_command(curl() + "--resolve unknown.example:" + port +
                  ":127.0.0.1 https://unknown.example:" + port + "/session");
  EXPECT_NE(refused.find("SSL"), std::string::npos) << refused;
}

// weft's client keeps the server's session tickets: a connection after the first (the server
// closes each after one response) resumes, without a certificate exchanged.
TEST(HttpServerTls, WeftsClientResumesItsSessionOnNewConnections) {
  served site;
  auto options = https_options();
  options.max_requests_per_connection = 1;
  running_http server(options, site.routes());
  weft::run([&] {
    weft::http::client web(trusting_client());
    const std::string url = https_url(server.port(), "/session");
    EXPECT_EQ(web.get(url).body, "[localhost] full");
    EXPECT_EQ(web.get(url).body, "[localhost] resumed");
    EXPECT_EQ(web.get(url).body, "[localhost] resumed");
    EXPECT_EQ(web.stats().connections_opened, 3u);
    web.close();
  });
}

}  // namespace

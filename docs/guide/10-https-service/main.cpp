// Guide, page 10: HTTPS. An HTTP service behind TLS, and the same program calling it over https
// with weft::http::client, which verifies the server's certificate and name.
//
//   ./https-service CERT KEY [port]    (default 8443; 0 picks a free port)
#include <weft/weft.hpp>

#include <cstdio>
#include <string>

namespace http = weft::http;
namespace net = weft::net;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s CERT KEY [port]\n", argv[0]);
    return 2;
  }
  const std::string certificate = argv[1];
  const std::string key = argv[2];

  // The server's side: its certificate chain and key, loaded once, shared by every worker.
  net::tls_server_options tls;
  tls.certificate_file = certificate;
  tls.private_key_file = key;
  tls.alpn = {"http/1.1"};

  http::router routes;
  routes.get("/hello", [](http::exchange& ex) {
    const net::connection& c = ex.connection();
    ex.respond(http::status::ok, "hello over " + c.tls_version() + "\n");
  });

  http::server_options options;
  options.host = "127.0.0.1";
  options.port = argc > 3 ? static_cast<std::uint16_t>(std::stoul(argv[3])) : 8443;
  options.workers = 2;
  options.handle_signals = true;                // Ctrl-C stops it gracefully
  options.tls = net::tls_context::server(tls);  // net::tls_error if a file does not load
  http::server server(options, routes);
  server.listen();

  weft::run([&] {
    auto serving = weft::spawn([&] { server.serve(); });

    // The client's side: trust the authority that signed the server's certificate (here the
    // certificate itself, which signed itself) and check the URL's name against it.
    net::tls_client_options trust;
    trust.ca_file = certificate;
    http::client web({.tls = net::tls_context::client(trust)});
    const std::string url = "https://localhost:" + std::to_string(server.port()) + "/hello";
    std::printf("self-check: %s", web.get(url).body.c_str());
    web.close();

    std::printf("https service listening on 127.0.0.1:%u\n", unsigned{server.port()});
    std::fflush(stdout);
    serving.await();
  });
  std::printf("stopped after %llu requests\n",
              static_cast<unsigned long long>(server.stats().total.requests));
  return 0;
}

// bench_http_weft: weft's program of suite http (contract: bench/http/README.md).
//
// `--port N --mode hello|static --root DIR`: a weft::http::server on 127.0.0.1:N with one worker
// (run.py pins the process to one core) and the server's defaults otherwise (keep-alive,
// pipelined responses batched into one write), requests dispatched by weft::http::router, the
// way a user writes it. Once listening it prints `READY <port>`; the main thread then runs a
// weft scheduler whose coroutine waits for standard input to become readable and reads it, and
// at end of file exits 0 (if stdin is not a pipe, socket or terminal, at once).
//
// Modes:
//   hello: GET /hello -> 200, Content-Type: text/plain, body "hello\n" (Content-Length).
//   static: GET /4k.txt -> DIR/4k.txt through router::files, the static-file handler a user
//     mounts, with its defaults: the file is opened beneath the root (openat2 RESOLVE_BENEATH)
//     and fstat'ed for its ETag and Last-Modified, and, being small, kept in the worker's
//     memory for a second (static_options::cache_valid), as h2o's default file cache does;
//     bigger files go out with sendfile(2).
//
// `--tls-cert FILE --tls-key FILE` (both or neither; run.py gives them for https_keepalive):
// HTTPS instead of plain HTTP, server_options::tls set to a net::tls_context::server of that
// certificate and key (PEM) with ALPN {"http/1.1"} and the context's defaults otherwise (TLS 1.2
// and 1.3, OpenSSL's default cipher suites and groups, stateless session tickets).
//
// `--upstream HOST:PORT` (run.py's proxy_keepalive row; bench/http/README.md, "A reverse
// proxy"): every request goes to http://HOST:PORT through weft::http::reverse_proxy
// (router::any("/*rest")), with proxy_options' defaults (X-Forwarded-* added, upstream
// keep-alive), instead of --mode.
//
// `--hibernate-above N` (not used by run.py) sets server_options::hibernate_above, for the A/B
// rounds of bench/http/README.md ("Fewer instructions in a keep-alive request").
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "bench_util.hpp"
#include "weft/weft.hpp"

namespace {

[[noreturn]] void usage(const char* program, const char* why) {
  std::fprintf(stderr,
               "%s: %s\nusage: %s --port N --mode hello|static --root DIR "
               "[--tls-cert FILE --tls-key FILE] [--upstream HOST:PORT] [--hibernate-above N]\n",
               program, why, program);
  std::exit(2);
}

bool stdin_watchable() {
  struct stat info {};
  return fstat(0, &info) == 0 && (S_ISFIFO(info.st_mode) || S_ISSOCK(info.st_mode) || isatty(0));
}

// A coroutine: returns when standard input reaches end of file.
void wait_for_stdin_end() {
  char buffer[256];
  for (;;) {
    weft::wait_readable(0);
    ssize_t got = read(0, buffer, sizeof buffer);
    if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN)) {
      return;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  int port = -1;
  std::string mode;
  std::string root;
  std::string tls_cert;
  std::string tls_key;
  long hibernate_above = -1;  // -1: the server's default
  std::string upstream;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (i + 1 >= argc) {
      usage(argv[0], ("missing value after " + arg).c_str());
    }
    if (arg == "--port") {
      long value = 0;
      if (!bench::parse_count(argv[++i], 65535, value)) {
        usage(argv[0], "a port is a number from 0 to 65535");
      }
      port = static_cast<int>(value);
    } else if (arg == "--mode") {
      mode = argv[++i];
    } else if (arg == "--root") {
      root = argv[++i];
    } else if (arg == "--tls-cert") {
      tls_cert = argv[++i];
    } else if (arg == "--tls-key") {
      tls_key = argv[++i];
    } else if (arg == "--upstream") {
      upstream = argv[++i];
    } else if (arg == "--hibernate-above") {
      if (!bench::parse_count(argv[++i], LONG_MAX, hibernate_above)) {
        usage(argv[0], "--hibernate-above takes a count of connections");
      }
    } else {
      usage(argv[0], ("unknown argument " + arg).c_str());
    }
  }
  if (port < 0 || port > 65535 || (upstream.empty() && mode != "hello" && mode != "static")) {
    usage(argv[0], "--port and --mode hello|static are required");
  }
  if (tls_cert.empty() != tls_key.empty()) {
    usage(argv[0], "--tls-cert and --tls-key go together");
  }

  weft::http::router routes;
  std::unique_ptr<weft::http::reverse_proxy> proxy;
  if (!upstream.empty()) {
    try {
      proxy = std::make_unique<weft::http::reverse_proxy>("http://" + upstream);
    } catch (const std::exception& failure) {
      std::fprintf(stderr, "bench_http_weft: %s\n", failure.what());
      return 1;
    }
    routes.any("/*rest", proxy->handler());
  } else if (mode == "hello") {
    routes.get("/hello", [](weft::http::exchange& ex) {
      ex.respond(weft::http::status::ok, "hello\n", "text/plain");
    });
  } else {
    try {
      routes.files("", weft::http::static_options{.root = root.empty() ? "." : root});
    } catch (const std::exception& failure) {
      std::fprintf(stderr, "bench_http_weft: %s\n", failure.what());
      return 1;
    }
  }

  weft::http::server_options options;
  options.host = "127.0.0.1";
  options.port = static_cast<std::uint16_t>(port);
  options.workers = 1;
  if (proxy != nullptr) {
    proxy->attach(options);
  }
  if (hibernate_above >= 0) {
    options.hibernate_above = static_cast<std::size_t>(hibernate_above);
  }
  if (!tls_cert.empty()) {
    try {
      options.tls = weft::net::tls_context::server(weft::net::tls_server_options{
          .certificate_file = tls_cert, .private_key_file = tls_key, .alpn = {"http/1.1"}});
    } catch (const std::exception& failure) {
      std::fprintf(stderr, "bench_http_weft: %s\n", failure.what());
      return 1;
    }
  }
  weft::http::server server(options, std::move(routes));
  try {
    server.listen();
  } catch (const std::exception& failure) {
    std::fprintf(stderr, "bench_http_weft: %s\n", failure.what());
    return 1;
  }
  std::printf("READY %u\n", static_cast<unsigned>(server.port()));
  std::fflush(stdout);
  if (!stdin_watchable()) {
    return 0;
  }
  weft::scheduler watcher;
  watcher.run([&server] {
    weft::spawn([] {
      wait_for_stdin_end();
      std::fflush(nullptr);
      std::_Exit(0);
    });
    server.serve();
  });
  return 0;
}

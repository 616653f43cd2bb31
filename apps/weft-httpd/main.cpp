// weft-httpd: weft's HTTP server as a user meets it. `make demo` builds it and starts it on
// 127.0.0.1:8080 in the foreground; Ctrl-C stops it gracefully (a second Ctrl-C at once).
// With --tls-cert, SIGHUP reads the certificate and key again (a renewed certificate, without a
// restart): connections accepted afterwards use it, those open keep theirs, and files that do
// not load are reported and leave the running certificate in place, as nginx's reload does.
// With --access-log FILE it reopens FILE (after logrotate moved it). Without either SIGHUP is
// reported and ignored.
//
//   weft-httpd [--listen HOST:PORT] [--workers N] [--root DIR] [--pg CONNINFO]
//              [--driver uv|ev|event|poll] [--log] [--access-log FILE]
//              [--tls-cert PEM --tls-key PEM] [--proxy-protocol [--proxy-protocol-from CIDR]]
//              [--proxy PREFIX=URL[ weight=N][,URL...] ...]
//              [--proxy-balance round-robin|least-conn]
#include <signal.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "access_log.hpp"
#include "site.hpp"
#include "weft/error.hpp"
#include "weft/net/tls.hpp"
#include "weft/reactor/signals.hpp"
#include "weft/sched/task.hpp"

namespace {

// "HOST:PORT", "[V6]:PORT" or ":PORT" (all of IPv4).
bool parse_listen(const std::string& text, std::string& host, std::uint16_t& port) {
  std::size_t colon = text.rfind(':');
  if (colon == std::string::npos) {
    return false;
  }
  host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty()) {
    host = "0.0.0.0";
  }
  const char* first = text.data() + colon + 1;
  const char* last = text.data() + text.size();
  unsigned value = 0;
  auto [end, failure] = std::from_chars(first, last, value);
  if (failure != std::errc() || end != last || first == last || value > 65535) {
    return false;
  }
  port = static_cast<std::uint16_t>(value);
  return true;
}

// Ten thousand sleepers need ten thousand sockets: lift the soft descriptor limit to the hard
// one (what a shell's `ulimit -n` would allow anyway).
void raise_descriptor_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
}

// The N of "weight=N" (nginx's server parameter), 1 to 1000, into weight.
bool parse_weight(std::string_view text, unsigned& weight) {
  constexpr std::string_view key = "weight=";
  if (!text.starts_with(key)) {
    return false;
  }
  const char* end = text.data() + text.size();
  unsigned value = 0;
  const auto [stop, error] = std::from_chars(text.data() + key.size(), end, value);
  if (error != std::errc() || stop != end || value < 1 || value > 1000) {
    return false;
  }
  weight = value;
  return true;
}

// "weft-httpd: /api/ -> http://127.0.0.1:9000/v1/" for each --proxy (its upstreams joined by
// ", ", each with its weight where not 1).
std::string proxy_lines(const weft_httpd::settings& config) {
  std::string lines;
  for (const auto& route : config.proxies) {
    lines += "weft-httpd: " + route.prefix + "/ -> ";
    for (std::size_t i = 0; i < route.upstreams.size(); ++i) {
      lines += (i > 0 ? ", " : "") + route.upstreams[i];
      if (route.weights[i] != 1) {
        lines += " weight=" + std::to_string(route.weights[i]);
      }
    }
    lines += "\n";
  }
  return lines;
}

}  // namespace

int main(int argc, char** argv) {
  weft_httpd::settings config;
  config.root = WEFT_HTTPD_DEFAULT_ROOT;
  std::string listen = "127.0.0.1:8080";

  CLI::App app{
      "weft-httpd: weft's HTTP/1.1 server (a page, static files, WebSocket echo, "
      "PostgreSQL routes)"};
  app.add_option("--listen", listen, "address to listen on: HOST:PORT, [V6]:PORT or :PORT")
      ->capture_default_str();
  app.add_option("--workers", config.workers, "worker threads (0: one per core)")
      ->capture_default_str();
  app.add_option("--root", config.root, "directory served under /static/")
      ->check(CLI::ExistingDirectory)
      ->capture_default_str();
  app.add_option("--pg", config.pg,
                 "PostgreSQL conninfo: enables /pg/now and /pg/query?n= (\"host=/run/postgresql "
                 "dbname=app\")");
  app.add_option("--driver", config.driver,
                 "event-loop driver: uv, ev, event, epoll, poll or uring");
  app.add_flag("--log", config.log, "write a line per notable event and request to stderr");
  std::string access_log_path;
  app.add_option("--access-log", access_log_path,
                 "append a line per response to FILE in nginx's combined format, with the "
                 "request time (- for standard output); SIGHUP reopens it (logrotate)")
      ->type_name("FILE");
  auto* cert = app.add_option("--tls-cert", config.tls_cert,
                              "PEM certificate chain (the server's certificate first): serve "
                              "HTTPS, with --tls-key")
                   ->check(CLI::ExistingFile);
  auto* key = app.add_option("--tls-key", config.tls_key, "PEM private key of --tls-cert")
                  ->check(CLI::ExistingFile);
  auto* proxy_protocol =
      app.add_flag("--proxy-protocol", config.proxy_protocol,
                   "every connection starts with a PROXY protocol header (v1 or v2) naming the "
                   "client: behind HAProxy's send-proxy, nginx's proxy_protocol, a load balancer");
  app.add_option("--proxy-protocol-from", config.proxy_protocol_from,
                 "with --proxy-protocol: only connections from these proxies (addresses or CIDR "
                 "blocks, 10.0.0.0/8) send the header; others are served as direct clients; "
                 "repeatable")
      ->type_name("CIDR")
      ->needs(proxy_protocol);
  std::vector<std::string> proxies;
  app.add_option("--proxy", proxies,
                 "PREFIX=URL[,URL...]: forward requests under PREFIX to an upstream HTTP "
                 "server, PREFIX taken off the path (/api=http://127.0.0.1:9000/v1); several "
                 "URLs are taken in turn, each as often as its weight (\"URL weight=5\", 1 to "
                 "1000, 1 without), one that fails (refuses, drops or times out) is skipped "
                 "for 10 s (WebSocket upgrades are tunnelled); repeatable")
      ->type_name("PREFIX=URL[ weight=N][,URL...]");
  std::string balance = "round-robin";
  app.add_option("--proxy-balance", balance,
                 "how each --proxy with several URLs picks one: round-robin (in turn) or "
                 "least-conn (the one with the fewest requests and WebSocket tunnels in flight)")
      ->check(CLI::IsMember({"round-robin", "least-conn"}))
      ->capture_default_str();
  cert->needs(key);
  key->needs(cert);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version print and exit 0; a usage error exits 2, as the checks below do
    // (CLI11's own codes, 105 to 115, say nothing to a shell script).
    return app.exit(e) == 0 ? 0 : 2;
  }

  if (!parse_listen(listen, config.host, config.port)) {
    std::fprintf(stderr, "weft-httpd: --listen %s is not HOST:PORT, [V6]:PORT or :PORT\n",
                 listen.c_str());
    return 2;
  }
  config.proxy_least_conn = balance == "least-conn";
  for (const std::string& proxy : proxies) {
    const std::size_t equals = proxy.find('=');
    std::string prefix = equals == std::string::npos ? std::string() : proxy.substr(0, equals);
    while (!prefix.empty() && prefix.back() == '/') {
      prefix.pop_back();
    }
    if (equals == std::string::npos || proxy.front() != '/') {
      std::fprintf(stderr, "weft-httpd: --proxy %s is not PREFIX=URL with PREFIX a path (/api)\n",
                   proxy.c_str());
      return 2;
    }
    weft_httpd::settings::proxy_route route{prefix, {}, {}};
    const std::string urls = proxy.substr(equals + 1);
    for (std::size_t at = 0; at <= urls.size();) {
      const std::size_t comma = std::min(urls.find(',', at), urls.size());
      const std::string upstream = urls.substr(at, comma - at);
      unsigned weight = 1;
      const std::size_t space = upstream.find(' ');
      if (space != std::string::npos) {
        const std::string after = upstream.substr(space + 1);
        if (!parse_weight(after, weight)) {
          std::fprintf(stderr,
                       "weft-httpd: --proxy %s: '%s' is not weight=N with N from 1 to 1000 after "
                       "the URL\n",
                       proxy.c_str(), after.c_str());
          return 2;
        }
      }
      route.upstreams.push_back(upstream.substr(0, space));
      route.weights.push_back(weight);
      at = comma + 1;
    }
    config.proxies.push_back(std::move(route));
  }
  config.root = std::filesystem::absolute(config.root).lexically_normal().string();
  raise_descriptor_limit();
  // Until worker 0's watcher waits on SIGHUP (which catches it from then on), one ignored rather
  // than fatal.
  ::signal(SIGHUP, SIG_IGN);

  try {
    std::unique_ptr<weft_httpd::access_log_file> access;
    if (!access_log_path.empty()) {
      access = std::make_unique<weft_httpd::access_log_file>(access_log_path);
    }
    weft_httpd::site site(config);
    weft::http::server_options options;
    options.host = config.host;
    options.port = config.port;
    options.workers = site.worker_count();
    options.driver = config.driver;
    options.handle_signals = true;
    options.proxy_protocol = config.proxy_protocol;
    options.proxy_protocol_from = config.proxy_protocol_from;
    // gzip for the page, /stats and the text files of --root, as nginx's "gzip on".
    options.compression.enabled = true;
    // /upload streams what it reads; no other route reads a body.
    options.limits.max_body_size = std::uint64_t{1} << 30;
    weft::net::tls_server_options tls;
    if (!config.tls_cert.empty()) {
      tls.certificate_file = config.tls_cert;
      tls.private_key_file = config.tls_key;
      tls.alpn = {"http/1.1"};
      options.tls = weft::net::tls_context::server(tls);
    }
    weft::http::server* running = nullptr;
    weft::task<void> reloader;  // worker 0's SIGHUP watcher
    options.on_worker_start = [&](unsigned worker) {
      site.start_worker(worker);
      if (worker != 0) {
        return;
      }
      // Without --tls-cert there is nothing to read again, but a SIGHUP (a closed terminal, a
      // reload by habit) must not end the server, as its default action would.
      reloader = weft::spawn(
          [&] {
            for (;;) {
              weft::signals::wait({SIGHUP});
              if (options.tls == nullptr && access == nullptr) {
                std::printf(
                    "weft-httpd: SIGHUP: nothing to reload (no --tls-cert, no --access-log)\n");
                std::fflush(stdout);
                continue;
              }
              if (access != nullptr) {
                // After logrotate moved the file: lines go to a new one from now on.
                try {
                  access->reopen();
                  std::printf("weft-httpd: SIGHUP: reopened %s\n", access->path().c_str());
                } catch (const std::exception& failure) {
                  std::printf("weft-httpd: SIGHUP: kept the open access log: %s\n", failure.what());
                }
              }
              if (options.tls != nullptr) {
                try {
                  running->set_tls(weft::net::tls_context::server(tls));
                  std::printf("weft-httpd: SIGHUP: reloaded %s and %s\n",
                              tls.certificate_file.c_str(), tls.private_key_file.c_str());
                } catch (const std::exception& failure) {
                  std::printf("weft-httpd: SIGHUP: kept the running certificate: %s\n",
                              failure.what());
                }
              }
              std::fflush(stdout);  // status lines, as the startup line (a log reads them)
            }
          },
          weft::spawn_options{.name = "weft-httpd reload", .background = true});
    };
    options.on_worker_stop = [&](unsigned worker) {
      if (worker == 0 && reloader.valid()) {
        reloader.cancel("weft-httpd: the server stopped");
      }
      site.stop_worker(worker);
    };
    if (config.log) {
      options.log = weft_httpd::log_line;
    }
    if (access != nullptr) {
      options.access_log = [log = access.get()](const weft::http::access_record& record) {
        log->write(weft::http::combined_log_line(record));
      };
    }
    site.attach_proxies(options);
    // The startup line goes out once every worker has started, the first with SIGINT and
    // SIGTERM already caught (tcp_server.hpp): whoever reads it may press Ctrl-C at once.
    std::function<void()> announce;
    std::atomic<unsigned> started{0};
    options.on_worker_start = [before = std::move(options.on_worker_start), &announce, &started,
                               workers = site.worker_count()](unsigned worker) {
      if (before) {
        before(worker);
      }
      if (started.fetch_add(1) + 1 == workers) {
        announce();
      }
    };
    weft::http::server server(options, site.make_router());
    running = &server;
    site.set_server(&server);
    server.listen();
    const std::string shown_host =
        config.host.find(':') != std::string::npos ? "[" + config.host + "]" : config.host;
    announce = [&] {
      std::printf(
          "weft-httpd: serving %s://%s:%u/ with %u worker%s on the %s driver (root %s%s)\n"
          "%s%s"
          "weft-httpd: Ctrl-C stops it\n",
          config.tls_cert.empty() ? "http" : "https", shown_host.c_str(),
          static_cast<unsigned>(server.port()), site.worker_count(),
          site.worker_count() == 1 ? "" : "s",
          config.driver.empty() ? "default" : config.driver.c_str(), config.root.c_str(),
          config.pg.empty() ? "" : ", PostgreSQL routes on",
          config.tls_cert.empty() ? "" : "weft-httpd: SIGHUP reloads the certificate and key\n",
          proxy_lines(config).c_str());
      std::fflush(stdout);
    };
    server.serve();
    std::printf("weft-httpd: stopped after %llu requests\n",
                static_cast<unsigned long long>(server.stats().total.requests));
    return 0;
  } catch (const std::exception& failure) {
    std::fprintf(stderr, "weft-httpd: %s\n", failure.what());
    return 1;
  }
}

// weft::http::client against a server no one here wrote: nginx (Debian's nginx-light), started
// by the test as the current user with a config in a temporary directory. Keep-alive reuse is
// proven with nginx's own $connection and $connection_requests; also a static file larger than
// one read, HEAD, 404, a real redirect, concurrent requests, and gzip from nginx's gzip module
// decoded as it arrives.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "http/client_support.hpp"
#include "http/server_support.hpp"
#include "net/tls_support.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::run_clean;
namespace fs = std::filesystem;

const char* const nginx_program = "/usr/sbin/nginx";

// Two distinct free loopback ports: both sockets stay bound until both are known (one socket
// at a time, the kernel handed out the same port twice under ctest -j4, 2026-12-06, and nginx
// refused its "duplicate listen").
std::pair<std::uint16_t, std::uint16_t> free_ports() {
  std::uint16_t ports[2] = {0, 0};
  int fds[2] = {-1, -1};
  for (int i = 0; i < 2; ++i) {
    fds[i] = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (fds[i] < 0 || ::bind(fds[i], reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        ::getsockname(fds[i], reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      const std::string reason = std::strerror(errno);
      for (int fd : fds) {
        if (fd >= 0) {
          ::close(fd);
        }
      }
      throw std::runtime_error("free_ports: " + reason);
    }
    ports[i] = ntohs(address.sin_port);
  }
  ::close(fds[0]);
  ::close(fds[1]);
  return {ports[0], ports[1]};
}

bool accepts_connections(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(port);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  ::close(fd);
  return ok;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// nginx in one process (daemon off, master_process off), on free loopback ports; stopped and
// reaped, and its directory removed, by the destructor.
class nginx_server {
 public:
  nginx_server() {
    char pattern[] = "/tmp/weft-nginx-XXXXXX";
    if (::mkdtemp(pattern) == nullptr) {
      throw std::runtime_error(std::string("mkdtemp: ") + std::strerror(errno));
    }
    dir_ = pattern;
    try {
      fs::create_directories(dir_ / "root" / "static");
      std::ofstream(dir_ / "root" / "static" / "file.txt") << file_body();
      // A port found free can be taken by another test's process before nginx binds it: then
      // nginx exits saying so, and it starts again on two other ports.
      for (int attempt = 1;; ++attempt) {
        std::tie(port_, tls_port_) = free_ports();
        write_config();
        const std::string failure = start();
        if (failure.empty()) {
          break;
        }
        if (attempt == 5 || failure.find("Address already in use") == std::string::npos) {
          throw std::runtime_error(failure);
        }
      }
    } catch (...) {
      stop();
      throw;
    }
  }
  ~nginx_server() { stop(); }
  nginx_server(const nginx_server&) = delete;
  nginx_server& operator=(const nginx_server&) = delete;

  std::string url(std::string_view path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + std::string(path);
  }
  // The HTTPS listener, by the name its certificate carries.
  std::string https_url(std::string_view path) const {
    return "https://localhost:" + std::to_string(tls_port_) + std::string(path);
  }
  static std::string file_body() {
    std::string body;
    for (int i = 0; body.size() < 100000; ++i) {
      body += "line " + std::to_string(i) + " of the static file\n";
    }
    return body;
  }

 private:
  // Stops and reaps nginx, if it runs, and removes its directory.
  void stop() noexcept {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int status = 0;
      ::waitpid(pid_, &status, 0);
      pid_ = -1;
    }
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
  void write_config() {
    std::ofstream(dir_ / "nginx.conf")
        << "daemon off;\n"
        << "master_process off;\n"
        << "worker_processes 1;\n"
        << "pid " << (dir_ / "nginx.pid").string() << ";\n"
        << "error_log " << (dir_ / "error.log").string() << " warn;\n"
        << "events { worker_connections 256; }\n"
        << "http {\n"
        << "  access_log off;\n"
        << "  default_type text/plain;\n"
        << "  keepalive_timeout 60s;\n"
        << "  client_body_temp_path " << dir_.string() << "/cb;\n"
        << "  proxy_temp_path " << dir_.string() << "/px;\n"
        << "  fastcgi_temp_path " << dir_.string() << "/fc;\n"
        << "  uwsgi_temp_path " << dir_.string() << "/uw;\n"
        << "  scgi_temp_path " << dir_.string() << "/sc;\n"
        << "  server {\n"
        << "    listen 127.0.0.1:" << port_ << ";\n"
        << "    listen 127.0.0.1:" << tls_port_ << " ssl;\n"
        << "    ssl_certificate " << tls_test::certs().cert << ";\n"
        << "    ssl_certificate_key " << tls_test::certs().key << ";\n"
        << "    ssl_protocols TLSv1.2;\n"  // the client's TLS 1.2 path (weft's server tests 1.3)
        << "    root " << (dir_ / "root").string() << ";\n"
        << "    location = /scheme { return 200 \"$scheme $ssl_protocol $connection\\n\"; }\n"
        << "    location = /to-plain { return 302 http://127.0.0.1:" << port_ << "/scheme; }\n"
        << "    location = /secure-cookie {\n"
        << "      add_header Set-Cookie \"token=t1; Path=/; Secure\";\n"
        << "      return 200 \"set\\n\";\n"
        << "    }\n"
        << "    location = /conn {\n"
        << "      return 200 \"$connection $connection_requests\\n\";\n"
        << "    }\n"
        << "    location = /small { client_max_body_size 1k; return 200 \"small\\n\"; }\n"
        << "    location = /moved { return 302 /conn; }\n"
        << "    location = /login {\n"
        << "      add_header Set-Cookie \"session=n9; Path=/; HttpOnly\";\n"
        << "      add_header Set-Cookie \"pref=dark; Path=/; Max-Age=600\";\n"
        << "      return 302 /echo-cookie;\n"
        << "    }\n"
        << "    location = /logout {\n"
        << "      add_header Set-Cookie \"session=; Path=/; Expires=Thu, 01 Jan 1970 00:00:00 "
           "GMT\";\n"
        << "      return 200 \"bye\\n\";\n"
        << "    }\n"
        << "    location = /echo-cookie { return 200 \"cookie=[$http_cookie]\\n\"; }\n"
        << "    location /gz/ {\n"
        << "      alias " << (dir_ / "root" / "static").string() << "/;\n"
        << "      gzip on; gzip_min_length 1; gzip_types text/plain;\n"
        << "    }\n"
        << "  }\n"
        << "}\n";
  }
  // Starts nginx on the configuration written; "" once it accepts connections, else why it
  // exited (the error log). Throws when it neither exits nor accepts within 10 s.
  std::string start() {
    const std::string prefix = dir_.string() + "/";
    const std::string conf = (dir_ / "nginx.conf").string();
    const std::string log = (dir_ / "error.log").string();
    std::error_code ignored;
    fs::remove(log, ignored);  // an earlier attempt's
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setsid();
      ::execl(nginx_program, nginx_program, "-p", prefix.c_str(), "-c", conf.c_str(), "-e",
              log.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    // nginx is ready once it accepts a connection; it exits at once on a bad config or a taken
    // port (then the error log says why).
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!accepts_connections(port_)) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return "nginx exited at start: " + read_file(dir_ / "error.log");
      }
      if (std::chrono::steady_clock::now() > deadline) {
        throw std::runtime_error("nginx did not accept connections within 10 s: " +
                                 read_file(dir_ / "error.log"));
      }
      std::this_thread::sleep_for(5ms);  // a readiness poll of another process, bounded above
    }
    return {};
  }

  fs::path dir_;
  std::uint16_t port_ = 0;
  std::uint16_t tls_port_ = 0;
  pid_t pid_ = -1;
};

class HttpClientNginx : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access(nginx_program, X_OK) != 0) {
      GTEST_SKIP() << nginx_program << " is missing: install Debian's nginx-light to run the "
                   << "client against a real server (scripts/install-deps)";
    }
    nginx_ = std::make_unique<nginx_server>();
  }
  std::unique_ptr<nginx_server> nginx_;
};

// "$connection $connection_requests\n" -> {connection, requests}.
std::pair<long, long> connection_of(const std::string& body) {
  std::istringstream in(body);
  long connection = -1;
  long requests = -1;
  in >> connection >> requests;
  return {connection, requests};
}

TEST_F(HttpClientNginx, KeepAliveReusesOneConnection) {
  run_clean([&] {
    weft::http::client web;
    long first = -1;
    for (long i = 1; i <= 10; ++i) {
      weft::http::response r = web.get(nginx_->url("/conn"));
      ASSERT_EQ(r.status, weft::http::status::ok);
      const auto [connection, requests] = connection_of(r.body);
      if (i == 1) {
        first = connection;
      }
      EXPECT_EQ(connection, first) << "request " << i << " went out on another connection";
      EXPECT_EQ(requests, i);
    }
    EXPECT_EQ(web.stats().connections_opened, 1u);
    EXPECT_EQ(web.stats().connections_reused, 9u);
    web.close();
  });
}

TEST_F(HttpClientNginx, StaticFileHeadAndNotFound) {
  run_clean([&] {
    weft::http::client web;
    weft::http::response file = web.get(nginx_->url("/static/file.txt"));
    EXPECT_EQ(file.status, weft::http::status::ok);
    EXPECT_EQ(file.body, nginx_server::file_body());
    EXPECT_EQ(file.headers.get("Content-Length"), std::to_string(file.body.size()));

    weft::http::response head = web.head(nginx_->url("/static/file.txt"));
    EXPECT_EQ(head.status, weft::http::status::ok);
    EXPECT_EQ(head.headers.get("Content-Length"), std::to_string(nginx_server::file_body().size()));
    EXPECT_TRUE(head.body.empty());

    weft::http::response missing = web.get(nginx_->url("/static/nothing-here"));
    EXPECT_EQ(missing.status, weft::http::status::not_found);
    EXPECT_NE(missing.body.find("404"), std::string::npos);

    // All three on one connection: the framing of each stayed in step.
    const auto [connection, requests] = connection_of(web.get(nginx_->url("/conn")).body);
    EXPECT_EQ(requests, 4);
    EXPECT_EQ(web.stats().connections_opened, 1u);
    web.close();
  });
}

TEST_F(HttpClientNginx, StreamingAStaticFile) {
  run_clean([&] {
    weft::http::client web;
    std::string received;
    std::size_t pieces = 0;
    int status = 0;
    web.request_streaming(
        weft::http::request{}, nginx_->url("/static/file.txt"),
        [&](const weft::http::response& head) { status = weft::http::code_of(head.status); },
        [&](std::string_view piece) {
          received += piece;
          ++pieces;
        });
    EXPECT_EQ(status, 200);
    EXPECT_EQ(received, nginx_server::file_body());
    EXPECT_GE(pieces, 1u);
    web.close();
  });
}

TEST_F(HttpClientNginx, GzipFromNginxIsDecodedUnlessTheRequestAskedForItItself) {
  run_clean([&] {
    weft::http::client web;
    // Asked for by the client: decoded, and the wire's Content-Encoding and Content-Length
    // taken out of the fields.
    weft::http::response file = web.get(nginx_->url("/gz/file.txt"));
    EXPECT_EQ(file.status, weft::http::status::ok);
    EXPECT_EQ(file.body, nginx_server::file_body());
    EXPECT_FALSE(file.headers.contains("Content-Encoding"));
    EXPECT_FALSE(file.headers.contains("Content-Length"));
    std::string streamed;
    web.request_streaming(
        weft::http::request{}, nginx_->url("/gz/file.txt"),
        [&](const weft::http::response& head) {
          EXPECT_FALSE(head.headers.contains("Content-Encoding"));
        },
        [&](std::string_view piece) { streamed += piece; });
    EXPECT_EQ(streamed, nginx_server::file_body());
    // Asked for by the caller: the bytes as nginx sent them, gzip (which proves nginx did).
    weft::http::request own;
    own.headers.add("Accept-Encoding", "gzip");
    weft::http::response raw = web.request(own, nginx_->url("/gz/file.txt"));
    EXPECT_EQ(raw.headers.get("Content-Encoding"), "gzip");
    EXPECT_LT(raw.body.size(), nginx_server::file_body().size());
    EXPECT_EQ(raw.body.substr(0, 2), "\x1f\x8b");
    web.close();
    // decompress off: nothing asked for, identity sent.
    weft::http::client plain({.decompress = false});
    weft::http::response identity = plain.get(nginx_->url("/gz/file.txt"));
    EXPECT_FALSE(identity.headers.contains("Content-Encoding"));
    EXPECT_EQ(identity.body, nginx_server::file_body());
    plain.close();
  });
}

TEST_F(HttpClientNginx, RedirectFromNginxIsFollowed) {
  run_clean([&] {
    weft::http::client web({.max_redirects = 2});
    weft::http::response r = web.get(nginx_->url("/moved"));
    EXPECT_EQ(r.status, weft::http::status::ok);
    EXPECT_EQ(connection_of(r.body).second, 2) << r.body;  // the same connection's 2nd request
    EXPECT_EQ(web.stats().redirects, 1u);
    web.close();
  });
}

TEST_F(HttpClientNginx, ACookieJarKeepsWhatNginxSetsThroughARedirectAndForgetsAnExpiredOne) {
  run_clean([&] {
    auto jar = std::make_shared<weft::http::cookie_jar>();
    weft::http::client web({.max_redirects = 2, .cookies = jar});
    // The Set-Cookie fields come on the 302; the redirect's request already carries them.
    EXPECT_EQ(web.get(nginx_->url("/login")).body, "cookie=[session=n9; pref=dark]\n");
    EXPECT_EQ(jar->size(), 2u);
    EXPECT_EQ(web.get(nginx_->url("/logout")).body, "bye\n");
    EXPECT_EQ(web.get(nginx_->url("/echo-cookie")).body, "cookie=[pref=dark]\n");
    // A request's own Cookie field wins over the jar.
    weft::http::request own;
    own.headers.add("Cookie", "mine=1");
    EXPECT_EQ(web.request(own, nginx_->url("/echo-cookie")).body, "cookie=[mine=1]\n");
    // Without a jar nothing is kept.
    weft::http::client plain({.max_redirects = 2});
    EXPECT_EQ(plain.get(nginx_->url("/login")).body, "cookie=[]\n");
    web.close();
    plain.close();
  });
}

TEST_F(HttpClientNginx, ConcurrentCoroutinesShareThePool) {
  run_clean([&] {
    weft::http::client web({.max_connections_per_host = 4});
    std::vector<weft::task<void>> tasks;
    std::vector<long> connections;
    for (int i = 0; i < 16; ++i) {
      tasks.push_back(weft::spawn([&] {
        for (int j = 0; j < 10; ++j) {
          weft::http::response r = web.get(nginx_->url("/conn"));
          EXPECT_EQ(r.status, weft::http::status::ok);
          connections.push_back(connection_of(r.body).first);
        }
      }));
    }
    for (auto& task : tasks) {
      task.await();
    }
    std::sort(connections.begin(), connections.end());
    connections.erase(std::unique(connections.begin(), connections.end()), connections.end());
    EXPECT_LE(connections.size(), 4u);
    EXPECT_EQ(web.stats().responses, 160u);
    EXPECT_LE(web.stats().connections_opened, 4u);
    web.close();
  });
}

// HTTPS: nginx's TLS listener, verified against the test authority, one connection reused,
// a file larger than a record, a redirect to the plain listener followed, and a Secure
// cookie kept for https only.
TEST_F(HttpClientNginx, HttpsIsVerifiedReusedAndFollowedAcrossSchemes) {
  run_clean([&] {
    weft::net::tls_client_options tls;
    tls.ca_file = tls_test::certs().ca;
    auto jar = std::make_shared<weft::http::cookie_jar>();
    weft::http::client web(
        {.max_redirects = 2, .cookies = jar, .tls = weft::net::tls_context::client(tls)});
    long first = -1;
    for (int i = 0; i < 5; ++i) {
      weft::http::response r = web.get(nginx_->https_url("/scheme"));
      ASSERT_EQ(r.status, weft::http::status::ok);
      std::istringstream in(r.body);
      std::string scheme;
      std::string protocol;
      long connection = -1;
      in >> scheme >> protocol >> connection;
      EXPECT_EQ(scheme, "https");
      EXPECT_EQ(protocol, "TLSv1.2");
      if (i == 0) {
        first = connection;
      }
      EXPECT_EQ(connection, first) << "request " << i << " opened a new connection";
    }
    EXPECT_EQ(web.stats().connections_opened, 1u);
    EXPECT_EQ(web.get(nginx_->https_url("/static/file.txt")).body, nginx_server::file_body());
    // https -> http: the redirect is followed on a connection of the other scheme.
    weft::http::response plain = web.get(nginx_->https_url("/to-plain"));
    EXPECT_EQ(plain.body.rfind("http ", 0), 0u) << plain.body;
    // A Secure cookie set over https goes back over https only.
    web.get(nginx_->https_url("/secure-cookie"));
    EXPECT_EQ(web.get(nginx_->https_url("/echo-cookie")).body, "cookie=[token=t1]\n");
    EXPECT_EQ(web.get(nginx_->url("/echo-cookie")).body, "cookie=[]\n");
    web.close();
  });
}

TEST_F(HttpClientNginx, AnUntrustedCertificateIsRefusedNamingWhy) {
  run_clean([&] {
    weft::http::client web;  // the system's authorities, which never signed the test's
    try {
      web.get(nginx_->https_url("/scheme"));
      ADD_FAILURE() << "accepted a certificate no trusted authority signed";
    } catch (const weft::net::tls_error& refused) {
      EXPECT_NE(std::string(refused.what()).find("certificate verify failed"), std::string::npos)
          << refused.what();
      EXPECT_NE(std::string(refused.what()).find("localhost:"), std::string::npos)
          << refused.what();
    }
    EXPECT_EQ(web.stats().idle_connections, 0u);
    web.close();
  });
}

TEST_F(HttpClientNginx, ExpectContinueSendsTheBodyOnlyWhenNginxAsksForIt) {
  run_clean([&] {
    weft::http::client web({.request_timeout = 10s, .expect_continue_timeout = 60s});
    weft::http::request post;
    post.method = weft::http::method::post;
    post.headers.add("Expect", "100-continue");
    std::uint64_t given = 0;
    const std::string piece(4096, 'n');
    // Past client_max_body_size: nginx answers 413 at the head, and no byte is taken.
    post.headers.add("Content-Length", "100000");
    const weft::http::response large =
        web.request(post, nginx_->url("/small"), http_test::repeated_piece(piece, 100000, given));
    EXPECT_EQ(code_of(large.status), 413);
    EXPECT_EQ(given, 0u);
    // Within it: nginx says 100 Continue (the client's 60 s would otherwise pass its 10 s
    // limit), reads the whole body, and keeps the connection for the next request.
    post.headers.set("Content-Length", "1000");
    const weft::http::response small =
        web.request(post, nginx_->url("/small"), http_test::repeated_piece(piece, 1000, given));
    EXPECT_EQ(small.body, "small\n");
    EXPECT_EQ(given, 1000u);
    const auto [connection, requests] = connection_of(web.get(nginx_->url("/conn")).body);
    EXPECT_EQ(requests, 2);
    EXPECT_EQ(web.stats().connections_opened, 2u);  // the 413's was not kept
    web.close();
  });
}

}  // namespace

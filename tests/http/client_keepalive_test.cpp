// weft::http::client: keep-alive reuse through the per-origin pool, stale connections the
// server closed or wrote to unasked (detected before every reuse, or retried once when the
// method is idempotent and the close raced the request), the server's Connection: close, the
// idle timeout and the per-host connection limit.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <filesystem>
#include <string>
#include <vector>

#include "http/client_support.hpp"

namespace {

using namespace std::chrono_literals;
using http_client_test::ok;
using http_client_test::received;
using http_client_test::script_server;
using weft_test::run_clean;

// The keep-alive settings, as the kernel has them, of this process's socket bound to
// 127.0.0.1:local_port, found among /proc/self/fd; on is -1 when no such socket is open.
struct keepalive_seen {
  int on = -1, idle = -1, interval = -1, probes = -1;
};
keepalive_seen keepalive_of_local_port(unsigned local_port) {
  keepalive_seen seen;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    const int fd = std::stoi(entry.path().filename().string());
    sockaddr_in address{};
    socklen_t length = sizeof address;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0 ||
        address.sin_family != AF_INET || ntohs(address.sin_port) != local_port) {
      continue;
    }
    socklen_t size = sizeof(int);
    EXPECT_EQ(::getsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &seen.on, &size), 0);
    EXPECT_EQ(::getsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &seen.idle, &size), 0);
    EXPECT_EQ(::getsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &seen.interval, &size), 0);
    EXPECT_EQ(::getsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &seen.probes, &size), 0);
    break;
  }
  return seen;
}

TEST(HttpClientKeepAlive, SequentialRequestsReuseOneConnection) {
  run_clean([] {
    script_server server([](weft::tcp::stream& s, const received& r) {
      s.write_all(ok(r.target + " " + std::to_string(r.on_connection)));
    });
    weft::http::client web;
    for (int i = 0; i < 5; ++i) {
      weft::http::response r = web.get(server.url("/n"));
      EXPECT_EQ(r.status, weft::http::status::ok);
      EXPECT_EQ(r.body, "/n " + std::to_string(i));
    }
    const weft::http::client_stats stats = web.stats();
    EXPECT_EQ(stats.connections_opened, 1u);
    EXPECT_EQ(stats.connections_reused, 4u);
    EXPECT_EQ(stats.requests, 5u);
    EXPECT_EQ(stats.responses, 5u);
    EXPECT_EQ(stats.idle_connections, 1u);
    EXPECT_EQ(server.connections(), 1);
    EXPECT_EQ(server.requests()[0].field("Host"), "127.0.0.1:" + std::to_string(server.port()));
    EXPECT_EQ(server.requests()[0].field("User-Agent"), "weft");
    web.close();
    server.close();
  });
}

// The check before every reuse sees the FIN of a server that closed the idle connection, for
// milliseconds or seconds: the connection is dropped before the request is written, so a POST
// (never retried) goes through, and a GET needs no retry.
TEST(HttpClientKeepAlive, ConnectionTheServerClosedWhileIdleIsNotReused) {
  for (const weft::http::method second : {weft::http::method::post, weft::http::method::get}) {
    SCOPED_TRACE(weft::http::method_name(second));
    run_clean([&] {
      weft::event closed;
      script_server server([&](weft::tcp::stream& s, const received& r) {
        s.write_all(ok("c" + std::to_string(r.connection)));
        if (r.connection == 0) {
          s.close();  // a server closing an idle keep-alive connection (FIN)
          closed.set();
        }
      });
      weft::http::client web;
      EXPECT_EQ(web.get(server.url("/")).body, "c0");
      closed.wait(weft::timeout(5s));
      weft::http::request again;
      again.method = second;
      again.body = second == weft::http::method::post ? "data" : "";
      EXPECT_EQ(web.request(again, server.url("/")).body, "c1");
      const weft::http::client_stats stats = web.stats();
      EXPECT_EQ(stats.connections_opened, 2u);
      EXPECT_EQ(stats.retries, 0u);
      EXPECT_EQ(stats.connections_reused, 0u);
      web.close();
      server.close();
    });
  }
}

// A server that writes something unasked on an idle kept-alive connection (a stray response, a
// body after a HEAD answer, a 408 before it closes): taken for the next request's answer, it
// would make every later answer on that connection one late. The connection is dropped
// however briefly it was idle.
TEST(HttpClientKeepAlive, BytesAServerSentUnaskedAreNeverTakenForTheNextAnswer) {
  run_clean([] {
    weft::event answered;
    weft::event stray_sent;
    script_server server([&](weft::tcp::stream& s, const received& r) {
      s.write_all(ok(r.target + " on " + std::to_string(r.connection)));
      if (r.connection == 0 && r.on_connection == 0) {
        answered.wait(weft::timeout(5s));
        s.write_all(ok("EVIL"));
        stray_sent.set();
      }
    });
    weft::http::client web;
    EXPECT_EQ(web.get(server.url("/a")).body, "/a on 0");
    answered.set();
    stray_sent.wait(weft::timeout(5s));
    EXPECT_EQ(web.get(server.url("/b")).body, "/b on 1");
    EXPECT_EQ(web.get(server.url("/c")).body, "/c on 1");
    const weft::http::client_stats stats = web.stats();
    EXPECT_EQ(stats.connections_opened, 2u);
    EXPECT_EQ(stats.connections_reused, 1u);
    EXPECT_EQ(stats.retries, 0u);
    web.close();
    server.close();
  });
}

// The race the peek cannot see: the server closes the connection just as the request arrives.
void stale_on_arrival(bool reset, weft::http::method method, bool expect_retry) {
  run_clean([&] {
    script_server server([&](weft::tcp::stream& s, const received& r) {
      if (r.connection == 0 && r.on_connection == 1) {
        if (reset) {
          s.close_reset();
        } else {
          s.close();
        }
        return;
      }
      s.write_all(ok("c" + std::to_string(r.connection)));
    });
    weft::http::client web;
    EXPECT_EQ(web.get(server.url("/")).body, "c0");
    weft::http::request second;
    second.method = method;
    second.body = method == weft::http::method::get ? "" : "payload";
    if (expect_retry) {
      weft::http::response r = web.request(second, server.url("/again"));
      EXPECT_EQ(r.body, "c1");
      EXPECT_EQ(web.stats().retries, 1u);
      EXPECT_EQ(web.stats().connections_opened, 2u);
      ASSERT_EQ(server.requests().size(), 3u);
      EXPECT_EQ(server.requests()[2].target, "/again");
      EXPECT_EQ(server.requests()[2].connection, 1);
    } else {
      try {
        web.request(second, server.url("/again"));
        ADD_FAILURE() << "a POST on a connection the server closed was not reported";
      } catch (const weft::io_error& failure) {
        const std::string what = failure.what();
        EXPECT_NE(what.find("not idempotent"), std::string::npos) << what;
        EXPECT_NE(what.find(server.url("/again")), std::string::npos) << what;
      }
      EXPECT_EQ(web.stats().retries, 0u);
      EXPECT_EQ(server.requests().size(), 2u) << "the POST was sent twice";
    }
    EXPECT_EQ(web.stats().active_connections, 0u);
    web.close();
    server.close();
  });
}

TEST(HttpClientKeepAlive, GetOnAConnectionClosedAsTheRequestArrivesIsRetriedOnce) {
  stale_on_arrival(false, weft::http::method::get, true);
}

TEST(HttpClientKeepAlive, GetOnAConnectionResetAsTheRequestArrivesIsRetriedOnce) {
  stale_on_arrival(true, weft::http::method::get, true);
}

TEST(HttpClientKeepAlive, PutIsIdempotentAndRetried) {
  stale_on_arrival(false, weft::http::method::put, true);
}

TEST(HttpClientKeepAlive, PostOnAStaleConnectionIsNotRetried) {
  stale_on_arrival(false, weft::http::method::post, false);
}

TEST(HttpClientKeepAlive, RetryHappensOnlyOnce) {
  run_clean([] {
    // Every second request on any connection is answered by a close: the retry's fresh
    // connection answers its first request, so make the server close on first requests of
    // later connections instead.
    script_server server([](weft::tcp::stream& s, const received& r) {
      if (r.connection == 0 && r.on_connection == 0) {
        s.write_all(ok("first"));
        return;
      }
      s.close();
    });
    weft::http::client web;
    EXPECT_EQ(web.get(server.url("/")).body, "first");
    EXPECT_THROW(web.get(server.url("/")), weft::io_error);
    EXPECT_EQ(web.stats().retries, 1u);
    EXPECT_EQ(server.requests().size(), 3u);
    web.close();
    server.close();
  });
}

TEST(HttpClientKeepAlive, ServerConnectionCloseIsHonoured) {
  run_clean([] {
    script_server server([](weft::tcp::stream& s, const received&) {
      // Connection: close, and the server leaves the socket open: the client must not reuse it.
      s.write_all(ok("bye", "Connection: close\r\n"));
    });
    weft::http::client web;
    EXPECT_EQ(web.get(server.url("/")).body, "bye");
    EXPECT_EQ(web.stats().idle_connections, 0u);
    EXPECT_EQ(web.get(server.url("/")).body, "bye");
    EXPECT_EQ(web.stats().connections_opened, 2u);
    EXPECT_EQ(server.connections(), 2);
    web.close();
    server.close();
  });
}

TEST(HttpClientKeepAlive, RequestConnectionCloseIsNotPooled) {
  run_clean([] {
    script_server server([](weft::tcp::stream& s, const received&) { s.write_all(ok("x")); });
    weft::http::client web;
    web.get(server.url("/"), {{"Connection", "close"}});
    EXPECT_EQ(web.stats().idle_connections, 0u);
    server.ended_event().wait(weft::timeout(5s));  // the client closed it
    EXPECT_EQ(server.ended(), 1);
    web.close();
    server.close();
  });
}

TEST(HttpClientKeepAlive, IdleConnectionIsClosedAfterIdleTimeout) {
  run_clean([] {
    script_server server([](weft::tcp::stream& s, const received&) { s.write_all(ok("x")); });
    weft::http::client web({.idle_timeout = 100ms});
    web.get(server.url("/"));
    const auto idle_from = std::chrono::steady_clock::now();
    EXPECT_EQ(web.stats().idle_connections, 1u);
    server.ended_event().wait(weft::timeout(10s));  // the pool's check closed it
    EXPECT_GE(std::chrono::steady_clock::now() - idle_from, 100ms);
    EXPECT_EQ(web.stats().idle_connections, 0u);
    EXPECT_EQ(web.stats().connections_closed, 1u);
    web.close();
    server.close();
  });
}

TEST(HttpClientKeepAlive, ConcurrentRequestsShareAtMostMaxConnectionsPerHost) {
  run_clean([] {
    script_server server([](weft::tcp::stream& s, const received& r) {
      weft::yield();  // let the other requests queue up
      s.write_all(ok(r.target));
    });
    weft::http::client web({.max_connections_per_host = 3});
    std::vector<weft::task<void>> tasks;
    for (int i = 0; i < 20; ++i) {
      tasks.push_back(weft::spawn([&, i] {
        const std::string path = "/" + std::to_string(i);
        EXPECT_EQ(web.get(server.url(path)).body, path);
      }));
    }
    for (auto& task : tasks) {
      task.await();
    }
    const weft::http::client_stats stats = web.stats();
    EXPECT_EQ(stats.responses, 20u);
    EXPECT_EQ(stats.connections_opened, 3u);
    EXPECT_EQ(stats.connections_reused, 17u);
    EXPECT_EQ(stats.idle_connections, 3u);
    EXPECT_EQ(server.connections(), 3);
    web.close();
    server.close();
  });
}

TEST(HttpClientKeepAlive, EachOriginHasItsOwnPool) {
  run_clean([] {
    auto answer = [](weft::tcp::stream& s, const received&) { s.write_all(ok("x")); };
    script_server a(answer);
    script_server b(answer);
    weft::http::client web;
    web.get(a.url("/"));
    web.get(b.url("/"));
    web.get(a.url("/"));
    EXPECT_EQ(web.stats().origins, 2u);
    EXPECT_EQ(web.stats().connections_opened, 2u);
    EXPECT_EQ(web.stats().idle_connections, 2u);
    web.close();
    EXPECT_EQ(web.stats().idle_connections, 0u);
    a.close();
    b.close();
  });
}

// client_options::keepalive reaches each connection's socket: the pooled connection's socket
// has keep-alive on with the idle, interval and probe count given, and off without the option.
// (Read with getsockopt: /proc/net/tcp's timer column is not reported by every kernel.)
TEST(HttpClientKeepAlive, TcpKeepAliveIsSetOnTheClientsSockets) {
  for (const bool on : {true, false}) {
    SCOPED_TRACE(on ? "keepalive 45 s" : "default (off)");
    run_clean([&] {
      std::string peer;
      script_server server([&](weft::tcp::stream& s, const received&) {
        peer = s.peer_address();
        s.write_all(ok("x"));
      });
      weft::http::client_options options;
      if (on) {
        options.keepalive = {.idle = 45s, .interval = 5s, .probes = 3};
      }
      weft::http::client web(options);
      EXPECT_EQ(web.get(server.url("/")).body, "x");
      ASSERT_EQ(peer.rfind("127.0.0.1:", 0), 0u) << peer;
      const unsigned port = static_cast<unsigned>(std::stoul(peer.substr(10)));
      const keepalive_seen seen = keepalive_of_local_port(port);
      if (on) {
        EXPECT_EQ(seen.on, 1);
        EXPECT_EQ(seen.idle, 45);
        EXPECT_EQ(seen.interval, 5);
        EXPECT_EQ(seen.probes, 3);
      } else {
        EXPECT_EQ(seen.on, 0);
      }
      web.close();
      server.close();
    });
  }
}

}  // namespace

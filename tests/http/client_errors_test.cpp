// weft::http::client: what a failure looks like (malformed and oversized responses, timeouts
// per phase, refused connections, bad URLs, use after close) and that the pool stays sound
// after each, cancellation included.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <tuple>

#include "http/client_support.hpp"
#include "net/net_support.hpp"
#include "refusing_port.hpp"

namespace {

using namespace std::chrono_literals;
using http_client_test::ok;
using http_client_test::received;
using http_client_test::script_server;
using weft_test::run_clean;

void expect_http_error(weft::http::client& web, const std::string& url, weft::http::error_kind kind,
                       const std::string& words) {
  try {
    web.get(url);
    ADD_FAILURE() << "no error for " << url;
  } catch (const weft::http::error& failure) {
    EXPECT_EQ(failure.kind(), kind) << failure.what();
    const std::string what = failure.what();
    EXPECT_NE(what.find(words), std::string::npos) << what;
    EXPECT_NE(what.find(failure.url()), std::string::npos) << what;
  }
}

TEST(HttpClientErrors, MalformedResponsesNameTheParsersReason) {
  run_clean([] {
    script_server server([](weft::tcp::stream& s, const received& r) {
      if (r.target == "/status") {
        s.write_all("HTTP/1.1 2000 OK\r\n\r\n");
      } else if (r.target == "/framing") {
        s.write_all("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n");
      } else if (r.target == "/cut") {
        s.write_all("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc");
        s.close();
      } else {
        s.write_all("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
      }
    });
    weft::http::client web;
    expect_http_error(web, server.url("/status"), weft::http::error_kind::malformed_response,
                      "status code");
    expect_http_error(web, server.url("/framing"), weft::http::error_kind::malformed_response,
                      "Content-Length and Transfer-Encoding");
    expect_http_error(web, server.url("/cut"), weft::http::error_kind::malformed_response,
                      "closed before the body was complete");
    expect_http_error(web, server.url("/chunk"), weft::http::error_kind::malformed_response,
                      "chunk");
    EXPECT_EQ(web.stats().idle_connections, 0u);
    EXPECT_EQ(web.stats().active_connections, 0u);
    web.close();
    server.close();
  });
}

TEST(HttpClientErrors, ResponseOverTheBodyLimit) {
  run_clean([] {
    script_server server(
        [](weft::tcp::stream& s, const received&) { s.write_all(ok(std::string(5000, 'x'))); });
    weft::http::client_options options;
    options.limits.max_body_size = 1000;
    weft::http::client web(options);
    expect_http_error(web, server.url("/"), weft::http::error_kind::response_too_large, "1000");
    web.close();
    server.close();
  });
}

TEST(HttpClientErrors, SlowResponseHeadTimesOutNamingThePhase) {
  run_clean([] {
    weft::event release;
    script_server server([&](weft::tcp::stream& s, const received&) {
      release.wait(weft::timeout(10s));
      s.write_all(ok("late"));
    });
    weft::http::client web({.request_timeout = 150ms});
    const auto start = std::chrono::steady_clock::now();
    try {
      web.get(server.url("/slow"));
      ADD_FAILURE() << "no timeout";
    } catch (const weft::timeout_error& failure) {
      const std::string what = failure.what();
      EXPECT_NE(what.find("response head"), std::string::npos) << what;
      EXPECT_NE(what.find(server.url("/slow")), std::string::npos) << what;
    }
    EXPECT_GE(std::chrono::steady_clock::now() - start, 150ms);
    EXPECT_EQ(web.stats().active_connections, 0u);
    EXPECT_EQ(web.stats().idle_connections, 0u);
    release.set();
    web.close();
    server.close();
  });
}

TEST(HttpClientErrors, SlowBodyTimesOutNamingThePhase) {
  run_clean([] {
    weft::event release;
    script_server server([&](weft::tcp::stream& s, const received&) {
      s.write_all("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nab");
      release.wait(weft::timeout(10s));
    });
    weft::http::client web({.request_timeout = 150ms});
    try {
      web.get(server.url("/"));
      ADD_FAILURE() << "no timeout";
    } catch (const weft::timeout_error& failure) {
      EXPECT_NE(std::string(failure.what()).find("body"), std::string::npos) << failure.what();
    }
    release.set();
    web.close();
    server.close();
  });
}

// io_timeout bounds each wait, not the call: a body that keeps coming outlives it, one that
// stops is cut after it, and request_timeout still caps the whole.
TEST(HttpClientErrors, IoTimeoutBoundsEachWaitNotTheCall) {
  run_clean([] {
    script_server server([](weft::tcp::stream& s, const received& r) {
      s.write_all("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
      for (int i = 0; i < 8; ++i) {
        weft::sleep_for(60ms);
        s.write_all("1\r\nx\r\n");
      }
      if (r.target == "/stall") {
        weft::sleep_for(std::chrono::hours(1));  // until the server closes
      }
      s.write_all("0\r\n\r\n");
    });
    // 8 pieces 60 ms apart: about half a second in all, no wait near 300 ms.
    weft::http::client patient(
        {.request_timeout = std::chrono::milliseconds::max(), .io_timeout = 300ms});
    EXPECT_EQ(patient.get(server.url("/flow")).body, "xxxxxxxx");
    try {
      patient.get(server.url("/stall"));
      ADD_FAILURE() << "a stalled body was waited for past io_timeout";
    } catch (const weft::timeout_error& e) {
      EXPECT_NE(std::string(e.what()).find("timed out reading the body"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("(io_timeout 300 ms)"), std::string::npos) << e.what();
    }
    // The whole call's limit still holds, and is named.
    weft::http::client hurried({.request_timeout = 200ms, .io_timeout = 300ms});
    try {
      hurried.get(server.url("/flow"));
      ADD_FAILURE() << "request_timeout did not cap the call";
    } catch (const weft::timeout_error& e) {
      EXPECT_NE(std::string(e.what()).find("(request_timeout 200 ms)"), std::string::npos)
          << e.what();
    }
    EXPECT_THROW(weft::http::client({.io_timeout = -1ms}), std::invalid_argument);
    patient.close();
    hurried.close();
    server.close();
  });
}

// One upload's server on a blocking socket with a small receive window: it reads 16 KiB every
// 16 ms (about 1 MB/s) up to the end of a request with a `body`-byte body, then answers
// "got N" (the body bytes) and closes; or with `reads` false it reads nothing at all.
class slow_upload_server {
 public:
  slow_upload_server(bool reads, std::uint64_t body) {
    std::tie(listen_fd_, port_) = net_test::loopback_listener(4, "slow_upload_server", 16384);
    body_size_ = body;
    thread_ = std::thread([this, reads, body] {
      const int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) {
        return;
      }
      std::uint64_t got = 0;
      std::string head;  // until its end is found
      std::uint64_t expected = ~std::uint64_t{0};
      char buffer[16384];
      while (reads && !done_) {
        pollfd ready{.fd = fd, .events = POLLIN, .revents = 0};
        if (::poll(&ready, 1, 100) <= 0) {
          continue;
        }
        const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
        if (n <= 0) {
          break;
        }
        got += static_cast<std::uint64_t>(n);
        if (expected == ~std::uint64_t{0}) {
          head.append(buffer, static_cast<std::size_t>(n));
          if (const std::size_t end = head.find("\r\n\r\n"); end != std::string::npos) {
            expected = end + 4 + body;
          }
        }
        if (got >= expected) {
          const std::string text = "got " + std::to_string(got - (expected - body_size_));
          const std::string answer = "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: " +
                                     std::to_string(text.size()) + "\r\n\r\n" + text;
          static_cast<void>(::send(fd, answer.data(), answer.size(), MSG_NOSIGNAL));
          break;
        }
        std::this_thread::sleep_for(16ms);  // the reader's pace, not a synchronisation
      }
      while (!reads && !done_) {
        std::this_thread::sleep_for(5ms);  // holds the connection unread until the test ends
      }
      ::close(fd);
    });
  }
  ~slow_upload_server() {
    done_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);
    thread_.join();
    ::close(listen_fd_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/up"; }

 private:
  int listen_fd_ = -1;
  std::uint16_t port_ = 0;
  std::uint64_t body_size_ = 0;
  std::atomic<bool> done_{false};
  std::thread thread_;
};

TEST(HttpClientErrors, AnUploadToASlowReaderIsNotAStallButToNoReaderIs) {
  run_clean([] {
    weft::http::request put;
    put.method = weft::http::method::put;
    put.body = std::string(3 << 20, 'u');
    // io_timeout far below the upload's 3 s: each wait for the socket is one stretch, and the
    // server's acknowledgements count as progress however long the socket stays unwritable.
    weft::http::client web({.request_timeout = 30s, .io_timeout = 200ms, .user_agent = ""});
    slow_upload_server slow(true, put.body.size());
    const weft::http::response r = web.request(put, slow.url());
    EXPECT_EQ(r.body, "got " + std::to_string(put.body.size()));
    // A server that takes nothing: the upload stalls once the buffers are full.
    slow_upload_server deaf(false, put.body.size());
    try {
      web.request(put, deaf.url());
      ADD_FAILURE() << "an upload nobody reads did not time out";
    } catch (const weft::timeout_error& e) {
      // Sending, or waiting for the answer once the kernel's buffers took the whole request.
      EXPECT_NE(std::string(e.what()).find("(io_timeout 200 ms)"), std::string::npos) << e.what();
    }
    web.close();
  });
}

TEST(HttpClientErrors, RefusedConnectionIsAnIoErrorNamingHostAndPort) {
  run_clean([] {
    weft_test::refusing_port closed;  // bound, never listening
    const std::uint16_t port = closed.port();
    weft::http::client web;
    try {
      web.get("http://127.0.0.1:" + std::to_string(port) + "/");
      ADD_FAILURE() << "no error";
    } catch (const weft::io_error& failure) {
      EXPECT_EQ(failure.error_code(), std::errc::connection_refused);
      EXPECT_NE(std::string(failure.what()).find("127.0.0.1:" + std::to_string(port)),
                std::string::npos)
          << failure.what();
    }
    EXPECT_EQ(web.stats().active_connections, 0u);
    EXPECT_EQ(web.stats().connections_opened, 0u);
    web.close();
  });
}

TEST(HttpClientErrors, BadUrlsAreRefusedBeforeAnyIo) {
  run_clean([] {
    weft::http::client web;
    auto kind_of = [&](const std::string& url) {
      try {
        web.get(url);
      } catch (const weft::http::error& failure) {
        EXPECT_EQ(failure.url(), url.substr(0, url.find('#')));
        return failure.kind();
      }
      ADD_FAILURE() << "accepted " << url;
      return weft::http::error_kind::malformed_response;
    };
    using weft::http::error_kind;
    EXPECT_EQ(kind_of("ftp://example.com/"), error_kind::unsupported_scheme);
    EXPECT_EQ(kind_of("wss://example.com/"), error_kind::unsupported_scheme);
    EXPECT_EQ(kind_of("https:///x"), error_kind::invalid_url);
    EXPECT_EQ(kind_of("example.com/x"), error_kind::invalid_url);
    EXPECT_EQ(kind_of("http:///x"), error_kind::invalid_url);
    EXPECT_EQ(kind_of("http://user:pw@example.com/"), error_kind::invalid_url);
    EXPECT_EQ(kind_of("http://example.com:0/"), error_kind::invalid_url);
    EXPECT_EQ(kind_of("http://example.com:70000/"), error_kind::invalid_url);
    EXPECT_EQ(kind_of("http://[::1/"), error_kind::invalid_url);
    // A NUL inside the brackets once ended the address for inet_pton and put what followed it
    // into the Host field (tests/http/fuzz/url_fuzz.cpp).
    EXPECT_EQ(kind_of(std::string("http://[::1\0evil]/", 18)), error_kind::invalid_url);
    EXPECT_EQ(kind_of("http://[::1%25eth0]/"), error_kind::invalid_url);
    EXPECT_EQ(kind_of("http://example.com/a b"), error_kind::invalid_url);
    EXPECT_EQ(web.stats().origins, 0u);
    try {
      web.get("ftp://example.com/");
    } catch (const weft::http::error& failure) {
      EXPECT_NE(std::string(failure.what()).find("http:// and https:// only"), std::string::npos)
          << failure.what();
    }
    web.close();
  });
}

TEST(HttpClientErrors, Ipv6LiteralUrl) {
  run_clean([] {
    std::optional<script_server> server;
    try {
      server.emplace(
          [](weft::tcp::stream& s, const received& r) { s.write_all(ok(r.field("Host"))); }, "::1");
    } catch (const weft::io_error&) {
      return;  // no IPv6 loopback here; the URL parsing is still covered by BadUrls
    }
    weft::http::client web;
    EXPECT_EQ(web.get(server->url("/six")).body, "[::1]:" + std::to_string(server->port()));
    web.close();
    server->close();
  });
}

TEST(HttpClientErrors, CancelledRequestDestroysItsConnectionAndThePoolStaysSound) {
  run_clean([] {
    weft::event arrived;
    script_server server([&](weft::tcp::stream& s, const received& r) {
      if (r.target == "/hang") {
        arrived.set();
        weft::sleep_for(std::chrono::hours(1));  // until the server closes
      }
      s.write_all(ok("fine"));
    });
    weft::http::client web({.max_connections_per_host = 1});
    web.get(server.url("/warm"));
    auto hanging = weft::spawn([&] { web.get(server.url("/hang")); });
    arrived.wait(weft::timeout(5s));
    hanging.cancel("test");
    EXPECT_THROW(hanging.await(), weft::cancelled_error);
    weft::http::client_stats stats = web.stats();
    EXPECT_EQ(stats.active_connections, 0u);
    EXPECT_EQ(stats.idle_connections, 0u);
    EXPECT_EQ(stats.connections_closed, 1u);
    // The one slot is free again: a new request gets a fresh connection.
    EXPECT_EQ(web.get(server.url("/after")).body, "fine");
    EXPECT_EQ(web.stats().connections_opened, 2u);
    web.close();
    server.close();
  });
}

TEST(HttpClientErrors, CloseEndsWaitersAndLetsExchangesInFlightFinish) {
  run_clean([] {
    weft::event arrived;
    weft::event release;
    script_server server([&](weft::tcp::stream& s, const received&) {
      arrived.set();
      release.wait(weft::timeout(10s));
      s.write_all(ok("done"));
    });
    weft::http::client web({.max_connections_per_host = 1});
    auto in_flight = weft::spawn([&] { return web.get(server.url("/first")).body; });
    arrived.wait(weft::timeout(5s));
    auto waiting = weft::spawn([&] { web.get(server.url("/second")); });
    EXPECT_TRUE(weft_test::yield_until([&] { return web.stats().waiting_requests == 1; }));
    web.close();
    EXPECT_THROW(waiting.await(), weft::pool_closed_error);
    release.set();
    EXPECT_EQ(in_flight.await(), "done");
    EXPECT_EQ(web.stats().active_connections, 0u);
    EXPECT_EQ(web.stats().idle_connections, 0u);
    EXPECT_EQ(web.stats().connections_closed, 1u);
    server.close();
  });
}

TEST(HttpClientErrors, UseAfterCloseIsMisuse) {
  run_clean([] {
    weft::http::client web;
    web.close();
    web.close();  // idempotent
    EXPECT_THROW(web.get("http://127.0.0.1:1/"), std::logic_error);
  });
}

TEST(HttpClientErrors, BadOptionsAreRefused) {
  EXPECT_THROW(weft::http::client({.max_connections_per_host = 0}), std::invalid_argument);
  EXPECT_THROW(weft::http::client({.max_redirects = -1}), std::invalid_argument);
  weft::http::client_options probes;
  probes.keepalive = {.idle = std::chrono::seconds(10), .interval = std::chrono::seconds(0)};
  try {
    weft::http::client refused(probes);
    ADD_FAILURE() << "keepalive.interval 0 was accepted";
  } catch (const std::invalid_argument& failure) {
    EXPECT_EQ(std::string(failure.what()),
              "weft::http::client: keepalive.interval must be 1 to 32767 s, not 0 s");
  }
}

}  // namespace

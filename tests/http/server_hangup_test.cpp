// http::hangup_watch: a handler waiting on something else than its client is cancelled when the
// client closes, half-closes or resets its connection, and never while the client stays.
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "http/server_support.hpp"
#include "net/tls_support.hpp"
#include "weft/sched/this_coroutine.hpp"

namespace {

using namespace http_test;
using namespace std::chrono_literals;

// What the handlers saw, read by the test thread.
struct seen {
  std::atomic<int> cancelled{0};
  std::atomic<int> finished{0};
  std::atomic<bool> watch_fired{false};
  std::mutex mutex;
  std::string reason;
};

// /wait (any query): sleeps for an hour under a 20 ms watch; /watch-then-sleep drops its watch,
// then sleeps 300 ms and responds; /slow sleeps 300 ms under the watch and responds; anything else
// is answered at once.
weft::http::handler watched(seen& s) {
  return [&s](exchange& ex) {
    const std::string& target = ex.request().target;
    if (ex.request().raw_path() == "/wait") {
      weft::http::hangup_watch watch(ex, 20ms);
      try {
        weft::sleep_for(std::chrono::hours(1));
      } catch (const weft::cancelled_error& e) {
        {
          std::lock_guard lock(s.mutex);
          s.reason = e.reason();
        }
        s.watch_fired = watch.fired();
        ++s.cancelled;
        throw;
      }
      ex.respond(status::ok, "woke\n");
    } else if (target == "/watch-then-sleep") {
      { weft::http::hangup_watch watch(ex, 20ms); }
      weft::sleep_for(300ms);
      ++s.finished;
      ex.respond(status::ok, "slept\n");
    } else if (target == "/slow") {
      weft::http::hangup_watch watch(ex, 20ms);
      weft::sleep_for(300ms);
      ++s.finished;
      ex.respond(status::ok, "slow\n");
    } else if (target == "/bad-period") {
      try {
        weft::http::hangup_watch watch(ex, 0ms);
        ex.respond(status::ok, "accepted\n");
      } catch (const std::invalid_argument& e) {
        ex.respond(status::bad_request, std::string(e.what()) + "\n");
      }
    } else {
      ex.respond(status::ok, "quick\n");
    }
  };
}

enum class leaving { close, half_close, reset };

// How the client leaves (the fd itself is closed by the client's destructor).
void leave(client& c, leaving how) {
  switch (how) {
    case leaving::close:
      ::shutdown(c.fd(), SHUT_RDWR);  // the FIN now; the destructor closes the fd
      break;
    case leaving::half_close:
      ::shutdown(c.fd(), SHUT_WR);  // still reading: only its direction ended
      break;
    case leaving::reset: {
      // A close with a zero linger sends a RST: the destructor's close.
      const linger now{.l_onoff = 1, .l_linger = 0};
      ASSERT_EQ(::setsockopt(c.fd(), SOL_SOCKET, SO_LINGER, &now, sizeof now), 0);
      break;
    }
  }
}

TEST(HttpServerHangup, AHandlerWaitingElsewhereIsCancelledWhenItsClientLeaves) {
  for (const leaving how : {leaving::close, leaving::half_close, leaving::reset}) {
    SCOPED_TRACE(static_cast<int>(how));
    seen s;
    log_lines log;
    auto options = local_http();
    options.log = log.sink();
    running_http server(options, watched(s));
    {
      client c(server.port());
      c.send("GET /wait HTTP/1.1\r\nHost: x\r\n\r\n");
      ASSERT_TRUE(eventually([&] { return server.server().stats().total.requests == 1; }));
      leave(c, how);
    }
    ASSERT_TRUE(eventually([&] { return s.cancelled == 1; }));
    EXPECT_TRUE(s.watch_fired);
    {
      std::lock_guard lock(s.mutex);
      EXPECT_EQ(s.reason, "weft::http: the client closed the connection");
    }
    ASSERT_TRUE(eventually([&] { return log.contains("its request was abandoned (GET /wait)"); }))
        << log.all();
    const auto stats = server.server().stats().total;
    EXPECT_EQ(stats.net.closed_by(weft::net::close_reason::peer), 1u);
    EXPECT_EQ(stats.net.closed_by(weft::net::close_reason::server_stop), 0u);
    EXPECT_EQ(stats.responses_of_class(2) + stats.responses_of_class(5), 0u);
    // The server goes on.
    client next(server.port());
    next.send("GET /quick HTTP/1.1\r\nHost: x\r\n\r\n");
    EXPECT_EQ(body_of(next.response()), "quick\n");
  }
}

TEST(HttpServerHangup, CurlGivingUpIsSeenLeavingInTheClearAndOverTls) {
  for (const bool tls : {false, true}) {
    SCOPED_TRACE(tls);
    seen s;
    auto options = local_http();
    if (tls) {
      weft::net::tls_server_options server_tls;
      server_tls.alpn = {"http/1.1"};
      options.tls = tls_test::server_context(server_tls);
    }
    running_http server(options, watched(s));
    const std::string url = std::string(tls ? "https" : "http") +
                            "://localhost:" + std::to_string(server.port()) + "/wait";
    // curl gives up after 500 ms (exit 28) and closes; over TLS it may say close_notify first.
    const std::string out = run_command("curl -sS --max-time 0.5 --cacert " + tls_test::certs().ca +
                                        " '" + url + "'; echo exit $?");
    EXPECT_NE(out.find("exit 28"), std::string::npos) << out;
    ASSERT_TRUE(eventually([&] { return s.cancelled == 1; }));
    EXPECT_EQ(server.server().stats().total.net.closed_by(weft::net::close_reason::peer), 1u);
  }
}

TEST(HttpServerHangup, OnlyTheHandlerWhoseClientLeftIsCancelled) {
  // Three watches on one worker, dropped from the middle of its list, its end, then its start.
  seen s;
  log_lines log;
  auto options = local_http();
  options.log = log.sink();
  running_http server(options, watched(s));
  std::unique_ptr<client> clients[3];
  for (int i = 0; i < 3; ++i) {
    clients[i] = std::make_unique<client>(server.port());
    clients[i]->send("GET /wait?" + std::to_string(i + 1) + " HTTP/1.1\r\nHost: x\r\n\r\n");
  }
  ASSERT_TRUE(eventually([&] { return server.server().stats().total.requests == 3; }));
  int left = 0;
  for (const int which : {2, 1, 3}) {
    leave(*clients[which - 1], leaving::close);
    ++left;
    const std::string line = "abandoned (GET /wait?" + std::to_string(which) + ")";
    ASSERT_TRUE(eventually([&] { return log.contains(line); })) << log.all();
    EXPECT_EQ(s.cancelled, left) << log.all();
  }
  EXPECT_EQ(server.server().stats().total.net.closed_by(weft::net::close_reason::peer), 3u);
}

// The sweep polls the sockets of all due watches at once: among 200 watched handlers, the 100
// whose clients leave together (closing, half-closing, resetting) are cancelled, and only they.
TEST(HttpServerHangup, AmongManyWatchesExactlyThoseWhoseClientsLeftAreCancelled) {
  constexpr int count = 200;
  seen s;
  log_lines log;
  auto options = local_http();
  options.log = log.sink();
  running_http server(options, watched(s));
  std::vector<std::unique_ptr<client>> clients;
  for (int i = 0; i < count; ++i) {
    clients.push_back(std::make_unique<client>(server.port()));
    clients.back()->send("GET /wait?" + std::to_string(i) + " HTTP/1.1\r\nHost: x\r\n\r\n");
  }
  ASSERT_TRUE(eventually([&] { return server.server().stats().total.requests == count; }));
  for (int i = 1; i < count; i += 2) {
    leave(*clients[i], static_cast<leaving>(i / 2 % 3));
    clients[i].reset();
  }
  // The handler counts its cancellation as it unwinds; the connection logs the abandoned
  // request after the handler has returned (later, in chaos order): wait for both.
  ASSERT_TRUE(eventually([&] {
    return s.cancelled == count / 2 && log.count("its request was abandoned") == count / 2;
  })) << s.cancelled
      << "\n"
      << log.all();
  for (int i = 0; i < count; ++i) {
    const std::string line = "abandoned (GET /wait?" + std::to_string(i) + ")";
    EXPECT_EQ(log.count(line), i % 2 == 1 ? 1u : 0u) << line;
  }
  EXPECT_EQ(server.server().stats().total.net.closed_by(weft::net::close_reason::peer),
            static_cast<std::uint64_t>(count / 2));
}

TEST(HttpServerHangup, AClientThatStaysIsAnsweredThoughItsNextRequestIsAlreadyThere) {
  seen s;
  running_http server(local_http(), watched(s));
  client c(server.port());
  // The pipelined request is in the socket (and maybe read) during the whole wait.
  c.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\nGET /quick HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(body_of(c.response()), "slow\n");
  EXPECT_EQ(body_of(c.response()), "quick\n");
  EXPECT_EQ(s.cancelled, 0);
  EXPECT_EQ(s.finished, 1);
}

TEST(HttpServerHangup, AWatchDroppedBeforeTheClientLeftCancelsNothing) {
  seen s;
  running_http server(local_http(), watched(s));
  {
    client c(server.port());
    c.send("GET /watch-then-sleep HTTP/1.1\r\nHost: x\r\n\r\n");
    ASSERT_TRUE(eventually([&] { return server.server().stats().total.requests == 1; }));
    leave(c, leaving::close);
  }
  // The handler sleeps its 300 ms out (15 of the dropped watch's periods) and returns.
  ASSERT_TRUE(eventually([&] { return s.finished == 1; }));
  EXPECT_EQ(s.cancelled, 0);
}

TEST(HttpServerHangup, AServerStoppingWithAWatchedHandlerEndsItAsAStop) {
  seen s;
  log_lines log;
  auto options = local_http();
  options.log = log.sink();
  auto server = std::make_unique<running_http>(options, watched(s));
  client c(server->port());
  c.send("GET /wait HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(eventually([&] { return server->server().stats().total.requests == 1; }));
  server->stop(std::chrono::milliseconds(100));  // the client stays: the deadline cancels
  server->wait();
  EXPECT_EQ(s.cancelled, 1);
  EXPECT_FALSE(s.watch_fired);
  {
    std::lock_guard lock(s.mutex);
    EXPECT_EQ(s.reason.find("client closed"), std::string::npos) << s.reason;
  }
  EXPECT_FALSE(log.contains("abandoned")) << log.all();
  EXPECT_EQ(server->server().stats().total.net.closed_by(weft::net::close_reason::server_stop), 1u);
  server.reset();  // the worker's sweeper and its timer go after the run
  EXPECT_TRUE(c.closes());
}

TEST(HttpServerHangup, APeriodThatIsNotPositiveIsRefused) {
  seen s;
  running_http server(local_http(), watched(s));
  client c(server.port());
  c.send("GET /bad-period HTTP/1.1\r\nHost: x\r\n\r\n");
  const auto r = c.response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, status::bad_request);
  EXPECT_EQ(r->body, "weft::http: a hangup_watch's period must be positive, not 0 ms\n");
}

}  // namespace

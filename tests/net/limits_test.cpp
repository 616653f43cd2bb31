// Limits and timeouts: slowloris, idle and handshake timeouts, max connections, and accept under
// descriptor exhaustion (EMFILE), each cutting only the connection at fault.
#include <sys/resource.h>
#include <sys/wait.h>

#include <atomic>
#include <string>
#include <vector>

#include "net/net_support.hpp"

namespace {

using namespace net_test;
using weft::net::close_reason;
using weft::net::connection;

void echo_lines(connection& c) {
  while (auto m = c.receive()) {
    c.send(m->data);
  }
}

TEST(NetLimits, SlowlorisIsCutAtTheMessageTimeoutWhileANormalClientIsServed) {
  auto options = local_options();
  options.protocol = weft::net::text();
  options.message_timeout = std::chrono::milliseconds(300);
  log_lines log;
  options.log = log.sink();
  running_server running(options, [](weft::net::tcp_server& server) { server.serve(echo_lines); });

  int slow = connect_to(running.port());
  int normal = connect_to(running.port());
  const auto started = std::chrono::steady_clock::now();
  send_all(slow, "GET / HTTP/1.1");  // a message that never ends
  // The slow client keeps dripping bytes of the same message; the normal one is served.
  bool slow_cut = false;
  int round_trips = 0;
  while (std::chrono::steady_clock::now() - started < std::chrono::seconds(5)) {
    send_all(normal, "ping " + std::to_string(round_trips) + "\n");
    std::string expected = "ping " + std::to_string(round_trips) + "\n";
    ASSERT_EQ(read_bytes(normal, expected.size()), expected);
    ++round_trips;
    if (::send(slow, "x", 1, MSG_NOSIGNAL) < 0) {
      slow_cut = true;
      break;
    }
    pollfd check{.fd = slow, .events = POLLIN, .revents = 0};
    if (::poll(&check, 1, 10) > 0) {
      char byte;
      if (::recv(slow, &byte, 1, 0) <= 0) {
        slow_cut = true;
        break;
      }
    }
  }
  const auto elapsed = std::chrono::steady_clock::now() - started;
  EXPECT_TRUE(slow_cut) << "the slowloris client was never cut";
  EXPECT_GE(elapsed, std::chrono::milliseconds(290));
  EXPECT_GT(round_trips, 3);
  // The normal client is still served after the cut.
  send_all(normal, "after\n");
  EXPECT_EQ(read_bytes(normal, 6), "after\n");
  ::close(slow);
  ::close(normal);
  running.stop();
  running.wait();
  auto stats = running.server().stats();
  EXPECT_EQ(stats.total.closed_by(close_reason::message_timeout), 1u);
  EXPECT_TRUE(log.contains("closed: message timeout")) << log.all();
}

TEST(NetLimits, IdleConnectionIsClosedAtTheIdleTimeout) {
  auto options = local_options();
  options.idle_timeout = std::chrono::milliseconds(200);
  running_server running(options, [](weft::net::tcp_server& server) { server.serve(echo_lines); });
  const auto started = std::chrono::steady_clock::now();
  int fd = connect_to(running.port());
  send_all(fd, "x");
  EXPECT_EQ(read_bytes(fd, 1), "x");
  EXPECT_EQ(read_to_end(fd), "");
  EXPECT_GE(std::chrono::steady_clock::now() - started, std::chrono::milliseconds(190));
  ::close(fd);
  running.stop();
  running.wait();
  EXPECT_EQ(running.server().stats().total.closed_by(close_reason::idle_timeout), 1u);
}

TEST(NetLimits, HandshakeTimeoutCutsAClientThatNeverCompletesAMessage) {
  auto options = local_options();
  options.protocol = weft::net::text();
  options.handshake_timeout = std::chrono::milliseconds(200);
  running_server running(options, [](weft::net::tcp_server& server) { server.serve(echo_lines); });
  int silent = connect_to(running.port());
  int prompt = connect_to(running.port());
  send_all(prompt, "hello\n");
  EXPECT_EQ(read_bytes(prompt, 6), "hello\n");
  send_all(silent, "partial");
  EXPECT_EQ(read_to_end(silent), "");
  // Past its first message the handshake timeout no longer applies.
  send_all(prompt, "still here\n");
  EXPECT_EQ(read_bytes(prompt, 11), "still here\n");
  ::close(silent);
  ::close(prompt);
  running.stop();
  running.wait();
  auto stats = running.server().stats();
  EXPECT_EQ(stats.total.closed_by(close_reason::handshake_timeout), 1u);
  EXPECT_EQ(stats.total.closed_by(close_reason::handshake_timeout) +
                stats.total.closed_by(close_reason::peer) +
                stats.total.closed_by(close_reason::server_stop),
            2u);
}

TEST(NetLimits, ConnectionsOverTheMaximumAreAcceptedClosedAndCounted) {
  auto options = local_options();
  options.protocol = weft::net::text();
  options.max_connections = 2;
  running_server running(options, [](weft::net::tcp_server& server) { server.serve(echo_lines); });
  int first = connect_to(running.port());
  int second = connect_to(running.port());
  send_all(first, "1\n");
  send_all(second, "2\n");
  EXPECT_EQ(read_bytes(first, 2), "1\n");
  EXPECT_EQ(read_bytes(second, 2), "2\n");
  int third = connect_to(running.port());
  EXPECT_EQ(read_to_end(third), "") << "the excess connection is closed at once";
  send_all(first, "still\n");
  EXPECT_EQ(read_bytes(first, 6), "still\n");
  auto stats = running.server().stats();
  EXPECT_EQ(stats.total.accepted, 3u);
  EXPECT_EQ(stats.total.connections, 2u);
  EXPECT_EQ(stats.total.closed_by(close_reason::max_connections), 1u);
  ::close(first);
  ::close(second);
  ::close(third);
  running.stop();
  running.wait();
}

// The server runs in a forked child under RLIMIT_NOFILE 64 while 100 clients connect: accept
// hits EMFILE, backs off and retries; once clients leave it serves a new one.
TEST(NetLimits, AcceptSurvivesRunningOutOfDescriptors) {
#if defined(WEFT_SANITIZE_ADDRESS)
  // UBSan's vptr check validates a vtable's memory by writing it into a pipe(2); with every
  // descriptor in use that fails and UBSan reports a valid object as having an invalid vptr.
  GTEST_SKIP() << "UBSan's vptr check needs free descriptors; run this test without sanitizers";
#endif
  int to_parent[2];
  ASSERT_EQ(::pipe2(to_parent, O_CLOEXEC), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(to_parent[0]);
    ::alarm(30);  // a wedged child must not hang the suite
    rlimit limit{};
    ::getrlimit(RLIMIT_NOFILE, &limit);
    limit.rlim_cur = 64;
    int code = 0;
    std::string report;
    if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) {
      ::_exit(3);
    }
    try {
      auto options = local_options();
      options.protocol = weft::net::text();
      options.accept_retry_delay = std::chrono::milliseconds(5);
      options.accept_retry_max_delay = std::chrono::milliseconds(40);
      weft::net::tcp_server server(options);
      server.listen();
      std::string ready = std::to_string(server.port()) + "\n";
      static_cast<void>(::write(to_parent[1], ready.data(), ready.size()));
      server.serve([&](connection& c) {
        while (auto m = c.receive()) {
          if (m->data == "stop") {
            server.stop(std::chrono::milliseconds(500));
          }
          c.send(m->data);
        }
      });
      auto stats = server.stats();
      report = "retries " + std::to_string(stats.total.accept_retries) + " accepted " +
               std::to_string(stats.total.accepted) + "\n";
    } catch (const std::exception& error) {
      report = std::string("failed ") + error.what() + "\n";
      code = 2;
    }
    static_cast<void>(::write(to_parent[1], report.data(), report.size()));
    ::_exit(code);
  }
  ::close(to_parent[1]);
  std::string line;
  char byte;
  while (::read(to_parent[0], &byte, 1) == 1 && byte != '\n') {
    line += byte;
  }
  ASSERT_FALSE(line.empty()) << "the child did not start its server";
  const auto port = static_cast<std::uint16_t>(std::stoi(line));
  std::vector<int> clients;
  for (int index = 0; index < 100; ++index) {
    int fd = connect_to(port);
    ASSERT_GE(fd, 0);
    send_all(fd, "hi\n");
    clients.push_back(fd);
  }
  // Some are served (up to the child's descriptor limit), the rest wait in the backlog.
  EXPECT_EQ(read_bytes(clients.front(), 3), "hi\n");
  for (int fd : clients) {
    ::close(fd);
  }
  // Once they are gone the server accepts again: a new client is served.
  int fresh = connect_to(port);
  send_all(fresh, "ping\n");
  EXPECT_EQ(read_bytes(fresh, 5, std::chrono::milliseconds(10000)), "ping\n");
  send_all(fresh, "stop\n");
  EXPECT_EQ(read_bytes(fresh, 5), "stop\n");
  ::close(fresh);
  std::string report;
  while (::read(to_parent[0], &byte, 1) == 1) {
    report += byte;
  }
  ::close(to_parent[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died: " << report;
  EXPECT_EQ(WEXITSTATUS(status), 0) << report;
  unsigned long retries = 0, accepted = 0;
  ASSERT_EQ(std::sscanf(report.c_str(), "retries %lu accepted %lu", &retries, &accepted), 2)
      << report;
  EXPECT_GT(retries, 0u) << "accept never ran out of descriptors: " << report;
  EXPECT_EQ(accepted, 101u) << report;
}

}  // namespace

// stacks.max_stacks bounds the memory a worker's coroutines take: a connection past it is
// accepted and closed at once (its coroutine could not start), counted and logged, while the
// connections being served go on; once some end, new ones are served again. The kernel
// refusing a stack's memory (ulimit -v, vm.max_map_count) takes the same path.
TEST(NetLimits, ConnectionsPastTheStackLimitAreClosedWhileTheOthersAreServed) {
  auto options = local_options();
  options.protocol = weft::net::text();
  options.stacks.max_stacks = 5;  // the worker's own coroutines and a few connections
  log_lines log;
  options.log = log.sink();
  running_server running(options, [](weft::net::tcp_server& server) { server.serve(echo_lines); });
  std::vector<int> served;
  int refused = -1;
  for (int attempt = 0; attempt < 5 && refused < 0; ++attempt) {
    int fd = connect_to(running.port());
    send_all(fd, "hello\n");
    if (read_bytes(fd, 6) == "hello\n") {
      served.push_back(fd);
    } else {
      refused = fd;
    }
  }
  ASSERT_GE(refused, 0) << "every connection got a coroutine";
  ASSERT_FALSE(served.empty());
  EXPECT_EQ(read_to_end(refused), "");
  ::close(refused);
  for (std::size_t i = 0; i < served.size(); ++i) {
    const std::string line = "still " + std::to_string(i) + "\n";
    send_all(served[i], line);
    EXPECT_EQ(read_bytes(served[i], line.size()), line);
  }
  EXPECT_EQ(running.server().stats().total.closed_by(close_reason::error), 1u);
  EXPECT_TRUE(log.contains("could not start a connection's coroutine")) << log.all();
  EXPECT_TRUE(log.contains("max_stacks (5)")) << log.all();
  for (int fd : served) {
    ::close(fd);
  }
  // The ended connections' stacks are free again (the server may see a new connection before
  // it has seen the old ones end: each attempt is a fresh connection).
  EXPECT_TRUE(eventually([&] {
    int fd = connect_to(running.port());
    send_all(fd, "again\n");
    const bool echoed = read_bytes(fd, 6) == "again\n";
    ::close(fd);
    return echoed;
  }));
  running.stop();
  running.wait();
  // Every accepted connection was closed once, for some reason: none was lost track of.
  auto stats = running.server().stats();
  std::uint64_t closed = 0;
  for (std::uint64_t each : stats.total.closed) {
    closed += each;
  }
  EXPECT_EQ(stats.total.connections, 0u);
  EXPECT_EQ(closed, stats.total.accepted);
}

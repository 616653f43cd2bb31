// net::connect tries every address of a name in turn (localhost may resolve to ::1 first while
// a server listens on 127.0.0.1 only): net::detail::connect_first, the loop it runs, with
// addresses a test controls, and connect() by name end to end.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <stdexcept>
#include <string>
#include <vector>

#include "net/address.hpp"
#include "net/net_support.hpp"
#include "refusing_port.hpp"

namespace {

using namespace std::chrono_literals;
using namespace net_test;
using weft::net::detail::socket_address;

socket_address loopback(std::uint16_t port) {
  socket_address made;
  EXPECT_TRUE(weft::net::detail::parse_numeric("127.0.0.1", port, made.storage, made.length));
  return made;
}

TEST(NetConnect, EachAddressIsTriedInTurnAndTheLastFailureIsNamed) {
  weft_test::refusing_port refused;
  weft_test::refusing_port also_refused;
  running_server server(local_options(), [](weft::net::tcp_server& s) {
    s.serve([](weft::net::connection& c) {
      while (auto m = c.receive()) {
        c.send(m->data);
      }
    });
  });
  weft::run([&] {
    std::string where;
    const int fd = weft::net::detail::connect_first(
        {loopback(refused.port()), loopback(server.port())}, weft::timeout(5s), where);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(where, "127.0.0.1:" + std::to_string(server.port()));
    ::close(fd);
    try {
      weft::net::detail::connect_first({loopback(refused.port()), loopback(also_refused.port())},
                                       weft::timeout(5s), where);
      ADD_FAILURE() << "a connect to two refusing ports succeeded";
    } catch (const weft::io_error& e) {
      EXPECT_EQ(e.uv_code(), -ECONNREFUSED);
      EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(also_refused.port())),
                std::string::npos)
          << e.what();
    }
    // By name: whatever localhost resolves to here, the server on 127.0.0.1 is reached.
    auto c = weft::net::connect("localhost", server.port(), {}, weft::timeout(5s));
    c->send("ping");
    const auto echo = c->receive(weft::timeout(5s));
    ASSERT_TRUE(echo);
    EXPECT_EQ(echo->data, "ping");
    c->close();
  });
}

// The keep-alive settings of one socket, as the kernel has them.
struct keepalive_seen {
  int on = -1, idle = -1, interval = -1, probes = -1;
};
keepalive_seen keepalive_of(int fd) {
  keepalive_seen seen;
  socklen_t size = sizeof(int);
  EXPECT_EQ(::getsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &seen.on, &size), 0);
  EXPECT_EQ(::getsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &seen.idle, &size), 0);
  EXPECT_EQ(::getsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &seen.interval, &size), 0);
  EXPECT_EQ(::getsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &seen.probes, &size), 0);
  return seen;
}

// connection_options::keepalive and tcp_server_options::keepalive reach the sockets: a server's
// accepted connections and a net::connect client each probe with the settings given; off by
// default.
TEST(NetConnect, KeepAliveSettingsReachBothSidesSockets) {
  auto options = local_options();
  options.keepalive = {.idle = 30s, .interval = 7s, .probes = 4};
  std::atomic<int> server_on{-1};
  std::atomic<int> server_idle{-1};
  std::atomic<int> server_interval{-1};
  std::atomic<int> server_probes{-1};
  running_server server(options, [&](weft::net::tcp_server& s) {
    s.serve([&](weft::net::connection& c) {
      const keepalive_seen seen = keepalive_of(c.native_handle());
      server_idle = seen.idle;
      server_interval = seen.interval;
      server_probes = seen.probes;
      server_on = seen.on;
      while (auto m = c.receive()) {
        c.send(m->data);
      }
    });
  });
  weft::run([&] {
    weft::net::connection_options client;
    client.keepalive = {.idle = 45s, .interval = 5s, .probes = 3};
    auto c = weft::net::connect("127.0.0.1", server.port(), client, weft::timeout(5s));
    const keepalive_seen mine = keepalive_of(c->native_handle());
    EXPECT_EQ(mine.on, 1);
    EXPECT_EQ(mine.idle, 45);
    EXPECT_EQ(mine.interval, 5);
    EXPECT_EQ(mine.probes, 3);
    c->send("ping");
    ASSERT_TRUE(c->receive(weft::timeout(5s)));  // the server looked at its socket by now
    c->close();
    auto plain = weft::net::connect("127.0.0.1", server.port(), {}, weft::timeout(5s));
    EXPECT_EQ(keepalive_of(plain->native_handle()).on, 0);
    plain->close();
  });
  EXPECT_EQ(server_on.load(), 1);
  EXPECT_EQ(server_idle.load(), 30);
  EXPECT_EQ(server_interval.load(), 7);
  EXPECT_EQ(server_probes.load(), 4);
}

TEST(NetConnect, KeepAliveSettingsPastLinuxsLimitsAreRefusedNamingTheField) {
  auto options = local_options();
  options.keepalive = {.idle = 40000s};
  try {
    weft::net::tcp_server refused(options);
    ADD_FAILURE() << "an idle of 40000 s was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("keepalive.idle must be 0 (off) to 32767 s"),
              std::string::npos)
        << e.what();
  }
  weft::run([&] {
    weft::net::connection_options client;
    client.keepalive = {.idle = 10s, .interval = 5s, .probes = 0};
    try {
      // Refused before connecting: port 1 would refuse the connection.
      weft::net::connect("127.0.0.1", 1, client, weft::timeout(5s));
      ADD_FAILURE() << "0 probes were taken";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("keepalive.probes must be 1 to 127, not 0"),
                std::string::npos)
          << e.what();
    }
  });
}

}  // namespace

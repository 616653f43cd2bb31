// net::connect tries every address of a name in turn (localhost may resolve to ::1 first while
// a server listens on 127.0.0.1 only): net::detail::connect_first, the loop it runs, with
// addresses a test controls, and connect() by name end to end.
#include <cerrno>
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

}  // namespace

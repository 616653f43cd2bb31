// weft::udp::socket: datagrams over loopback.
#include <uv.h>

#include <array>
#include <chrono>
#include <optional>
#include <string>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::run_clean;

std::optional<weft::udp::socket> bind_or_skip(const std::string& host) {
  try {
    return weft::udp::socket::bind(host, 0);
  } catch (const weft::io_error& error) {
    if (error.uv_code() == UV_EADDRNOTAVAIL || error.uv_code() == UV_EAFNOSUPPORT) {
      return std::nullopt;
    }
    throw;
  }
}

bool echo_round_trip(const std::string& host) {
  bool available = true;
  run_clean([&] {
    auto server = bind_or_skip(host);
    if (!server) {
      available = false;
      return;
    }
    auto echo = weft::spawn([&] {
      std::array<char, 1500> buffer;
      weft::udp::datagram got = server->recv_from(buffer);
      std::string peer_host = got.peer.substr(0, got.peer.rfind(':'));
      if (peer_host.front() == '[') {
        peer_host = peer_host.substr(1, peer_host.size() - 2);
      }
      auto peer_port =
          static_cast<std::uint16_t>(std::stoul(got.peer.substr(got.peer.rfind(':') + 1)));
      server->send_to(std::string_view(buffer.data(), got.bytes), peer_host, peer_port);
    });
    weft::udp::socket client = weft::udp::socket::bind(host, 0);
    client.send_to("datagram", host, server->port());
    std::array<char, 1500> buffer;
    weft::udp::datagram reply = client.recv_from(buffer, weft::timeout(5s));
    EXPECT_EQ(std::string_view(buffer.data(), reply.bytes), "datagram");
    EXPECT_EQ(reply.peer, server->local_address());
    EXPECT_FALSE(reply.truncated);
    echo.await();
  });
  return available;
}

TEST(Udp, EchoRoundTripOverIpv4) { EXPECT_TRUE(echo_round_trip("127.0.0.1")); }

TEST(Udp, EchoRoundTripOverIpv6) {
  if (!echo_round_trip("::1")) {
    GTEST_SKIP() << "this machine has no IPv6 loopback (::1 is not available)";
  }
}

TEST(Udp, ConnectedSocketsSendAndReceive) {
  run_clean([] {
    auto server = weft::udp::socket::bind("127.0.0.1", 0);
    auto client = weft::udp::socket::bind("127.0.0.1", 0);
    client.connect("127.0.0.1", server.port());
    client.send("one");
    client.send("two");
    std::array<char, 16> buffer;
    auto first = server.recv_from(buffer, weft::timeout(5s));
    EXPECT_EQ(std::string_view(buffer.data(), first.bytes), "one");
    EXPECT_EQ(first.peer, client.local_address());
    auto second = server.recv_from(buffer, weft::timeout(5s));
    EXPECT_EQ(std::string_view(buffer.data(), second.bytes), "two");
  });
}

TEST(Udp, ATimedOutReceiveLosesNothing) {
  run_clean([] {
    auto server = weft::udp::socket::bind("127.0.0.1", 0);
    auto client = weft::udp::socket::bind("127.0.0.1", 0);
    std::array<char, 16> buffer;
    EXPECT_THROW(server.recv_from(buffer, weft::timeout(20ms)), weft::timeout_error);
    client.send_to("after timeout", "127.0.0.1", server.port());
    auto got = server.recv_from(buffer, weft::timeout(5s));
    EXPECT_EQ(std::string_view(buffer.data(), got.bytes), "after timeout");
  });
}

TEST(Udp, ASmallBufferTruncatesTheDatagram) {
  run_clean([] {
    auto server = weft::udp::socket::bind("127.0.0.1", 0);
    auto client = weft::udp::socket::bind("127.0.0.1", 0);
    client.send_to("0123456789", "127.0.0.1", server.port());
    std::array<char, 4> buffer;
    auto got = server.recv_from(buffer, weft::timeout(5s));
    EXPECT_EQ(got.bytes, 4u);
    EXPECT_TRUE(got.truncated);
    EXPECT_EQ(std::string_view(buffer.data(), 4), "0123");
  });
}

TEST(Udp, ClosingWakesTheReceiverAndASecondReceiverIsALogicError) {
  run_clean([] {
    auto server = weft::udp::socket::bind("127.0.0.1", 0);
    bool receiving = false;
    auto receiver = weft::spawn([&] {
      std::array<char, 16> buffer;
      receiving = true;
      server.recv_from(buffer);
    });
    ASSERT_TRUE(weft_test::yield_until([&] { return receiving; }));
    std::array<char, 16> buffer;
    EXPECT_THROW(server.recv_from(buffer), std::logic_error);
    server.close();
    EXPECT_THROW(receiver.await(), weft::io_error);
  });
}

TEST(Udp, MulticastOverLoopback) {
  std::string skipped;
  run_clean([&] {
    const std::string group = "239.255.77.77";
    weft::udp::bind_options options;
    options.reuse_address = true;
    auto receiver = weft::udp::socket::bind("0.0.0.0", 0, options);
    try {
      receiver.join_group(group, "127.0.0.1");
    } catch (const weft::io_error& error) {
      skipped = std::string("cannot join a multicast group on loopback: ") + error.what();
      return;
    }
    auto sender = weft::udp::socket::bind("127.0.0.1", 0);
    sender.set_multicast_ttl(1);
    sender.set_multicast_loop(true);
    try {
      sender.send_to("to the group", group, receiver.port());
    } catch (const weft::io_error& error) {
      skipped = std::string("no multicast route here: ") + error.what();
      return;
    }
    std::array<char, 32> buffer;
    try {
      auto got = receiver.recv_from(buffer, weft::timeout(2s));
      EXPECT_EQ(std::string_view(buffer.data(), got.bytes), "to the group");
    } catch (const weft::timeout_error&) {
      skipped = "multicast is not looped back on this machine's loopback interface";
    }
    receiver.leave_group(group, "127.0.0.1");
  });
  if (!skipped.empty()) {
    GTEST_SKIP() << skipped;
  }
}

TEST(Udp, SendToAnInvalidAddressNamesIt) {
  run_clean([] {
    auto socket = weft::udp::socket::bind("127.0.0.1", 0);
    try {
      socket.send_to("x", "::1", 9);  // an IPv6 destination from an IPv4 socket
      ADD_FAILURE() << "the send should fail";
    } catch (const weft::io_error& error) {
      EXPECT_NE(std::string(error.what()).find("send_to [::1]:9"), std::string::npos)
          << error.what();
    }
  });
}

}  // namespace

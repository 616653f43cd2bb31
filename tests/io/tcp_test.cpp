// weft::tcp: listener, connect and the weft::stream interface over TCP (loopback only).
#include <uv.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "refusing_port.hpp"
#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::run_clean;

// Listens on host with an ephemeral port, or returns nothing if the host has no such address
// (an IPv6-less container).
std::optional<weft::tcp::listener> listen_or_skip(const std::string& host) {
  try {
    return weft::tcp::listener::listen(host, 0);
  } catch (const weft::io_error& error) {
    if (error.uv_code() == UV_EADDRNOTAVAIL || error.uv_code() == UV_EAFNOSUPPORT) {
      return std::nullopt;
    }
    throw;
  }
}

std::string read_all(weft::stream& stream) {
  std::string all;
  std::array<char, 4096> buffer;
  while (std::size_t bytes = stream.read_some(buffer)) {
    all.append(buffer.data(), bytes);
  }
  return all;
}

void echo_round_trip(const std::string& host, bool& skipped) {
  run_clean([&] {
    auto server = listen_or_skip(host);
    if (!server) {
      skipped = true;
      return;
    }
    auto echo = weft::spawn([&] {
      weft::tcp::stream connection = server->accept();
      std::array<char, 1024> buffer;
      while (std::size_t bytes = connection.read_some(buffer)) {
        connection.write_all(std::string_view(buffer.data(), bytes));
      }
    });
    weft::tcp::stream client = weft::tcp::connect(host, server->port());
    EXPECT_EQ(client.peer_address(), server->local_address());
    client.write_all("ping");
    std::array<char, 4> reply;
    client.read_exactly(reply);
    EXPECT_EQ(std::string_view(reply.data(), reply.size()), "ping");
    client.shutdown();
    EXPECT_EQ(read_all(client), "") << "the server ends once it reads our end of stream";
    echo.await();
  });
}

TEST(Tcp, EchoRoundTripOverIpv4) {
  bool skipped = false;
  echo_round_trip("127.0.0.1", skipped);
  EXPECT_FALSE(skipped);
}

TEST(Tcp, EchoRoundTripOverIpv6) {
  bool skipped = false;
  echo_round_trip("::1", skipped);
  if (skipped) {
    GTEST_SKIP() << "this machine has no IPv6 loopback (::1 is not available)";
  }
}

TEST(Tcp, AddressesAreFormattedAsHostColonPort) {
  run_clean([] {
    auto server = weft::tcp::listener::listen("127.0.0.1", 0);
    EXPECT_NE(server.port(), 0);
    EXPECT_EQ(server.local_address(), "127.0.0.1:" + std::to_string(server.port()));
    auto accepted = weft::spawn([&] { return server.accept(); });
    weft::tcp::stream client = weft::tcp::connect("127.0.0.1", server.port());
    weft::tcp::stream connection = std::move(accepted).await();
    EXPECT_EQ(connection.local_address(), server.local_address());
    EXPECT_EQ(connection.peer_address(), client.local_address());
    EXPECT_EQ(connection.subject(), client.local_address()) << "errors name the peer";
    EXPECT_EQ(client.subject(), server.local_address());
    if (auto v6 = listen_or_skip("::1")) {
      EXPECT_EQ(v6->local_address(), "[::1]:" + std::to_string(v6->port()));
    }
  });
}

TEST(Tcp, ThousandConcurrentConnections) {
  constexpr int connections = 1000;
  run_clean([] {
    weft::tcp::listen_options options;
    options.backlog = connections;
    auto server = weft::tcp::listener::listen("127.0.0.1", 0, options);
    std::vector<weft::task<void>> handlers;
    auto acceptor = weft::spawn([&] {
      for (int index = 0; index < connections; ++index) {
        handlers.push_back(weft::spawn([connection = server.accept()]() mutable {
          std::string line;
          connection.read_until(line, "\n");
          connection.write_all("echo " + line);
        }));
      }
    });
    std::vector<weft::task<std::string>> clients;
    for (int index = 0; index < connections; ++index) {
      clients.push_back(weft::spawn([&server, index] {
        weft::tcp::stream client = weft::tcp::connect("127.0.0.1", server.port());
        client.write_all(std::to_string(index) + "\n");
        std::string reply;
        client.read_until(reply, "\n");
        return reply;
      }));
    }
    for (int index = 0; index < connections; ++index) {
      EXPECT_EQ(clients[index].await(weft::timeout(5s)), "echo " + std::to_string(index) + "\n");
    }
    acceptor.await();
    for (auto& handler : handlers) {
      handler.await();
    }
  });
}

// A connected pair over loopback: {client side, server side}.
std::pair<weft::tcp::stream, weft::tcp::stream> connected_pair() {
  auto server = weft::tcp::listener::listen("127.0.0.1", 0);
  auto accepted = weft::spawn([&] { return server.accept(); });
  weft::tcp::stream client = weft::tcp::connect("127.0.0.1", server.port());
  return {std::move(client), std::move(accepted).await()};
}

TEST(Tcp, ATimedOutReadLeavesTheConnectionUsable) {
  run_clean([] {
    auto [client, server] = connected_pair();
    std::array<char, 16> buffer;
    EXPECT_THROW(client.read_some(buffer, weft::timeout(20ms)), weft::timeout_error);
    server.write_all("late data");
    std::size_t bytes = client.read_some(buffer);
    EXPECT_EQ(std::string_view(buffer.data(), bytes), "late data");
  });
}

TEST(Tcp, ACancelledReadLeavesTheConnectionUsable) {
  run_clean([] {
    auto [client, server] = connected_pair();
    bool reading = false;
    auto reader = weft::spawn([&] {
      std::array<char, 16> buffer;
      reading = true;
      client.read_some(buffer);
    });
    ASSERT_TRUE(weft_test::yield_until([&] { return reading; }));
    weft::yield();
    reader.cancel("not needed");
    EXPECT_THROW(reader.await(), weft::cancelled_error);
    server.write_all("after cancel");
    std::array<char, 32> buffer;
    std::size_t bytes = client.read_some(buffer);
    EXPECT_EQ(std::string_view(buffer.data(), bytes), "after cancel");
  });
}

TEST(Tcp, DataThatArrivedBeforeATimeoutIsNotLost) {
  run_clean([] {
    auto [client, server] = connected_pair();
    server.write_all("abc");
    std::array<char, 8> buffer;
    // Wants 8 bytes, gets 3, times out: the 3 stay buffered for the next read.
    EXPECT_THROW(client.read_exactly(buffer, weft::timeout(50ms)), weft::timeout_error);
    std::size_t bytes = client.read_some(buffer);
    EXPECT_EQ(std::string_view(buffer.data(), bytes), "abc");
  });
}

TEST(Tcp, ReadAfterThePeerClosedReturnsZero) {
  run_clean([] {
    auto [client, server] = connected_pair();
    server.write_all("last words");
    server.close();
    EXPECT_EQ(read_all(client), "last words");
    std::array<char, 8> buffer;
    EXPECT_EQ(client.read_some(buffer), 0u) << "end of stream stays end of stream";
    EXPECT_EQ(client.read_some(buffer, weft::timeout(10ms)), 0u);
  });
}

TEST(Tcp, ConnectToARefusedPortNamesTheAddress) {
  run_clean([] {
    weft_test::refusing_port closed;  // bound, never listening
    const std::uint16_t port = closed.port();
    try {
      weft::tcp::connect("127.0.0.1", port);
      ADD_FAILURE() << "connect should have been refused";
    } catch (const weft::io_error& error) {
      EXPECT_EQ(error.uv_code(), UV_ECONNREFUSED);
      EXPECT_EQ(std::string(error.what()),
                "connect 127.0.0.1:" + std::to_string(port) + ": connection refused");
      EXPECT_EQ(error.operation(), "connect");
    }
  });
}

TEST(Tcp, ConnectTimesOutWhenTheListenBacklogIsFull) {
  // Linux drops SYNs to a listener whose accept queue is full, so a connect to it hangs in SYN
  // retransmission (1 s and more): a local, deterministic black hole.
  bool timed_out = false;
  std::string message;
  run_clean([&] {
    weft::tcp::listen_options options;
    options.backlog = 1;
    auto server = weft::tcp::listener::listen("127.0.0.1", 0, options);
    std::vector<weft::tcp::stream> queued;  // never accepted
    for (int attempt = 0; attempt < 16 && !timed_out; ++attempt) {
      try {
        queued.push_back(weft::tcp::connect("127.0.0.1", server.port(), weft::timeout(200ms)));
      } catch (const weft::timeout_error& error) {
        timed_out = true;
        message = error.what();
      }
    }
  });
  if (!timed_out) {
    GTEST_SKIP() << "16 connects to a listener with backlog 1 all completed: this kernel does "
                    "not drop SYNs on a full accept queue, so there is no local black hole";
  }
  EXPECT_NE(message.find("connect 127.0.0.1:"), std::string::npos) << message;
  EXPECT_NE(message.find("timed out after 200 ms"), std::string::npos) << message;
}

TEST(Tcp, WriteToAResetConnectionRaises) {
  run_clean([] {
    auto [client, server] = connected_pair();
    server.close_reset();
    std::array<char, 8> buffer;
    // The reset reaches the client's read first (deterministic: the read waits for it) ...
    try {
      client.read_some(buffer);
      ADD_FAILURE() << "the read should see the reset";
    } catch (const weft::io_error& error) {
      EXPECT_EQ(error.uv_code(), UV_ECONNRESET) << error.what();
    }
    // ... and a write after it fails instead of killing the process with SIGPIPE.
    try {
      client.write_all("into the void");
      ADD_FAILURE() << "the write should fail";
    } catch (const weft::io_error& error) {
      EXPECT_TRUE(error.uv_code() == UV_EPIPE || error.uv_code() == UV_ECONNRESET) << error.what();
      EXPECT_EQ(error.operation(), "write");
      EXPECT_NE(std::string(error.what()).find(client.subject()), std::string::npos);
    }
  });
}

TEST(Tcp, ReadUntilAndReadExactlySemantics) {
  run_clean([] {
    auto [client, server] = connected_pair();
    server.write_all("hello\r\nworld\r\nabc");
    server.shutdown();
    std::string line;
    EXPECT_EQ(client.read_until(line, "\r\n"), 7u);
    EXPECT_EQ(line, "hello\r\n");
    EXPECT_EQ(client.read_until(line, "\r\n"), 7u) << "appends";
    EXPECT_EQ(line, "hello\r\nworld\r\n");
    // Too long: nothing is consumed.
    std::string tail;
    try {
      client.read_until(tail, "\r\n", 2);
      ADD_FAILURE() << "no delimiter within 2 bytes";
    } catch (const weft::io_error& error) {
      EXPECT_EQ(error.uv_code(), UV_ENOBUFS) << error.what();
    }
    // The stream ends before 5 bytes: nothing is consumed either.
    std::array<char, 5> five;
    try {
      client.read_exactly(five);
      ADD_FAILURE() << "only 3 bytes are left";
    } catch (const weft::io_error& error) {
      EXPECT_EQ(error.uv_code(), UV_EOF);
      EXPECT_NE(std::string(error.what()).find("end of stream after 3 of 5 bytes"),
                std::string::npos)
          << error.what();
    }
    // Ends without the delimiter: an error, the bytes stay.
    EXPECT_THROW(client.read_until(tail, "\r\n"), weft::io_error);
    EXPECT_EQ(client.buffered(), 3u);
    std::array<char, 3> three;
    client.read_exactly(three);
    EXPECT_EQ(std::string_view(three.data(), 3), "abc");
    EXPECT_EQ(client.read_until(tail, "\r\n"), 0u) << "a clean end with nothing left";
    EXPECT_TRUE(tail.empty());
  });
}

TEST(Tcp, ReadUntilFindsADelimiterSplitAcrossReads) {
  run_clean([] {
    auto [client, server] = connected_pair();
    auto writer = weft::spawn([&server = server] {
      for (std::string_view piece : {"ab", "c\r", "\ndef\r", "\n"}) {
        server.write_all(piece);
        weft::sleep_for(1ms);
      }
    });
    std::string line;
    client.read_until(line, "\r\n");
    EXPECT_EQ(line, "abc\r\n");
    line.clear();
    client.read_until(line, "\r\n");
    EXPECT_EQ(line, "def\r\n");
    writer.await();
  });
}

TEST(Tcp, ASecondConcurrentReaderIsALogicError) {
  run_clean([] {
    auto [client, server] = connected_pair();
    bool reading = false;
    auto reader = weft::spawn([&client = client, &reading] {
      std::array<char, 4> buffer;
      reading = true;  // no suspension between this and the read's wait
      return client.read_some(buffer);
    });
    ASSERT_TRUE(weft_test::yield_until([&] { return reading; }));
    std::array<char, 4> buffer;
    try {
      client.read_some(buffer);
      ADD_FAILURE() << "a second reader must be refused";
    } catch (const std::logic_error& error) {
      EXPECT_NE(std::string(error.what()).find("already has a reader"), std::string::npos);
    }
    server.write_all("x");
    EXPECT_EQ(reader.await(), 1u);
  });
}

TEST(Tcp, ConcurrentWritesAreDeliveredInOrderAndWhole) {
  constexpr std::size_t chunk = 1 << 20;  // far more than a socket buffer: the writes queue
  constexpr int writers = 4;
  run_clean([] {
    auto [client, server] = connected_pair();
    std::vector<weft::task<void>> tasks;
    for (int index = 0; index < writers; ++index) {
      tasks.push_back(weft::spawn([&client = client, index] {
        client.write_all(std::string(chunk, static_cast<char>('a' + index)));
      }));
    }
    auto closer = weft::spawn([&] {
      for (auto& task : tasks) {
        task.await();
      }
      client.shutdown();
    });
    std::string received = read_all(server);
    ASSERT_EQ(received.size(), chunk * writers);
    std::string order;
    for (int index = 0; index < writers; ++index) {
      char first = received[index * chunk];
      EXPECT_EQ(std::count(received.begin() + index * chunk, received.begin() + (index + 1) * chunk,
                           first),
                static_cast<long>(chunk))
          << "write " << index << " was interleaved with another";
      order += first;
    }
    std::string sorted = order;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, "abcd");
    closer.await();
  });
}

TEST(Tcp, ATimedOutWriteKeepsItsBytesQueuedInOrder) {
  constexpr std::size_t size = 32 << 20;  // far beyond what the socket buffers hold
  run_clean([] {
    auto [client, server] = connected_pair();
    std::string payload(size, 'w');
    payload.back() = '!';
    EXPECT_THROW(client.write_all(payload, weft::timeout(20ms)), weft::timeout_error);
    payload.assign(payload.size(), 'x');  // the queued bytes are the write's own copy
    // Queued behind the timed-out bytes: it completes once the server has read those.
    auto closer = weft::spawn([&client = client] {
      client.write_all("tail");
      client.shutdown();
    });
    std::string received = read_all(server);
    ASSERT_EQ(received.size(), size + 4);
    EXPECT_EQ(received.substr(size - 1), "!tail");
    EXPECT_EQ(received.find('x'), std::string::npos);
    closer.await();
  });
}

TEST(Tcp, ClosingAStreamWithAQueuedWriteFailsThatWrite) {
  run_clean([] {
    auto [client, server] = connected_pair();
    bool writing = false;
    auto writer = weft::spawn([&client = client, &writing] {
      writing = true;
      client.write_all(std::string(32 << 20, 'w'));
    });
    ASSERT_TRUE(weft_test::yield_until([&] { return writing; }));
    weft::yield();
    client.close();
    try {
      writer.await();
      ADD_FAILURE() << "the write cannot have completed: nobody read";
    } catch (const weft::io_error& error) {
      EXPECT_EQ(error.uv_code(), UV_ECANCELED) << error.what();
    }
  });
}

TEST(Tcp, WritevSendsTheBuffersInOrder) {
  run_clean([] {
    auto [client, server] = connected_pair();
    std::array<std::string_view, 3> parts = {"one ", "", "two"};
    client.writev(parts);
    client.close();
    EXPECT_EQ(read_all(server), "one two");
  });
}

TEST(Tcp, ClosingAStreamWakesItsReader) {
  run_clean([] {
    auto [client, server] = connected_pair();
    bool reading = false;
    auto reader = weft::spawn([&client = client, &reading] {
      std::array<char, 4> buffer;
      reading = true;
      client.read_some(buffer);
    });
    ASSERT_TRUE(weft_test::yield_until([&] { return reading; }));
    client.close();
    client.close();  // idempotent
    try {
      reader.await();
      ADD_FAILURE() << "the reader should fail";
    } catch (const weft::io_error& error) {
      EXPECT_EQ(error.uv_code(), UV_ECANCELED);
    }
    EXPECT_FALSE(client.is_open());
    EXPECT_THROW(client.write_all("x"), weft::io_error);
  });
}

TEST(Tcp, AcceptTimesOutAndIsCancellable) {
  run_clean([] {
    auto server = weft::tcp::listener::listen("127.0.0.1", 0);
    EXPECT_THROW(server.accept(weft::timeout(10ms)), weft::timeout_error);
    auto acceptor = weft::spawn([&] { server.accept(); });
    weft::yield();
    acceptor.cancel("shutting down");
    EXPECT_THROW(acceptor.await(), weft::cancelled_error);
    // Still usable: a connection made now is accepted.
    auto accepted = weft::spawn([&] { return server.accept(weft::timeout(5s)); });
    weft::tcp::stream client = weft::tcp::connect("127.0.0.1", server.port());
    EXPECT_TRUE(accepted.await().is_open());
  });
}

TEST(Tcp, ConnectionsMadeBeforeAcceptAreNotLost) {
  run_clean([] {
    auto server = weft::tcp::listener::listen("127.0.0.1", 0);
    std::vector<weft::tcp::stream> clients;
    for (int index = 0; index < 5; ++index) {
      clients.push_back(weft::tcp::connect("127.0.0.1", server.port()));
      clients.back().write_all(std::to_string(index));
    }
    for (int index = 0; index < 5; ++index) {
      weft::tcp::stream connection = server.accept(weft::timeout(5s));
      std::array<char, 1> digit;
      connection.read_exactly(digit);
      EXPECT_EQ(digit[0], '0' + index) << "accepted in arrival order";
    }
  });
}

TEST(Tcp, ClosingAListenerWakesItsAcceptor) {
  run_clean([] {
    auto server = weft::tcp::listener::listen("127.0.0.1", 0);
    auto acceptor = weft::spawn([&] { server.accept(); });
    weft::yield();
    server.close();
    EXPECT_THROW(acceptor.await(), weft::io_error);
  });
}

TEST(Tcp, ReusePortLetsTwoListenersShareAPort) {
  run_clean([] {
    weft::tcp::listen_options options;
    options.reuse_port = true;
    auto first = weft::tcp::listener::listen("127.0.0.1", 0, options);
    auto second = weft::tcp::listener::listen("127.0.0.1", first.port(), options);
    EXPECT_EQ(first.port(), second.port());
    try {
      weft::tcp::listener::listen("127.0.0.1", first.port());
      ADD_FAILURE() << "without SO_REUSEPORT the port is taken";
    } catch (const weft::io_error& error) {
      EXPECT_EQ(error.uv_code(), UV_EADDRINUSE);
      EXPECT_NE(std::string(error.what()).find("listen 127.0.0.1:"), std::string::npos);
    }
  });
}

TEST(Tcp, OptionsApply) {
  run_clean([] {
    auto [client, server] = connected_pair();
    client.set_nodelay(true);
    client.set_keepalive(true, 30);
    client.set_keepalive(false);
    client.write_all("ok");
    std::array<char, 2> buffer;
    server.read_exactly(buffer);
  });
}

TEST(Tcp, ConnectByName) {
  run_clean([] {
    auto server = weft::tcp::listener::listen("127.0.0.1", 0);
    auto accepted = weft::spawn([&] { return server.accept(weft::timeout(5s)); });
    try {
      weft::tcp::stream client = weft::tcp::connect("localhost", server.port(), weft::timeout(5s));
      EXPECT_NE(client.subject().find("localhost ("), std::string::npos) << client.subject();
      accepted.await();
    } catch (const weft::io_error& error) {
      accepted.cancel("skipped");
      EXPECT_THROW(accepted.await(), weft::cancelled_error);
      GTEST_SKIP() << "localhost does not resolve to 127.0.0.1 here: " << error.what();
    }
  });
}

TEST(Tcp, OutsideACoroutineIsALogicError) {
  EXPECT_THROW(weft::tcp::connect("127.0.0.1", 1), std::logic_error);
  EXPECT_THROW(weft::tcp::listener::listen("127.0.0.1", 0), std::logic_error);
}

}  // namespace

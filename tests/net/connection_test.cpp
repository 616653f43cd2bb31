// weft::net::connection through a running tcp_server: the two styles, closing, pausing, the
// connection's identity and counters.
#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "net/net_support.hpp"

namespace {

using namespace net_test;
using weft::net::close_reason;
using weft::net::connection;

TEST(NetConnection, CoroutineHandlerEchoesTextLinesInOrder) {
  auto options = local_options();
  options.protocol = weft::net::text();
  running_server running(options, [](weft::net::tcp_server& server) {
    server.serve([](connection& c) {
      while (auto m = c.receive()) {
        c.send("echo:" + m->data);
      }
    });
  });
  int fd = connect_to(running.port());
  send_all(fd, "one\ntwo\r\nthree\n");
  EXPECT_EQ(read_bytes(fd, 29), "echo:one\necho:two\necho:three\n");
  ::close(fd);
  EXPECT_TRUE(eventually([&] { return running.server().stats().total.connections == 0; }));
  running.stop();
  running.wait();
  auto stats = running.server().stats();
  EXPECT_EQ(stats.total.accepted, 1u);
  EXPECT_EQ(stats.total.messages_in, 3u);
  EXPECT_EQ(stats.total.messages_out, 3u);
  EXPECT_EQ(stats.total.bytes_in, 15u);
  EXPECT_EQ(stats.total.bytes_out, 29u);
  EXPECT_EQ(stats.total.closed_by(close_reason::peer), 1u);
}

TEST(NetConnection, CallbackStyleRunsConnectMessageAndCloseInOrder) {
  auto options = local_options();
  options.protocol = weft::net::frame();
  std::mutex mutex;
  std::vector<std::string> seen;
  auto record = [&](std::string what) {
    std::lock_guard<std::mutex> lock(mutex);
    seen.push_back(std::move(what));
  };
  running_server running(options, [&](weft::net::tcp_server& server) {
    server.serve(weft::net::connection_events{
        .on_connect = [&](connection& c) { record("connect " + std::to_string(c.id())); },
        .on_message =
            [&](connection& c, weft::net::message& m) {
              record("message " + m.data);
              EXPECT_TRUE(c.try_send(m.data + "!"));
            },
        .on_close =
            [&](connection&, close_reason reason) {
              record(std::string("close ") + weft::net::to_string(reason));
            },
    });
  });
  int fd = connect_to(running.port());
  send_all(fd, frame_of("a") + frame_of("bc"));
  EXPECT_EQ(read_bytes(fd, 4 + 2 + 4 + 3), frame_of("a!") + frame_of("bc!"));
  ::close(fd);
  EXPECT_TRUE(eventually([&] {
    std::lock_guard<std::mutex> lock(mutex);
    return seen.size() == 4;
  }));
  running.stop();
  running.wait();
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[0], "connect 1");
  EXPECT_EQ(seen[1], "message a");
  EXPECT_EQ(seen[2], "message bc");
  EXPECT_EQ(seen[3], "close peer");
}

TEST(NetConnection, CallbackStyleWithoutOnMessageIsRefused) {
  weft::net::tcp_server server(local_options());
  EXPECT_THROW(server.serve(weft::net::connection_events{}), std::invalid_argument);
}

TEST(NetConnection, AHostWithANulInsideIsRefusedNotCutShort) {
  // inet_pton alone would read "127.0.0.1" and listen there, dropping what follows the NUL.
  for (const std::string& host :
       {std::string("127.0.0.1\0junk", 14), std::string("::1\0x", 5), std::string("[::1\0]", 6)}) {
    auto options = local_options();
    options.host = host;
    EXPECT_THROW(weft::net::tcp_server server(options), std::invalid_argument);
  }
  auto options = local_options();
  options.host = "::1";
  EXPECT_NO_THROW(weft::net::tcp_server server(options));
}

TEST(NetConnection, CloseFlushesEverythingQueuedThenCloses) {
  auto options = local_options();
  constexpr std::size_t total = 4 << 20;  // far more than the socket buffers hold
  options.send_buffer_limit = 8 << 20;
  std::atomic<int> state{0};
  running_server running(options, [&](weft::net::tcp_server& server) {
    server.serve([&](connection& c) {
      c.receive();  // the client says it is ready
      small_send_buffer(c.native_handle());
      EXPECT_TRUE(c.try_send(std::string(total, 'x')));
      EXPECT_GT(c.queued(), 0u) << "the payload should not fit the socket at once";
      c.close();
      EXPECT_FALSE(c.is_open());
      EXPECT_FALSE(c.try_send("late")) << "a closing connection accepts nothing more";
      state = 1;
    });
  });
  int fd = connect_to(running.port(), 16384);
  send_all(fd, "go");
  std::string got = read_to_end(fd);
  EXPECT_EQ(got.size(), total);
  EXPECT_EQ(got.find_first_not_of('x'), std::string::npos);
  ::close(fd);
  running.stop();
  running.wait();
  EXPECT_EQ(state.load(), 1);
  EXPECT_EQ(running.server().stats().total.closed_by(close_reason::local), 1u);
  EXPECT_EQ(running.server().stats().total.bytes_out, total);
}

// close_timeout bounds a stretch in which the peer takes nothing, not the whole flush: a
// reader slower than that in total, but never pausing that long, gets everything; one that
// stops reading is cut at it. (As a total deadline it cut a slow client's large reply short.)
TEST(NetConnection, CloseTimeoutCutsAStalledPeerButNotASlowOne) {
  auto options = local_options();
  constexpr std::size_t total = 4 << 20;
  options.send_buffer_limit = 8 << 20;
  options.close_timeout = std::chrono::milliseconds(400);
  running_server running(options, [&](weft::net::tcp_server& server) {
    server.serve([&](connection& c) {
      c.receive();  // the client says it is ready
      small_send_buffer(c.native_handle());
      EXPECT_TRUE(c.try_send(std::string(total, 'x')));
      c.close();
    });
  });
  // Slow: 256 KiB, then 40 ms without reading, sixteen times (0.64 s in all, more than the
  // close timeout, but no pause near it).
  int slow = connect_to(running.port(), 16384);
  send_all(slow, "go");
  std::size_t got = 0;
  for (int round = 0; round < 16; ++round) {
    got += read_bytes(slow, 256 * 1024).size();
    std::this_thread::sleep_for(std::chrono::milliseconds(40));
  }
  EXPECT_EQ(got, total);
  EXPECT_EQ(read_to_end(slow), "");  // then the end: nothing was dropped
  ::close(slow);
  ASSERT_TRUE(eventually(
      [&] { return running.server().stats().total.closed_by(close_reason::local) == 1; }));
  // Stalled: 256 KiB, then nothing; the flush is cut once it takes nothing for 400 ms.
  int stalled = connect_to(running.port(), 16384);
  send_all(stalled, "go");
  EXPECT_EQ(read_bytes(stalled, 256 * 1024).size(), 256u * 1024);
  EXPECT_TRUE(eventually(
      [&] { return running.server().stats().total.closed_by(close_reason::close_timeout) == 1; }));
  ::close(stalled);
  running.stop();
  running.wait();
}

TEST(NetConnection, DestroyDropsWhatIsQueuedAndClosesAtOnce) {
  auto options = local_options();
  constexpr std::size_t total = 8 << 20;
  options.send_buffer_limit = 16 << 20;
  running_server running(options, [&](weft::net::tcp_server& server) {
    server.serve([&](connection& c) {
      c.receive();
      small_send_buffer(c.native_handle());
      EXPECT_TRUE(c.try_send(std::string(total, 'x')));
      EXPECT_GT(c.queued(), 0u);
      c.destroy();
      EXPECT_EQ(c.queued(), 0u);
      EXPECT_FALSE(c.receive().has_value());
    });
  });
  int fd = connect_to(running.port(), 16384);
  send_all(fd, "go");
  std::string got = read_to_end(fd);  // ends with the close (or a reset): not the whole payload
  EXPECT_LT(got.size(), total);
  ::close(fd);
  running.stop();
  running.wait();
  auto stats = running.server().stats();
  EXPECT_LT(stats.total.bytes_out, total);
  EXPECT_EQ(stats.total.closed_by(close_reason::local), 1u);
}

TEST(NetConnection, PausedConnectionDeliversNothingUntilResumed) {
  auto options = local_options();
  options.protocol = weft::net::text();
  std::atomic<int> delivered{0};
  running_server running(options, [&](weft::net::tcp_server& server) {
    server.serve([&](connection& c) {
      auto first = c.receive();
      ASSERT_TRUE(first.has_value());
      delivered = 1;
      c.pause_recv();
      EXPECT_TRUE(c.recv_paused());
      c.send("paused");
      // A second coroutine resumes the connection once the client says so through a second
      // connection... kept simple: resume after the paused receive timed out once.
      EXPECT_THROW(c.receive(weft::timeout(50ms)), weft::timeout_error);
      EXPECT_EQ(delivered.load(), 1) << "nothing is delivered while paused";
      c.resume_recv();
      auto second = c.receive();
      ASSERT_TRUE(second.has_value());
      EXPECT_EQ(second->data, "second");
      delivered = 2;
      c.send("resumed");
    });
  });
  int fd = connect_to(running.port());
  send_all(fd, "first\nsecond\n");
  EXPECT_EQ(read_bytes(fd, 7), "paused\n");
  EXPECT_EQ(read_bytes(fd, 8), "resumed\n");
  ::close(fd);
  running.stop();
  running.wait();
  EXPECT_EQ(delivered.load(), 2);
}

TEST(NetConnection, KnowsItsAddressesIdWorkerAndCountsItsTraffic) {
  auto options = local_options();
  options.protocol = weft::net::text();
  std::string peer, local;
  weft::net::connection_counters counters;
  running_server running(options, [&](weft::net::tcp_server& server) {
    server.serve([&](connection& c) {
      peer = c.peer_address();
      local = c.local_address();
      EXPECT_EQ(c.worker(), 0u);
      EXPECT_GE(c.id(), 1u);
      c.context() = std::string("user data");
      while (auto m = c.receive()) {
        c.send(m->data);
      }
      EXPECT_EQ(std::any_cast<std::string>(c.context()), "user data");
      counters = c.counters();
    });
  });
  int fd = connect_to(running.port());
  sockaddr_in mine{};
  socklen_t length = sizeof mine;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&mine), &length);
  send_all(fd, "ab\ncd\n");
  EXPECT_EQ(read_bytes(fd, 6), "ab\ncd\n");
  ::close(fd);
  EXPECT_TRUE(eventually([&] { return running.server().stats().total.connections == 0; }));
  running.stop();
  running.wait();
  EXPECT_EQ(peer, "127.0.0.1:" + std::to_string(ntohs(mine.sin_port)));
  EXPECT_EQ(local, "127.0.0.1:" + std::to_string(running.port()));
  EXPECT_EQ(counters.messages_in, 2u);
  EXPECT_EQ(counters.messages_out, 2u);
  EXPECT_EQ(counters.bytes_in, 6u);
  EXPECT_EQ(counters.bytes_out, 6u);
}

TEST(NetConnection, ReceiveIntoOneMessageReusesItUntilTheInputEnds) {
  auto options = local_options();
  options.protocol = weft::net::text();
  std::vector<std::string> seen;
  bool ended_false = false;
  running_server running(options, [&](weft::net::tcp_server& server) {
    server.serve([&](connection& c) {
      weft::net::message m;
      m.kind = weft::net::message_kind::text;
      while (c.receive(m)) {
        seen.push_back(m.data);
        EXPECT_EQ(m.kind, weft::net::message_kind::binary);
        c.send(m.data);
      }
      ended_false = c.closed_by() == close_reason::peer;
    });
  });
  int fd = connect_to(running.port());
  send_all(fd, "a long first line\nb\n\n");
  EXPECT_EQ(read_bytes(fd, 21), "a long first line\nb\n\n");
  ::close(fd);
  EXPECT_TRUE(eventually([&] { return running.server().stats().total.connections == 0; }));
  running.stop();
  running.wait();
  EXPECT_EQ(seen, (std::vector<std::string>{"a long first line", "b", ""}));
  EXPECT_TRUE(ended_false);
}

TEST(NetConnection, ConcurrentReceiveIsAMisuse) {
  auto options = local_options();
  std::atomic<bool> refused{false};
  running_server running(options, [&](weft::net::tcp_server& server) {
    server.serve([&](connection& c) {
      auto attempt = [&] {
        try {
          c.receive();  // ends when the client closes
        } catch (const std::logic_error& misuse) {
          refused = std::string(misuse.what()).find("one reader at a time") != std::string::npos;
        }
      };
      auto other = weft::spawn(attempt);
      weft::yield();
      attempt();
      other.await();
    });
  });
  int fd = connect_to(running.port());
  // The spawned reader may be the first one in (then the handler's is refused): either way one
  // is, while the client stays connected and silent; its close then ends the other receive.
  EXPECT_TRUE(eventually([&] { return refused.load(); }));
  ::close(fd);
  running.stop();
  running.wait();
  EXPECT_TRUE(refused.load());
}

TEST(NetConnection, HandlerExceptionIsReportedAndClosesWithError) {
  auto options = local_options();
  log_lines log;
  options.log = log.sink();
  std::atomic<int> errors{0};
  running_server running(options, [&](weft::net::tcp_server& server) {
    server.serve(
        [](connection&) { throw std::runtime_error("handler broke"); },
        weft::net::connection_events{.on_error = [&](connection&, const std::exception& e) {
          errors += std::string(e.what()) == "handler broke";
        }});
  });
  int fd = connect_to(running.port());
  EXPECT_EQ(read_to_end(fd), "");
  ::close(fd);
  running.stop();
  running.wait();
  EXPECT_EQ(errors.load(), 1);
  EXPECT_EQ(running.server().stats().total.closed_by(close_reason::error), 1u);
  EXPECT_TRUE(log.contains("handler failed: handler broke")) << log.all();
}

TEST(NetConnection, ServeFromACoroutineSuspendsItAndConnectReachesTheServer) {
  auto options = local_options();
  options.protocol = weft::net::frame();
  weft::net::tcp_server server(options);
  server.listen();
  std::string reply = weft::run([&] {
    auto serving = weft::spawn([&] {
      server.serve([](connection& c) {
        while (auto m = c.receive()) {
          c.send(m->data + m->data);
        }
      });
    });
    auto c = weft::net::connect("127.0.0.1", server.port(),
                                weft::net::connection_options{.protocol = weft::net::frame()});
    c->send("ab");
    auto m = c->receive(weft::timeout(5s));
    c->close();
    server.stop(1000ms);
    serving.await();
    return m ? m->data : std::string("nothing");
  });
  EXPECT_EQ(reply, "abab");
}

}  // namespace

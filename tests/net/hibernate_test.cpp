// weft::net::connection::hibernate: a connection idle between messages with no coroutine of its
// own. The handler is called again, in a new coroutine, for each thing that ends the hibernation:
// input, the peer's close, the hibernation's limit, the options' idle timeout, a close from
// elsewhere, the stop.
#include <atomic>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "net/net_support.hpp"

namespace {

using namespace net_test;
using weft::net::close_reason;
using weft::net::connection;

// Answers one line per call with "<carry>:<line>" and hibernates with carry + 1; records the
// coroutine each call ran in and how the connection ended.
struct hibernating_echo {
  std::mutex mutex;
  std::set<std::uint64_t> coroutines;
  std::atomic<int> calls{0};
  std::atomic<int> ended{0};  // calls that found the input ended and returned without hibernating
  std::chrono::milliseconds limit{0};
  std::vector<std::string> timeouts;  // what the first read after a hibernation threw
  // Sees each message first; true: it answered, the handler returns without hibernating.
  std::function<bool(connection&, const std::string&)> special{};

  void operator()(connection& c) {
    ++calls;
    {
      std::lock_guard<std::mutex> lock(mutex);
      coroutines.insert(weft::this_coroutine::id());
    }
    std::optional<weft::net::message> m;
    try {
      m = c.receive();
    } catch (const weft::timeout_error& failure) {
      std::lock_guard<std::mutex> lock(mutex);
      timeouts.emplace_back(failure.what());
      c.send("timeout");
      return;  // the handler ends: the connection closes (local)
    }
    if (!m) {
      ++ended;
      return;
    }
    if (special && special(c, m->data)) {
      return;
    }
    c.send(std::to_string(c.carried()) + ":" + m->data);
    c.hibernate(limit.count() > 0 ? weft::timeout(limit) : weft::timeout::never(), c.carried() + 1);
  }
};

weft::net::tcp_server_options text_options() {
  auto options = local_options();
  options.protocol = weft::net::text();
  return options;
}

TEST(NetHibernate, HandlerIsCalledAgainPerMessageInANewCoroutineWithItsCarry) {
  auto echo = std::make_shared<hibernating_echo>();
  running_server running(text_options(), [echo](weft::net::tcp_server& server) {
    server.serve([echo](connection& c) { (*echo)(c); });
  });
  int fd = connect_to(running.port());
  send_all(fd, "a\n");
  EXPECT_EQ(read_bytes(fd, 4), "0:a\n");
  send_all(fd, "bb\n");
  EXPECT_EQ(read_bytes(fd, 5), "1:bb\n");
  send_all(fd, "c\n");
  EXPECT_EQ(read_bytes(fd, 4), "2:c\n");
  ::close(fd);
  EXPECT_TRUE(eventually([&] { return running.server().stats().total.connections == 0; }));
  running.stop();
  running.wait();
  EXPECT_EQ(echo->calls.load(), 4);  // three messages, then the call that finds the end
  EXPECT_EQ(echo->ended.load(), 1);
  EXPECT_EQ(echo->coroutines.size(), 4u);  // each call its own coroutine
  auto stats = running.server().stats();
  EXPECT_EQ(stats.total.messages_in, 3u);
  EXPECT_EQ(stats.total.closed_by(close_reason::peer), 1u);
}

TEST(NetHibernate, HibernatingConnectionsHoldNoCoroutine) {
  constexpr int idle = 200;
  auto echo = std::make_shared<hibernating_echo>();
  std::atomic<std::uint64_t> live_seen{0};
  echo->special = [&](connection& c, const std::string& line) {
    if (line != "live?") {
      return false;
    }
    // The probe: how many coroutines the worker has now.
    live_seen = weft::current_scheduler().stats().live_coroutines;
    c.send("ok");
    return true;
  };
  running_server running(text_options(), [echo](weft::net::tcp_server& server) {
    server.serve([echo](connection& c) { (*echo)(c); });
  });
  std::vector<int> fds;
  for (int index = 0; index < idle; ++index) {
    int fd = connect_to(running.port());
    ASSERT_GE(fd, 0);
    send_all(fd, "x\n");
    EXPECT_EQ(read_bytes(fd, 4), "0:x\n");
    fds.push_back(fd);
  }
  int probe = connect_to(running.port());
  send_all(probe, "live?\n");
  EXPECT_EQ(read_bytes(probe, 3), "ok\n");
  // The probe's handler, the acceptor, the worker's main and control coroutines and the like:
  // a handful, not one per hibernating connection.
  EXPECT_LT(live_seen.load(), 16u) << "hibernating connections keep coroutines";
  // The probe's handler returned (its connection closes); the hibernating ones all stay open.
  EXPECT_TRUE(eventually([&] {
    return running.server().stats().total.connections == static_cast<std::uint64_t>(idle);
  }));
  // Every hibernating connection still answers.
  for (int fd : fds) {
    send_all(fd, "y\n");
  }
  for (int fd : fds) {
    EXPECT_EQ(read_bytes(fd, 4), "1:y\n");
    ::close(fd);
  }
  ::close(probe);
  EXPECT_TRUE(eventually([&] { return running.server().stats().total.connections == 0; }));
  running.stop();
  running.wait();
  EXPECT_EQ(echo->ended.load(), idle);  // the probe's handler returned after its answer
}

TEST(NetHibernate, TheHibernationsLimitEndsTheFirstReadWithATimeout) {
  auto echo = std::make_shared<hibernating_echo>();
  echo->limit = 100ms;
  running_server running(text_options(), [echo](weft::net::tcp_server& server) {
    server.serve([echo](connection& c) { (*echo)(c); });
  });
  int fd = connect_to(running.port());
  send_all(fd, "a\n");
  EXPECT_EQ(read_bytes(fd, 4), "0:a\n");
  const auto hibernated_at = std::chrono::steady_clock::now();
  EXPECT_EQ(read_to_end(fd), "timeout\n");  // the handler answers the timeout and returns
  EXPECT_GE(std::chrono::steady_clock::now() - hibernated_at, 90ms);
  ::close(fd);
  EXPECT_TRUE(eventually([&] { return running.server().stats().total.connections == 0; }));
  running.stop();
  running.wait();
  ASSERT_EQ(echo->timeouts.size(), 1u);
  EXPECT_NE(echo->timeouts[0].find("timed out"), std::string::npos) << echo->timeouts[0];
  EXPECT_EQ(running.server().stats().total.closed_by(close_reason::local), 1u);
}

TEST(NetHibernate, TheIdleTimeoutClosesAHibernatingConnection) {
  auto options = text_options();
  options.idle_timeout = 100ms;
  auto echo = std::make_shared<hibernating_echo>();
  running_server running(options, [echo](weft::net::tcp_server& server) {
    server.serve([echo](connection& c) { (*echo)(c); });
  });
  int fd = connect_to(running.port());
  send_all(fd, "a\n");
  EXPECT_EQ(read_bytes(fd, 4), "0:a\n");
  EXPECT_EQ(read_to_end(fd), "");  // closed by the server, nothing more said
  ::close(fd);
  EXPECT_TRUE(eventually([&] { return running.server().stats().total.connections == 0; }));
  running.stop();
  running.wait();
  EXPECT_EQ(running.server().stats().total.closed_by(close_reason::idle_timeout), 1u);
  EXPECT_EQ(echo->ended.load(), 1);  // called again, it found the input ended
  EXPECT_TRUE(echo->timeouts.empty());
}

TEST(NetHibernate, ACloseFromAnotherConnectionWakesTheHibernatingOne) {
  std::mutex mutex;
  std::vector<std::shared_ptr<connection>> handles;
  auto echo = std::make_shared<hibernating_echo>();
  echo->special = [&](connection& c, const std::string& line) {
    std::lock_guard<std::mutex> lock(mutex);  // one worker: no other thread holds it
    if (line != "close the others") {
      if (c.carried() == 0) {
        handles.push_back(c.handle());
      }
      return false;
    }
    for (auto& other : handles) {
      other->close();
    }
    c.send("done");
    return true;
  };
  running_server running(text_options(), [echo](weft::net::tcp_server& server) {
    server.serve([echo](connection& c) { (*echo)(c); });
  });
  int hibernating = connect_to(running.port());
  send_all(hibernating, "a\n");
  EXPECT_EQ(read_bytes(hibernating, 4), "0:a\n");
  int closer = connect_to(running.port());
  send_all(closer, "close the others\n");
  EXPECT_EQ(read_bytes(closer, 5), "done\n");
  EXPECT_EQ(read_to_end(hibernating), "");  // the hibernating connection closed, gracefully
  ::close(hibernating);
  ::close(closer);
  EXPECT_TRUE(eventually([&] { return running.server().stats().total.connections == 0; }));
  running.stop();
  running.wait();
  handles.clear();
  EXPECT_EQ(running.server().stats().total.closed_by(close_reason::local), 2u);
  EXPECT_EQ(echo->ended.load(), 1);
}

TEST(NetHibernate, StopResumesHibernatingConnectionsAndEndsThemAtOnce) {
  constexpr int count = 20;
  auto echo = std::make_shared<hibernating_echo>();
  running_server running(text_options(), [echo](weft::net::tcp_server& server) {
    server.serve([echo](connection& c) { (*echo)(c); });
  });
  std::vector<int> fds;
  for (int index = 0; index < count; ++index) {
    int fd = connect_to(running.port());
    send_all(fd, "a\n");
    EXPECT_EQ(read_bytes(fd, 4), "0:a\n");
    fds.push_back(fd);
  }
  const auto stopped_at = std::chrono::steady_clock::now();
  running.stop(10000ms);  // a long grace: idle connections must not need it
  running.wait();
  EXPECT_LT(std::chrono::steady_clock::now() - stopped_at, 5000ms);
  for (int fd : fds) {
    EXPECT_EQ(read_to_end(fd), "");
    ::close(fd);
  }
  auto stats = running.server().stats();
  EXPECT_EQ(stats.total.connections, 0u);
  EXPECT_EQ(stats.total.closed_by(close_reason::server_stop), static_cast<std::uint64_t>(count));
  EXPECT_EQ(echo->ended.load(), count);
}

TEST(NetHibernate, MisusesAreRefusedWithTheirReason) {
  std::mutex mutex;
  std::vector<std::string> errors;
  auto record = [&](const std::exception& failure) {
    std::lock_guard<std::mutex> lock(mutex);
    errors.emplace_back(failure.what());
  };
  running_server running(local_options(), [&](weft::net::tcp_server& server) {
    server.serve([&](connection& c) {
      if (!c.read_input()) {
        return;
      }
      try {
        c.hibernate();  // the bytes read are still in input()
      } catch (const std::logic_error& failure) {
        record(failure);
      }
      auto never_done = weft::spawn([] { weft::sleep_for(std::chrono::hours(1)); });
      try {
        c.hibernate(weft::cancel_on(never_done));
      } catch (const std::invalid_argument& failure) {
        record(failure);
      }
      never_done.cancel("the test is over");
      c.consume_input(c.input().size());
      weft::spawn([&] {
        try {
          c.hibernate();  // not the handler's coroutine
        } catch (const std::logic_error& failure) {
          record(failure);
        }
      }).await();
      c.send("checked\n");
    });
  });
  int fd = connect_to(running.port());
  send_all(fd, "abc");
  EXPECT_EQ(read_to_end(fd),
            "checked\n");  // no hibernate took effect: the handler's return closed it
  ::close(fd);
  running.stop();
  running.wait();
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_NE(errors[0].find("3 bytes of input not consumed"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("cancel token"), std::string::npos) << errors[1];
  EXPECT_NE(errors[2].find("only the server's handler can hibernate"), std::string::npos)
      << errors[2];
}

// A connection served again after a hibernation keeps its fd's subscription, dormant, until its
// socket is released. Input that arrives while the handler waits for something else (a sleep
// here) must neither make the worker spin, reported at every poll with nobody to take it, nor be
// lost: the next hibernation re-arms the watch and the bytes already there wake it at once.
TEST(NetHibernate, InputWhileTheHandlerWaitsElsewhereNeitherSpinsNorIsLost) {
  auto echo = std::make_shared<hibernating_echo>();
  std::atomic<std::uint64_t> polls_during_sleep{~std::uint64_t{0}};
  echo->special = [&](connection& c, const std::string& line) {
    if (line != "wait") {
      return false;
    }
    c.send("sleeping");
    auto polls = [] {
      const weft::scheduler_stats stats = weft::current_scheduler().stats();
      return stats.reactor_polls + stats.reactor_waits;
    };
    const std::uint64_t before = polls();
    weft::sleep_for(std::chrono::milliseconds(300));
    polls_during_sleep = polls() - before;
    c.send("awake");
    c.hibernate(weft::timeout::never(), c.carried() + 1);
    return true;
  };
  running_server running(text_options(), [echo](weft::net::tcp_server& server) {
    server.serve([echo](connection& c) { (*echo)(c); });
  });
  int fd = connect_to(running.port());
  send_all(fd, "a\n");
  EXPECT_EQ(read_bytes(fd, 4), "0:a\n");  // the first call hibernated: subscribed
  send_all(fd, "wait\n");
  EXPECT_EQ(read_bytes(fd, 9), "sleeping\n");
  send_all(fd, "more\n");  // readable during the sleep, with nobody reading
  EXPECT_EQ(read_bytes(fd, 6), "awake\n");
  EXPECT_EQ(read_bytes(fd, 7), "2:more\n");  // woken by the bytes already there
  ::close(fd);
  EXPECT_TRUE(eventually([&] { return running.server().stats().total.connections == 0; }));
  running.stop();
  running.wait();
  // The sleep's timer, the other connection-less coroutines of the worker: a few polls. A fd
  // reported at every poll would make the worker spin through thousands.
  EXPECT_LT(polls_during_sleep.load(), 50u) << "the worker spun while input waited";
  EXPECT_EQ(echo->ended.load(), 1);
}

// The callback style hibernates by itself between messages once its worker has more than
// tcp_server_options::hibernate_above connections; below that its read loops wait in their
// coroutines. Either way every message is delivered, in order.
TEST(NetHibernate, CallbackConnectionsHibernateBetweenMessagesAboveTheThreshold) {
  for (const std::size_t above : {std::size_t{0}, std::size_t{512}}) {
    SCOPED_TRACE("hibernate_above " + std::to_string(above));
    constexpr int count = 60;
    auto options = text_options();
    options.hibernate_above = above;
    running_server running(options, [](weft::net::tcp_server& server) {
      server.serve(weft::net::connection_events{
          .on_message =
              [](connection& c, weft::net::message& m) {
                if (m.data == "live?") {
                  EXPECT_TRUE(c.try_send(
                      std::to_string(weft::current_scheduler().stats().live_coroutines)));
                  return;
                }
                EXPECT_TRUE(c.try_send("echo:" + m.data));
              },
      });
    });
    std::vector<int> fds;
    for (int index = 0; index < count; ++index) {
      int fd = connect_to(running.port());
      ASSERT_GE(fd, 0);
      send_all(fd, "x\n");
      EXPECT_EQ(read_bytes(fd, 7), "echo:x\n");
      fds.push_back(fd);
    }
    int probe = connect_to(running.port());
    send_all(probe, "live?\n");
    std::string live;
    for (char byte = 0; ::recv(probe, &byte, 1, 0) == 1 && byte != '\n';) {
      live += byte;
    }
    ASSERT_FALSE(live.empty());
    if (above == 0) {
      EXPECT_LT(std::stoul(live), 16u) << "hibernating connections keep coroutines";
    } else {
      EXPECT_GE(std::stoul(live), static_cast<unsigned long>(count));
    }
    for (int fd : fds) {
      send_all(fd, "y\nz\n");
    }
    for (int fd : fds) {
      EXPECT_EQ(read_bytes(fd, 14), "echo:y\necho:z\n");
      ::close(fd);
    }
    ::close(probe);
    EXPECT_TRUE(eventually([&] { return running.server().stats().total.connections == 0; }));
    running.stop();
    running.wait();
    auto stats = running.server().stats();
    EXPECT_EQ(stats.total.messages_in, static_cast<std::uint64_t>(3 * count + 1));
    EXPECT_EQ(stats.total.closed_by(close_reason::peer), static_cast<std::uint64_t>(count + 1));
  }
}

// Connections woken by one poll whose coroutines then run one at a time with a poll before each
// (reactor_poll_interval 0): the sockets of those not yet run are reported again and again, and
// past a few reports a waking hibernation goes dormant and the registry drops its read interest
// (src/net/hibernate.cpp). The input that woke them is still read by their coroutines, and the
// next hibernation arms the interest again for the next message, round after round.
TEST(NetHibernate, ConnectionsWokenTogetherAndPolledBetweenEachLoseNothing) {
  constexpr int count = 64;
  constexpr int rounds = 20;
  auto options = text_options();
  options.hibernate_above = 0;
  options.reactor_poll_interval = std::chrono::microseconds(0);
  running_server running(options, [](weft::net::tcp_server& server) {
    server.serve(weft::net::connection_events{
        .on_message = [](connection& c,
                         weft::net::message& m) { EXPECT_TRUE(c.try_send("echo:" + m.data)); },
    });
  });
  std::vector<int> fds;
  for (int index = 0; index < count; ++index) {
    int fd = connect_to(running.port());
    ASSERT_GE(fd, 0);
    fds.push_back(fd);
  }
  for (int round = 0; round < rounds; ++round) {
    const std::string line = std::to_string(round % 10);
    for (int fd : fds) {
      send_all(fd, line + "\n");
    }
    for (int fd : fds) {
      ASSERT_EQ(read_bytes(fd, 7), "echo:" + line + "\n") << "round " << round << ", fd " << fd;
    }
  }
  for (int fd : fds) {
    ::close(fd);
  }
  EXPECT_TRUE(eventually([&] { return running.server().stats().total.connections == 0; }));
  running.stop();
  running.wait();
  EXPECT_EQ(running.server().stats().total.messages_in, static_cast<std::uint64_t>(count * rounds));
}

}  // namespace

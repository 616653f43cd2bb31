// weft::net::connection::park: a connection idle between messages with no coroutine of its own.
// The handler is called again, in a new coroutine, for each thing that ends the park: input, the
// peer's close, the park's limit, the options' idle timeout, a close from elsewhere, the stop.
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

// Answers one line per call with "<carry>:<line>" and parks with carry + 1; records the
// coroutine each call ran in and how the connection ended.
struct parking_echo {
  std::mutex mutex;
  std::set<std::uint64_t> coroutines;
  std::atomic<int> calls{0};
  std::atomic<int> ended{0};  // calls that found the input ended and returned without parking
  std::chrono::milliseconds limit{0};
  std::vector<std::string> timeouts;  // what the first read after a park threw
  // Sees each message first; true: it answered, the handler returns without parking.
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
    c.park(limit.count() > 0 ? weft::timeout(limit) : weft::timeout::never(), c.carried() + 1);
  }
};

weft::net::tcp_server_options text_options() {
  auto options = local_options();
  options.protocol = weft::net::text();
  return options;
}

TEST(NetPark, HandlerIsCalledAgainPerMessageInANewCoroutineWithItsCarry) {
  auto echo = std::make_shared<parking_echo>();
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

TEST(NetPark, ParkedConnectionsHoldNoCoroutine) {
  constexpr int idle = 200;
  auto echo = std::make_shared<parking_echo>();
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
  // a handful, not one per parked connection.
  EXPECT_LT(live_seen.load(), 16u) << "parked connections keep coroutines";
  // The probe's handler returned (its connection closes); the parked ones all stay open.
  EXPECT_TRUE(eventually([&] {
    return running.server().stats().total.connections == static_cast<std::uint64_t>(idle);
  }));
  // Every parked connection still answers.
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

TEST(NetPark, TheParksLimitEndsTheFirstReadWithATimeout) {
  auto echo = std::make_shared<parking_echo>();
  echo->limit = 100ms;
  running_server running(text_options(), [echo](weft::net::tcp_server& server) {
    server.serve([echo](connection& c) { (*echo)(c); });
  });
  int fd = connect_to(running.port());
  send_all(fd, "a\n");
  EXPECT_EQ(read_bytes(fd, 4), "0:a\n");
  const auto parked_at = std::chrono::steady_clock::now();
  EXPECT_EQ(read_to_end(fd), "timeout\n");  // the handler answers the timeout and returns
  EXPECT_GE(std::chrono::steady_clock::now() - parked_at, 90ms);
  ::close(fd);
  EXPECT_TRUE(eventually([&] { return running.server().stats().total.connections == 0; }));
  running.stop();
  running.wait();
  ASSERT_EQ(echo->timeouts.size(), 1u);
  EXPECT_NE(echo->timeouts[0].find("timed out"), std::string::npos) << echo->timeouts[0];
  EXPECT_EQ(running.server().stats().total.closed_by(close_reason::local), 1u);
}

TEST(NetPark, TheIdleTimeoutClosesAParkedConnection) {
  auto options = text_options();
  options.idle_timeout = 100ms;
  auto echo = std::make_shared<parking_echo>();
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

TEST(NetPark, ACloseFromAnotherConnectionWakesTheParkedOne) {
  std::mutex mutex;
  std::vector<std::shared_ptr<connection>> handles;
  auto echo = std::make_shared<parking_echo>();
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
  int parked = connect_to(running.port());
  send_all(parked, "a\n");
  EXPECT_EQ(read_bytes(parked, 4), "0:a\n");
  int closer = connect_to(running.port());
  send_all(closer, "close the others\n");
  EXPECT_EQ(read_bytes(closer, 5), "done\n");
  EXPECT_EQ(read_to_end(parked), "");  // the parked connection closed, gracefully
  ::close(parked);
  ::close(closer);
  EXPECT_TRUE(eventually([&] { return running.server().stats().total.connections == 0; }));
  running.stop();
  running.wait();
  handles.clear();
  EXPECT_EQ(running.server().stats().total.closed_by(close_reason::local), 2u);
  EXPECT_EQ(echo->ended.load(), 1);
}

TEST(NetPark, StopResumesParkedConnectionsAndEndsThemAtOnce) {
  constexpr int count = 20;
  auto echo = std::make_shared<parking_echo>();
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

TEST(NetPark, MisusesAreRefusedWithTheirReason) {
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
        c.park();  // the bytes read are still in input()
      } catch (const std::logic_error& failure) {
        record(failure);
      }
      auto never_done = weft::spawn([] { weft::sleep_for(std::chrono::hours(1)); });
      try {
        c.park(weft::cancel_on(never_done));
      } catch (const std::invalid_argument& failure) {
        record(failure);
      }
      never_done.cancel("the test is over");
      c.consume_input(c.input().size());
      weft::spawn([&] {
        try {
          c.park();  // not the handler's coroutine
        } catch (const std::logic_error& failure) {
          record(failure);
        }
      }).await();
      c.send("checked\n");
    });
  });
  int fd = connect_to(running.port());
  send_all(fd, "abc");
  EXPECT_EQ(read_to_end(fd), "checked\n");  // no park took effect: the handler's return closed it
  ::close(fd);
  running.stop();
  running.wait();
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_NE(errors[0].find("3 bytes of input not consumed"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("cancel token"), std::string::npos) << errors[1];
  EXPECT_NE(errors[2].find("only the server's handler can park"), std::string::npos) << errors[2];
}

}  // namespace

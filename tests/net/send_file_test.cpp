// connection::send_file: file ranges queued in order with the memory sends and written with
// sendfile(2), not counted against the send buffer; a short file closes the connection rather
// than truncating silently. And receiving in place (input/consume_input/read_input).
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <string>

#include "net/net_support.hpp"

namespace {

using namespace net_test;
using weft::net::close_reason;
using weft::net::connection;

// A temporary file with `size` bytes of a known pattern; removed by the destructor.
class temp_file {
 public:
  explicit temp_file(std::size_t size) {
    char name[] = "/tmp/weft-send-file-XXXXXX";
    fd_ = ::mkstemp(name);
    path_ = name;
    content_.resize(size);
    for (std::size_t i = 0; i < size; ++i) {
      content_[i] = static_cast<char>('A' + i % 26);
    }
    std::size_t done = 0;
    while (done < size) {
      ssize_t wrote = ::write(fd_, content_.data() + done, size - done);
      if (wrote <= 0) {
        ADD_FAILURE() << "write: " << std::strerror(errno);
        break;
      }
      done += static_cast<std::size_t>(wrote);
    }
  }
  ~temp_file() {
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  int fd() const { return fd_; }
  const std::string& content() const { return content_; }

 private:
  int fd_ = -1;
  std::string path_;
  std::string content_;
};

TEST(NetSendFile, RangeGoesOutInOrderBetweenMemorySends) {
  temp_file file(100000);
  running_server server(local_options(), [&](weft::net::tcp_server& s) {
    s.serve([&](connection& c) {
      c.send("head:");
      c.send_file(file.fd(), 10, 50000);
      c.send(":tail");
    });
  });
  int fd = connect_to(server.port());
  std::string got = read_to_end(fd);
  ::close(fd);
  EXPECT_EQ(got, "head:" + file.content().substr(10, 50000) + ":tail");
}

TEST(NetSendFile, LargeFileToSlowReaderIsWholeAndHoldsNoMemory) {
  constexpr std::size_t size = 8 << 20;
  temp_file file(size);
  std::atomic<std::size_t> high{0};
  running_server server(local_options(), [&](weft::net::tcp_server& s) {
    weft::net::connection_events events;
    events.on_close = [&](connection& c, close_reason) { high = c.counters().send_buffer_high; };
    s.serve(
        [&](connection& c) {
          small_send_buffer(c.native_handle());
          c.send_file(file.fd(), 0, size);
          EXPECT_EQ(c.queued(), 0u);  // the range is not memory
          EXPECT_EQ(c.queued_files(), 1u);
          c.send("end");
        },
        events);
  });
  int fd = connect_to(server.port(), 16384);
  std::string got = read_to_end(fd, std::chrono::milliseconds(20000));
  ::close(fd);
  ASSERT_EQ(got.size(), size + 3);
  EXPECT_TRUE(got == file.content() + "end");
  server.stop();
  server.wait();
  EXPECT_LE(high.load(), 3u);
}

TEST(NetSendFile, FileShorterThanRangeClosesTheConnectionAndIsReported) {
  constexpr std::size_t size = 16 << 20;
  temp_file file(size);
  log_lines log;
  auto options = local_options();
  options.log = log.sink();
  std::atomic<int> errors{0};
  running_server server(options, [&](weft::net::tcp_server& s) {
    weft::net::connection_events events;
    events.on_error = [&](connection&, const std::exception&) { ++errors; };
    s.serve(
        [&](connection& c) {
          small_send_buffer(c.native_handle());
          c.send_file(file.fd(), 0, size);  // the client does not read yet: most stays queued
          EXPECT_EQ(::ftruncate(file.fd(), 0), 0);
          c.wait_closed(weft::timeout(std::chrono::seconds(20)));
        },
        events);
  });
  int fd = connect_to(server.port(), 16384);
  std::string got = read_to_end(fd, std::chrono::milliseconds(20000));
  ::close(fd);
  EXPECT_LT(got.size(), size);
  ASSERT_TRUE(eventually(
      [&] { return server.server().stats().total.closed_by(close_reason::error) == 1; }));
  EXPECT_EQ(errors.load(), 1);
  EXPECT_TRUE(log.contains("short file")) << log.all();
}

TEST(NetSendFile, BadArgumentsAreRefusedByName) {
  temp_file file(100);
  std::atomic<int> refused{0};
  running_server server(local_options(), [&](weft::net::tcp_server& s) {
    s.serve([&](connection& c) {
      try {
        c.send_file(file.fd(), 50, 51);
      } catch (const std::invalid_argument& e) {
        if (std::string(e.what()).find("past the end of the file") != std::string::npos) {
          ++refused;
        }
      }
      try {
        c.send_file(-1, 0, 1);
      } catch (const std::invalid_argument& e) {
        if (std::string(e.what()).find("fd -1") != std::string::npos) {
          ++refused;
        }
      }
      c.send_file(file.fd(), 50, 0);  // nothing
      c.send_file(file.fd(), 50, 50);
    });
  });
  int fd = connect_to(server.port());
  std::string got = read_to_end(fd);
  ::close(fd);
  EXPECT_EQ(got, file.content().substr(50));
  EXPECT_EQ(refused.load(), 2);
}

TEST(NetReceiveInPlace, ReadInputAccumulatesUntilConsumed) {
  running_server server(local_options(), [&](weft::net::tcp_server& s) {
    s.serve([&](connection& c) {
      // Lines, parsed in the connection's buffer: each echoed back reversed.
      for (;;) {
        std::string_view in = c.input();
        std::size_t end = in.find('\n');
        if (end == std::string_view::npos) {
          if (!c.read_input(weft::timeout::never(), !in.empty())) {
            return;
          }
          continue;
        }
        std::string line(in.substr(0, end));
        c.consume_input(end + 1);
        c.send(std::string(line.rbegin(), line.rend()) + "\n");
      }
    });
  });
  int fd = connect_to(server.port());
  send_all(fd, "abc\nde");
  EXPECT_EQ(read_bytes(fd, 4), "cba\n");
  send_all(fd, "f\nxy\nz");
  EXPECT_EQ(read_bytes(fd, 7), "fed\nyx\n");
  ::shutdown(fd, SHUT_WR);
  EXPECT_EQ(read_to_end(fd), "");
  ::close(fd);
}

TEST(NetReceiveInPlace, ConsumingMoreThanBufferedIsOutOfRange) {
  std::atomic<bool> thrown{false};
  running_server server(local_options(), [&](weft::net::tcp_server& s) {
    s.serve([&](connection& c) {
      ASSERT_TRUE(c.read_input());
      try {
        c.consume_input(c.input().size() + 1);
      } catch (const std::out_of_range&) {
        thrown = true;
      }
    });
  });
  int fd = connect_to(server.port());
  send_all(fd, "x");
  read_to_end(fd);
  ::close(fd);
  EXPECT_TRUE(thrown.load());
}

}  // namespace

TEST(NetSendFile, AnAdoptedFileIsSentThenClosedByTheConnection) {
  temp_file file(30000);
  std::atomic<int> adopted{-1};
  running_server server(local_options(), [&](weft::net::tcp_server& s) {
    s.serve([&](connection& c) {
      const int own = ::open(("/proc/self/fd/" + std::to_string(file.fd())).c_str(), O_RDONLY);
      adopted = own;
      c.send("[");
      c.adopt_file(own, 5, 20000);
      c.send("]");
    });
  });
  int fd = connect_to(server.port());
  std::string got = read_to_end(fd);
  ::close(fd);
  EXPECT_EQ(got, "[" + file.content().substr(5, 20000) + "]");
  // The connection closed the descriptor it was handed once the range was out.
  ASSERT_GE(adopted.load(), 0);
  EXPECT_TRUE(eventually([&] { return ::fcntl(adopted.load(), F_GETFD) == -1; }));
}

// wait_sent: returns once the socket took every byte and range queued (true), its own limit
// leaves the connection open, and a peer that resets with bytes unread makes it false.
TEST(NetSendFile, WaitSentEndsOnceAllIsWrittenAndSaysWhenSomeWasDropped) {
  constexpr std::size_t size = 8 << 20;
  temp_file file(size);
  std::atomic<bool> may_read{false};
  std::atomic<int> outcome{-1};  // the second connection's wait_sent: 0 false, 1 true
  std::atomic<int> served{0};
  running_server server(local_options(), [&](weft::net::tcp_server& s) {
    s.serve([&](connection& c) {
      const int index = served++;
      small_send_buffer(c.native_handle());
      EXPECT_TRUE(c.wait_sent());  // nothing queued: at once
      try {
        c.send("head:");
        c.send_file(file.fd(), 0, size);
        c.send(":tail");
      } catch (const weft::net::connection_closed_error&) {
        // The second client's reset can come while the range is being written here.
        ASSERT_EQ(index, 1);
      }
      if (index == 0) {
        // The client reads nothing yet: the limit passes, the connection stays open.
        EXPECT_THROW(c.wait_sent(weft::timeout(std::chrono::milliseconds(50))),
                     weft::timeout_error);
        EXPECT_TRUE(c.is_open());
        EXPECT_EQ(c.queued_files(), 1u);
        may_read = true;
        may_read.notify_one();
        EXPECT_TRUE(c.wait_sent());
        EXPECT_EQ(c.queued_files(), 0u);
        EXPECT_EQ(c.queued(), 0u);
        EXPECT_EQ(c.counters().bytes_out, size + 10);
      } else {
        outcome = c.wait_sent() ? 1 : 0;
        EXPECT_FALSE(c.wait_sent());  // and after the drop, at once
      }
    });
  });
  int fd = connect_to(server.port(), 16384);
  may_read.wait(false);
  std::string got = read_bytes(fd, size + 10, std::chrono::milliseconds(20000));
  ::close(fd);
  EXPECT_TRUE(got == "head:" + file.content() + ":tail");
  // The second client reads a little, then closes with the rest unread (a reset).
  int cut = connect_to(server.port(), 16384);
  EXPECT_EQ(read_bytes(cut, 65536).size(), 65536u);
  ::close(cut);
  ASSERT_TRUE(eventually([&] { return outcome.load() != -1; }, std::chrono::milliseconds(10000)));
  EXPECT_EQ(outcome.load(), 0);
}

// A send whose first write fails (the peer reset before it) loses the payload before any of it
// was queued: wait_sent says so all the same (it said true, and weft-httpd then logged such a
// reply as delivered).
TEST(NetSendFile, ASendThatTheResetPeerNeverTookMakesWaitSentFalse) {
  std::atomic<bool> reset{false};
  std::atomic<int> outcome{-1};  // wait_sent: 0 false, 1 true
  running_server server(local_options(), [&](weft::net::tcp_server& s) {
    s.serve([&](connection& c) {
      for (int i = 0; i < 10000 && !reset.load(); ++i) {
        weft::sleep_for(std::chrono::milliseconds(1));
      }
      c.send(std::string(1 << 20, 'x'));  // accepted: the connection did not know yet
      outcome = c.wait_sent() ? 1 : 0;
      EXPECT_FALSE(c.is_open());
    });
  });
  const int fd = connect_to(server.port());
  const linger abort_on_close{1, 0};
  ASSERT_EQ(::setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof abort_on_close), 0);
  ::close(fd);  // a reset
  reset = true;
  ASSERT_TRUE(eventually([&] { return outcome.load() != -1; }, std::chrono::milliseconds(10000)));
  EXPECT_EQ(outcome.load(), 0);
}

// A peer that takes nothing for the send timeout is cut off by wait_sent as by a waiting send.
TEST(NetSendFile, WaitSentOnAPeerThatDoesNotReadClosesAtTheSendTimeout) {
  constexpr std::size_t size = 8 << 20;
  temp_file file(size);
  auto options = local_options();
  options.send_timeout = std::chrono::milliseconds(200);
  std::atomic<bool> timed_out{false};
  running_server server(options, [&](weft::net::tcp_server& s) {
    s.serve([&](connection& c) {
      small_send_buffer(c.native_handle());
      c.send_file(file.fd(), 0, size);
      try {
        c.wait_sent();
      } catch (const weft::timeout_error& e) {
        timed_out = std::string(e.what()).find("took nothing") != std::string::npos;
      }
      EXPECT_EQ(c.closed_by(), close_reason::send_limit);
    });
  });
  int fd = connect_to(server.port(), 16384);
  ASSERT_TRUE(eventually(
      [&] { return server.server().stats().total.closed_by(close_reason::send_limit) == 1; },
      std::chrono::milliseconds(10000)));
  ::close(fd);
  EXPECT_TRUE(timed_out.load());
}

TEST(NetSwitchProtocol, ReplayedBytesAndTheRestOfTheInputReachTheNewFramer) {
  std::string lines;
  std::string failure;
  running_server server(local_options(), [&](weft::net::tcp_server& s) {
    s.serve([&](connection& c) {
      // Raw input up to "SWITCH\n", then the text protocol, replaying "first" ahead of what
      // followed the marker in the same read.
      while (c.input().find("SWITCH\n") == std::string_view::npos) {
        ASSERT_TRUE(c.read_input());
      }
      c.consume_input(c.input().find("SWITCH\n") + 7);
      c.switch_protocol(weft::net::text(), "first\n");
      try {
        c.switch_protocol(weft::net::text());
      } catch (const std::logic_error& e) {
        failure = e.what();
      }
      while (auto m = c.receive()) {
        lines += m->data + ";";
      }
    });
  });
  int fd = connect_to(server.port());
  send_all(fd, "raw bytes SWITCH\nsecond\n");
  send_all(fd, "third\n");
  ::shutdown(fd, SHUT_WR);
  read_to_end(fd);
  ::close(fd);
  server.stop();
  server.wait();
  EXPECT_EQ(lines, "first;second;third;");
  EXPECT_NE(failure.find("already speaks the text protocol"), std::string::npos) << failure;
}

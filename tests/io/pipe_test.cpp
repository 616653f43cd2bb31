// weft::pipe: unix-domain sockets and wrapped descriptors through the weft::stream interface.
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::run_clean;

// A fresh directory for socket files (short: unix socket paths are limited to 107 bytes).
class socket_directory {
 public:
  socket_directory() {
    char pattern[] = "/tmp/weft-pipe-XXXXXX";
    path_ = mkdtemp(pattern);
  }
  ~socket_directory() { std::filesystem::remove_all(path_); }
  std::string file(const char* name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::string read_all(weft::stream& stream) {
  std::string all;
  std::array<char, 4096> buffer;
  while (std::size_t bytes = stream.read_some(buffer)) {
    all.append(buffer.data(), bytes);
  }
  return all;
}

TEST(Pipe, UnixSocketEchoRoundTrip) {
  socket_directory directory;
  const std::string path = directory.file("echo.sock");
  run_clean([&] {
    auto server = weft::pipe::listener::listen(path);
    EXPECT_EQ(server.path(), path);
    EXPECT_TRUE(std::filesystem::exists(path));
    auto echo = weft::spawn([&] {
      weft::pipe connection = server.accept();
      std::array<char, 256> buffer;
      while (std::size_t bytes = connection.read_some(buffer)) {
        connection.write_all(std::string_view(buffer.data(), bytes));
      }
    });
    weft::pipe client = weft::pipe::connect(path);
    EXPECT_EQ(client.peer_address(), path);
    client.write_all("over a unix socket\n");
    std::string line;
    client.read_until(line, "\n");
    EXPECT_EQ(line, "over a unix socket\n");
    client.shutdown();
    EXPECT_EQ(read_all(client), "");
    echo.await();
    server.close();
  });
  EXPECT_FALSE(std::filesystem::exists(path)) << "closing the listener removes the socket file";
}

TEST(Pipe, ConnectToAMissingSocketNamesThePath) {
  socket_directory directory;
  const std::string path = directory.file("missing.sock");
  run_clean([&] {
    try {
      weft::pipe::connect(path);
      ADD_FAILURE() << "there is nothing at " << path;
    } catch (const weft::io_error& error) {
      EXPECT_EQ(error.uv_code(), UV_ENOENT);
      EXPECT_EQ(std::string(error.what()), "connect " + path + ": no such file or directory");
    }
  });
}

TEST(Pipe, ListeningOnATakenPathFails) {
  socket_directory directory;
  const std::string path = directory.file("taken.sock");
  run_clean([&] {
    auto first = weft::pipe::listener::listen(path);
    EXPECT_THROW(weft::pipe::listener::listen(path), weft::io_error);
  });
}

TEST(Pipe, WrappedSocketpairEchoAndEndOfStream) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  run_clean([&] {
    weft::pipe left = weft::pipe::open(fds[0]);
    weft::pipe right = weft::pipe::open(fds[1]);
    left.write_all("ping");
    std::array<char, 4> buffer;
    right.read_exactly(buffer);
    EXPECT_EQ(std::string_view(buffer.data(), 4), "ping");
    right.write_all("pong");
    left.read_exactly(buffer);
    EXPECT_EQ(std::string_view(buffer.data(), 4), "pong");
    left.close();  // closes fds[0]: the pipe owns it
    EXPECT_EQ(right.read_some(buffer), 0u);
  });
}

TEST(Pipe, WrappedPipeTimedOutReadLosesNothing) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  run_clean([&] {
    weft::pipe reader = weft::pipe::open(fds[0]);
    weft::pipe writer = weft::pipe::open(fds[1]);
    std::array<char, 16> buffer;
    EXPECT_THROW(reader.read_some(buffer, weft::timeout(20ms)), weft::timeout_error);
    bool reading = false;
    auto cancelled = weft::spawn([&] {
      reading = true;
      reader.read_some(buffer);
    });
    ASSERT_TRUE(weft_test::yield_until([&] { return reading; }));
    cancelled.cancel("test");
    EXPECT_THROW(cancelled.await(), weft::cancelled_error);
    writer.write_all("still here");
    writer.close();
    EXPECT_EQ(read_all(reader), "still here");
  });
}

// A waiting read_some lends its buffer to libuv (no copy). Bytes that land there in the poll that
// also fires the reader's deadline are not lost: the timeout wins (the first wake) and the bytes
// move into the stream's buffer for the next read.
TEST(Pipe, BytesThatLandAsAReadTimesOutStayReadable) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  run_clean(
      [&] {
        weft::pipe reader = weft::pipe::open(fds[0]);
        weft::pipe writer = weft::pipe::open(fds[1]);
        bool timed_out = false;
        auto waiting = weft::spawn([&] {
          std::array<char, 16> buffer;
          try {
            std::size_t bytes = reader.read_some(buffer, weft::timeout(20ms));
            return std::string(buffer.data(), bytes);
          } catch (const weft::timeout_error&) {
            timed_out = true;
          }
          return std::string();
        });
        weft::yield();  // the reader waits, its buffer on loan
        writer.write_all("landed");
        // Past the reader's deadline without suspending: the next poll fires the deadline and reads
        // the bytes before the reader runs again.
        auto until = std::chrono::steady_clock::now() + 40ms;
        while (std::chrono::steady_clock::now() < until) {
        }
        std::string got = waiting.await();
        if (timed_out) {
          EXPECT_EQ(got, "");
          EXPECT_EQ(reader.buffered(), 6u) << "the bytes moved into the stream's buffer";
          std::array<char, 16> buffer;
          got.assign(buffer.data(), reader.read_some(buffer, weft::timeout(10s)));
        }
        EXPECT_EQ(got, "landed");
        EXPECT_TRUE(timed_out) << "the deadline fires before the poll for I/O";
      },
      weft_test::fifo_options());
}

// A reader whose data is always there never has to wait, so read_some yields on its own now and
// then: a fast peer cannot starve the other coroutines of the scheduler.
TEST(Pipe, AReaderThatNeverWaitsStillLetsOthersRun) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  run_clean(
      [&] {
        weft::pipe reader = weft::pipe::open(fds[0]);
        weft::pipe writer = weft::pipe::open(fds[1]);
        constexpr std::size_t total = 4096;
        writer.write_all(std::string(total, 'x'));  // all of it waits in the socket already
        bool done = false;
        std::size_t ticks = 0;
        auto ticker = weft::spawn([&] {
          while (!done) {
            ++ticks;
            weft::yield();
          }
        });
        weft::yield();  // the ticker starts
        std::size_t ticks_before = ticks;
        char byte;
        for (std::size_t read = 0; read < total; ++read) {
          ASSERT_EQ(reader.read_some(std::span<char>(&byte, 1)), 1u);
        }
        done = true;
        ticker.await();
        // One turn for the ticker per 32 reads that never waited.
        EXPECT_GE(ticks - ticks_before, total / 33);
      },
      weft_test::fifo_options());
}

TEST(Pipe, AcceptedConnectionsQueueUntilAccepted) {
  socket_directory directory;
  const std::string path = directory.file("queue.sock");
  run_clean([&] {
    auto server = weft::pipe::listener::listen(path);
    std::vector<weft::pipe> clients;
    for (int index = 0; index < 3; ++index) {
      clients.push_back(weft::pipe::connect(path));
      clients.back().write_all(std::to_string(index));
    }
    for (int index = 0; index < 3; ++index) {
      weft::pipe connection = server.accept(weft::timeout(5s));
      std::array<char, 1> digit;
      connection.read_exactly(digit);
      EXPECT_EQ(digit[0], '0' + index);
    }
  });
}

}  // namespace

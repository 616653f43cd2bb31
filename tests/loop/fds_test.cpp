// weft::loop::event_loop fd watchers: on_readable, on_writable, off_readable, off_writable, and
// the fd rules of event_loop.hpp.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include "loop/loop_support.hpp"
#include "weft/reactor/fd.hpp"
#include "weft/sched/task.hpp"

namespace {

using namespace std::chrono_literals;
using weft::loop::event_loop;
using weft::loop::watcher_id;
using weft_loop_test::socket_pair;
using weft_loop_test::with_loop;

std::string message_of_invalid(auto&& call) {
  try {
    call();
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  return "no std::invalid_argument";
}

TEST(LoopFds, ReadableIsLevelTriggered) {
  socket_pair pair;
  with_loop([&](event_loop& loop) {
    ASSERT_EQ(::write(pair.ends[1], "abc", 3), 3);
    std::string got;
    int calls = 0;
    loop.on_readable(pair.ends[0], [&] {
      ++calls;
      char byte;
      ASSERT_EQ(::read(pair.ends[0], &byte, 1), 1);  // one byte per call: still readable after
      got += byte;
      if (got.size() == 3) {
        EXPECT_TRUE(loop.off_readable(pair.ends[0]));
      }
    });
    loop.run();
    EXPECT_EQ(got, "abc");
    EXPECT_EQ(calls, 3);
  });
}

TEST(LoopFds, WritableRunsWhileTheFdIsWritable) {
  socket_pair pair;
  with_loop([&](event_loop& loop) {
    int calls = 0;
    loop.on_writable(pair.ends[0], [&] {
      ++calls;
      ASSERT_EQ(::write(pair.ends[0], "x", 1), 1);
      if (calls == 3) {
        loop.off_writable(pair.ends[0]);
      }
    });
    loop.run();
    EXPECT_EQ(calls, 3);
    char buffer[8];
    EXPECT_EQ(::read(pair.ends[1], buffer, sizeof(buffer)), 3);
  });
}

TEST(LoopFds, RegisteringAgainReplacesTheCallback) {
  socket_pair pair;
  with_loop([&](event_loop& loop) {
    std::vector<std::string> calls;
    watcher_id first = loop.on_readable(pair.ends[0], [&] { calls.push_back("first"); });
    watcher_id second = loop.on_readable(pair.ends[0], [&] {
      calls.push_back("second");
      char byte;
      EXPECT_EQ(::read(pair.ends[0], &byte, 1), 1);
      loop.off_readable(pair.ends[0]);
    });
    EXPECT_NE(first, second);
    EXPECT_FALSE(loop.unreference(first)) << "the replaced watcher's id names nothing";
    EXPECT_TRUE(loop.unreference(second));
    EXPECT_TRUE(loop.reference(second));
    ASSERT_EQ(::write(pair.ends[1], "x", 1), 1);
    loop.run();
    EXPECT_EQ(calls, std::vector<std::string>{"second"});
  });
}

TEST(LoopFds, ReadableAndWritableOfOneFdAreIndependent) {
  socket_pair pair;
  with_loop([&](event_loop& loop) {
    int readable = 0;
    int writable = 0;
    loop.on_readable(pair.ends[0], [&] {
      ++readable;
      char buffer[8];
      EXPECT_EQ(::read(pair.ends[0], buffer, sizeof(buffer)), 1);
      loop.off_readable(pair.ends[0]);
    });
    loop.on_writable(pair.ends[0], [&] {
      ++writable;
      EXPECT_TRUE(loop.off_writable(pair.ends[0]));
      // The readable watcher keeps working with the writable one gone.
      ASSERT_EQ(::write(pair.ends[1], "x", 1), 1);
    });
    loop.run();
    EXPECT_EQ(readable, 1);
    EXPECT_EQ(writable, 1);
  });
}

TEST(LoopFds, OffReturnsWhetherAWatcherWasRemoved) {
  socket_pair pair;
  with_loop([&](event_loop& loop) {
    EXPECT_FALSE(loop.off_readable(pair.ends[0]));
    EXPECT_FALSE(loop.off_writable(-1));
    EXPECT_FALSE(loop.off_readable(123456));
    watcher_id id = loop.on_readable(pair.ends[0], [] {});
    EXPECT_FALSE(loop.off_writable(pair.ends[0])) << "only the readable direction is watched";
    EXPECT_FALSE(loop.off_delay(id)) << "an fd watcher is not a timer";
    EXPECT_TRUE(loop.off_readable(pair.ends[0]));
    EXPECT_FALSE(loop.off_readable(pair.ends[0]));
    loop.run();
  });
}

TEST(LoopFds, BadFdsAreInvalidArgumentsAtOnce) {
  weft_test::temporary_directory directory;
  int file = ::open((directory / "plain").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  ASSERT_GE(file, 0);
  int folder = ::open(directory.path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(folder, 0);
  int closed_fd = 4000;  // far above what this test process opens
  ASSERT_EQ(::fcntl(closed_fd, F_GETFD), -1);
  with_loop([&](event_loop& loop) {
    std::string negative = message_of_invalid([&] { loop.on_readable(-1, [] {}); });
    EXPECT_NE(negative.find("on_readable"), std::string::npos) << negative;
    EXPECT_NE(negative.find("-1"), std::string::npos) << negative;
    std::string not_open = message_of_invalid([&] { loop.on_writable(closed_fd, [] {}); });
    EXPECT_NE(not_open.find("fd " + std::to_string(closed_fd) + " is not open"), std::string::npos)
        << not_open;
    std::string regular = message_of_invalid([&] { loop.on_readable(file, [] {}); });
    EXPECT_NE(regular.find("regular file"), std::string::npos) << regular;
    std::string directory_message = message_of_invalid([&] { loop.on_readable(folder, [] {}); });
    EXPECT_NE(directory_message.find("directory"), std::string::npos) << directory_message;
    socket_pair pair;
    EXPECT_THROW(loop.on_readable(pair.ends[1], nullptr), std::invalid_argument);
    EXPECT_FALSE(loop.off_readable(file)) << "nothing was registered";
    loop.run();  // returns at once: nothing is registered
  });
  ::close(file);
  ::close(folder);
}

TEST(LoopFds, HangUpCountsAsReadable) {
  with_loop([&](event_loop& loop) {
    socket_pair pair;
    ssize_t got = -2;
    loop.on_readable(pair.ends[0], [&] {
      char buffer[8];
      got = ::read(pair.ends[0], buffer, sizeof(buffer));
      loop.off_readable(pair.ends[0]);
    });
    pair.close(1);
    loop.run();
    EXPECT_EQ(got, 0) << "end of stream";
  });
}

TEST(LoopFds, HangUpCountsAsWritable) {
  with_loop([&](event_loop& loop) {
    socket_pair pair;
    // Fill the buffer so that the fd is not writable, then let the peer go away.
    char block[4096] = {};
    while (::write(pair.ends[0], block, sizeof(block)) > 0) {
    }
    int calls = 0;
    int error = 0;
    loop.on_writable(pair.ends[0], [&] {
      ++calls;
      if (::send(pair.ends[0], "x", 1, MSG_NOSIGNAL) < 0) {
        error = errno;
      }
      loop.off_writable(pair.ends[0]);
    });
    loop.defer([&] { pair.close(1); });
    loop.run();
    EXPECT_EQ(calls, 1);
    EXPECT_EQ(error, EPIPE) << "the write reports the real error";
  });
}

TEST(LoopFds, WatcherRegisteredDuringATickRunsInALaterTick) {
  socket_pair pair;
  with_loop([&](event_loop& loop) {
    ASSERT_EQ(::write(pair.ends[1], "x", 1), 1);  // readable before anything runs
    std::vector<std::string> order;
    loop.defer([&] {
      order.push_back("registering");
      loop.on_readable(pair.ends[0], [&] {
        order.push_back("readable");
        loop.off_readable(pair.ends[0]);
      });
      loop.defer([&] { order.push_back("next tick"); });
    });
    loop.run();
    EXPECT_EQ(order, (std::vector<std::string>{"registering", "next tick", "readable"}));
  });
}

TEST(LoopFds, WatcherRemovedByAnEarlierCallbackOfTheSameTickDoesNotRun) {
  socket_pair first;
  socket_pair second;
  with_loop([&](event_loop& loop) {
    ASSERT_EQ(::write(first.ends[1], "x", 1), 1);
    ASSERT_EQ(::write(second.ends[1], "x", 1), 1);
    int runs = 0;
    // Both are ready in the same tick; whichever runs first removes the other.
    loop.on_readable(first.ends[0], [&] {
      ++runs;
      loop.off_readable(first.ends[0]);
      loop.off_readable(second.ends[0]);
    });
    loop.on_readable(second.ends[0], [&] {
      ++runs;
      loop.off_readable(first.ends[0]);
      loop.off_readable(second.ends[0]);
    });
    loop.run();
    EXPECT_EQ(runs, 1);
  });
}

TEST(LoopFds, PingPongThroughReadableAndWritable) {
  socket_pair pair;
  with_loop([&](event_loop& loop) {
    const int trips = 2000;
    int done = 0;
    auto writable = [&loop](int fd) {
      return [&loop, fd] {
        ASSERT_EQ(::write(fd, "x", 1), 1);
        loop.off_writable(fd);
      };
    };
    for (int index = 0; index < 2; ++index) {
      int fd = pair.ends[index];
      loop.on_readable(fd, [&, fd, index, writable] {
        char byte;
        if (::read(fd, &byte, 1) != 1) {
          return;
        }
        if (index == 0 && ++done == trips) {
          loop.off_readable(pair.ends[0]);
          loop.off_readable(pair.ends[1]);
          return;
        }
        loop.on_writable(fd, writable(fd));
      });
    }
    loop.on_writable(pair.ends[0], writable(pair.ends[0]));
    loop.run();
    EXPECT_EQ(done, trips);
  });
}

TEST(LoopFds, OffThenCloseRightAwayIsSafe) {
  with_loop([&](event_loop& loop) {
    // The usual end of a connection: stop watching, close, and a new connection gets the same
    // number at once.
    int rounds = 0;
    std::function<void()> round = [&] {
      int ends[2];
      ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, ends), 0);
      ASSERT_EQ(::write(ends[1], "x", 1), 1);
      loop.on_writable(ends[0], [] {});
      loop.on_readable(ends[0], [&, ends0 = ends[0], ends1 = ends[1]] {
        EXPECT_TRUE(loop.off_readable(ends0));
        EXPECT_TRUE(loop.off_writable(ends0));
        ::close(ends0);
        ::close(ends1);
        if (++rounds < 200) {
          round();
        }
      });
    };
    round();
    loop.run();
    EXPECT_EQ(rounds, 200);
  });
}

TEST(LoopFds, FdWatchersWorkInsideWeft) {
  socket_pair pair;
  weft_test::run_clean([&] {
    event_loop loop;
    std::string got;
    loop.on_readable(pair.ends[0], [&] {
      char buffer[16];
      ssize_t count = ::read(pair.ends[0], buffer, sizeof(buffer));
      if (count > 0) {
        got.append(buffer, static_cast<std::size_t>(count));
      }
      if (got == "hello") {
        loop.off_readable(pair.ends[0]);
      }
    });
    // A coroutine writes while the loop dispatches in main.
    auto writer = weft::spawn([&] {
      weft::yield();
      ASSERT_EQ(::write(pair.ends[1], "hel", 3), 3);
      weft::yield();
      ASSERT_EQ(::write(pair.ends[1], "lo", 2), 2);
    });
    loop.run();
    writer.await();
    EXPECT_EQ(got, "hello");
  });
}

TEST(LoopFds, ALoopWatcherAndACoroutineWaitingOnTheSameFdShareItsWatch) {
  // One driver watch per fd: the loop's readable watcher and a coroutine's wait_writable on the
  // same fd go through the same one, each told what it asked for.
  socket_pair pair;
  weft_test::run_clean([&] {
    event_loop loop;
    std::string got;
    loop.on_readable(pair.ends[0], [&] {
      char buffer[16];
      ssize_t count = ::read(pair.ends[0], buffer, sizeof(buffer));
      if (count > 0) {
        got.append(buffer, static_cast<std::size_t>(count));
      }
      if (got.size() == 3) {
        loop.off_readable(pair.ends[0]);
      }
    });
    int waits = 0;
    auto writer = weft::spawn([&] {
      for (const char* part : {"a", "b", "c"}) {
        weft::wait_writable(pair.ends[0]);  // the loop's fd, the other direction
        ++waits;
        ASSERT_EQ(::write(pair.ends[1], part, 1), 1);
        weft::yield();
      }
    });
    loop.run();
    writer.await();
    EXPECT_EQ(got, "abc");
    EXPECT_EQ(waits, 3);
  });
}

}  // namespace

// weft::loop::event_loop in the situations real programs put it in: thousands of idle
// connections, a signal while the loop sleeps in the kernel, callbacks that remove themselves, an
// fd closed behind the loop's back, fork().
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "loop/loop_support.hpp"

namespace {

using namespace std::chrono_literals;
using weft::loop::event_loop;
using weft::loop::watcher_id;
using weft_loop_test::seconds_since;
using weft_loop_test::socket_pair;
using weft_loop_test::with_loop;

// Ping-pong of one byte over pair through readable/writable callbacks, trips round trips; the
// loop is stopped after the last one.
void ping_pong(event_loop& loop, socket_pair& pair, int trips) {
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
        loop.stop();
        return;
      }
      loop.on_writable(fd, writable(fd));
    });
  }
  loop.on_writable(pair.ends[0], writable(pair.ends[0]));
  loop.run();
  EXPECT_EQ(done, trips);
}

TEST(LoopRealWorld, TenThousandIdleFdsAndOneActivePair) {
  constexpr int idle_pairs = 5000;
  rlimit limit{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &limit), 0);
  if (limit.rlim_cur < 2 * idle_pairs + 100) {
    limit.rlim_cur = std::min<rlim_t>(limit.rlim_max, 2 * idle_pairs + 1000);
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
  ASSERT_GE(limit.rlim_cur, 2 * idle_pairs + 100)
      << "this test needs an open-file limit above 10,100 (ulimit -n)";
  with_loop([&](event_loop& loop) {
    std::vector<int> idle;
    int idle_calls = 0;
    for (int pair = 0; pair < idle_pairs; ++pair) {
      int ends[2];
      ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, ends), 0);
      for (int fd : ends) {
        idle.push_back(fd);
        loop.on_readable(fd, [&idle_calls] { ++idle_calls; });
      }
    }
    socket_pair active;
    auto start = std::chrono::steady_clock::now();
    ping_pong(loop, active, 100);  // poll(2) scans all 10,002 fds at each wait: ~3 ms
    EXPECT_LT(seconds_since(start), 10.0);
    EXPECT_EQ(idle_calls, 0) << "no idle fd's callback ran";
    // One of the idle ones becomes ready: only its callback runs.
    ASSERT_EQ(::write(idle[4321], "x", 1), 1);
    int woken = -1;
    for (std::size_t index = 0; index < idle.size(); ++index) {
      int fd = idle[index];
      loop.on_readable(fd, [&, fd] {
        woken = fd;
        loop.stop();
      });
    }
    loop.run();
    EXPECT_EQ(woken, idle[4320]) << "the peer of the end written to";
    for (int fd : idle) {
      EXPECT_TRUE(loop.off_readable(fd));
      ::close(fd);
    }
  });
}

// The state of a thread ('R' running, 'S' sleeping in the kernel...), from /proc.
char thread_state(pid_t thread) {
  std::ifstream stat("/proc/self/task/" + std::to_string(thread) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  std::size_t close = text.rfind(')');
  return close == std::string::npos || close + 2 >= text.size() ? '?' : text[close + 2];
}

TEST(LoopRealWorld, ASignalRaisedOnAnotherThreadWakesTheLoopBlockedInTheKernel) {
  with_loop([](event_loop& loop) {
    const pid_t loop_thread = ::gettid();
    std::thread raiser;
    std::thread::id ran_on;
    bool saw_sleeping = false;
    loop.on_signal(SIGUSR1, [&] {
      ran_on = std::this_thread::get_id();
      loop.off_signal(SIGUSR1);
    });
    loop.defer([&] {
      raiser = std::thread([&] {
        // Wait for the condition itself: the loop thread asleep in its blocking wait.
        auto deadline = std::chrono::steady_clock::now() + 10s;
        while (std::chrono::steady_clock::now() < deadline) {
          if (thread_state(loop_thread) == 'S') {
            saw_sleeping = true;
            break;
          }
          std::this_thread::yield();
        }
        std::raise(SIGUSR1);  // delivered to this thread: the OS handler runs here
      });
    });
    loop.run();
    raiser.join();
    EXPECT_TRUE(saw_sleeping) << "the loop thread never blocked";
    EXPECT_EQ(ran_on, std::this_thread::get_id()) << "the callback ran on the loop's thread";
  });
}

TEST(LoopRealWorld, CallbacksThatRemoveTheirOwnWatcher) {
  socket_pair pair;
  with_loop([&](event_loop& loop) {
    // A repeat: its captures live until it returns, and go right after.
    auto marker = std::make_shared<std::string>("alive");
    std::weak_ptr<std::string> watch_marker = marker;
    watcher_id repeat{};
    bool first_off = false;
    bool second_off = true;
    std::string seen_after;
    repeat = loop.repeat(1ms, [&, marker = std::move(marker)] {
      first_off = loop.off_repeat(repeat);
      second_off = loop.off_repeat(repeat);
      seen_after = *marker;  // still alive: removal waits for the callback to return
    });
    // An fd watcher that removes itself and registers its successor.
    ASSERT_EQ(::write(pair.ends[1], "ab", 2), 2);
    std::vector<std::string> reads;
    loop.on_readable(pair.ends[0], [&] {
      char byte;
      ASSERT_EQ(::read(pair.ends[0], &byte, 1), 1);
      reads.push_back(std::string("first:") + byte);
      EXPECT_TRUE(loop.off_readable(pair.ends[0]));
      loop.on_readable(pair.ends[0], [&] {
        char next;
        ASSERT_EQ(::read(pair.ends[0], &next, 1), 1);
        reads.push_back(std::string("second:") + next);
        EXPECT_TRUE(loop.off_readable(pair.ends[0]));
      });
    });
    // A defer cannot remove itself: it has left already.
    watcher_id deferred{};
    bool defer_off = true;
    deferred = loop.defer([&] { defer_off = loop.off_defer(deferred); });
    loop.run();
    EXPECT_TRUE(first_off);
    EXPECT_FALSE(second_off);
    EXPECT_EQ(seen_after, "alive");
    EXPECT_TRUE(watch_marker.expired()) << "the callback was destroyed once it returned";
    EXPECT_EQ(reads, (std::vector<std::string>{"first:a", "second:b"}));
    EXPECT_FALSE(defer_off);
  });
}

std::string what_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& caught) {
    return caught.what();
  }
}

TEST(LoopRealWorld, AnFdClosedUnderItsWatcherIsReportedThroughTheErrorHandler) {
  with_loop([&](event_loop& loop) {
    socket_pair pair;
    const int fd = pair.ends[0];
    bool ran = false;
    loop.on_readable(fd, [&] { ran = true; });
    std::vector<std::exception_ptr> errors;
    loop.set_error_handler([&](std::exception_ptr error) { errors.push_back(error); });
    auto start = std::chrono::steady_clock::now();
    // Closed once the loop runs (so that no descriptor the run opens takes the number), without
    // off_readable: the kernel drops it from the loop silently.
    loop.defer([&] { pair.close(0); });
    loop.run();  // would hang forever if the close went unnoticed
    EXPECT_LT(seconds_since(start), 5.0);
    EXPECT_FALSE(ran);
    ASSERT_EQ(errors.size(), 1u);
    std::string message = what_of(errors[0]);
    EXPECT_NE(message.find("fd " + std::to_string(fd)), std::string::npos) << message;
    EXPECT_NE(message.find("closed while its readable watcher was still registered"),
              std::string::npos)
        << message;
    try {
      std::rethrow_exception(errors[0]);
    } catch (const weft::io_error& error) {
      EXPECT_EQ(error.error_code(), std::errc::bad_file_descriptor);
      EXPECT_EQ(error.uv_code(), -EBADF);
    }
    EXPECT_FALSE(loop.off_readable(fd)) << "the loop removed the watcher";
  });
}

TEST(LoopRealWorld, AnFdClosedAndItsNumberReusedIsReportedToo) {
  with_loop([&](event_loop& loop) {
    socket_pair pair;
    const int fd = pair.ends[0];
    loop.on_readable(fd, [] {});
    std::string message;
    loop.set_error_handler([&](std::exception_ptr error) { message = what_of(error); });
    std::unique_ptr<socket_pair> reuse;
    loop.defer([&] {
      pair.close(0);
      reuse = std::make_unique<socket_pair>();  // takes the lowest free number: the one closed
      EXPECT_EQ(reuse->ends[0], fd);
    });
    loop.run();
    EXPECT_NE(message.find("closed, and its number reused,"), std::string::npos) << message;
  });
}

TEST(LoopRealWorld, AnFdClosedUnderItsWatcherWithoutAHandlerEndsRun) {
  with_loop([&](event_loop& loop) {
    socket_pair pair;
    const int fd = pair.ends[0];
    loop.on_readable(fd, [] {});
    loop.delay(1ms, [&] {
      pair.close(0);
      loop.on_writable(fd, [] {});  // an interest change finds the fd closed at once
    });
    auto start = std::chrono::steady_clock::now();
    try {
      loop.run();
      ADD_FAILURE() << "run() returned";
    } catch (const weft::io_error& error) {
      EXPECT_NE(std::string(error.what()).find("readable and writable watchers were"),
                std::string::npos)
          << error.what();
    }
    EXPECT_LT(seconds_since(start), 0.5) << "found by the interest change, not the sweep";
    EXPECT_FALSE(loop.off_readable(fd));
    EXPECT_FALSE(loop.off_writable(fd));
  });
}

TEST(LoopRealWorld, ADuplicatedFdClosedUnderItsReadyWatcherIsReportedToo) {
  with_loop([&](event_loop& loop) {
    socket_pair pair;
    const int fd = pair.ends[0];
    int copy = ::dup(fd);  // the file outlives the number: the kernel keeps it in epoll sets
    ASSERT_GE(copy, 0);
    std::vector<std::string> messages;
    int calls_after_report = 0;
    loop.set_error_handler([&](std::exception_ptr error) { messages.push_back(what_of(error)); });
    loop.on_readable(fd, [&] {
      char byte;
      (void)::read(fd, &byte, 1);  // EBADF once the number is closed
      if (!messages.empty()) {
        ++calls_after_report;
      }
    });
    loop.defer([&] {
      ASSERT_EQ(::write(pair.ends[1], "x", 1), 1);  // ready, and it stays ready
      pair.close(0);
    });
    auto start = std::chrono::steady_clock::now();
    loop.run();  // returns once the watcher is removed: nothing else is registered
    ::close(copy);
    EXPECT_LT(seconds_since(start), 5.0);
    ASSERT_EQ(messages.size(), 1u);
    EXPECT_NE(messages[0].find("fd " + std::to_string(fd)), std::string::npos) << messages[0];
    EXPECT_NE(messages[0].find("closed while its readable watcher"), std::string::npos)
        << messages[0];
    EXPECT_EQ(calls_after_report, 0) << "the watcher is gone once reported";
    EXPECT_FALSE(loop.off_readable(fd));
  });
}

TEST(LoopRealWorld, ALoopMadeAfterForkWorksInTheChildAndOneMadeBeforeRefuses) {
  event_loop before;
  watcher_id far = before.delay(1h, [] {});
  std::fflush(nullptr);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // In the child: report through the exit status only.
    int status = 0;
    try {
      before.delay(0.0, [] {});
      status = 10;  // accepted: wrong
    } catch (const std::logic_error& error) {
      if (std::strstr(error.what(), "fork") == nullptr) {
        status = 11;
      }
    }
    try {
      event_loop after;
      int fired = 0;
      after.delay(1ms, [&] { ++fired; });
      socket_pair pair;
      ping_pong(after, pair, 100);
      after.run();
      if (fired != 1) {
        status = 12;
      }
    } catch (...) {
      status = 13;
    }
    std::_Exit(status);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: the old loop was usable; 11: unclear message; "
                                       "12/13: the child's own loop failed";
  EXPECT_TRUE(before.off_delay(far)) << "the parent's loop is untouched";
  before.run();
}

}  // namespace

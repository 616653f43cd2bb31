// weft::wait_readable / weft::wait_writable: fd readiness for other libraries' I/O.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "reactor/socket_pair.hpp"
#include "test_support.hpp"
#include "weft/sync/event.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::run_clean;

using weft_test::socket_pair;

TEST(Fd, WaitReadableReturnsOnceThePeerWrote) {
  socket_pair pair;
  run_clean([&] {
    auto reader = weft::spawn([&] {
      char buffer[16];
      ssize_t got = ::read(pair.ends[0], buffer, sizeof(buffer));
      EXPECT_EQ(got, -1) << "nothing written yet";
      weft::wait_readable(pair.ends[0], weft::timeout(5s));
      got = ::read(pair.ends[0], buffer, sizeof(buffer));
      return std::string(buffer, got > 0 ? static_cast<std::size_t>(got) : 0);
    });
    weft::spawn([&] {
      weft::yield();
      EXPECT_EQ(::write(pair.ends[1], "ping", 4), 4);
    });
    EXPECT_EQ(reader.await(), "ping");
  });
}

TEST(Fd, ReaderAndWriterShareOneFd) {
  socket_pair pair;
  run_clean([&] {
    auto reader = weft::spawn([&] { weft::wait_readable(pair.ends[0], weft::timeout(5s)); });
    auto writer = weft::spawn([&] { weft::wait_writable(pair.ends[0], weft::timeout(5s)); });
    writer.await();  // an empty socket buffer is writable at once
    EXPECT_FALSE(reader.done());
    EXPECT_EQ(::write(pair.ends[1], "x", 1), 1);
    reader.await();
  });
}

TEST(Fd, ManyReadersOfOneFdAreAllWoken) {
  socket_pair pair;
  run_clean([&] {
    int woken = 0;
    std::vector<weft::task<void>> readers;
    for (int index = 0; index < 4; ++index) {
      readers.push_back(weft::spawn([&] {
        weft::wait_readable(pair.ends[0], weft::timeout(5s));
        ++woken;
      }));
    }
    weft::spawn([&] {
      weft::yield();
      EXPECT_EQ(::write(pair.ends[1], "x", 1), 1);
    });
    for (auto& reader : readers) {
      reader.await();
    }
    EXPECT_EQ(woken, 4);
  });
}

TEST(Fd, ATimeoutLeavesNothingBehind) {
  socket_pair pair;
  run_clean([&] {
    EXPECT_THROW(weft::wait_readable(pair.ends[0], weft::timeout(10ms)), weft::timeout_error);
    // The fd can be waited on again afterwards.
    EXPECT_EQ(::write(pair.ends[1], "x", 1), 1);
    weft::wait_readable(pair.ends[0], weft::timeout(5s));
  });
}

TEST(Fd, AZeroLimitTimesOutAtOnceAfterTheThreadComputed) {
  socket_pair pair;
  run_clean([&] {
    weft::sleep_for(1ms);
    const auto polled = weft::loop_time();
    while (std::chrono::steady_clock::now() < polled + 10ms) {
    }
    // Near the last poll a deadline is checked on the clock, so limits made now (after it)
    // are already past: both give up at once.
    const auto start = std::chrono::steady_clock::now();
    EXPECT_THROW(weft::wait_readable(pair.ends[0], weft::timeout(0ms)), weft::timeout_error);
    EXPECT_THROW(weft::wait_readable(pair.ends[0], weft::timeout::at(start - 1ms)),
                 weft::timeout_error);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
    EXPECT_EQ(::write(pair.ends[1], "x", 1), 1);
    weft::wait_readable(pair.ends[0], weft::timeout(5s));  // and the fd still serves a wait
  });
}

TEST(Fd, ADeadlineThatPassedWhileTheThreadComputedEndsTheWaitAtTheNextPoll) {
  socket_pair pair;
  run_clean([&] {
    weft::sleep_for(1ms);  // a poll: loop_time() is fresh
    const auto polled = weft::loop_time();
    // Compute without yielding past a deadline counted from that poll: far enough from it
    // (more than fd.cpp's exact_within) that the wait does not read the clock, so it arms and
    // its timer fires at the poll its suspension brings.
    const auto limit = weft::timeout::from(polled, 100ms);
    while (std::chrono::steady_clock::now() < polled + 150ms) {
    }
    EXPECT_EQ(weft::loop_time(), polled) << "no poll while the coroutine computed";
    const auto start = std::chrono::steady_clock::now();
    EXPECT_THROW(weft::wait_readable(pair.ends[0], limit), weft::timeout_error);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 2s) << "it waited for something else";
    EXPECT_GE(weft::loop_time(), polled + 150ms) << "the wait ended at a poll";
  });
}

TEST(Fd, ACancelledWaiterLeavesTheOthersWaiting) {
  socket_pair pair;
  run_clean([&] {
    auto cancelled = weft::spawn([&] { weft::wait_readable(pair.ends[0]); });
    auto patient = weft::spawn([&] { weft::wait_readable(pair.ends[0], weft::timeout(5s)); });
    weft::yield();
    cancelled.cancel("not needed");
    EXPECT_THROW(cancelled.await(), weft::cancelled_error);
    EXPECT_EQ(::write(pair.ends[1], "x", 1), 1);
    patient.await();
  });
}

// fd_registration keeps the poll handle between waits (a database socket waited on at every
// query); waits on it work as before, one after another.
TEST(Fd, ARegisteredFdServesWaitAfterWait) {
  socket_pair pair;
  run_clean([&] {
    weft::fd_registration registered(pair.ends[0]);
    EXPECT_EQ(registered.fd(), pair.ends[0]);
    auto writer = weft::spawn([&] {
      for (int round = 0; round < 100; ++round) {
        EXPECT_EQ(::write(pair.ends[1], "x", 1), 1);
        weft::yield();
      }
    });
    for (int round = 0; round < 100; ++round) {
      char byte;
      while (::read(pair.ends[0], &byte, 1) != 1) {
        weft::wait_readable(pair.ends[0], weft::timeout(5s));
      }
    }
    writer.await();
    registered.reset();
    EXPECT_EQ(registered.fd(), -1);
  });  // run_clean: the handle is gone once the registration is
}

// A peer that closes with our data unread resets the connection: the fd reports an error
// condition (POLLERR), which libuv turns into "bad file descriptor" and a stopped handle. The
// waiter must wake as for readiness, and its read must see the real error; a later wait on the
// same registered fd must not hang on the stopped handle.
TEST(Fd, AResetConnectionWakesTheWaiterAndTheReadReportsTheRealError) {
  socket_pair pair;
  run_clean([&] {
    weft::fd_registration registered(pair.ends[0]);
    auto reader = weft::spawn([&] {
      weft::wait_readable(pair.ends[0], weft::timeout(5s));
      char byte;
      errno = 0;
      EXPECT_EQ(::read(pair.ends[0], &byte, 1), -1);
      EXPECT_EQ(errno, ECONNRESET);
      weft::wait_readable(pair.ends[0], weft::timeout(5s));  // the peer is gone: readable (EOF)
      EXPECT_EQ(::read(pair.ends[0], &byte, 1), 0);
      weft::wait_writable(pair.ends[0], weft::timeout(5s));
      EXPECT_EQ(::send(pair.ends[0], "x", 1, MSG_NOSIGNAL), -1);
      EXPECT_EQ(errno, EPIPE);
    });
    weft::yield();  // the reader waits now
    EXPECT_EQ(::write(pair.ends[0], "unread", 6), 6);
    ::close(pair.ends[1]);
    pair.ends[1] = -1;
    reader.await();
  });
}

// Data nobody waits for on a registered fd must not make the (level-triggered) poll fire at
// every turn of the loop: the interest is dropped when it fires with no waiter.
TEST(Fd, AnIdleRegisteredFdWithUnreadDataDoesNotSpinTheLoop) {
  socket_pair pair;
  weft::scheduler scheduler;
  weft_test::clean_end_check check(scheduler);
  scheduler.run([&] {
    weft::fd_registration registered(pair.ends[0]);
    EXPECT_EQ(::write(pair.ends[1], "x", 1), 1);
    auto waiter = weft::spawn([&] { weft::wait_readable(pair.ends[0], weft::timeout(5s)); });
    waiter.await();  // registered and polled for reading; the byte stays unread
    std::uint64_t waits_before = scheduler.stats().reactor_waits;
    weft::sleep_for(30ms);
    EXPECT_LT(scheduler.stats().reactor_waits - waits_before, 20u)
        << "the loop woke again and again for data nobody waits for";
  });
}

// A main that registers a socket, waits on it `served` times (a byte each time), then waits for
// an event nobody sets: the deadlock must be reported, not hidden by the registration.
void expect_deadlock_after_waits(int served) {
  socket_pair pair;
  weft::run_options options;
  options.deadlock_reporter = [](std::string_view) {};
  EXPECT_THROW(run_clean(
                   [&] {
                     weft::fd_registration registered(pair.ends[0]);
                     for (int round = 0; round < served; ++round) {
                       EXPECT_EQ(::write(pair.ends[1], "x", 1), 1);
                       weft::wait_readable(pair.ends[0], weft::timeout(5s));
                       char byte;
                       EXPECT_EQ(::read(pair.ends[0], &byte, 1), 1);
                     }
                     weft::event never;
                     never.wait();
                   },
                   options),
               weft::deadlock_error);
}

// An idle registration neither keeps run() going nor hides a deadlock.
TEST(Fd, AnIdleRegisteredFdDoesNotHideADeadlock) { expect_deadlock_after_waits(0); }

// Nor does one whose waits have ended: the registry keeps a pinned fd's reference from one
// wait to the next (fd.cpp, settled_wait) and must drop it before the scheduler decides whether
// to block, or a deadlock right after a served wait would block in the poll for ever.
TEST(Fd, ARegisteredFdWaitedOnBeforeDoesNotHideADeadlock) { expect_deadlock_after_waits(3); }

TEST(Fd, ARegularFileIsAnIoErrorNamingTheFd) {
  FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  int fd = ::fileno(file);
  run_clean([&] {
    try {
      weft::wait_readable(fd, weft::timeout(1s));
      ADD_FAILURE() << "a regular file cannot be polled";
    } catch (const weft::io_error& error) {
      std::string message = error.what();
      EXPECT_NE(message.find("weft::wait_readable fd " + std::to_string(fd)), std::string::npos)
          << message;
    }
  });
  std::fclose(file);
}

TEST(Fd, ANegativeFdIsInvalidArgument) {
  run_clean([] { EXPECT_THROW(weft::wait_writable(-1), std::invalid_argument); });
}

}  // namespace

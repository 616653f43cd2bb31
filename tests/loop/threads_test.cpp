// weft::loop::event_loop and threads: a loop belongs to the thread that made it.
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "loop/loop_support.hpp"

namespace {

using namespace std::chrono_literals;
using weft::loop::event_loop;
using weft::loop::watcher_id;
using weft_loop_test::with_loop;

TEST(LoopThreads, EveryCallFromAnotherThreadIsALogicError) {
  with_loop([](event_loop& loop) {
    watcher_id id = loop.delay(1h, [] {});
    std::vector<std::string> messages;
    std::thread other([&] {
      auto record = [&](auto&& call) {
        try {
          call();
          messages.push_back("accepted");
        } catch (const std::logic_error& error) {
          messages.push_back(error.what());
        }
      };
      record([&] { loop.delay(1.0, [] {}); });
      record([&] { loop.off_delay(id); });
      record([&] { loop.defer([] {}); });
      record([&] { loop.timer_count(); });
      record([&] { loop.unreference(id); });
      record([&] { loop.stop(); });
      record([&] { loop.run(); });
      record([&] { loop.on_readable(0, [] {}); });
    });
    other.join();
    ASSERT_EQ(messages.size(), 8u);
    for (const std::string& message : messages) {
      EXPECT_NE(message.find("thread that does not own the loop"), std::string::npos) << message;
    }
    EXPECT_TRUE(loop.off_delay(id)) << "nothing was changed from the other thread";
    EXPECT_EQ(loop.timer_count(), 0u);
  });
}

TEST(LoopThreads, AThreadHasOneLoopAtATime) {
  {
    event_loop first;
    try {
      event_loop second;
      ADD_FAILURE() << "a second loop was made";
    } catch (const std::logic_error& error) {
      EXPECT_NE(std::string(error.what()).find("already has an event loop"), std::string::npos)
          << error.what();
    }
  }
  with_loop([](event_loop& loop) {
    bool ran = false;
    loop.defer([&] { ran = true; });
    loop.run();
    EXPECT_TRUE(ran) << "once the first is gone, a new one works";
  });
}

TEST(LoopThreads, LoopsOnTwoThreadsRunIndependently) {
  std::atomic<int> finished{0};
  auto work = [&finished] {
    event_loop loop;
    int runs = 0;
    watcher_id id{};
    id = loop.repeat(1ms, [&] {
      if (++runs == 10) {
        loop.off_repeat(id);
      }
    });
    loop.run();
    if (runs == 10) {
      finished.fetch_add(1);
    }
  };
  std::thread one(work);
  std::thread two(work);
  one.join();
  two.join();
  EXPECT_EQ(finished.load(), 2);
}

TEST(LoopThreads, AnotherThreadWakesTheLoopThroughAnEventfd) {
  int wake = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  ASSERT_GE(wake, 0);
  with_loop([&](event_loop& loop) {
    std::uint64_t received = 0;
    std::thread other;
    loop.on_readable(wake, [&] {
      std::uint64_t value = 0;
      ASSERT_EQ(::read(wake, &value, sizeof(value)), static_cast<ssize_t>(sizeof(value)));
      received += value;
      loop.off_readable(wake);
    });
    loop.defer([&] {
      other = std::thread([wake] {
        std::uint64_t one = 1;
        EXPECT_EQ(::write(wake, &one, sizeof(one)), static_cast<ssize_t>(sizeof(one)));
      });
    });
    loop.run();
    other.join();
    EXPECT_EQ(received, 1u);
  });
  ::close(wake);
}

}  // namespace

// weft::loop::event_loop ticks: defer, the order within a tick, run() and stop(), and how
// callbacks and coroutines mix.
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "loop/loop_support.hpp"

namespace {

using namespace std::chrono_literals;
using weft::loop::event_loop;
using weft::loop::watcher_id;
using weft_loop_test::socket_pair;
using weft_loop_test::with_loop;

TEST(LoopTickOrder, DefersRunInTheOrderQueued) {
  with_loop([](event_loop& loop) {
    std::vector<int> order;
    for (int index = 0; index < 50; ++index) {
      loop.defer([&order, index] { order.push_back(index); });
    }
    loop.run();
    ASSERT_EQ(order.size(), 50u);
    for (int index = 0; index < 50; ++index) {
      EXPECT_EQ(order[static_cast<std::size_t>(index)], index);
    }
  });
}

TEST(LoopTickOrder, DeferQueuedByACallbackRunsInTheNextTick) {
  with_loop([](event_loop& loop) {
    std::vector<std::string> order;
    loop.defer([&] {
      order.push_back("defer");
      loop.defer([&] { order.push_back("deferred by a callback"); });
    });
    loop.delay(0.0, [&] { order.push_back("timer of the same tick"); });
    loop.run();
    EXPECT_EQ(order, (std::vector<std::string>{"defer", "timer of the same tick",
                                               "deferred by a callback"}));
  });
}

TEST(LoopTickOrder, OffDeferRemovesADeferThatHasNotRun) {
  with_loop([](event_loop& loop) {
    bool ran = false;
    watcher_id second{};
    loop.defer([&] { EXPECT_TRUE(loop.off_defer(second)); });
    second = loop.defer([&] { ran = true; });
    watcher_id done = loop.defer([] {});
    loop.run();
    EXPECT_FALSE(ran) << "removed by an earlier callback of the same tick";
    EXPECT_FALSE(loop.off_defer(done)) << "it ran already";
  });
}

TEST(LoopTickOrder, ATickRunsDefersThenTimersThenFds) {
  socket_pair pair;
  with_loop([&](event_loop& loop) {
    std::vector<std::string> order;
    ASSERT_EQ(::write(pair.ends[1], "x", 1), 1);
    // Registered in the reverse of the order they must run in; all ready for the first tick.
    loop.on_readable(pair.ends[0], [&] {
      order.push_back("fd");
      loop.off_readable(pair.ends[0]);
    });
    loop.delay(0.0, [&] { order.push_back("timer"); });
    loop.defer([&] { order.push_back("defer"); });
    loop.run();
    EXPECT_EQ(order, (std::vector<std::string>{"defer", "timer", "fd"}));
  });
}

TEST(LoopTickOrder, SignalCallbacksRunAfterTheFdCallbacksOfTheirTick) {
  socket_pair pair;
  with_loop([&](event_loop& loop) {
    ASSERT_EQ(::write(pair.ends[1], "x", 1), 1);  // never read: ready in every tick
    int tick = 0;
    bool done = false;
    std::vector<std::pair<int, std::string>> seen;
    std::function<void()> count = [&] {
      ++tick;
      if (!done) {
        loop.defer(count);  // one defer per tick: counts the ticks
      }
    };
    loop.defer(count);
    loop.on_readable(pair.ends[0], [&] { seen.emplace_back(tick, "fd"); });
    loop.on_signal(SIGUSR1, [&] {
      seen.emplace_back(tick, "signal");
      done = true;
      loop.off_signal(SIGUSR1);
      loop.off_readable(pair.ends[0]);
    });
    loop.delay(1ms, [] { std::raise(SIGUSR1); });
    loop.run();
    ASSERT_GE(seen.size(), 2u);
    EXPECT_EQ(seen.back().second, "signal");
    const auto& before = seen[seen.size() - 2];
    EXPECT_EQ(before.second, "fd");
    EXPECT_EQ(before.first, seen.back().first) << "the fd callback of the signal's tick ran first";
  });
}

TEST(LoopTickOrder, StopFinishesTheCurrentTickAndRunReturns) {
  with_loop([](event_loop& loop) {
    std::vector<std::string> order;
    loop.defer([&] {
      order.push_back("stopper");
      loop.stop();
    });
    loop.defer([&] { order.push_back("same tick"); });
    loop.delay(0.0, [&] { order.push_back("timer of the same tick"); });
    loop.delay(5ms, [&] { order.push_back("later timer"); });
    loop.run();
    EXPECT_EQ(order, (std::vector<std::string>{"stopper", "same tick", "timer of the same tick"}));
    EXPECT_EQ(loop.timer_count(), 1u) << "what is left stays registered";
    loop.run();  // and runs on the next run()
    EXPECT_EQ(order.back(), "later timer");
  });
}

TEST(LoopTickOrder, StopBeforeRunDoesNothing) {
  with_loop([](event_loop& loop) {
    bool ran = false;
    loop.stop();
    loop.delay(1ms, [&] { ran = true; });
    loop.stop();
    loop.run();
    EXPECT_TRUE(ran) << "run() ran normally";
  });
}

TEST(LoopTickOrder, RunWithNothingReferencedReturnsAtOnce) {
  with_loop([](event_loop& loop) {
    loop.run();
    bool ran = false;
    watcher_id id = loop.delay(1ms, [&] { ran = true; });
    loop.unreference(id);
    loop.run();
    EXPECT_FALSE(ran);
    EXPECT_TRUE(loop.off_delay(id));
  });
}

TEST(LoopTickOrder, RunFromItsOwnCallbackIsALogicError) {
  with_loop([](event_loop& loop) {
    std::string message;
    loop.defer([&] {
      try {
        loop.run();
      } catch (const std::logic_error& error) {
        message = error.what();
      }
    });
    loop.run();
    EXPECT_NE(message.find("own callbacks"), std::string::npos) << message;
  });
}

TEST(LoopTickOrder, RunWhileAnotherCoroutineDispatchesIsALogicError) {
  weft_test::run_clean([] {
    event_loop loop;
    std::string message;
    loop.delay(5ms, [] {});
    auto other = weft::spawn([&] {
      try {
        loop.run();
      } catch (const std::logic_error& error) {
        message = error.what();
      }
    });
    loop.run();
    other.await();
    EXPECT_NE(message.find("already being dispatched"), std::string::npos) << message;
  });
}

TEST(LoopTickOrder, CallbacksMaySpawnCoroutinesThatKeepAStandaloneRunGoing) {
  with_loop([](event_loop& loop) {
    std::vector<std::string> order;
    loop.defer([&] {
      order.push_back("callback");
      weft::spawn([&] {
        // Nothing referenced is left in the loop while this sleeps: the coroutine keeps the run.
        weft::sleep_for(10ms);
        order.push_back("coroutine");
        loop.delay(1ms, [&] { order.push_back("callback registered by the coroutine"); });
      });
    });
    loop.run();
    EXPECT_EQ(order, (std::vector<std::string>{"callback", "coroutine",
                                               "callback registered by the coroutine"}));
  });
}

TEST(LoopTickOrder, StopCancelsTheCoroutinesOfAStandaloneRun) {
  with_loop([](event_loop& loop) {
    bool cleaned_up = false;
    bool finished = false;
    loop.defer([&] {
      weft::spawn([&] {
        weft_test::destructor_flag flag(cleaned_up);
        weft::sleep_for(std::chrono::hours(1));
        finished = true;
      });
      loop.delay(2ms, [&] { loop.stop(); });
    });
    loop.run();
    EXPECT_TRUE(cleaned_up);
    EXPECT_FALSE(finished);
  });
}

TEST(LoopTickOrder, RunInACoroutineReturnsWhenNothingReferencedIsLeft) {
  weft_test::run_clean([] {
    event_loop loop;
    auto sibling = weft::spawn([] { weft::sleep_for(std::chrono::hours(1)); });
    int fired = 0;
    loop.delay(1ms, [&] { ++fired; });
    loop.run();
    EXPECT_EQ(fired, 1);
    EXPECT_FALSE(sibling.done()) << "run() did not wait for the caller's other coroutines";
    sibling.cancel();
    EXPECT_THROW(sibling.await(), weft::cancelled_error);
  });
}

TEST(LoopTickOrder, StopFromAnotherCoroutineEndsRun) {
  weft_test::run_clean([] {
    event_loop loop;
    watcher_id far = loop.delay(1h, [] {});
    auto stopper = weft::spawn([&] {
      weft::yield();  // run() dispatches, idle: nothing is due for an hour
      loop.stop();
    });
    loop.run();
    stopper.await();
    EXPECT_TRUE(loop.off_delay(far));
  });
}

TEST(LoopTickOrder, ACoroutineMayRegisterCallbacksWhileTheLoopRuns) {
  weft_test::run_clean([] {
    event_loop loop;
    std::vector<std::string> order;
    watcher_id keep_running = loop.delay(1h, [] {});
    weft::spawn([&] {
      weft::yield();  // registered while run() dispatches
      loop.defer([&] { order.push_back("defer"); });
      loop.delay(1ms, [&] {
        order.push_back("delay");
        loop.off_delay(keep_running);
      });
    });
    loop.run();
    EXPECT_EQ(order, (std::vector<std::string>{"defer", "delay"}));
  });
}

TEST(LoopTickOrder, ABlockingCallbackHoldsTheLoop) {
  weft_test::run_clean([] {
    event_loop loop;
    std::vector<std::string> order;
    loop.defer([&] {
      order.push_back("blocks");
      weft::sleep_for(10ms);  // holds the loop: nothing else of it runs meanwhile
      order.push_back("unblocked");
    });
    loop.delay(1ms, [&] { order.push_back("timer due meanwhile"); });
    loop.run();
    EXPECT_EQ(order, (std::vector<std::string>{"blocks", "unblocked", "timer due meanwhile"}));
  });
}

}  // namespace

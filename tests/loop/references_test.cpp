// weft::loop::event_loop references: reference() / unreference() for every kind of watcher.
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <string>
#include <string_view>

#include "loop/loop_support.hpp"
#include "weft/error.hpp"

namespace {

using namespace std::chrono_literals;
using weft::loop::event_loop;
using weft::loop::watcher_id;
using weft_loop_test::socket_pair;
using weft_loop_test::with_loop;

TEST(LoopReferences, AnUnreferencedTimerDoesNotKeepRunGoing) {
  with_loop([](event_loop& loop) {
    int background_runs = 0;
    watcher_id background = loop.repeat(1ms, [&] { ++background_runs; });
    EXPECT_TRUE(loop.unreference(background));
    bool done = false;
    loop.delay(20ms, [&] { done = true; });
    loop.run();
    EXPECT_TRUE(done);
    EXPECT_GE(background_runs, 1) << "it still runs while something else keeps the loop going";
    EXPECT_EQ(loop.timer_count(), 1u) << "and it is still registered";
    EXPECT_TRUE(loop.off_repeat(background));
  });
}

TEST(LoopReferences, ReferenceUndoesUnreference) {
  with_loop([](event_loop& loop) {
    int runs = 0;
    watcher_id id{};
    id = loop.repeat(1ms, [&] {
      if (++runs == 3) {
        loop.off_repeat(id);
      }
    });
    EXPECT_TRUE(loop.unreference(id));
    EXPECT_TRUE(loop.unreference(id)) << "idempotent";
    EXPECT_TRUE(loop.reference(id));
    loop.run();
    EXPECT_EQ(runs, 3) << "referenced again, it kept run() going until it removed itself";
  });
}

TEST(LoopReferences, ReturnsWhetherTheIdNamesALiveWatcher) {
  with_loop([](event_loop& loop) {
    EXPECT_FALSE(loop.reference(watcher_id::none));
    EXPECT_FALSE(loop.unreference(static_cast<watcher_id>(12345)));
    watcher_id fired = loop.delay(0.0, [] {});
    watcher_id deferred = loop.defer([] {});
    loop.run();
    EXPECT_FALSE(loop.reference(fired));
    EXPECT_FALSE(loop.unreference(deferred));
  });
}

TEST(LoopReferences, UnreferencedFdAndSignalWatchersDoNotKeepRunGoing) {
  socket_pair pair;
  with_loop([&](event_loop& loop) {
    watcher_id readable = loop.on_readable(pair.ends[0], [] {});
    watcher_id signal = loop.on_signal(SIGUSR1, [] {});
    EXPECT_TRUE(loop.unreference(readable));
    EXPECT_TRUE(loop.unreference(signal));
    bool done = false;
    loop.delay(5ms, [&] { done = true; });
    loop.run();
    EXPECT_TRUE(done);
    EXPECT_TRUE(loop.off_readable(pair.ends[0]));
    EXPECT_TRUE(loop.off_signal(SIGUSR1));
  });
}

TEST(LoopReferences, AnUnreferencedFdWatcherStillRunsWhileTheLoopDoes) {
  socket_pair pair;
  with_loop([&](event_loop& loop) {
    int reads = 0;
    watcher_id readable = loop.on_readable(pair.ends[0], [&] {
      char byte;
      if (::read(pair.ends[0], &byte, 1) == 1) {
        ++reads;
      }
    });
    loop.unreference(readable);
    loop.delay(2ms, [&] { ASSERT_EQ(::write(pair.ends[1], "x", 1), 1); });
    watcher_id keeper{};
    keeper = loop.repeat(1ms, [&] {
      if (reads == 1) {
        loop.off_repeat(keeper);
      }
    });
    loop.run();
    EXPECT_EQ(reads, 1);
    EXPECT_TRUE(loop.off_readable(pair.ends[0]));
  });
}

TEST(LoopReferences, APendingDeferKeepsRunGoingUntilItRan) {
  with_loop([](event_loop& loop) {
    bool ran = false;
    loop.defer([&] { ran = true; });
    loop.run();
    EXPECT_TRUE(ran);
    bool unreferenced_ran = false;
    watcher_id id = loop.defer([&] { unreferenced_ran = true; });
    loop.unreference(id);
    loop.run();
    EXPECT_FALSE(unreferenced_ran) << "nothing referenced: run() returned at once";
    EXPECT_TRUE(loop.off_defer(id));
  });
}

TEST(LoopReferences, UnreferencingTheLastWatcherEndsAnIdleRunInACoroutine) {
  weft_test::run_clean([] {
    event_loop loop;
    watcher_id far = loop.delay(1h, [] {});
    weft::spawn([&] {
      weft::yield();  // run() dispatches, idle: nothing is due for an hour
      loop.unreference(far);
    });
    loop.run();  // returns once the hour-long timer no longer counts
    EXPECT_TRUE(loop.off_delay(far));
  });
}

TEST(LoopReferences, UnreferencedFdWatchersAloneDoNotHoldOffADeadlockReport) {
  // An unreferenced watcher keeps nothing alive, the scheduler's driver included: with main
  // suspended and nothing else to wait for, the run is deadlocked, idle fd or not.
  socket_pair pair;
  std::string report;
  weft::run_options options;
  options.deadlock_reporter = [&](std::string_view text) { report = text; };
  EXPECT_THROW(weft_test::run_clean(
                   [&] {
                     event_loop loop;
                     watcher_id idle = loop.on_readable(pair.ends[0], [] {});
                     EXPECT_TRUE(loop.unreference(idle));
                     auto parked = loop.suspension<int>();
                     loop.delay(1ms, [] {});  // a first tick, so that the fd is watched
                     try {
                       parked.suspend();
                     } catch (const weft::cancelled_error&) {
                       loop.off_readable(pair.ends[0]);
                       throw;
                     }
                   },
                   std::move(options)),
               weft::deadlock_error);
  EXPECT_NE(report.find("weft::loop suspension"), std::string::npos) << report;
}

}  // namespace

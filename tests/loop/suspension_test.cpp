// weft::loop::suspension: parking a coroutine until a callback hands it a value.
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "loop/loop_support.hpp"

namespace {

using namespace std::chrono_literals;
using weft::loop::event_loop;
using weft::loop::suspension;
using weft::loop::watcher_id;
using weft_loop_test::with_loop;

std::string logic_error_of(auto&& call) {
  try {
    call();
  } catch (const std::logic_error& error) {
    return error.what();
  }
  return "no std::logic_error";
}

TEST(LoopSuspension, ResumeHandsItsValueToSuspend) {
  weft_test::run_clean([] {
    event_loop loop;
    suspension<int> parked = loop.suspension<int>();
    auto start = std::chrono::steady_clock::now();
    loop.delay(5ms, [parked]() mutable { parked.resume(42); });
    // Nobody runs the loop: suspend() dispatches it until resumed.
    EXPECT_EQ(parked.suspend(), 42);
    EXPECT_GE(std::chrono::steady_clock::now() - start, 5ms);
  });
}

TEST(LoopSuspension, ThrowIntoRethrowsOutOfSuspend) {
  weft_test::run_clean([] {
    event_loop loop;
    auto parked = loop.suspension<std::string>();
    loop.defer([parked]() mutable {
      parked.throw_into(std::make_exception_ptr(std::runtime_error("refused")));
    });
    try {
      parked.suspend();
      ADD_FAILURE() << "suspend() returned";
    } catch (const std::runtime_error& error) {
      EXPECT_STREQ(error.what(), "refused");
    }
    EXPECT_THROW(parked.throw_into(nullptr), std::invalid_argument);
  });
}

TEST(LoopSuspension, AVoidSuspensionIsReusable) {
  weft_test::run_clean([] {
    event_loop loop;
    suspension<> parked = loop.suspension();
    int resumed = 0;
    for (int round = 0; round < 3; ++round) {
      loop.delay(1ms, [&, parked]() mutable {
        ++resumed;
        parked.resume();
      });
      parked.suspend();
    }
    EXPECT_EQ(resumed, 3);
  });
}

TEST(LoopSuspension, AMoveOnlyValueIsHandedOverByMove) {
  weft_test::run_clean([] {
    event_loop loop;
    auto parked = loop.suspension<std::unique_ptr<int>>();
    loop.defer([parked]() mutable { parked.resume(std::make_unique<int>(7)); });
    std::unique_ptr<int> value = parked.suspend();
    ASSERT_NE(value, nullptr);
    EXPECT_EQ(*value, 7);
  });
}

TEST(LoopSuspension, ACoroutineSuspendsWhileRunDispatchesInAnother) {
  weft_test::run_clean([] {
    event_loop loop;
    std::vector<std::string> order;
    watcher_id keep = loop.delay(1h, [] {});
    auto worker = weft::spawn([&] {
      auto parked = loop.suspension<int>();
      loop.delay(3ms, [parked]() mutable { parked.resume(5); });
      order.push_back("worker suspends");
      int value = parked.suspend();
      order.push_back("worker resumed with " + std::to_string(value));
      loop.defer([&] {
        order.push_back("callback registered by the worker");
        loop.off_delay(keep);
      });
    });
    weft::yield();  // the worker registers and suspends first: it dispatches until run() starts
    loop.run();
    worker.await();
    EXPECT_EQ(order, (std::vector<std::string>{"worker suspends", "worker resumed with 5",
                                               "callback registered by the worker"}));
  });
}

TEST(LoopSuspension, ASuspendedCoroutineTakesOverWhenRunEnds) {
  weft_test::run_clean([] {
    event_loop loop;
    weft::loop::suspension<int> parked;
    auto worker = weft::spawn([&] {
      parked = loop.suspension<int>();
      return parked.suspend();
    });
    weft::yield();  // the worker suspends, dispatching the loop until run() takes over
    loop.delay(1ms, [&] { loop.stop(); });
    loop.run();
    EXPECT_FALSE(worker.done());
    // Nobody runs the loop now but the suspended worker, which took the dispatching back: it
    // runs this callback, which resumes it.
    loop.defer([&] { parked.resume(9); });
    EXPECT_EQ(worker.await(), 9);
  });
}

TEST(LoopSuspension, CallbacksSpawnCoroutinesThatSuspendOnAStandaloneRun) {
  with_loop([](event_loop& loop) {
    std::vector<int> got;
    loop.defer([&] {
      weft::spawn([&] {
        for (int round = 0; round < 3; ++round) {
          auto parked = loop.suspension<int>();
          loop.delay(1ms, [parked, round]() mutable { parked.resume(round * 10); });
          got.push_back(parked.suspend());
        }
      });
    });
    loop.run();
    EXPECT_EQ(got, (std::vector<int>{0, 10, 20}));
  });
}

TEST(LoopSuspension, ResumeBeforeSuspendIsALogicError) {
  weft_test::run_clean([] {
    event_loop loop;
    auto parked = loop.suspension<int>();
    std::string message = logic_error_of([&] { parked.resume(1); });
    EXPECT_NE(message.find("not suspended"), std::string::npos) << message;
    suspension<> empty;
    EXPECT_FALSE(empty.valid());
    EXPECT_THROW(empty.resume(), std::logic_error);
  });
}

TEST(LoopSuspension, ResumingTwiceIsALogicError) {
  weft_test::run_clean([] {
    event_loop loop;
    auto parked = loop.suspension<int>();
    std::string message;
    loop.defer([&, parked]() mutable {
      parked.resume(1);
      message = logic_error_of([&] { parked.resume(2); });
    });
    EXPECT_EQ(parked.suspend(), 1);
    EXPECT_NE(message.find("twice"), std::string::npos) << message;
  });
}

TEST(LoopSuspension, SuspendFromAnotherCoroutineOrTwiceIsALogicError) {
  weft_test::run_clean([] {
    event_loop loop;
    auto parked = loop.suspension<int>();
    std::string from_another;
    std::string while_suspended;
    auto other = weft::spawn([&] { from_another = logic_error_of([&] { parked.suspend(); }); });
    other.await();
    loop.defer([&, parked]() mutable {
      weft::spawn([&while_suspended, parked]() mutable {
        while_suspended = logic_error_of([&] { parked.suspend(); });
      });
      loop.delay(2ms, [parked]() mutable { parked.resume(3); });
    });
    EXPECT_EQ(parked.suspend(), 3);
    EXPECT_NE(from_another.find("belongs to coroutine 0 'main'"), std::string::npos)
        << from_another;
    EXPECT_NE(while_suspended.find("already suspended"), std::string::npos) << while_suspended;
  });
}

TEST(LoopSuspension, SuspendFromACallbackIsALogicError) {
  weft_test::run_clean([] {
    event_loop loop;
    std::string message;
    loop.defer([&] {
      auto parked = loop.suspension<int>();  // owned by the dispatching coroutine
      message = logic_error_of([&] { parked.suspend(); });
    });
    loop.run();
    EXPECT_NE(message.find("from a callback"), std::string::npos) << message;
  });
}

TEST(LoopSuspension, OutsideACoroutineIsALogicError) {
  with_loop([](event_loop& loop) {
    std::string message = logic_error_of([&] { loop.suspension<int>(); });
    EXPECT_NE(message.find("outside a coroutine"), std::string::npos) << message;
  });
}

TEST(LoopSuspension, ALoopThatRunsDryWhileMainIsSuspendedIsADeadlock) {
  std::string report;
  weft::run_options options;
  options.deadlock_reporter = [&](std::string_view text) { report = text; };
  bool unwound = false;
  EXPECT_THROW(weft_test::run_clean(
                   [&] {
                     event_loop loop;
                     auto parked = loop.suspension<int>();
                     loop.delay(1ms, [] {});  // runs, but nobody resumes
                     try {
                       parked.suspend();
                     } catch (const weft::cancelled_error&) {
                       unwound = true;
                       throw;
                     }
                   },
                   std::move(options)),
               weft::deadlock_error);
  EXPECT_TRUE(unwound);
  EXPECT_NE(report.find("weft::loop suspension"), std::string::npos) << report;
}

TEST(LoopSuspension, ACancelledOwnerLeavesSuspendAndTheSuspensionIsIdleAgain) {
  weft_test::run_clean([] {
    event_loop loop;
    weft::loop::suspension<int> shared;
    auto worker = weft::spawn([&] {
      shared = loop.suspension<int>();
      return shared.suspend();
    });
    watcher_id keep = loop.delay(1h, [] {});
    loop.delay(2ms, [&] {
      worker.cancel("not needed");
      loop.off_delay(keep);
    });
    loop.run();
    EXPECT_THROW(worker.await(), weft::cancelled_error);
    std::string message = logic_error_of([&] { shared.resume(1); });
    EXPECT_NE(message.find("not suspended"), std::string::npos) << message;
  });
}

TEST(LoopSuspension, UsingOneAfterItsLoopIsGoneIsALogicError) {
  weft_test::run_clean([] {
    weft::loop::suspension<int> orphan;
    {
      event_loop loop;
      orphan = loop.suspension<int>();
    }
    std::string message = logic_error_of([&] { orphan.suspend(); });
    EXPECT_NE(message.find("destroyed"), std::string::npos) << message;
  });
}

}  // namespace

// weft::promise / weft::future: settle once, any number of awaiters, continuations.
#include "weft/sync/future.hpp"

#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::fifo_options;
using weft_test::run_clean;

TEST(Future, AwaiterGetsTheValueSetLater) {
  run_clean([] {
    weft::promise<int> promise;
    auto consumer =
        weft::spawn([future = promise.get_future()]() mutable { return future.await(); });
    weft::yield();
    EXPECT_FALSE(consumer.done()) << "the consumer waits for the value";
    promise.set_value(42);
    EXPECT_EQ(consumer.await(), 42);
  });
}

TEST(Future, VoidFutureCompletes) {
  run_clean([] {
    weft::promise<void> promise;
    weft::future<void> future = promise.get_future();
    auto consumer = weft::spawn([future]() mutable { future.await(); });
    weft::yield();
    EXPECT_FALSE(future.done());
    promise.set_value();
    consumer.await();
    EXPECT_TRUE(future.done());
    EXPECT_EQ(future.exception(), nullptr);
  });
}

TEST(Future, ExceptionPropagatesToEveryAwaiter) {
  run_clean([] {
    weft::promise<int> promise;
    auto future = promise.get_future();
    auto consumer = weft::spawn([future]() mutable { return future.await(); });
    weft::yield();
    promise.set_exception(std::runtime_error("disk on fire"));
    EXPECT_THROW(
        {
          try {
            consumer.await();
          } catch (const std::runtime_error& error) {
            EXPECT_STREQ(error.what(), "disk on fire");
            throw;
          }
        },
        std::runtime_error);
    EXPECT_THROW(future.await(), std::runtime_error) << "the error stays for later awaiters";
    EXPECT_NE(future.exception(), nullptr);
  });
}

TEST(Future, OneSettleWakesEveryAwaiterOldestFirstWithTheSameValue) {
  run_clean(
      [] {
        weft::promise<std::string> promise;
        std::vector<std::string> seen;
        std::vector<weft::task<void>> consumers;
        for (int index = 0; index < 5; ++index) {
          consumers.push_back(weft::spawn([&, index, future = promise.get_future()]() mutable {
            const std::string& value = future.await();
            seen.push_back(std::to_string(index) + ":" + value);
          }));
        }
        weft::yield();
        EXPECT_TRUE(seen.empty());
        promise.set_value("v");
        for (auto& consumer : consumers) {
          consumer.await();
        }
        EXPECT_EQ(seen, (std::vector<std::string>{"0:v", "1:v", "2:v", "3:v", "4:v"}));
      },
      fifo_options());
}

TEST(Future, AwaitingASettledFutureNeverSuspends) {
  run_clean([] {
    auto ready = weft::make_ready_future(7);
    weft::promise<int> promise;
    auto settled = promise.get_future();
    promise.set_value(8);
    auto failed = weft::make_exception_future<int>(std::make_exception_ptr(std::logic_error("x")));
    // Something else is ready, so a suspension would switch to it.
    auto other = weft::spawn([] {});
    auto switches = weft::current_scheduler().stats().switches;
    EXPECT_EQ(ready.await(), 7);
    EXPECT_EQ(settled.await(weft::timeout(1ms)), 8);
    EXPECT_THROW(failed.await(), std::logic_error);
    EXPECT_EQ(weft::current_scheduler().stats().switches, switches);
    EXPECT_FALSE(other.done());
    other.await();
  });
}

TEST(Future, SecondSettleIsALogicErrorNamingTheFirstSite) {
  run_clean([] {
    weft::promise<int> promise;
    auto future = promise.get_future();
    promise.set_value(1);
    const int first_line = __LINE__ - 1;
    const std::string first_site = "future_test.cpp:" + std::to_string(first_line);
    try {
      promise.set_value(2);
      ADD_FAILURE() << "a second set_value must throw";
    } catch (const std::logic_error& error) {
      std::string message = error.what();
      EXPECT_NE(message.find("already settled by set_value at"), std::string::npos) << message;
      EXPECT_NE(message.find(first_site), std::string::npos) << message;
    }
    EXPECT_THROW(promise.set_exception(std::runtime_error("late")), std::logic_error);
    EXPECT_EQ(future.await(), 1) << "the first settle stands";
  });
}

TEST(Future, DestroyedPromiseBreaksItsFutureAndWakesTheAwaiter) {
  run_clean([] {
    // new here, not make_unique/emplace: the promise records where it was created.
    std::unique_ptr<weft::promise<int>> promise(new weft::promise<int>());
    auto future = promise->get_future();
    auto consumer = weft::spawn([future]() mutable { return future.await(); });
    weft::yield();
    promise.reset();
    try {
      consumer.await();
      ADD_FAILURE() << "a broken promise must fail the future";
    } catch (const weft::broken_promise_error& error) {
      std::string message = error.what();
      EXPECT_NE(message.find("broken promise"), std::string::npos) << message;
      EXPECT_NE(message.find("future_test.cpp"), std::string::npos) << message;
    }
  });
}

TEST(Future, TimeoutLeavesItPendingAndItCanStillCompleteAndBeAwaited) {
  run_clean([] {
    weft::promise<int> promise;
    auto future = promise.get_future();
    auto start = std::chrono::steady_clock::now();
    try {
      future.await(weft::timeout(10ms));
      ADD_FAILURE() << "the await should time out";
    } catch (const weft::timeout_error& error) {
      std::string message = error.what();
      EXPECT_NE(message.find("future of the promise created at"), std::string::npos) << message;
      EXPECT_NE(message.find("timed out after 10 ms"), std::string::npos) << message;
    }
    EXPECT_GE(std::chrono::steady_clock::now() - start, 10ms);
    EXPECT_FALSE(future.done());
    auto producer = weft::spawn([&] { promise.set_value(5); });
    EXPECT_EQ(future.await(weft::timeout(5s)), 5);
    producer.await();
  });
}

TEST(Future, CancelSettlesWithCancelledErrorAndTheProducerLearnsIt) {
  run_clean([] {
    weft::promise<int> promise;
    auto future = promise.get_future();
    auto consumer = weft::spawn([future]() mutable { return future.await(); });
    weft::yield();
    EXPECT_FALSE(promise.cancelled());
    EXPECT_TRUE(future.cancel("no longer needed"));
    EXPECT_FALSE(future.cancel("again")) << "cancelling a settled future does nothing";
    try {
      consumer.await();
      ADD_FAILURE() << "the awaiter must see the cancel";
    } catch (const weft::cancelled_error& error) {
      EXPECT_EQ(error.reason(), "no longer needed");
    }
    EXPECT_TRUE(promise.cancelled());
    EXPECT_TRUE(future.cancelled());
    EXPECT_NO_THROW(promise.set_value(3)) << "settling a cancelled future is a no-op";
    EXPECT_THROW(future.await(), weft::cancelled_error);
  });
}

TEST(Future, CancellingTheAwaiterLeavesTheFuturePending) {
  run_clean([] {
    weft::promise<int> promise;
    auto future = promise.get_future();
    auto consumer = weft::spawn([future]() mutable { return future.await(); });
    weft::yield();
    consumer.cancel("stop");
    EXPECT_THROW(consumer.await(), weft::cancelled_error);
    EXPECT_FALSE(future.done());
    EXPECT_FALSE(promise.cancelled());
    promise.set_value(9);
    EXPECT_EQ(future.await(), 9);
  });
}

TEST(Future, MapAndThenChainValues) {
  run_clean([] {
    weft::promise<int> promise;
    auto doubled = promise.get_future().map([](int value) { return value * 2; });
    auto text = doubled.map([](int value) { return std::to_string(value); });
    auto unwrapped = text.then([](const std::string& value) {
      return weft::make_ready_future(value.size());  // then unwraps a returned future
    });
    auto nothing = unwrapped.map([](std::size_t) {});
    promise.set_value(21);
    EXPECT_EQ(text.await(), "42");
    EXPECT_EQ(unwrapped.await(), 2u);
    nothing.await();
    EXPECT_TRUE(nothing.done());
  });
}

TEST(Future, AnErrorSkipsTheContinuationsAndPropagates) {
  run_clean([] {
    weft::promise<int> promise;
    bool ran = false;
    auto chained = promise.get_future()
                       .map([&](int value) {
                         ran = true;
                         return value + 1;
                       })
                       .then([&](int value) {
                         ran = true;
                         return value + 1;
                       });
    promise.set_exception(std::runtime_error("upstream"));
    EXPECT_THROW(chained.await(), std::runtime_error);
    EXPECT_FALSE(ran);
  });
}

TEST(Future, AThrowingContinuationFailsTheNextFuture) {
  run_clean([] {
    auto failed =
        weft::make_ready_future(1).map([](int) -> int { throw std::out_of_range("bad value"); });
    EXPECT_THROW(failed.await(), std::out_of_range);
  });
}

TEST(Future, CatchErrorTurnsAnErrorIntoAValueAndLetsValuesThrough) {
  run_clean([] {
    weft::promise<int> failing;
    auto recovered = failing.get_future().catch_error([](std::exception_ptr error) {
      try {
        std::rethrow_exception(error);
      } catch (const std::runtime_error&) {
        return -1;
      }
    });
    failing.set_exception(std::runtime_error("oops"));
    EXPECT_EQ(recovered.await(), -1);

    bool handler_ran = false;
    auto untouched = weft::make_ready_future(5).catch_error([&](std::exception_ptr) {
      handler_ran = true;
      return 0;
    });
    EXPECT_EQ(untouched.await(), 5);
    EXPECT_FALSE(handler_ran);
  });
}

TEST(Future, FinallyRunsEitherWayInChainOrder) {
  run_clean([] {
    std::vector<std::string> log;
    weft::promise<int> promise;
    auto chained = promise.get_future()
                       .map([&](int value) {
                         log.push_back("map");
                         return value;
                       })
                       .finally([&] { log.push_back("finally"); })
                       .map([&](int value) {
                         log.push_back("after");
                         return value * 10;
                       });
    promise.set_value(4);
    EXPECT_EQ(chained.await(), 40);
    EXPECT_EQ(log, (std::vector<std::string>{"map", "finally", "after"}));

    bool cleaned = false;
    auto failed = weft::make_exception_future<int>(std::make_exception_ptr(std::runtime_error("e")))
                      .finally([&] { cleaned = true; });
    EXPECT_THROW(failed.await(), std::runtime_error);
    EXPECT_TRUE(cleaned) << "finally runs on failure too";
  });
}

TEST(Future, ContinuationsRunAsMicrotasksAfterTheSettleInAttachOrder) {
  run_clean(
      [] {
        std::vector<std::string> log;
        weft::promise<int> promise;
        auto future = promise.get_future();
        auto a = future.map([&](int) { log.push_back("a"); });
        auto b = future.map([&](int) { log.push_back("b"); });
        auto c = future.finally([&] { log.push_back("c"); });
        promise.set_value(1);
        log.push_back("after set_value");
        weft::yield();  // the next context switch point runs the microtasks
        auto d = future.map([&](int) { log.push_back("d: attached after the settle"); });
        EXPECT_EQ(log.size(), 4u) << "a continuation attached to a settled future is queued";
        weft::yield();
        EXPECT_EQ(log, (std::vector<std::string>{"after set_value", "a", "b", "c",
                                                 "d: attached after the settle"}));
        EXPECT_TRUE(a.done() && b.done() && c.done() && d.done());
      },
      fifo_options());
}

TEST(Future, MoveOnlyValueMovesOutOfATemporary) {
  run_clean([] {
    weft::promise<std::unique_ptr<int>> promise;
    auto future = promise.get_future();
    promise.set_value(std::make_unique<int>(3));
    std::unique_ptr<int> value = std::move(future).await();
    ASSERT_NE(value, nullptr);
    EXPECT_EQ(*value, 3);
  });
}

TEST(Future, ReferenceFutureRefersToTheProducersObject) {
  run_clean([] {
    int target = 1;
    weft::promise<int&> promise;
    auto future = promise.get_future();
    promise.set_value(target);
    future.await() = 2;
    EXPECT_EQ(target, 2);
  });
}

TEST(Future, AFutureNobodySettlesIsReportedAsADeadlock) {
  std::string report;
  weft::run_options options;
  options.deadlock_reporter = [&](std::string_view text) { report = text; };
  EXPECT_THROW(run_clean(
                   [] {
                     weft::promise<int> kept;
                     kept.get_future().await();
                   },
                   std::move(options)),
               weft::deadlock_error);
  EXPECT_NE(report.find("future of the promise created at"), std::string::npos) << report;
}

TEST(Future, MisuseIsALogicError) {
  weft::future<int> empty;
  EXPECT_THROW(empty.await(), std::logic_error);
  weft::promise<int> promise;
  weft::promise<int> moved = std::move(promise);
  EXPECT_THROW(promise.set_value(1), std::logic_error);  // NOLINT(bugprone-use-after-move)
  EXPECT_THROW(moved.set_exception(std::exception_ptr()), std::invalid_argument);
  auto pending = moved.get_future();
  EXPECT_THROW(pending.await(), std::logic_error) << "waiting outside a coroutine";
}

TEST(Future, WithoutARunningSchedulerContinuationsRunInline) {
  bool ran = false;
  weft::future<int> derived;
  {
    weft::promise<int> promise;
    derived = promise.get_future().catch_error([&](std::exception_ptr) {
      ran = true;
      return 0;
    });
  }  // broken outside weft::run: nobody can be waiting, the continuation runs here
  EXPECT_TRUE(ran);
  EXPECT_EQ(derived.await(), 0);
}

}  // namespace

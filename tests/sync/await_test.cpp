// The await combinators over tasks and futures: await_all, await_all_or_fail, await_any_or_fail,
// await_first_success, await_any_of.
#include "weft/sync/await.hpp"

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::destructor_flag;
using weft_test::fifo_options;
using weft_test::run_clean;

// A task that waits for `gate` and then returns value (or throws when value < 0).
weft::task<int> gated(weft::future<void> gate, int value) {
  return weft::spawn([gate, value]() mutable {
    gate.await();
    if (value < 0) {
      throw std::runtime_error("failed " + std::to_string(value));
    }
    return value;
  });
}

// A task that would run for a long time unless cancelled; its cleanup sets `cleaned`. Returns once
// it has started (in any scheduling order), so that a cancel finds cleanup to run.
weft::task<int> long_running(bool& cleaned) {
  auto started = std::make_shared<bool>(false);
  auto task = weft::spawn([&cleaned, started] {
    *started = true;
    destructor_flag cleanup(cleaned);
    weft::sleep_for(10s);
    return -100;
  });
  EXPECT_TRUE(weft_test::yield_until([&] { return *started; }));
  return task;
}

std::string message_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& failed) {
    return failed.what();
  }
}

TEST(Await, AllReturnsEveryOutcomeInInputOrderAndNeverThrowsForThem) {
  run_clean([] {
    weft::promise<void> gate;
    std::vector<weft::task<int>> tasks;
    tasks.push_back(gated(gate.get_future(), 1));
    tasks.push_back(gated(gate.get_future(), -2));
    tasks.push_back(gated(gate.get_future(), 3));
    auto opener = weft::spawn([&] { gate.set_value(); });
    auto outcomes = weft::await_all(tasks);
    ASSERT_EQ(outcomes.size(), 3u);
    EXPECT_EQ(outcomes[0].value(), 1);
    EXPECT_FALSE(outcomes[1].has_value());
    EXPECT_EQ(message_of(outcomes[1].error()), "failed -2");
    EXPECT_THROW(outcomes[1].value(), std::runtime_error);
    EXPECT_EQ(outcomes[2].value(), 3);
    opener.await();
  });
}

TEST(Await, AllOverMixedTasksAndFuturesGivesATupleOfOutcomes) {
  run_clean([] {
    weft::promise<std::string> text;
    auto number = weft::spawn([] {
      weft::yield();
      return 7;
    });
    auto nothing = weft::spawn([] { weft::yield(); });
    auto producer = weft::spawn([&] { text.set_value("seven"); });
    auto [a, b, c] = weft::await_all(number, text.get_future(), nothing, weft::timeout(5s));
    EXPECT_EQ(a.value(), 7);
    EXPECT_EQ(b.value(), "seven");
    EXPECT_TRUE(c.has_value());
    producer.await();
  });
}

TEST(Await, AllOrFailReturnsValuesInInputOrderWhateverTheCompletionOrder) {
  run_clean([] {
    std::vector<weft::promise<int>> promises(3);
    std::vector<weft::future<int>> futures;
    for (auto& promise : promises) {
      futures.push_back(promise.get_future());
    }
    auto producer = weft::spawn([&] {
      for (int index : {2, 0, 1}) {
        promises[index].set_value(index * 10);
        weft::yield();
      }
    });
    EXPECT_EQ(weft::await_all_or_fail(futures), (std::vector<int>{0, 10, 20}));
    producer.await();
  });
}

TEST(Await, AllOrFailThrowsTheFirstErrorAndCancelsTheRest) {
  run_clean([] {
    bool first_cleaned = false;
    bool second_cleaned = false;
    weft::promise<void> gate;
    auto slow_one = long_running(first_cleaned);
    auto failing = gated(gate.get_future(), -1);
    auto slow_two = long_running(second_cleaned);
    auto opener = weft::spawn([&] { gate.set_value(); });
    try {
      weft::await_all_or_fail(slow_one, failing, slow_two);
      ADD_FAILURE() << "the failure must be thrown";
    } catch (const std::runtime_error& error) {
      EXPECT_STREQ(error.what(), "failed -1");
    }
    EXPECT_THROW(slow_one.await(), weft::cancelled_error);
    EXPECT_THROW(slow_two.await(), weft::cancelled_error);
    EXPECT_TRUE(first_cleaned && second_cleaned) << "the losers' cleanup ran";
    opener.await();
  });
}

TEST(Await, AnyOrFailReturnsTheFirstToFinishWithItsIndexAndCancelsTheLosers) {
  run_clean([] {
    bool cleaned[2] = {false, false};
    weft::promise<void> gate;
    std::vector<weft::task<int>> tasks;
    tasks.push_back(long_running(cleaned[0]));
    tasks.push_back(gated(gate.get_future(), 5));
    tasks.push_back(long_running(cleaned[1]));
    auto opener = weft::spawn([&] { gate.set_value(); });
    auto winner = weft::await_any_or_fail(tasks);
    EXPECT_EQ(winner.index, 1u);
    EXPECT_EQ(winner.value, 5);
    EXPECT_THROW(tasks[0].await(), weft::cancelled_error);
    EXPECT_THROW(tasks[2].await(), weft::cancelled_error);
    EXPECT_TRUE(cleaned[0] && cleaned[1]);
    opener.await();
  });
}

TEST(Await, AnyOrFailThrowsTheErrorOfTheFirstToFinish) {
  run_clean([] {
    bool cleaned = false;
    weft::promise<void> gate;
    auto loser = long_running(cleaned);
    auto failing = gated(gate.get_future(), -3);
    auto opener = weft::spawn([&] { gate.set_value(); });
    EXPECT_THROW(weft::await_any_or_fail(loser, failing), std::runtime_error);
    EXPECT_THROW(loser.await(), weft::cancelled_error);
    EXPECT_TRUE(cleaned);
    opener.await();
  });
}

TEST(Await, AnyOrFailOverMixedInputsReturnsAVariantWhoseIndexIsTheWinner) {
  run_clean([] {
    bool cleaned = false;
    weft::promise<std::string> text;
    auto slow = long_running(cleaned);
    auto producer = weft::spawn([&] { text.set_value("quick"); });
    auto winner = weft::await_any_or_fail(slow, text.get_future());
    ASSERT_EQ(winner.index(), 1u);
    EXPECT_EQ(std::get<1>(winner), "quick");
    EXPECT_THROW(slow.await(), weft::cancelled_error);
    producer.await();
  });
}

TEST(Await, LosingFuturesAreCancelledAndTheirProducersLearnIt) {
  run_clean([] {
    weft::promise<int> fast;
    weft::promise<int> slow;
    std::vector<weft::future<int>> futures{slow.get_future(), fast.get_future()};
    auto producer = weft::spawn([&] { fast.set_value(1); });
    auto winner = weft::await_any_or_fail(futures);
    EXPECT_EQ(winner.index, 1u);
    EXPECT_TRUE(slow.cancelled()) << "the producer of a losing future is told to stop";
    EXPECT_FALSE(fast.cancelled());
    EXPECT_THROW(futures[0].await(), weft::cancelled_error);
    producer.await();
  });
}

TEST(Await, FirstSuccessSkipsFailuresAndCancelsTheRest) {
  run_clean(
      [] {
        bool cleaned = false;
        weft::promise<void> early;
        weft::promise<void> late;
        std::vector<weft::task<int>> tasks;
        tasks.push_back(gated(early.get_future(), -1));
        tasks.push_back(gated(late.get_future(), 8));
        tasks.push_back(long_running(cleaned));
        auto opener = weft::spawn([&] {
          early.set_value();
          weft::yield();
          late.set_value();
        });
        auto first = weft::await_first_success(tasks);
        EXPECT_EQ(first.index, 1u);
        EXPECT_EQ(first.value, 8);
        EXPECT_THROW(tasks[2].await(), weft::cancelled_error);
        EXPECT_TRUE(cleaned);
        opener.await();
      },
      fifo_options());
}

TEST(Await, FirstSuccessWhenAllFailThrowsEveryErrorInInputOrder) {
  run_clean([] {
    weft::promise<void> gate;
    auto first = gated(gate.get_future(), -1);
    auto second = gated(gate.get_future(), -2);
    weft::promise<int> third;
    auto opener = weft::spawn([&] {
      gate.set_value();
      third.set_exception(std::runtime_error("failed -3"));
    });
    try {
      weft::await_first_success(first, second, third.get_future());
      ADD_FAILURE() << "all failed: must throw";
    } catch (const weft::all_failed_error& error) {
      ASSERT_EQ(error.errors().size(), 3u);
      EXPECT_EQ(message_of(error.errors()[0]), "failed -1");
      EXPECT_EQ(message_of(error.errors()[1]), "failed -2");
      EXPECT_EQ(message_of(error.errors()[2]), "failed -3");
      EXPECT_EQ(error.indexes(), (std::vector<std::size_t>{0, 1, 2}));
      EXPECT_NE(std::string(error.what()).find("all 3 inputs failed"), std::string::npos);
    }
    opener.await();
  });
}

TEST(Await, AnyOfReturnsTheFirstNSuccessesInCompletionOrderAndCancelsTheRest) {
  run_clean([] {
    std::vector<weft::promise<int>> promises(4);
    std::vector<weft::future<int>> futures;
    for (auto& promise : promises) {
      futures.push_back(promise.get_future());
    }
    auto producer = weft::spawn([&] {
      promises[3].set_value(30);
      weft::yield();
      promises[1].set_exception(std::runtime_error("one failure is fine"));
      weft::yield();
      promises[0].set_value(0);
    });
    auto results = weft::await_any_of(2, futures);
    ASSERT_EQ(results.size(), 2u);
    EXPECT_EQ(results[0].index, 3u);
    EXPECT_EQ(results[0].value, 30);
    EXPECT_EQ(results[1].index, 0u);
    EXPECT_EQ(results[1].value, 0);
    EXPECT_TRUE(promises[2].cancelled()) << "the one still pending is a loser";
    producer.await();
  });
}

TEST(Await, AnyOfThrowsOnceTooFewCanSucceedWithTheErrorsSoFar) {
  run_clean([] {
    bool cleaned = false;
    weft::promise<void> gate;
    auto good = gated(gate.get_future(), 1);
    auto bad = gated(gate.get_future(), -1);
    auto worse = gated(gate.get_future(), -2);
    auto slow = long_running(cleaned);
    auto opener = weft::spawn([&] { gate.set_value(); });
    try {
      weft::await_any_of(3, good, bad, worse, slow);
      ADD_FAILURE() << "3 of 4 cannot succeed once 2 failed";
    } catch (const weft::all_failed_error& error) {
      EXPECT_EQ(error.indexes(), (std::vector<std::size_t>{1, 2}));
      ASSERT_EQ(error.errors().size(), 2u);
      EXPECT_EQ(message_of(error.errors()[1]), "failed -2");
    }
    EXPECT_THROW(slow.await(), weft::cancelled_error);
    EXPECT_TRUE(cleaned);
    opener.await();
  });
}

TEST(Await, AnyOfOverMixedInputsReturnsVariantsInCompletionOrder) {
  run_clean([] {
    weft::promise<std::string> text;
    auto number = weft::spawn([] { return 4; });
    auto producer = weft::spawn([&] { text.set_value("four"); });
    number.await();  // finished before the call: counts first
    auto results = weft::await_any_of(2, number, text.get_future());
    ASSERT_EQ(results.size(), 2u);
    EXPECT_EQ(std::get<0>(results[0]), 4);
    EXPECT_EQ(std::get<1>(results[1]), "four");
    producer.await();
  });
}

TEST(Await, EmptyInputReturnsAtOnce) {
  run_clean([] {
    std::vector<weft::task<int>> none;
    auto switches = weft::current_scheduler().stats().switches;
    EXPECT_TRUE(weft::await_all(none).empty());
    EXPECT_TRUE(weft::await_all_or_fail(none).empty());
    EXPECT_TRUE(weft::await_any_of(0, none).empty());
    EXPECT_EQ(std::tuple_size_v<decltype(weft::await_all())>, 0u);
    try {
      weft::await_first_success(none);
      ADD_FAILURE() << "no input can succeed";
    } catch (const weft::all_failed_error& error) {
      EXPECT_TRUE(error.errors().empty());
    }
    EXPECT_THROW(weft::await_any_or_fail(none), std::invalid_argument);
    EXPECT_THROW(weft::await_any_of(1, none), std::invalid_argument);
    EXPECT_EQ(weft::current_scheduler().stats().switches, switches);
  });
}

TEST(Await, FinishedInputsNeverSuspendTheCaller) {
  run_clean([] {
    auto done = weft::spawn([] { return 1; });
    done.await();
    auto ready = weft::make_ready_future(2);
    auto other = weft::spawn([] {});  // ready: a suspension would switch to it
    auto switches = weft::current_scheduler().stats().switches;
    auto [a, b] = weft::await_all_or_fail(done, ready);
    EXPECT_EQ(a + b, 3);
    EXPECT_EQ(weft::current_scheduler().stats().switches, switches);
    other.await();
  });
}

TEST(Await, TimeoutThrowsAndLeavesTheInputsRunningToCompleteLater) {
  run_clean([] {
    weft::promise<void> gate;
    auto first = gated(gate.get_future(), 1);
    auto second = gated(gate.get_future(), 2);
    try {
      weft::await_all(first, second, weft::timeout(10ms));
      ADD_FAILURE() << "must time out";
    } catch (const weft::timeout_error& error) {
      std::string message = error.what();
      EXPECT_NE(message.find("await_all on 2 inputs"), std::string::npos) << message;
      EXPECT_NE(message.find("timed out after 10 ms"), std::string::npos) << message;
    }
    EXPECT_FALSE(first.done() || second.done()) << "a timeout leaves the inputs running";
    gate.set_value();
    auto values = weft::await_all_or_fail(first, second, weft::timeout(5s));
    EXPECT_EQ(values, std::make_tuple(1, 2));
  });
}

TEST(Await, TimeoutCancelsThePendingInputsWhenAsked) {
  run_clean([] {
    bool cleaned = false;
    weft::promise<int> never;
    auto slow = long_running(cleaned);
    weft::await_options options{.limit = weft::timeout(5ms), .cancel_rest_on_timeout = true};
    EXPECT_THROW(weft::await_any_or_fail(slow, never.get_future(), options), weft::timeout_error);
    EXPECT_TRUE(never.cancelled());
    EXPECT_THROW(slow.await(), weft::cancelled_error);
    EXPECT_TRUE(cleaned);
  });
}

TEST(Await, CancellingTheAwaitingCoroutineInterruptsTheWait) {
  run_clean([] {
    weft::promise<void> gate;
    auto input = gated(gate.get_future(), 6);
    bool waiting = false;
    auto waiter = weft::spawn([&] {
      waiting = true;  // and suspends in the combinator before anything else runs
      return std::get<0>(weft::await_first_success(input));
    });
    ASSERT_TRUE(weft_test::yield_until([&] { return waiting; }));
    waiter.cancel("caller gave up");
    try {
      waiter.await();
      ADD_FAILURE() << "the awaiting coroutine must see its cancel";
    } catch (const weft::cancelled_error& error) {
      EXPECT_EQ(error.reason(), "caller gave up");
    }
    EXPECT_FALSE(input.done()) << "the inputs keep running by default";
    gate.set_value();
    EXPECT_EQ(input.await(), 6);

    bool cleaned = false;
    auto doomed = long_running(cleaned);
    bool strict_waiting = false;
    auto strict_waiter = weft::spawn([&] {
      strict_waiting = true;
      weft::await_all(doomed, weft::await_options{.cancel_rest_on_cancel = true});
    });
    ASSERT_TRUE(weft_test::yield_until([&] { return strict_waiting; }));
    strict_waiter.cancel();
    EXPECT_THROW(strict_waiter.await(), weft::cancelled_error);
    EXPECT_THROW(doomed.await(), weft::cancelled_error);
    EXPECT_TRUE(cleaned);
  });
}

TEST(Await, TheWaiterWakesOncePerCompletionNotByPolling) {
  run_clean([] {
    std::vector<weft::promise<int>> promises(3);
    std::vector<weft::future<int>> futures;
    for (auto& promise : promises) {
      futures.push_back(promise.get_future());
    }
    int resumes = 0;
    auto waiter = weft::spawn([&] {
      weft::this_coroutine::on_enter([&] {
        ++resumes;
        return true;
      });
      return weft::await_all_or_fail(futures);
    });
    weft::yield();
    int resumes_before = resumes;
    auto idle_waits_before = weft::current_scheduler().stats().reactor_waits;
    for (std::size_t index = 0; index < promises.size(); ++index) {
      weft::sleep_for(2ms);  // time in which a polling waiter would run many times
      promises[index].set_value(static_cast<int>(index));
    }
    EXPECT_EQ(waiter.await(), (std::vector<int>{0, 1, 2}));
    EXPECT_LE(resumes - resumes_before, 3) << "at most one wake per completion";
    EXPECT_GE(weft::current_scheduler().stats().reactor_waits - idle_waits_before, 3u)
        << "the scheduler sat idle (blocked in the reactor) while the waiter waited";
  });
}

TEST(Await, RvalueInputsHaveTheirValuesMovedOut) {
  run_clean([] {
    std::vector<weft::task<std::unique_ptr<int>>> tasks;
    tasks.push_back(weft::spawn([] { return std::make_unique<int>(1); }));
    tasks.push_back(weft::spawn([] { return std::make_unique<int>(2); }));
    auto values = weft::await_all_or_fail(std::move(tasks));
    ASSERT_EQ(values.size(), 2u);
    EXPECT_EQ(*values[0] + *values[1], 3);
    weft::promise<std::unique_ptr<int>> promise;
    promise.set_value(std::make_unique<int>(5));
    auto winner = weft::await_any_or_fail(promise.get_future());
    EXPECT_EQ(*std::get<0>(winner), 5);
  });
}

TEST(Await, MisuseIsALogicError) {
  run_clean([] {
    weft::task<int> empty;
    auto fine = weft::spawn([] { return 1; });
    EXPECT_THROW(weft::await_all(fine, empty), std::logic_error);
    fine.await();
    weft::task<void> self_awaiting;
    self_awaiting = weft::spawn(
        [&] { EXPECT_THROW(weft::await_any_or_fail(self_awaiting), std::logic_error); });
    self_awaiting.await();
  });
}

}  // namespace

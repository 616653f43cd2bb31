// A task is a handle to its coroutine's settled result: the value or the exception is kept on
// the task, awaiting it again returns the same thing, and awaiting a finished task never
// suspends.
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "test_support.hpp"
#include "weft/weft.hpp"

namespace {

using weft_test::run_clean;
using weft_test::yield_until;

TEST(Task, AwaitReturnsTheValueEveryTime) {
  run_clean([] {
    auto task = weft::spawn([] { return 42; });
    EXPECT_EQ(task.await(), 42);
    EXPECT_EQ(task.await(), 42);
    // The same settled object, not a recomputation.
    EXPECT_EQ(&task.await(), &task.await());
    EXPECT_TRUE(task.done());
    EXPECT_EQ(task.exception(), nullptr);
  });
}

TEST(Task, TheCoroutineRunsOnceHoweverOftenItIsAwaited) {
  int runs = 0;
  run_clean([&] {
    auto task = weft::spawn([&] {
      ++runs;
      weft::yield();
      return std::string("done");
    });
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(task.await(), "done");
    }
  });
  EXPECT_EQ(runs, 1);
}

TEST(Task, AwaitRethrowsTheSameExceptionObjectEveryTime) {
  run_clean([] {
    auto task = weft::spawn([]() -> int { throw std::runtime_error("broken widget"); });
    const std::exception* first = nullptr;
    const std::exception* second = nullptr;
    try {
      task.await();
      ADD_FAILURE() << "await did not throw";
    } catch (const std::runtime_error& error) {
      EXPECT_STREQ(error.what(), "broken widget");
      first = &error;
    }
    try {
      task.await();
      ADD_FAILURE() << "second await did not throw";
    } catch (const std::runtime_error& error) {
      EXPECT_STREQ(error.what(), "broken widget");
      second = &error;
    }
    EXPECT_NE(first, nullptr);
    EXPECT_EQ(first, second);
    std::exception_ptr stored = task.exception();
    ASSERT_NE(stored, nullptr);
    EXPECT_EQ(stored, task.exception());
  });
}

TEST(Task, AnAwaitedFailureIsNotAnUncaughtException) {
  // The run ends normally: the exception was observed through the task.
  EXPECT_NO_THROW(run_clean([] {
    auto task = weft::spawn([] { throw std::runtime_error("observed"); });
    EXPECT_THROW(task.await(), std::runtime_error);
  }));
}

TEST(Task, ExceptionReadThroughExceptionIsObserved) {
  EXPECT_NO_THROW(run_clean([] {
    auto task = weft::spawn([] { throw std::runtime_error("looked at"); });
    yield_until([&] { return task.done(); });
    std::exception_ptr error = task.exception();
    ASSERT_NE(error, nullptr);
    EXPECT_THROW(std::rethrow_exception(error), std::runtime_error);
  }));
}

TEST(Task, AwaitingAFinishedTaskNeverSuspends) {
  run_clean([] {
    auto task = weft::spawn([] { return 5; });
    // Something else ready, so a suspension would show up as a switch.
    auto busy = weft::spawn([] {
      for (int i = 0; i < 50; ++i) {
        weft::yield();
      }
    });
    yield_until([&] { return task.done(); });
    weft::scheduler& scheduler = weft::current_scheduler();
    const auto switches = scheduler.stats().switches;
    for (int i = 0; i < 10; ++i) {
      EXPECT_EQ(task.await(), 5);
    }
    EXPECT_EQ(scheduler.stats().switches, switches);
    busy.await();
  });
}

TEST(Task, AwaitingAFinishedFailedTaskNeverSuspends) {
  run_clean([] {
    auto task = weft::spawn([] { throw std::logic_error("settled failure"); });
    auto busy = weft::spawn([] {
      for (int i = 0; i < 50; ++i) {
        weft::yield();
      }
    });
    EXPECT_THROW(task.await(), std::logic_error);
    weft::scheduler& scheduler = weft::current_scheduler();
    const auto switches = scheduler.stats().switches;
    for (int i = 0; i < 10; ++i) {
      EXPECT_THROW(task.await(), std::logic_error);
    }
    EXPECT_EQ(scheduler.stats().switches, switches);
    busy.await();
  });
}

TEST(Task, MoveOnlyResultIsMovedOutOfARvalueTask) {
  run_clean([] {
    auto task = weft::spawn([] { return std::make_unique<int>(7); });
    std::unique_ptr<int> value = std::move(task).await();
    ASSERT_NE(value, nullptr);
    EXPECT_EQ(*value, 7);

    std::unique_ptr<int> direct = weft::spawn([] { return std::make_unique<int>(8); }).await();
    ASSERT_NE(direct, nullptr);
    EXPECT_EQ(*direct, 8);
  });
}

TEST(Task, MoveOnlyResultCanBeReadInPlaceThroughAnLvalueTask) {
  run_clean([] {
    auto task = weft::spawn([] { return std::make_unique<std::string>("kept in the task"); });
    std::unique_ptr<std::string>& kept = task.await();
    ASSERT_NE(kept, nullptr);
    EXPECT_EQ(*kept, "kept in the task");
    EXPECT_EQ(task.await().get(), kept.get());
  });
}

TEST(Task, CopiesShareOneResult) {
  run_clean([] {
    auto original = weft::spawn([] {
      weft::yield();
      return std::vector<int>{1, 2, 3};
    });
    weft::task<std::vector<int>> copy = original;
    weft::task<std::vector<int>> assigned;
    EXPECT_FALSE(assigned.valid());
    assigned = copy;
    EXPECT_TRUE(assigned.valid());
    EXPECT_EQ(copy.id(), original.id());
    EXPECT_EQ(assigned.id(), original.id());
    EXPECT_EQ(copy.await(), (std::vector<int>{1, 2, 3}));
    EXPECT_EQ(&copy.await(), &original.await());
    EXPECT_EQ(&assigned.await(), &original.await());
    EXPECT_TRUE(original.done());
  });
}

TEST(Task, ACopyOutlivesTheOriginalHandle) {
  run_clean([] {
    weft::task<std::string> survivor;
    {
      auto original = weft::spawn([] {
        weft::yield();
        return std::string("still here");
      });
      survivor = original;
    }
    EXPECT_EQ(survivor.await(), "still here");
  });
}

TEST(Task, MovedFromTaskIsInvalidAndMisuseIsALogicError) {
  run_clean([] {
    auto original = weft::spawn([] { return 1; });
    auto moved = std::move(original);
    EXPECT_FALSE(original.valid());  // NOLINT(bugprone-use-after-move): the point of the test
    EXPECT_TRUE(moved.valid());
    EXPECT_THROW(original.await(), std::logic_error);
    EXPECT_THROW(original.cancel(), std::logic_error);
    EXPECT_THROW(original.done(), std::logic_error);
    EXPECT_EQ(moved.await(), 1);
  });
}

TEST(Task, VoidTaskAwaitsAndRethrows) {
  run_clean([] {
    bool ran = false;
    auto ok = weft::spawn([&] { ran = true; });
    ok.await();
    EXPECT_TRUE(ran);
    auto failing = weft::spawn([] { throw std::out_of_range("index 9"); });
    EXPECT_THROW(failing.await(), std::out_of_range);
    EXPECT_THROW(failing.await(), std::out_of_range);
  });
}

TEST(Task, DetachedCoroutineKeepsRunningAfterItsHandleIsDropped) {
  int steps = 0;
  run_clean([&] {
    weft::spawn([&] {
      for (int i = 0; i < 3; ++i) {
        ++steps;
        weft::yield();
      }
    });
  });
  EXPECT_EQ(steps, 3);
}

TEST(Task, ManyAwaitersOfOneTaskAllGetTheValue) {
  run_clean([] {
    auto producer = weft::spawn([] {
      weft::yield();
      weft::yield();
      return 99;
    });
    std::vector<weft::task<int>> consumers;
    for (int i = 0; i < 10; ++i) {
      consumers.push_back(weft::spawn([producer]() mutable { return producer.await() + 1; }));
    }
    for (auto& consumer : consumers) {
      EXPECT_EQ(consumer.await(), 100);
    }
  });
}

TEST(Task, ReferenceResultRefersToTheReturnedObject) {
  int shared = 1;
  run_clean([&] {
    auto task = weft::spawn([&]() -> int& {
      weft::yield();
      return shared;
    });
    int& first = task.await();
    EXPECT_EQ(&first, &shared);
    first = 5;
    EXPECT_EQ(task.await(), 5) << "every await refers to the same object";
    int& moved = std::move(task).await();
    EXPECT_EQ(&moved, &shared);
  });
  EXPECT_EQ(shared, 5);
}

}  // namespace

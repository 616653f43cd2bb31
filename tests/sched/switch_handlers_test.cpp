// Switch handlers: per-coroutine callbacks run on the coroutine's own stack when it is switched
// to (enter), switched away from (leave) and when it ends (finish); a handler returning false
// is unregistered. run_options::on_main_start runs on main's stack right before main's body.
// An exception escaping a finish handler is an error of its coroutine (its task's outcome, its
// scope's failure), never dropped; on_finish on a finished coroutine runs the handler at once.
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_support.hpp"
#include "weft/sync/scope.hpp"
#include "weft/sync/task_group.hpp"
#include "weft/weft.hpp"

namespace {

using weft_test::fifo_options;
using weft_test::run_clean;
using log_type = std::vector<std::string>;

TEST(SwitchHandlers, EnterLeaveAndFinishRunAtTheRightMomentsInOrder) {
  log_type log;
  run_clean(
      [&] {
        auto a = weft::spawn([&] {
          log.push_back("A1");
          weft::yield();
          log.push_back("A2");
        });
        auto b = weft::spawn([&] { log.push_back("B"); });
        a.on_enter([&] {
          log.push_back("enter A");
          return true;
        });
        a.on_leave([&] {
          log.push_back("leave A");
          return true;
        });
        a.on_finish([&] {
          log.push_back("finish A");
          return true;
        });
        a.await();
        b.await();
      },
      fifo_options());
  EXPECT_EQ(log, (log_type{"enter A", "A1", "leave A", "B", "enter A", "A2", "finish A"}));
}

TEST(SwitchHandlers, HandlerReturningFalseIsUnregistered) {
  int once = 0;
  int always = 0;
  int leaves_once = 0;
  run_clean(
      [&] {
        auto yielder = [] {
          for (int i = 0; i < 3; ++i) {
            weft::yield();
          }
        };
        auto a = weft::spawn(yielder);
        auto b = weft::spawn(yielder);
        a.on_enter([&] {
          ++once;
          return false;
        });
        a.on_enter([&] {
          ++always;
          return true;
        });
        a.on_leave([&] {
          ++leaves_once;
          return false;
        });
        a.await();
        b.await();
      },
      fifo_options());
  EXPECT_EQ(once, 1);
  EXPECT_EQ(leaves_once, 1);
  // main -> A, then A resumes after each of B's three yields.
  EXPECT_EQ(always, 4);
}

TEST(SwitchHandlers, HandlersRunOnTheCoroutinesOwnStack) {
  std::vector<std::uint64_t> seen_in_enter;
  std::vector<std::uint64_t> seen_in_leave;
  std::vector<std::uint64_t> seen_in_finish;
  std::uint64_t a_id = 0;
  run_clean([&] {
    auto a = weft::spawn([] {
      for (int i = 0; i < 3; ++i) {
        weft::yield();
      }
    });
    auto b = weft::spawn([] {
      for (int i = 0; i < 3; ++i) {
        weft::yield();
      }
    });
    a_id = a.id();
    a.on_enter([&] {
      seen_in_enter.push_back(weft::this_coroutine::id());
      return true;
    });
    a.on_leave([&] {
      seen_in_leave.push_back(weft::this_coroutine::id());
      return true;
    });
    a.on_finish([&] {
      seen_in_finish.push_back(weft::this_coroutine::id());
      return true;
    });
    a.await();
    b.await();
  });
  EXPECT_FALSE(seen_in_enter.empty());
  for (auto id : seen_in_enter) {
    EXPECT_EQ(id, a_id);
  }
  for (auto id : seen_in_leave) {
    EXPECT_EQ(id, a_id);
  }
  ASSERT_EQ(seen_in_finish.size(), 1u);
  EXPECT_EQ(seen_in_finish[0], a_id);
}

TEST(SwitchHandlers, CoroutineCanRegisterItsOwnHandlers) {
  int enters = 0;
  int leaves = 0;
  bool finished = false;
  run_clean(
      [&] {
        auto a = weft::spawn([&] {
          weft::this_coroutine::on_enter([&] {
            ++enters;
            return true;
          });
          weft::this_coroutine::on_leave([&] {
            ++leaves;
            return true;
          });
          weft::this_coroutine::on_finish([&] {
            finished = true;
            return true;
          });
          EXPECT_EQ(enters, 0);
          weft::yield();  // leave for B, enter again
          EXPECT_EQ(leaves, 1);
          EXPECT_EQ(enters, 1);
          weft::yield();
          EXPECT_EQ(leaves, 2);
          EXPECT_EQ(enters, 2);
          EXPECT_FALSE(finished);
        });
        auto b = weft::spawn([] {
          weft::yield();
          weft::yield();
        });
        a.await();
        b.await();
      },
      fifo_options());
  EXPECT_EQ(enters, 2);
  EXPECT_EQ(leaves, 2);
  EXPECT_TRUE(finished);
}

TEST(SwitchHandlers, FinishRunsWhenTheCoroutineFailsOrIsCancelled) {
  int failed_finishes = 0;
  int cancelled_finishes = 0;
  bool sleeping = false;
  run_clean([&] {
    auto failing = weft::spawn([] {
      weft::yield();
      throw std::runtime_error("failing coroutine");
    });
    failing.on_finish([&] {
      ++failed_finishes;
      return true;
    });
    auto sleeper = weft::spawn([&] {
      sleeping = true;
      weft::sleep_for(std::chrono::hours(1));
    });
    sleeper.on_finish([&] {
      ++cancelled_finishes;
      return true;
    });
    EXPECT_THROW(failing.await(), std::runtime_error);
    weft_test::yield_until([&] { return sleeping; });
    sleeper.cancel("test over");
    EXPECT_THROW(sleeper.await(), weft::cancelled_error);
  });
  EXPECT_EQ(failed_finishes, 1);
  EXPECT_EQ(cancelled_finishes, 1);
}

std::vector<std::string> messages_of(const weft::all_failed_error& failure) {
  std::vector<std::string> messages;
  for (const auto& error : failure.errors()) {
    messages.push_back(weft::detail::what_of(error));
  }
  return messages;
}

TEST(SwitchHandlers, FinishHandlerErrorReachesTheScopesExceptionHandler) {
  std::vector<std::string> handled;
  run_clean([&] {
    weft::scope workers("workers");
    workers.set_exception_handler(
        [&](std::exception_ptr error) { handled.push_back(weft::detail::what_of(error)); });
    auto worker = workers.spawn([] {
      weft::this_coroutine::on_finish([]() -> bool { throw std::runtime_error("cleanup failed"); });
      return 1;
    });
    workers.join();  // the handler took it: the scope did not fail
    EXPECT_FALSE(workers.failed());
    EXPECT_TRUE(worker.exception() != nullptr);
    EXPECT_EQ(workers.stats().failed, 1u);
  });
  EXPECT_EQ(handled, (std::vector<std::string>{"cleanup failed"}));
}

TEST(SwitchHandlers, SeveralFinishHandlerErrorsReachTheScopeHandlerTogether) {
  std::vector<std::exception_ptr> handled;
  run_clean([&] {
    weft::scope workers("workers");
    workers.set_exception_handler([&](std::exception_ptr error) { handled.push_back(error); });
    workers.spawn([] {
      weft::this_coroutine::on_finish([]() -> bool { throw std::runtime_error("first"); });
      weft::this_coroutine::on_finish([] { return true; });
      weft::this_coroutine::on_finish([]() -> bool { throw std::logic_error("second"); });
    });
    workers.join();
  });
  ASSERT_EQ(handled.size(), 1u);
  try {
    std::rethrow_exception(handled[0]);
  } catch (const weft::all_failed_error& failure) {
    EXPECT_EQ(messages_of(failure), (std::vector<std::string>{"first", "second"}));
    EXPECT_NE(std::string(failure.what()).find("2 errors (thrown by its finish handlers)"),
              std::string::npos)
        << failure.what();
  } catch (...) {
    ADD_FAILURE() << "expected all_failed_error, got " << weft::detail::what_of(handled[0]);
  }
}

TEST(SwitchHandlers, BodyFailureReachesTheScopeOnceAndHandlerErrorsAfterIt) {
  std::vector<std::string> handled;
  run_clean([&] {
    weft::scope workers("workers");
    workers.set_exception_handler(
        [&](std::exception_ptr error) { handled.push_back(weft::detail::what_of(error)); });
    auto worker = workers.spawn([] {
      weft::this_coroutine::on_finish([]() -> bool { throw std::runtime_error("cleanup"); });
      throw std::runtime_error("body");
    });
    workers.join();
    // The task keeps both: its own failure, then the handler's.
    try {
      worker.await();
      ADD_FAILURE() << "await did not throw";
    } catch (const weft::all_failed_error& failure) {
      EXPECT_EQ(messages_of(failure), (std::vector<std::string>{"body", "cleanup"}));
    }
  });
  EXPECT_EQ(handled, (std::vector<std::string>{"body", "cleanup"}));
}

TEST(SwitchHandlers, FinishHandlerErrorFailsAScopeWithoutHandler) {
  run_clean([] {
    weft::scope workers("workers");
    workers.spawn([] {
      weft::this_coroutine::on_finish([]() -> bool { throw std::runtime_error("cleanup failed"); });
    });
    try {
      workers.join();
      ADD_FAILURE() << "join did not rethrow the finish handler's error";
    } catch (const std::runtime_error& error) {
      EXPECT_STREQ(error.what(), "cleanup failed");
    }
    EXPECT_TRUE(workers.failed());
  });
}

TEST(SwitchHandlers, FinishHandlerErrorIsTheTasksOutcome) {
  run_clean([] {
    auto succeeded = weft::spawn([] { return 5; });
    succeeded.on_finish([]() -> bool { throw std::runtime_error("cleanup after success"); });
    try {
      succeeded.await();
      ADD_FAILURE() << "await did not rethrow the finish handler's error";
    } catch (const std::runtime_error& error) {
      EXPECT_STREQ(error.what(), "cleanup after success");
    }

    // A cancelled coroutine whose cleanup fails has failed: the cancellation is not an error.
    weft_test::cancellable body;
    auto cancelled = weft::spawn(std::ref(body));
    cancelled.on_finish([]() -> bool { throw std::runtime_error("cleanup after cancel"); });
    weft_test::yield_until([&] { return body.started; });
    cancelled.cancel("stop");
    EXPECT_THROW(cancelled.await(), std::runtime_error);
    EXPECT_TRUE(body.cleaned_up);

    weft::task_group<int> group(2);
    auto grouped = group.spawn([] { return 7; });
    grouped.on_finish([]() -> bool { throw std::runtime_error("cleanup in a group"); });
    auto outcome = group.next();
    ASSERT_TRUE(outcome.has_value());
    EXPECT_THROW(outcome->await(), std::runtime_error);
  });
}

TEST(SwitchHandlers, FinishHandlerErrorsOfADetachedCoroutineAreAllKept) {
  try {
    run_clean([] {
      auto detached = weft::spawn([] { weft::yield(); });
      detached.on_finish([]() -> bool { throw std::runtime_error("first"); });
      detached.on_finish([]() -> bool { throw std::runtime_error("second"); });
    });
    ADD_FAILURE() << "run did not rethrow the detached coroutine's error";
  } catch (const weft::all_failed_error& failure) {
    EXPECT_EQ(messages_of(failure), (std::vector<std::string>{"first", "second"}));
  }
}

TEST(SwitchHandlers, OnFinishOnAFinishedCoroutineRunsAtOnce) {
  run_clean([] {
    auto done = weft::spawn([] { return 1; });
    done.await();
    int runs = 0;
    done.on_finish([&] {
      ++runs;
      return true;
    });
    EXPECT_EQ(runs, 1);
    try {
      done.on_finish([]() -> bool { throw std::runtime_error("late handler failed"); });
      ADD_FAILURE() << "the late handler's exception did not reach its registrant";
    } catch (const std::runtime_error& error) {
      EXPECT_STREQ(error.what(), "late handler failed");
    }
    EXPECT_EQ(done.await(), 1);  // the settled outcome is untouched
    EXPECT_THROW(done.on_finish(nullptr), std::invalid_argument);
  });
}

TEST(SwitchHandlers, FinishHandlerRegisteredFromAFinishHandlerRunsAtOnce) {
  std::vector<std::string> log;
  run_clean([&] {
    auto worker = weft::spawn([] { weft::yield(); });
    worker.on_finish([&] {
      log.push_back("outer");
      worker.on_finish([&] {
        log.push_back("inner");
        return true;
      });
      log.push_back("outer done");
      return true;
    });
    worker.await();
  });
  EXPECT_EQ(log, (std::vector<std::string>{"outer", "inner", "outer done"}));
}

TEST(SwitchHandlers, OnMainStartRunsInOrderOnMainsStackBeforeMainsBody) {
  log_type log;
  weft::run_options options;
  options.on_main_start.push_back([&] {
    log.push_back(weft::this_coroutine::is_main() ? "first hook in main" : "first hook elsewhere");
  });
  options.on_main_start.push_back([&] { log.push_back("second hook"); });
  const int result = run_clean(
      [&] {
        log.push_back("main body");
        return 3;
      },
      std::move(options));
  EXPECT_EQ(result, 3);
  EXPECT_EQ(log, (log_type{"first hook in main", "second hook", "main body"}));
}

TEST(SwitchHandlers, OnMainStartHookThatThrowsFailsTheRunBeforeMainsBody) {
  bool body_ran = false;
  weft::run_options options;
  options.on_main_start.push_back([] { throw std::runtime_error("hook failed"); });
  try {
    run_clean([&] { body_ran = true; }, std::move(options));
    ADD_FAILURE() << "run did not rethrow the hook's exception";
  } catch (const std::runtime_error& error) {
    EXPECT_STREQ(error.what(), "hook failed");
  }
  EXPECT_FALSE(body_ran);
}

TEST(SwitchHandlers, OnMainStartHookCanSpawn) {
  log_type log;
  weft::run_options options = fifo_options();
  options.on_main_start.push_back([&] { weft::spawn([&] { log.push_back("from hook"); }); });
  run_clean(
      [&] {
        log.push_back("main body");
        weft::yield();
        log.push_back("main after yield");
      },
      std::move(options));
  EXPECT_EQ(log, (log_type{"main body", "from hook", "main after yield"}));
}

}  // namespace

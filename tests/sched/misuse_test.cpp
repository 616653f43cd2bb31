// Misuse is a std::logic_error with a message that says what was wrong: a blocking weft call
// outside a coroutine, awaiting yourself, a task awaited from another thread, a nested run.
#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "test_support.hpp"
#include "weft/weft.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::run_clean;

// Runs call and returns the std::logic_error's message ("" and a failure if it threw nothing
// or something else).
std::string logic_error_message(const std::function<void()>& call) {
  try {
    call();
  } catch (const std::logic_error& error) {
    EXPECT_GT(std::string(error.what()).size(), 10u) << "unhelpfully short message";
    return error.what();
  } catch (const std::exception& error) {
    ADD_FAILURE() << "threw something other than std::logic_error: " << error.what();
    return "";
  }
  ADD_FAILURE() << "did not throw";
  return "";
}

// Runs call on a fresh std::thread (no scheduler there) and returns its logic_error message.
std::string logic_error_message_on_plain_thread(const std::function<void()>& call) {
  std::string message;
  std::thread thread([&] { message = logic_error_message(call); });
  thread.join();
  return message;
}

bool mentions(const std::string& message, const std::string& word) {
  return message.find(word) != std::string::npos;
}

TEST(Misuse, SuspendingCallsOutsideACoroutine) {
  // The message names the call and the rule that was broken.
  const std::string yield_message = logic_error_message_on_plain_thread([] { weft::yield(); });
  EXPECT_TRUE(mentions(yield_message, "yield")) << yield_message;
  EXPECT_TRUE(mentions(yield_message, "outside a coroutine")) << yield_message;
  const std::string sleep_message =
      logic_error_message_on_plain_thread([] { weft::sleep_for(1ms); });
  EXPECT_TRUE(mentions(sleep_message, "sleep")) << sleep_message;
  EXPECT_TRUE(mentions(sleep_message, "outside a coroutine")) << sleep_message;
  const std::string sleep_until_message =
      logic_error_message_on_plain_thread([] { weft::sleep_until(weft::clock::now()); });
  EXPECT_TRUE(mentions(sleep_until_message, "outside a coroutine")) << sleep_until_message;
  // The main thread outside any run is just as much "outside a coroutine".
  EXPECT_THROW(weft::yield(), std::logic_error);
}

// A microtask (or reactor callback) runs inside the tick of the coroutine giving up the CPU; a
// wait there would suspend that coroutine a second time from the middle of its switch. Every
// kind of wait refuses with a message that says where it was called from.
TEST(Misuse, WaitingInAMicrotaskIsALogicErrorThatSaysSo) {
  std::vector<std::string> errors;
  run_clean([&] {
    weft::mutex held;
    weft::channel<int> gate(0);
    auto holder = weft::spawn([&] {
      held.lock();
      (void)gate.recv();
      held.unlock();
    });
    ASSERT_TRUE(weft_test::yield_until([&] { return held.locked(); }));
    weft::channel<int> empty(0);
    weft::semaphore none(0);
    weft::current_scheduler().add_microtask([&] {
      auto refused = [&](auto&& wait) {
        try {
          wait();
          errors.push_back("returned");
        } catch (const std::logic_error& error) {
          errors.push_back(error.what());
        }
      };
      refused([&] { held.lock(); });
      refused([&] { (void)empty.recv(); });
      refused([&] { none.acquire(); });
      refused([&] { weft::yield(); });
      refused([&] { weft::sleep_for(std::chrono::milliseconds(1)); });
      refused([&] { holder.await(); });
    });
    weft::yield();  // the tick runs the microtask
    gate.send(1);
    holder.await();
    EXPECT_FALSE(held.locked());
    EXPECT_EQ(held.waiting(), 0u);
    EXPECT_EQ(none.waiting(), 0u);
  });
  ASSERT_EQ(errors.size(), 6u);
  for (const std::string& error : errors) {
    EXPECT_NE(error.find("called from a microtask, a reactor callback or a switch handler"),
              std::string::npos)
        << error;
  }
}

TEST(Misuse, SpawnOutsideARun) {
  const std::string message = logic_error_message_on_plain_thread([] { weft::spawn([] {}); });
  EXPECT_TRUE(mentions(message, "weft::run")) << message;
  EXPECT_TRUE(mentions(message, "scheduler")) << message;
  EXPECT_THROW(weft::current_scheduler(), std::logic_error);
  EXPECT_EQ(weft::current_scheduler_or_null(), nullptr);
}

TEST(Misuse, CoroutineQueriesOutsideACoroutine) {
  logic_error_message_on_plain_thread([] { weft::this_coroutine::id(); });
  logic_error_message_on_plain_thread([] { weft::this_coroutine::name(); });
  logic_error_message_on_plain_thread([] { weft::protect([] {}); });
  logic_error_message_on_plain_thread([] { weft::graceful_shutdown(); });
}

TEST(Misuse, AwaitOnAPlainThread) {
  run_clean([] {
    bool release = false;
    auto task = weft::spawn([&] {
      weft_test::yield_until([&] { return release; });
      return 1;
    });
    // The task is pending; the plain thread has no scheduler and is not a coroutine.
    const std::string message = logic_error_message_on_plain_thread([&] { task.await(); });
    EXPECT_TRUE(mentions(message, "thread")) << message;
    EXPECT_TRUE(mentions(message, std::to_string(task.id()))) << message;
    release = true;
    EXPECT_EQ(task.await(), 1);
  });
}

TEST(Misuse, AwaitingATaskFromAnotherThreadsScheduler) {
  run_clean([] {
    bool release = false;
    auto task = weft::spawn([&] {
      weft_test::yield_until([&] { return release; });
      return 2;
    });
    std::string message;
    std::thread other([&] {
      // A coroutine of another scheduler, on another thread, awaiting this scheduler's task.
      weft::run([&] { message = logic_error_message([&] { task.await(); }); });
    });
    other.join();
    EXPECT_TRUE(mentions(message, "thread")) << message;
    release = true;
    EXPECT_EQ(task.await(), 2);
  });
}

TEST(Misuse, AwaitingYourself) {
  std::string message;
  run_clean([&] {
    weft::task<int> self;
    self = weft::spawn([&] {
      message = logic_error_message([&] { self.await(); });
      return 3;
    });
    EXPECT_EQ(self.await(), 3);
  });
  EXPECT_TRUE(mentions(message, "its own task") || mentions(message, "itself") ||
              mentions(message, "yourself"))
      << message;
}

TEST(Misuse, NestedRunOnTheSameThread) {
  std::string message;
  run_clean([&] {
    message = logic_error_message([] { weft::run([] {}); });
    // The outer run is unharmed.
    EXPECT_EQ(weft::spawn([] { return 4; }).await(), 4);
  });
  EXPECT_TRUE(mentions(message, "weft::run")) << message;
  EXPECT_TRUE(mentions(message, "already running")) << message;
}

TEST(Misuse, RunningTheSameSchedulerInsideItself) {
  weft::scheduler scheduler;
  weft_test::clean_end_check check(scheduler);
  std::string message;
  scheduler.run([&] { message = logic_error_message([&] { scheduler.run([] {}); }); });
  EXPECT_TRUE(mentions(message, "already running")) << message;
}

TEST(Misuse, InvalidTask) {
  run_clean([] {
    weft::task<int> empty;
    EXPECT_FALSE(empty.valid());
    const std::string message = logic_error_message([&] { empty.await(); });
    EXPECT_TRUE(mentions(message, "await")) << message;
    EXPECT_TRUE(mentions(message, "empty task")) << message;
    logic_error_message([&] { empty.cancel(); });
    logic_error_message([&] { empty.id(); });
    logic_error_message([&] { empty.on_enter([] { return true; }); });
  });
}

TEST(Misuse, CancellingATaskFromAnotherThread) {
  run_clean([] {
    bool release = false;
    auto task = weft::spawn([&] {
      weft_test::yield_until([&] { return release; });
      return 5;
    });
    const std::string message = logic_error_message_on_plain_thread([&] { task.cancel(); });
    EXPECT_TRUE(mentions(message, "thread")) << message;
    release = true;
    EXPECT_EQ(task.await(), 5);  // not cancelled
  });
}

TEST(Misuse, AddMicrotaskOutsideARun) {
  logic_error_message_on_plain_thread([] { weft::current_scheduler().add_microtask([] {}); });
}

}  // namespace

// weft coroutines and procs processes together: a coroutine awaits a process's outcome
// suspending only itself (its weft::scheduler keeps running the other coroutines), with the usual
// weft timeout; and a command handler can hand its completion to a weft thread whose
// coroutine completes the yield.
#include <atomic>
#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>

#include "procs/procs_support.hpp"
#include "test_support.hpp"
#include "weft/error.hpp"

namespace {

using namespace procs_test;
using weft_test::run_clean;
using ProcsCoroutine = contract_checked;

// The process only finishes once another coroutine of the same weft thread sent it a message,
// so the await must let that coroutine run.
TEST_F(ProcsCoroutine, AwaitSuspendsOnlyTheAwaitingCoroutine) {
  int ticks = 0;
  std::string result;
  runtime engine({.workers = 2});
  run_clean([&] {
    process_handle handle = engine.submit(first_message_wins());
    auto ticker = weft::spawn([&] {
      while (ticks < 100) {
        ++ticks;
        weft::yield();
      }
      engine.send(handle.id(), "sent after 100 ticks");
    });
    result = handle.await(weft::timeout(generous));
    ticker.await();
  });
  EXPECT_EQ(result, "sent after 100 ticks");
  EXPECT_EQ(ticks, 100);
  stop_and_check_clean(engine);
}

TEST_F(ProcsCoroutine, AwaitOfAFinishedProcessReturnsItsResult) {
  runtime engine({.workers = 2});
  process_handle handle = engine.submit(std::function<std::string()>([] { return "ready"; }));
  EXPECT_EQ(handle.wait_for(generous), "ready");
  run_clean([&] { EXPECT_EQ(handle.await(), "ready"); });
  stop_and_check_clean(engine);
}

TEST_F(ProcsCoroutine, AwaitRethrowsTheProcessError) {
  runtime engine({.workers = 2});
  process_handle handle = engine.submit(std::function<std::string()>(
      []() -> std::string { throw std::out_of_range("index 7 of 3"); }));
  run_clean([&] { EXPECT_THROW(handle.await(weft::timeout(generous)), std::out_of_range); });
  stop_and_check_clean(engine);
}

TEST_F(ProcsCoroutine, AwaitWithATimeoutGivesTimeoutErrorAndTheProcessKeepsRunning) {
  runtime engine({.workers = 2});
  run_clean([&] {
    process_handle handle = engine.submit(first_message_wins());
    const auto start = std::chrono::steady_clock::now();
    EXPECT_THROW(handle.await(weft::timeout(20ms)), weft::timeout_error);
    EXPECT_GE(std::chrono::steady_clock::now() - start, 20ms);
    EXPECT_FALSE(handle.done());
    engine.send(handle.id(), "still there");
    EXPECT_EQ(handle.await(weft::timeout(generous)), "still there");
  });
  stop_and_check_clean(engine);
}

TEST_F(ProcsCoroutine, ACancelledAwaitLeavesTheProcessRunning) {
  process_handle handle;
  runtime engine({.workers = 2});
  run_clean([&] {
    handle = engine.submit(first_message_wins());
    auto awaiting = weft::spawn([&] { return handle.await(); });
    weft::yield();  // let it start waiting
    awaiting.cancel("not needed any more");
    EXPECT_THROW(awaiting.await(), weft::cancelled_error);
  });
  EXPECT_FALSE(handle.done());
  engine.send(handle.id(), "after all");
  EXPECT_EQ(handle.wait_for(generous), "after all");
  stop_and_check_clean(engine);
}

// The handler passes each completion through a thread_channel to a weft thread, whose main
// coroutine completes it (after a yield, so from a coroutine that ran on).
TEST_F(ProcsCoroutine, AWeftThreadCompletesYieldsHandedOverThroughAThreadChannel) {
  auto handed = weft::thread_channel<completion>::unbounded();
  runtime engine({.workers = 2});
  engine.on_command("remote", [handed](const command&, completion done) mutable {
    handed.try_send(std::move(done));  // a refused one is dropped, failing the yield
  });
  constexpr int yields = 3;
  std::string result;
  run_clean([&] {
    auto remote = weft::spawn_thread([handed]() mutable {
      int served = 0;
      for (completion& done : handed) {
        weft::yield();
        done.complete("served " + std::to_string(done.tag()) + " by weft");
        ++served;
      }
      return served;
    });
    process_handle handle = engine.submit(
        scripted({.step = [next = 0, seen = std::string()](context&, std::span<event> events,
                                                           step_output& out) mutable {
          for (const event& arrived : events) {
            if (arrived.type == event_type::yield_complete) {
              seen += (arrived.error ? message_of(arrived.error) : arrived.data) + ";";
            }
          }
          if (next == yields) {
            out.done(seen);
            return;
          }
          ++next;
          out.yield("remote", static_cast<std::uint64_t>(next));
        }}));
    result = handle.await(weft::timeout(generous));
    handed.close("no more commands");
    EXPECT_EQ(remote.await(), yields);
  });
  EXPECT_EQ(result, "served 1 by weft;served 2 by weft;served 3 by weft;");
  stop_and_check_clean(engine);
}

}  // namespace

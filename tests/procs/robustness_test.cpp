// Edges of the procs runtime: a command handler that throws, live() right after a wait, and
// time limits at the ends of the clock.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <future>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "procs/procs_support.hpp"
#include "weft/error.hpp"

namespace {

using namespace procs_test;
using ProcsRobustness = contract_checked;

// What a yield came back with, as the process saw it.
struct yield_outcome {
  std::uint64_t tag = 0;
  std::string data;
  std::exception_ptr error;
};

// A process that yields one command in its first step and finishes once it came back,
// recording the outcome.
std::unique_ptr<process> yield_one(command asked, std::optional<yield_outcome>& outcome) {
  return scripted({.step = [asked = std::move(asked), &outcome, started = false](
                               context&, std::span<event> events, step_output& out) mutable {
    if (!started) {
      started = true;
      out.yield(asked.type, asked.tag, asked.payload);
      return;
    }
    for (event& arrived : events) {
      if (arrived.type == event_type::yield_complete) {
        outcome = yield_outcome{arrived.tag, std::move(arrived.data), arrived.error};
        out.done();
        return;
      }
    }
    out.wait();
  }});
}

struct disk_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// --- a handler that throws -----------------------------------------------------------------

TEST_F(ProcsRobustness, AThrowingHandlerFailsTheYieldWithItsException) {
  std::optional<yield_outcome> outcome;
  runtime engine({.workers = 2});
  engine.on_command("save",
                    [](const command&, completion) { throw std::runtime_error("disk full"); });
  process_handle handle = engine.submit(yield_one({"save", 8, "report.pdf"}, outcome));
  EXPECT_EQ(handle.wait_for(generous), "");
  stop_and_check_clean(engine);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->tag, 8u);
  EXPECT_TRUE(outcome->data.empty());
  EXPECT_TRUE(holds<std::runtime_error>(outcome->error)) << message_of(outcome->error);
  EXPECT_EQ(message_of(outcome->error), "disk full") << "the handler's own error, not 'dropped'";
}

TEST_F(ProcsRobustness, AThrowingHandlerKeepsTheExceptionsTypeWhereverItHeldItsCompletion) {
  // The completion moved into the handler's own locals (and a lambda) before the throw: it
  // is destroyed by the unwinding all the same, and the yield still gets the exception.
  std::optional<yield_outcome> outcome;
  runtime engine({.workers = 1});
  engine.on_command("save", [](const command& asked, completion done) {
    completion mine = std::move(done);
    auto later = [held = std::move(mine)]() mutable { held.complete("never"); };
    if (asked.payload == "full") {
      throw disk_error("disk full while saving " + asked.payload);
    }
    later();
  });
  process_handle handle = engine.submit(yield_one({"save", 2, "full"}, outcome));
  handle.wait_for(generous);
  stop_and_check_clean(engine);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_TRUE(holds<disk_error>(outcome->error)) << message_of(outcome->error);
  EXPECT_EQ(message_of(outcome->error), "disk full while saving full");
}

TEST_F(ProcsRobustness, AHandlerThatHandedItsCompletionOnBeforeThrowingLeavesItToTheHolder) {
  completion_box box;
  std::optional<yield_outcome> outcome;
  runtime engine({.workers = 2});
  engine.on_command("queue", [&](const command&, completion done) {
    box.put(std::move(done));
    throw std::runtime_error("metrics backend unreachable");
  });
  testing::internal::CaptureStderr();
  process_handle handle = engine.submit(yield_one({"queue", 4, ""}, outcome));
  std::optional<completion> held = box.take();
  ASSERT_TRUE(held.has_value()) << "the handler never ran";
  EXPECT_FALSE(handle.done()) << "the holder completes the yield, not the throw";
  held->complete("queued");
  handle.wait_for(generous);
  stop_and_check_clean(engine);
  const std::string reported = testing::internal::GetCapturedStderr();
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->data, "queued");
  EXPECT_FALSE(outcome->error);
  EXPECT_NE(reported.find("the handler for command \"queue\""), std::string::npos) << reported;
  EXPECT_NE(reported.find("metrics backend unreachable"), std::string::npos)
      << "the exception is reported, not lost: " << reported;
}

TEST_F(ProcsRobustness, AHandlerReturningWithoutItsCompletionStillFailsTheYieldAsDropped) {
  std::optional<yield_outcome> outcome;
  runtime engine({.workers = 2});
  engine.on_command("forgetful", [](const command&, completion done) {
    completion moved = std::move(done);  // and dropped at the end of the handler
  });
  process_handle handle = engine.submit(yield_one({"forgetful", 1, ""}, outcome));
  handle.wait_for(generous);
  stop_and_check_clean(engine);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(message_of(outcome->error),
            "weft::procs: the handler for command \"forgetful\" dropped its completion without "
            "completing it");
}

// --- live() agrees with a waiter ------------------------------------------------------------

void check_live_after_wait(std::size_t workers) {
  runtime engine({.workers = workers});
  const std::size_t rounds = scaled(20000, 2000);
  std::size_t counted = 0;
  std::size_t first_bad_round = 0;
  for (std::size_t round = 0; round < rounds; ++round) {
    process_handle handle = engine.submit([] { return std::string("ok"); });
    ASSERT_EQ(handle.wait(), "ok");
    if (engine.live() != 0) {
      if (counted++ == 0) {
        first_bad_round = round;
      }
    }
  }
  EXPECT_EQ(counted, 0u) << "live() counted a process whose wait() had returned, in " << counted
                         << " of " << rounds << " rounds (first: round " << first_bad_round << ")";
  stop_and_check_clean(engine);
}

TEST_F(ProcsRobustness, LiveIsZeroOnceWaitReturnedOnOneWorker) { check_live_after_wait(1); }

TEST_F(ProcsRobustness, LiveIsZeroOnceWaitReturnedOnTwoWorkers) { check_live_after_wait(2); }

TEST_F(ProcsRobustness, LiveIsZeroOnceDoneIsSeen) {
  runtime engine({.workers = 2});
  for (std::size_t round = 0; round < scaled(5000, 500); ++round) {
    process_handle handle = engine.submit([] { return std::string(); });
    // A tight spin, no pause: the moment done() turns true is the moment that counts.
    const auto deadline = std::chrono::steady_clock::now() + generous;
    while (!handle.done()) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "round " << round << " never done";
    }
    ASSERT_EQ(engine.live(), 0u) << "round " << round;
  }
  stop_and_check_clean(engine);
}

// --- the ends of the clock ----------------------------------------------------------------

TEST_F(ProcsRobustness, AHugeWaitLimitMeansNoLimit) {
  completion_box box;
  std::optional<yield_outcome> outcome;
  runtime engine({.workers = 2});
  engine.on_command("later", [&](const command&, completion done) { box.put(std::move(done)); });
  process_handle handle = engine.submit(yield_one({"later", 1, ""}, outcome));
  std::optional<completion> held = box.take();
  ASSERT_TRUE(held.has_value());
  std::thread completer([done = std::move(*held)]() mutable { done.complete("late"); });
  EXPECT_EQ(handle.wait_for(std::chrono::steady_clock::duration::max()), "");
  completer.join();
  EXPECT_EQ(handle.wait_for(std::chrono::steady_clock::duration::max()), "");
  stop_and_check_clean(engine);
  ASSERT_TRUE(outcome.has_value());
  EXPECT_EQ(outcome->data, "late");
}

TEST_F(ProcsRobustness, AWaitLimitAtTheClocksStartHasAlreadyPassed) {
  completion_box box;
  std::optional<yield_outcome> outcome;
  runtime engine({.workers = 2});
  engine.on_command("later", [&](const command&, completion done) { box.put(std::move(done)); });
  process_handle handle = engine.submit(yield_one({"later", 1, ""}, outcome));
  std::optional<completion> held = box.take();
  ASSERT_TRUE(held.has_value());
  // In a thread of its own: a broken limit would wait (nearly) forever, and the test must end.
  auto waited = std::async(std::launch::async, [&] {
    try {
      handle.wait_for(std::chrono::steady_clock::duration::min());
      return std::string("returned");
    } catch (const weft::timeout_error& error) {
      return std::string(error.what());
    }
  });
  const bool gave_up = waited.wait_for(generous) == std::future_status::ready;
  EXPECT_TRUE(gave_up) << "wait_for(duration::min()) must give up at once";
  if (!gave_up) {
    held->complete("done");  // lets the stuck wait end, so the test does
  }
  const std::string message = waited.get();
  EXPECT_NE(message.find("did not finish before its deadline, which had already passed"),
            std::string::npos)
      << message;
  try {
    handle.wait_for(-std::chrono::seconds(5));
    ADD_FAILURE() << "the process is still waiting for its command";
  } catch (const weft::timeout_error& error) {
    EXPECT_NE(std::string(error.what()).find("which had already passed"), std::string::npos)
        << error.what();
  }
  if (held->pending()) {
    held->complete("done");
  }
  EXPECT_EQ(handle.wait(), "");
  EXPECT_EQ(handle.wait_for(std::chrono::steady_clock::duration::min() / 2), "")
      << "a finished process is returned whatever the limit";
  stop_and_check_clean(engine);
}

TEST_F(ProcsRobustness, StopAtTheEndsOfTheClock) {
  std::atomic<int> closes{0};
  {
    runtime engine({.workers = 2});
    engine.submit(wait_for_cancel(closes));
    // Waits as long as it takes: the process ends on its cancel.
    EXPECT_TRUE(engine.stop(std::chrono::steady_clock::duration::max()));
    EXPECT_EQ(engine.live(), 0u);
  }
  {
    runtime engine({.workers = 2});
    completion_box box;
    engine.on_command("never", [&](const command&, completion done) { box.put(std::move(done)); });
    std::optional<yield_outcome> outcome;
    process_handle stubborn = engine.submit(yield_one({"never", 1, ""}, outcome));
    ASSERT_TRUE(box.wait_for_count(1));
    // No grace at all: what did not finish on the cancel is forced at once.
    EXPECT_FALSE(engine.stop(std::chrono::steady_clock::duration::min()));
    EXPECT_EQ(engine.live(), 0u);
    EXPECT_TRUE(holds<weft::cancelled_error>(error_of(stubborn)));
  }
  EXPECT_EQ(closes.load(), 1);
}

}  // namespace

// No process can starve the others, even on a single worker: a process that always keeps
// running, two processes that wake each other forever (each woken into the worker's "next"
// slot), or a process that keeps generating local work cannot keep a newcomer, submitted from
// inside (the local queue) or from outside (the global queue), from running to its end.
#include <atomic>
#include <future>
#include <memory>
#include <string>

#include "procs/procs_support.hpp"

namespace {

using namespace procs_test;
using ProcsFairness = contract_checked;

// Keeps running until cancelled, counting its steps.
std::unique_ptr<process> hog(std::atomic<long>& steps) {
  return scripted({.step = [&steps](context&, std::span<event> events, step_output& out) {
    steps.fetch_add(1, std::memory_order_relaxed);
    for (const event& arrived : events) {
      if (arrived.type == event_type::cancel) {
        out.done("hog stopped");
        return;
      }
    }
    out.keep_running();
  }});
}

// Runs `steps` steps (keep_running between them), then finishes.
std::unique_ptr<process> short_job(int steps) {
  return scripted(
      {.step = [steps, taken = 0](context&, std::span<event>, step_output& out) mutable {
        if (++taken == steps) {
          out.done("short job done");
        } else {
          out.keep_running();
        }
      }});
}

// Returns the ball to whoever sent it, forever, until cancelled. "partner PID" from the test
// serves the first ball. After `submit_at` returns, it submits a short job from inside its
// step (into its worker's local queue) and hands over the handle.
std::unique_ptr<process> player(std::atomic<long>& returns, long submit_at = 0,
                                std::promise<process_handle>* newcomer = nullptr) {
  return scripted({.step = [&returns, submit_at, newcomer, submitted = false](
                               context& self, std::span<event> events, step_output& out) mutable {
    for (const event& arrived : events) {
      if (arrived.type == event_type::cancel) {
        out.done("left the game");
        return;
      }
      if (arrived.type != event_type::message) {
        continue;
      }
      if (arrived.data.starts_with("partner ")) {
        self.owner().send(std::stoull(arrived.data.substr(8)), "ball", self.self());
        continue;
      }
      const long count = returns.fetch_add(1, std::memory_order_relaxed) + 1;
      self.owner().try_send(arrived.from, "ball", self.self());
      if (newcomer != nullptr && !submitted && count >= submit_at) {
        submitted = true;
        newcomer->set_value(self.owner().submit(short_job(3)));
      }
    }
  }});
}

TEST_F(ProcsFairness, AHogOnOneWorkerCannotStarveAnotherProcess) {
  std::atomic<long> hog_steps{0};
  runtime engine({.workers = 1});
  process_handle greedy = engine.submit(hog(hog_steps));
  ASSERT_TRUE(spin_until([&] { return hog_steps.load() >= 100; }));
  process_handle modest = engine.submit(short_job(10));
  EXPECT_EQ(modest.wait_for(generous), "short job done");
  EXPECT_FALSE(greedy.done()) << "the hog is still running";
  engine.cancel(greedy.id());
  EXPECT_EQ(greedy.wait_for(generous), "hog stopped");
  stop_and_check_clean(engine);
}

TEST_F(ProcsFairness, APingPongingPairCannotStarveAProcessTheySubmitLocally) {
  std::atomic<long> returns{0};
  std::promise<process_handle> newcomer;
  std::future<process_handle> newcomer_handle = newcomer.get_future();
  runtime engine({.workers = 1});
  process_handle left = engine.submit(player(returns, 1000, &newcomer));
  process_handle right = engine.submit(player(returns));
  engine.send(left.id(), "partner " + std::to_string(right.id()));
  ASSERT_EQ(newcomer_handle.wait_for(generous), std::future_status::ready);
  process_handle local = newcomer_handle.get();
  EXPECT_EQ(local.wait_for(generous), "short job done");
  const long returns_when_done = returns.load();
  EXPECT_FALSE(left.done());
  EXPECT_FALSE(right.done());
  EXPECT_TRUE(spin_until([&] { return returns.load() > returns_when_done + 100; }))
      << "the pair stopped playing";
  engine.cancel(left.id());
  engine.cancel(right.id());
  EXPECT_EQ(left.wait_for(generous), "left the game");
  EXPECT_EQ(right.wait_for(generous), "left the game");
  stop_and_check_clean(engine);
}

TEST_F(ProcsFairness, APingPongingPairCannotStarveAProcessSubmittedFromOutside) {
  std::atomic<long> returns{0};
  runtime engine({.workers = 1});
  process_handle left = engine.submit(player(returns));
  process_handle right = engine.submit(player(returns));
  engine.send(left.id(), "partner " + std::to_string(right.id()));
  ASSERT_TRUE(spin_until([&] { return returns.load() >= 1000; }));
  process_handle outsider = engine.submit(short_job(3));
  EXPECT_EQ(outsider.wait_for(generous), "short job done");
  EXPECT_FALSE(left.done());
  engine.cancel(left.id());
  engine.cancel(right.id());
  EXPECT_EQ(left.wait_for(generous), "left the game");
  EXPECT_EQ(right.wait_for(generous), "left the game");
  stop_and_check_clean(engine);
}

// Each step submits a child from inside (local work) and keeps running.
TEST_F(ProcsFairness, AProcessSubmittedFromOutsideRunsWhileLocalWorkKeepsComing) {
  std::atomic<long> children{0};
  runtime engine({.workers = 1});
  process_handle generator = engine.submit(
      scripted({.step = [&](context& self, std::span<event> events, step_output& out) {
        for (const event& arrived : events) {
          if (arrived.type == event_type::cancel) {
            out.done("generator stopped");
            return;
          }
        }
        self.owner().submit(std::function<std::string()>([&children] {
          children.fetch_add(1, std::memory_order_relaxed);
          return std::string();
        }));
        out.keep_running();
      }}));
  ASSERT_TRUE(spin_until([&] { return children.load() >= 1000; }));
  process_handle outsider = engine.submit(short_job(3));
  EXPECT_EQ(outsider.wait_for(generous), "short job done");
  EXPECT_FALSE(generator.done()) << "the generator is still generating";
  engine.cancel(generator.id());
  EXPECT_EQ(generator.wait_for(generous), "generator stopped");
  stop_and_check_clean(engine);
}

}  // namespace

// The runtime under load: exactly-once completion and close for a million processes on 1, 2
// and 8 workers; never two workers in one process's step while it yields, receives messages and
// gets completions from other threads; no wakeup lost when a message or a completion races a
// process going idle; tags that always find their yields.
//
// Chaos variants: WEFT_PROCS_CHAOS=1 makes the runtime yield the thread at random between
// its atomic steps (src/procs/chaos.hpp reads it once, at start-up). Each StressChaos test
// re-runs this executable on the matching Stress test with that variable set, so that the
// variable is in place before anything reads it; under chaos the sizes shrink to the sanitizer
// sizes or below. The whole suite can also be run that way: WEFT_PROCS_CHAOS=1
// build/NAME/tests/weft_tests.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include "procs/procs_support.hpp"

extern char** environ;

namespace {

using namespace procs_test;
using ProcsStress = contract_checked;

bool chaos_run() {
  const char* value = std::getenv("WEFT_PROCS_CHAOS");
  return value != nullptr && std::string(value) == "1";
}

// The size of a stress test: `release` in a release build, `sanitized` under ASan/TSan, and
// `chaos` (or the smaller of the two when not given) under chaos, where every run is many
// times slower: the random yields give the core away, for a whole time slice on a busy host.
std::size_t stress_size(std::size_t release, std::size_t sanitized, std::size_t chaos = 0) {
  const std::size_t size = scaled(release, sanitized);
  if (!chaos_run()) {
    return size;
  }
  return std::min(size, chaos == 0 ? sanitized : chaos);
}

// How long a whole stress run may take before it counts as hung. Under chaos every random yield
// can cost a whole time slice on a busy host, so the limit is larger there; a lost wakeup
// still fails the test, only later.
std::chrono::steady_clock::duration stress_limit() { return chaos_run() ? 60s : generous; }

// --- exactly once --------------------------------------------------------------------------

// One step, done with its index; counts its steps and closes in per-index slots.
class counted_process final : public process {
 public:
  counted_process(std::size_t index, std::vector<std::atomic<std::uint8_t>>& steps,
                  std::vector<std::atomic<std::uint8_t>>& closes, countdown& closed)
      : index_(index), steps_(steps), closes_(closes), closed_(closed) {}
  void init(context&, std::string_view, std::string_view) override {}
  void step(std::span<event>, step_output& out) override {
    steps_[index_].fetch_add(1, std::memory_order_relaxed);
    out.done(std::to_string(index_));
  }
  void close() noexcept override {
    closes_[index_].fetch_add(1, std::memory_order_relaxed);
    closed_.arrive();
  }

 private:
  std::size_t index_;
  std::vector<std::atomic<std::uint8_t>>& steps_;
  std::vector<std::atomic<std::uint8_t>>& closes_;
  countdown& closed_;
};

void expect_exactly_once(std::size_t workers) {
  constexpr std::size_t submitters = 4;
  const std::size_t count = stress_size(1'000'000, 50'000, 2'000);
  std::vector<std::atomic<std::uint8_t>> steps(count);
  std::vector<std::atomic<std::uint8_t>> closes(count);
  countdown closed(count);
  // Every 64th handle is kept to check that results reach their own handles.
  std::vector<std::vector<std::pair<std::size_t, process_handle>>> sampled(submitters);
  std::atomic<std::size_t> refused{0};
  runtime engine({.workers = workers});
  std::vector<std::thread> threads;
  for (std::size_t thread = 0; thread < submitters; ++thread) {
    threads.emplace_back([&, thread] {
      for (std::size_t index = thread; index < count; index += submitters) {
        try {
          process_handle handle =
              engine.submit(std::make_unique<counted_process>(index, steps, closes, closed));
          if (index % 64 == thread) {
            sampled[thread].emplace_back(index, std::move(handle));
          }
        } catch (...) {
          refused.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  ASSERT_EQ(refused.load(), 0u);
  EXPECT_TRUE(closed.wait_for(stress_limit())) << closed.arrived() << " of " << count << " closed";
  for (const auto& handles : sampled) {
    for (const auto& [index, handle] : handles) {
      ASSERT_EQ(handle.wait_for(stress_limit()), std::to_string(index));
    }
  }
  stop_and_check_clean(engine);
  std::size_t wrong = 0;
  for (std::size_t index = 0; index < count; ++index) {
    if (steps[index].load() != 1 || closes[index].load() != 1) {
      if (++wrong <= 5) {
        ADD_FAILURE() << "process " << index << ": " << int(steps[index].load()) << " steps, "
                      << int(closes[index].load()) << " closes";
      }
    }
  }
  EXPECT_EQ(wrong, 0u);
  EXPECT_GE(engine.stats().steps, count);
}

TEST_F(ProcsStress, ExactlyOnceCompletionAndCloseOn1Worker) { expect_exactly_once(1); }
TEST_F(ProcsStress, ExactlyOnceCompletionAndCloseOn2Workers) { expect_exactly_once(2); }
TEST_F(ProcsStress, ExactlyOnceCompletionAndCloseOn8Workers) { expect_exactly_once(8); }

// --- one step at a time --------------------------------------------------------------------

// Many processes on 8 workers, each yielding commands completed by other threads and poking a
// partner with messages at every step, so that wakeups from all sides race each other. The
// scripted process records any step that begins while another of its steps is running (and
// any step or close out of order); TSan checks that each step happens-after the previous one.
TEST_F(ProcsStress, NoProcessIsEverSteppedByTwoWorkersAtOnce) {
  const std::size_t processes = stress_size(32, 16);
  const std::size_t rounds = stress_size(100, 50);
  completer_threads completers(4);
  std::vector<std::atomic<pid>> pids(processes);
  std::atomic<std::size_t> wrong_data{0};
  std::atomic<std::size_t> pokes{0};
  runtime engine({.workers = 8});
  engine.on_command("work", [&](const command& asked, completion done) {
    completers.hand_over(std::move(done), asked.payload);
  });
  std::vector<process_handle> handles;
  for (std::size_t index = 0; index < processes; ++index) {
    handles.push_back(engine.submit(
        scripted({.step = [&, index, next_tag = std::uint64_t{0}, completed = std::size_t{0},
                           outstanding = 0](context& self, std::span<event> events,
                                            step_output& out) mutable {
          bool got_completion = next_tag == 0;
          for (const event& arrived : events) {
            if (arrived.type == event_type::yield_complete) {
              if (arrived.error || arrived.data != std::to_string(arrived.tag)) {
                wrong_data.fetch_add(1);
              }
              ++completed;
              --outstanding;
              got_completion = true;
            } else if (arrived.type == event_type::message) {
              pokes.fetch_add(1, std::memory_order_relaxed);
            }
          }
          if (completed >= rounds) {
            out.done();
            return;
          }
          // Poked only for completions: pokes answering pokes would circulate forever.
          const pid partner = pids[(index + 1) % processes].load(std::memory_order_acquire);
          if (got_completion && partner != weft::procs::no_pid) {
            self.owner().try_send(partner, "poke", self.self());
          }
          while (outstanding < 2) {
            ++next_tag;
            out.yield("work", next_tag, std::to_string(next_tag));
            ++outstanding;
          }
          if (next_tag % 5 == 0) {
            out.keep_running();
          }
        }})));
    pids[index].store(handles.back().id(), std::memory_order_release);
  }
  for (const process_handle& handle : handles) {
    ASSERT_NO_THROW(handle.wait_for(stress_limit()));
  }
  completers.shut_down();
  stop_and_check_clean(engine);
  EXPECT_EQ(wrong_data.load(), 0u);
  EXPECT_GT(pokes.load(), 0u);
}

// --- lost wakeups --------------------------------------------------------------------------

// Each round the process announces, at the end of its step, that it is about to end it, and
// lingers until the test thread has seen that; the test thread then sends after a delay that
// varies from round to round, so that over the rounds the message lands all across the worker's
// end of the step and what follows it:
//   wait: the transition of the process to idle; a lost wakeup leaves the round waiting forever;
//   keep_running: the requeueing of the process (which drops a `notified` set meanwhile: the
//     requeued run must drain the message anyway); a lost message leaves the process running
//     forever. There, the steps between a round's first and its message just run again.
// Each message must arrive, once, in one of the process's next steps.
void expect_no_message_lost_racing_the_end_of_a_step(weft::procs::step_status ending) {
  const std::size_t rounds = stress_size(10000, 2000, 1000);
  std::atomic<std::size_t> waiting_in_round{0};
  std::atomic<std::size_t> sending_in_round{0};
  runtime engine({.workers = 2});
  process_handle handle = engine.submit(
      scripted({.step = [&, received = std::size_t{0}](context&, std::span<event> events,
                                                       step_output& out) mutable {
        for (const event& arrived : events) {
          if (arrived.type == event_type::message) {
            ++received;
          }
        }
        if (received == rounds) {
          out.done(std::to_string(received));
          return;
        }
        if (waiting_in_round.load(std::memory_order_relaxed) < received + 1) {
          waiting_in_round.store(received + 1, std::memory_order_release);
          spin_until([&] { return sending_in_round.load() >= received + 1; });
        }
        if (ending == weft::procs::step_status::keep_running) {
          out.keep_running();
        }
      }}));
  for (std::size_t round = 1; round <= rounds; ++round) {
    ASSERT_TRUE(spin_until([&] { return waiting_in_round.load() >= round; }))
        << "round " << round << " was never reached";
    sending_in_round.store(round);
    for (std::size_t delay = 0; delay < round % 256; ++delay) {
      std::atomic_signal_fence(std::memory_order_seq_cst);  // keeps the delay loop
    }
    engine.send(handle.id(), "wake");
  }
  EXPECT_EQ(handle.wait_for(stress_limit()), std::to_string(rounds));
  stop_and_check_clean(engine);
}

TEST_F(ProcsStress, NoWakeupIsLostWhenAMessageRacesTheIdleTransition) {
  expect_no_message_lost_racing_the_end_of_a_step(weft::procs::step_status::wait);
}

TEST_F(ProcsStress, NoMessageIsLostWhenItRacesAKeepRunningStep) {
  expect_no_message_lost_racing_the_end_of_a_step(weft::procs::step_status::keep_running);
}

// The same race with a completion: the handler parks it, the test thread completes it at once,
// while the worker is still ending the yielding step.
TEST_F(ProcsStress, NoWakeupIsLostWhenACompletionRacesTheIdleTransition) {
  const std::size_t rounds = stress_size(10000, 2000, 1000);
  completion_box box;
  runtime engine({.workers = 2});
  engine.on_command("hold", [&](const command&, completion done) { box.put(std::move(done)); });
  process_handle handle = engine.submit(
      scripted({.step = [&, completed = std::size_t{0}](context&, std::span<event> events,
                                                        step_output& out) mutable {
        for (const event& arrived : events) {
          if (arrived.type == event_type::yield_complete) {
            ++completed;
          }
        }
        if (completed == rounds) {
          out.done(std::to_string(completed));
          return;
        }
        out.yield("hold", completed + 1);
      }}));
  for (std::size_t round = 1; round <= rounds; ++round) {
    std::optional<completion> held = box.take();
    ASSERT_TRUE(held.has_value()) << "round " << round << " was never woken";
    ASSERT_EQ(held->tag(), round);
    held->complete();
  }
  EXPECT_EQ(handle.wait_for(stress_limit()), std::to_string(rounds));
  stop_and_check_clean(engine);
}

// --- tags ----------------------------------------------------------------------------------

// Processes yield batches of commands with distinct tags; four threads complete them in
// whatever order they get them. Each completion must come back once, to its own process, with
// the data of its own yield.
TEST_F(ProcsStress, CompletionsFromManyThreadsFindTheirYields) {
  const std::size_t processes = stress_size(32, 8);
  const std::size_t batches = stress_size(100, 30);
  constexpr std::size_t batch = 8;
  completer_threads completers(4);
  std::atomic<std::size_t> wrong{0};
  runtime engine({.workers = 4});
  engine.on_command("tagged", [&](const command& asked, completion done) {
    completers.hand_over(std::move(done), asked.payload);
  });
  std::vector<process_handle> handles;
  for (std::size_t index = 0; index < processes; ++index) {
    handles.push_back(engine.submit(
        scripted({.step = [&, index, outstanding = std::unordered_set<std::uint64_t>(),
                           started = std::size_t{0}](context&, std::span<event> events,
                                                     step_output& out) mutable {
          for (const event& arrived : events) {
            if (arrived.type != event_type::yield_complete) {
              continue;
            }
            // Unknown or seen twice, or another yield's data: a misrouted completion.
            if (outstanding.erase(arrived.tag) != 1 || arrived.error ||
                arrived.data != std::to_string(arrived.tag)) {
              wrong.fetch_add(1);
            }
          }
          if (!outstanding.empty()) {
            return;
          }
          if (started == batches) {
            out.done();
            return;
          }
          for (std::size_t slot = 0; slot < batch; ++slot) {
            const std::uint64_t tag = (std::uint64_t{index} << 32) | (started * batch + slot + 1);
            out.yield("tagged", tag, std::to_string(tag));
            outstanding.insert(tag);
          }
          ++started;
        }})));
  }
  for (const process_handle& handle : handles) {
    ASSERT_NO_THROW(handle.wait_for(stress_limit()));
  }
  completers.shut_down();
  stop_and_check_clean(engine);
  EXPECT_EQ(wrong.load(), 0u);
}

// --- overflow ------------------------------------------------------------------------------

// One step submits far more children than a worker's local queue holds: the rest must spill
// somewhere they still run (to the global queue), exactly once each.
void expect_children_beyond_the_local_queue_all_run(std::size_t workers) {
  const std::size_t children = stress_size(20000, 5000, 2000);
  countdown ran(children);
  std::atomic<std::size_t> runs{0};
  runtime engine({.workers = workers, .local_queue_capacity = 64});
  process_handle parent =
      engine.submit(scripted({.step = [&](context& self, std::span<event>, step_output& out) {
        for (std::size_t index = 0; index < children; ++index) {
          self.owner().submit(std::function<std::string()>([&] {
            runs.fetch_add(1);
            ran.arrive();
            return std::string();
          }));
        }
        out.done();
      }}));
  EXPECT_NO_THROW(parent.wait_for(stress_limit()));
  EXPECT_TRUE(ran.wait_for(stress_limit())) << ran.arrived() << " of " << children << " ran";
  stop_and_check_clean(engine);
  EXPECT_EQ(runs.load(), children);
}

TEST_F(ProcsStress, ChildrenBeyondTheLocalQueueAllRunOn1Worker) {
  expect_children_beyond_the_local_queue_all_run(1);
}
TEST_F(ProcsStress, ChildrenBeyondTheLocalQueueAllRunOn4Workers) {
  expect_children_beyond_the_local_queue_all_run(4);
}

// --- the same under WEFT_PROCS_CHAOS=1 -----------------------------------------------------

// Runs this test executable again on the tests matching `filter`, with WEFT_PROCS_CHAOS=1 in
// its environment; returns its wait status.
int rerun_with_chaos(const std::string& filter) {
  std::vector<std::string> environment;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string_view variable(*entry);
    if (variable.starts_with("WEFT_PROCS_CHAOS=") || variable.starts_with("GTEST_OUTPUT=")) {
      continue;  // the child must not overwrite the parent's report
    }
    environment.emplace_back(variable);
  }
  environment.emplace_back("WEFT_PROCS_CHAOS=1");
  std::vector<char*> environment_pointers;
  for (std::string& variable : environment) {
    environment_pointers.push_back(variable.data());
  }
  environment_pointers.push_back(nullptr);
  std::string program = "/proc/self/exe";
  std::string filter_flag = "--gtest_filter=" + filter;
  char* arguments[] = {program.data(), filter_flag.data(), nullptr};
  pid_t child = 0;
  const int spawned = ::posix_spawn(&child, program.c_str(), nullptr, nullptr, arguments,
                                    environment_pointers.data());
  if (spawned != 0) {
    ADD_FAILURE() << "posix_spawn of the test executable failed: " << std::strerror(spawned);
    return -1;
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) {
      ADD_FAILURE() << "waitpid failed: " << std::strerror(errno);
      return -1;
    }
  }
  return status;
}

void expect_passes_with_chaos(const std::string& test_name) {
  const int status = rerun_with_chaos("ProcsStress." + test_name);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "ProcsStress." << test_name << " failed with WEFT_PROCS_CHAOS=1 (wait status " << status
      << "); its output is above";
}

TEST(ProcsStressChaos, ExactlyOnceCompletionAndCloseOn1Worker) {
  expect_passes_with_chaos("ExactlyOnceCompletionAndCloseOn1Worker");
}
TEST(ProcsStressChaos, ExactlyOnceCompletionAndCloseOn2Workers) {
  expect_passes_with_chaos("ExactlyOnceCompletionAndCloseOn2Workers");
}
TEST(ProcsStressChaos, ExactlyOnceCompletionAndCloseOn8Workers) {
  expect_passes_with_chaos("ExactlyOnceCompletionAndCloseOn8Workers");
}
TEST(ProcsStressChaos, NoProcessIsEverSteppedByTwoWorkersAtOnce) {
  expect_passes_with_chaos("NoProcessIsEverSteppedByTwoWorkersAtOnce");
}
TEST(ProcsStressChaos, NoWakeupIsLostWhenAMessageRacesTheIdleTransition) {
  expect_passes_with_chaos("NoWakeupIsLostWhenAMessageRacesTheIdleTransition");
}
TEST(ProcsStressChaos, NoWakeupIsLostWhenACompletionRacesTheIdleTransition) {
  expect_passes_with_chaos("NoWakeupIsLostWhenACompletionRacesTheIdleTransition");
}
TEST(ProcsStressChaos, NoMessageIsLostWhenItRacesAKeepRunningStep) {
  expect_passes_with_chaos("NoMessageIsLostWhenItRacesAKeepRunningStep");
}
TEST(ProcsStressChaos, CompletionsFromManyThreadsFindTheirYields) {
  expect_passes_with_chaos("CompletionsFromManyThreadsFindTheirYields");
}

TEST(ProcsStressChaos, ChildrenBeyondTheLocalQueueAllRunOn1Worker) {
  expect_passes_with_chaos("ChildrenBeyondTheLocalQueueAllRunOn1Worker");
}
TEST(ProcsStressChaos, ChildrenBeyondTheLocalQueueAllRunOn4Workers) {
  expect_passes_with_chaos("ChildrenBeyondTheLocalQueueAllRunOn4Workers");
}

}  // namespace

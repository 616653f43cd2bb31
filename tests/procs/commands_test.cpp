// Commands: what a step yields reaches the handler registered for its type, and the handler's
// completion (inline or later, from any thread, a value or an error, or dropped) comes back to
// the yielding process as a yield_complete event carrying the yield's tag. A process is never
// left waiting for a completion that nobody can deliver.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "procs/procs_support.hpp"
#include "weft/error.hpp"

namespace {

using namespace procs_test;
using weft::procs::unknown_command_error;
using ProcsCommands = contract_checked;

// What a yield came back with, as the process saw it.
struct yield_outcome {
  std::uint64_t tag = 0;
  std::string data;
  std::exception_ptr error;
};

// A process that yields `commands` in its first step and finishes once every one came back,
// recording the outcomes in arrival order.
std::unique_ptr<process> yielder(std::vector<command> commands,
                                 std::vector<yield_outcome>& outcomes) {
  return scripted({.step = [commands = std::move(commands), &outcomes, started = false](
                               context&, std::span<event> events, step_output& out) mutable {
    if (!started) {
      started = true;
      for (const command& each : commands) {
        out.yield(each.type, each.tag, each.payload);
      }
      return;
    }
    for (event& arrived : events) {
      if (arrived.type == event_type::yield_complete) {
        outcomes.push_back({arrived.tag, std::move(arrived.data), arrived.error});
      }
    }
    if (outcomes.size() == commands.size()) {
      out.done();
    }
  }});
}

TEST_F(ProcsCommands, AHandlerCompletingInlineDeliversTheResult) {
  std::vector<std::string> handled;
  std::vector<yield_outcome> outcomes;
  runtime engine({.workers = 2});
  engine.on_command("lookup", [&](const command& asked, completion done) {
    handled.push_back(asked.type + "/" + std::to_string(asked.tag) + "/" + asked.payload);
    EXPECT_TRUE(done.pending());
    EXPECT_EQ(done.tag(), asked.tag);
    done.complete("value of " + asked.payload);
    EXPECT_FALSE(done.pending());
  });
  process_handle handle = engine.submit(yielder({{"lookup", 7, "account 12"}}, outcomes));
  EXPECT_EQ(handle.wait_for(generous), "");
  stop_and_check_clean(engine);
  EXPECT_EQ(handled, std::vector<std::string>{"lookup/7/account 12"});
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_EQ(outcomes[0].tag, 7u);
  EXPECT_EQ(outcomes[0].data, "value of account 12");
  EXPECT_FALSE(outcomes[0].error);
}

TEST_F(ProcsCommands, AHandlerCompletingLaterFromAnotherThreadDeliversTheResult) {
  completion_box box;
  std::vector<yield_outcome> outcomes;
  runtime engine({.workers = 2});
  engine.on_command("slow", [&](const command&, completion done) { box.put(std::move(done)); });
  process_handle handle = engine.submit(yielder({{"slow", 3, ""}}, outcomes));
  std::optional<completion> held = box.take();
  ASSERT_TRUE(held.has_value()) << "the handler never ran";
  EXPECT_EQ(held->target(), handle.id());
  EXPECT_FALSE(handle.done()) << "the process waits for its command";
  std::thread later([done = std::move(*held)]() mutable { done.complete("finally"); });
  later.join();
  handle.wait_for(generous);
  stop_and_check_clean(engine);
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_EQ(outcomes[0].tag, 3u);
  EXPECT_EQ(outcomes[0].data, "finally");
}

// Three yields completed in reverse order: each tag comes back with its own data, in the
// order of the completions.
TEST_F(ProcsCommands, TagsCorrelateCompletionsWithTheirYields) {
  completion_box box;
  std::vector<std::string> payloads_by_tag(4);
  std::vector<yield_outcome> outcomes;
  runtime engine({.workers = 2});
  engine.on_command("fetch", [&](const command& asked, completion done) {
    payloads_by_tag[asked.tag] = asked.payload;
    box.put(std::move(done));
  });
  process_handle handle = engine.submit(
      yielder({{"fetch", 1, "first"}, {"fetch", 2, "second"}, {"fetch", 3, "third"}}, outcomes));
  ASSERT_TRUE(box.wait_for_count(3));
  std::vector<completion> held = box.take_all();
  ASSERT_EQ(held.size(), 3u);
  std::reverse(held.begin(), held.end());
  for (completion& done : held) {
    done.complete(payloads_by_tag[done.tag()] + " done");
  }
  handle.wait_for(generous);
  stop_and_check_clean(engine);
  ASSERT_EQ(outcomes.size(), 3u);
  EXPECT_EQ(outcomes[0].tag, 3u);
  EXPECT_EQ(outcomes[0].data, "third done");
  EXPECT_EQ(outcomes[1].tag, 2u);
  EXPECT_EQ(outcomes[1].data, "second done");
  EXPECT_EQ(outcomes[2].tag, 1u);
  EXPECT_EQ(outcomes[2].data, "first done");
}

TEST_F(ProcsCommands, AnUnknownCommandCompletesWithUnknownCommandError) {
  std::vector<yield_outcome> outcomes;
  runtime engine({.workers = 2});
  process_handle handle = engine.submit(yielder({{"teleport", 9, "to mars"}}, outcomes));
  handle.wait_for(generous);  // not hung
  stop_and_check_clean(engine);
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_EQ(outcomes[0].tag, 9u);
  EXPECT_TRUE(outcomes[0].data.empty());
  EXPECT_TRUE(holds<unknown_command_error>(outcomes[0].error)) << message_of(outcomes[0].error);
  EXPECT_NE(message_of(outcomes[0].error).find("teleport"), std::string::npos)
      << "the message names the command: " << message_of(outcomes[0].error);
}

TEST_F(ProcsCommands, ADroppedCompletionFailsTheYield) {
  std::vector<yield_outcome> outcomes;
  runtime engine({.workers = 2});
  engine.on_command("forgetful", [](const command&, completion) {});
  process_handle handle = engine.submit(yielder({{"forgetful", 4, ""}}, outcomes));
  handle.wait_for(generous);
  stop_and_check_clean(engine);
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_EQ(outcomes[0].tag, 4u);
  ASSERT_TRUE(outcomes[0].error) << "a dropped completion must fail the yield";
  EXPECT_TRUE(holds<weft::error>(outcomes[0].error)) << message_of(outcomes[0].error);
  const std::string message = message_of(outcomes[0].error);
  EXPECT_NE(message.find("forgetful"), std::string::npos) << message;
  EXPECT_NE(message.find("dropped"), std::string::npos) << message;
}

TEST_F(ProcsCommands, ACompletionDroppedLaterOnAnotherThreadFailsTheYield) {
  completion_box box;
  std::vector<yield_outcome> outcomes;
  runtime engine({.workers = 2});
  engine.on_command("lost", [&](const command&, completion done) { box.put(std::move(done)); });
  process_handle handle = engine.submit(yielder({{"lost", 5, ""}}, outcomes));
  std::optional<completion> held = box.take();
  ASSERT_TRUE(held.has_value());
  std::thread([done = std::move(*held)] {}).join();  // destroyed there, never completed
  handle.wait_for(generous);
  stop_and_check_clean(engine);
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_NE(message_of(outcomes[0].error).find("dropped"), std::string::npos)
      << message_of(outcomes[0].error);
}

TEST_F(ProcsCommands, FailWithAReasonCarriesTheMessage) {
  std::vector<yield_outcome> outcomes;
  runtime engine({.workers = 2});
  engine.on_command("charge", [](const command&, completion done) {
    done.fail(std::string_view("card declined"));
  });
  process_handle handle = engine.submit(yielder({{"charge", 1, ""}}, outcomes));
  handle.wait_for(generous);
  stop_and_check_clean(engine);
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_TRUE(holds<weft::error>(outcomes[0].error)) << message_of(outcomes[0].error);
  EXPECT_NE(message_of(outcomes[0].error).find("card declined"), std::string::npos)
      << message_of(outcomes[0].error);
  EXPECT_TRUE(outcomes[0].data.empty());
}

struct gateway_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

TEST_F(ProcsCommands, FailWithAnExceptionKeepsItsType) {
  std::vector<yield_outcome> outcomes;
  runtime engine({.workers = 2});
  engine.on_command("charge", [](const command&, completion done) {
    done.fail(std::make_exception_ptr(gateway_error("gateway down")));
  });
  process_handle handle = engine.submit(yielder({{"charge", 1, ""}}, outcomes));
  handle.wait_for(generous);
  stop_and_check_clean(engine);
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_TRUE(holds<gateway_error>(outcomes[0].error));
  EXPECT_EQ(message_of(outcomes[0].error), "gateway down");
}

TEST_F(ProcsCommands, ARegisteredHandlerCanBeReplaced) {
  std::vector<yield_outcome> outcomes;
  runtime engine({.workers = 2});
  engine.on_command("greet", [](const command&, completion done) { done.complete("old"); });
  engine.on_command("greet", [](const command&, completion done) { done.complete("new"); });
  process_handle handle = engine.submit(yielder({{"greet", 1, ""}}, outcomes));
  handle.wait_for(generous);
  stop_and_check_clean(engine);
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_EQ(outcomes[0].data, "new");
}

// One process yields again and again; each completion comes from another thread that
// completes it as soon as it gets it, racing the worker that is just ending the step with
// `wait`. A completion lost in that race would leave the process waiting forever.
TEST_F(ProcsCommands, ACompletionRacingTheEndOfTheStepIsNeverLost) {
  const std::size_t rounds = scaled(10000, 2000);
  completer_threads completers(1);
  runtime engine({.workers = 2});
  engine.on_command("race", [&](const command& asked, completion done) {
    completers.hand_over(std::move(done), asked.payload);
  });
  std::atomic<std::size_t> mismatched{0};
  process_handle handle = engine.submit(
      scripted({.step = [&, next = std::uint64_t{0}, outstanding = false](
                            context&, std::span<event> events, step_output& out) mutable {
        for (const event& arrived : events) {
          if (arrived.type != event_type::yield_complete) {
            continue;
          }
          if (arrived.tag != next || arrived.data != std::to_string(next)) {
            mismatched.fetch_add(1);
          }
          outstanding = false;
        }
        if (outstanding) {
          return;
        }
        if (next == rounds) {
          out.done(std::to_string(next));
          return;
        }
        ++next;
        out.yield("race", next, std::to_string(next));
        outstanding = true;
      }}));
  EXPECT_EQ(handle.wait_for(generous), std::to_string(rounds));
  completers.shut_down();
  stop_and_check_clean(engine);
  EXPECT_EQ(mismatched.load(), 0u);
}

// The process that yielded is terminated while its command is out; the slot goes to a new
// process. Completing the old command later must reach nobody, least of all the newcomer.
TEST_F(ProcsCommands, ACompletionOutlivingItsProcessIsDroppedNotMisrouted) {
  completion_box box;
  std::atomic<int> misrouted{0};
  std::vector<yield_outcome> outcomes;
  runtime engine({.workers = 1});
  engine.on_command("hold", [&](const command&, completion done) { box.put(std::move(done)); });
  process_handle yielding = engine.submit(yielder({{"hold", 1, ""}}, outcomes));
  std::optional<completion> held = box.take();
  ASSERT_TRUE(held.has_value());
  engine.terminate(yielding.id());
  EXPECT_TRUE(holds<weft::cancelled_error>(error_of(yielding)));
  // Newcomers submitted from a step on the same (only) worker take the slots that worker freed
  // last, so one of them gets the ended process's slot.
  std::vector<process_handle> newcomers;
  process_handle spawner =
      engine.submit(scripted({.step = [&](context& self, std::span<event>, step_output& out) {
        submit_slot_heirs(self, 8, event_type::yield_complete, misrouted, newcomers);
        out.done();
      }}));
  spawner.wait_for(generous);
  // The pid's low half is its slot: one newcomer should have inherited the ended one's.
  const auto slot_of = [](pid id) { return static_cast<std::uint32_t>(id); };
  EXPECT_TRUE(std::any_of(newcomers.begin(), newcomers.end(), [&](const process_handle& newcomer) {
    return slot_of(newcomer.id()) == slot_of(yielding.id());
  })) << "no newcomer took the slot, so this run proves little";
  EXPECT_EQ(held->target(), yielding.id());
  held->complete("for the terminated process");
  held.reset();
  for (const process_handle& newcomer : newcomers) {
    engine.cancel(newcomer.id());
    newcomer.wait_for(generous);
  }
  stop_and_check_clean(engine);
  EXPECT_EQ(misrouted.load(), 0) << "a completion for an ended process reached another one";
  EXPECT_TRUE(outcomes.empty()) << "the terminated process stepped again";
}

TEST_F(ProcsCommands, CompletingTwiceIsMisuse) {
  std::vector<yield_outcome> outcomes;
  std::atomic<int> second_refused{0};
  runtime engine({.workers = 2});
  engine.on_command("once", [&](const command&, completion done) {
    done.complete("first");
    try {
      done.complete("second");
    } catch (const std::logic_error&) {
      second_refused.fetch_add(1);
    }
    try {
      done.fail(std::string_view("third"));
    } catch (const std::logic_error&) {
      second_refused.fetch_add(1);
    }
  });
  process_handle handle = engine.submit(yielder({{"once", 1, ""}}, outcomes));
  handle.wait_for(generous);
  stop_and_check_clean(engine);
  EXPECT_EQ(second_refused.load(), 2);
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_EQ(outcomes[0].data, "first");
}

// Handlers may call back into the runtime: a message sent to the yielding process from its
// handler arrives before the completion the handler delivers after it.
TEST_F(ProcsCommands, AHandlerMaySendToTheYieldingProcessBeforeCompleting) {
  std::vector<std::string> seen;
  runtime engine({.workers = 2});
  engine.on_command("notify_then_complete", [&engine](const command&, completion done) {
    engine.send(done.target(), "from the handler");
    done.complete("completed");
  });
  process_handle handle = engine.submit(scripted(
      {.step = [&, started = false](context&, std::span<event> events, step_output& out) mutable {
        if (!started) {
          started = true;
          out.yield("notify_then_complete", 1);
          return;
        }
        for (const event& arrived : events) {
          seen.push_back(arrived.data);
        }
        if (seen.size() == 2) {
          out.done();
        }
      }}));
  handle.wait_for(generous);
  stop_and_check_clean(engine);
  EXPECT_EQ(seen, (std::vector<std::string>{"from the handler", "completed"}));
}

// Registering handlers while processes yield commands of other types: each yield still finds
// the handler of its type (TSan checks the registration is published safely).
TEST_F(ProcsCommands, HandlersCanBeRegisteredWhileProcessesRun) {
  const int processes = static_cast<int>(scaled(64, 16));
  std::atomic<int> wrong{0};
  runtime engine({.workers = 2});
  engine.on_command("steady",
                    [](const command& asked, completion done) { done.complete(asked.payload); });
  std::vector<process_handle> handles;
  for (int index = 0; index < processes; ++index) {
    handles.push_back(engine.submit(scripted(
        {.step = [&, round = 0](context&, std::span<event> events, step_output& out) mutable {
          for (const event& arrived : events) {
            if (arrived.type == event_type::yield_complete &&
                (arrived.error || arrived.data != std::to_string(arrived.tag))) {
              wrong.fetch_add(1);
            }
          }
          if (round == 50) {
            out.done();
            return;
          }
          ++round;
          out.yield("steady", static_cast<std::uint64_t>(round), std::to_string(round));
        }})));
  }
  for (int index = 0; index < 50; ++index) {
    engine.on_command("extra " + std::to_string(index),
                      [](const command&, completion done) { done.complete(); });
  }
  for (const process_handle& handle : handles) {
    handle.wait_for(generous);
  }
  stop_and_check_clean(engine);
  EXPECT_EQ(wrong.load(), 0);
}

// A completion still held when stop() forced its process: completing it (or dropping it) later,
// while the stopped runtime still exists, reaches nobody and throws nothing.
TEST_F(ProcsCommands, CompletionsHeldPastStopAreHarmless) {
  completion_box box;
  std::vector<yield_outcome> outcomes;
  runtime engine({.workers = 2});
  engine.on_command("hold", [&](const command&, completion done) { box.put(std::move(done)); });
  process_handle first = engine.submit(yielder({{"hold", 1, ""}}, outcomes));
  process_handle second = engine.submit(yielder({{"hold", 2, ""}}, outcomes));
  ASSERT_TRUE(box.wait_for_count(2));
  std::vector<completion> held = box.take_all();
  EXPECT_FALSE(engine.stop(10ms)) << "both waited on their commands, so both were forced";
  EXPECT_EQ(engine.live(), 0u);
  EXPECT_TRUE(holds<weft::cancelled_error>(error_of(first)));
  EXPECT_TRUE(holds<weft::cancelled_error>(error_of(second)));
  EXPECT_NO_THROW(held[0].complete("too late"));
  EXPECT_NO_THROW(held.clear());  // the second one dropped unfinished
  EXPECT_TRUE(outcomes.empty());
}

// Completions may outlive the runtime: completed or dropped after it is destroyed, they are
// dropped (ASan checks nothing freed is touched).
TEST_F(ProcsCommands, CompletionsMayOutliveTheRuntime) {
  completion_box box;
  std::vector<yield_outcome> outcomes;
  process_handle handle;
  std::vector<completion> held;
  {
    runtime engine({.workers = 2});
    engine.on_command("hold", [&](const command&, completion done) { box.put(std::move(done)); });
    handle = engine.submit(yielder({{"hold", 1, ""}, {"hold", 2, ""}}, outcomes));
    ASSERT_TRUE(box.wait_for_count(2));
    held = box.take_all();
    EXPECT_FALSE(engine.stop(10ms));
  }
  ASSERT_EQ(held.size(), 2u);
  EXPECT_NO_THROW(held[0].complete("after the end"));
  EXPECT_NO_THROW(held.clear());
  EXPECT_TRUE(holds<weft::cancelled_error>(error_of(handle)));
  EXPECT_TRUE(outcomes.empty());
}

}  // namespace

// A process's life as its author relies on it: init refuses unknown entry points, a step's
// status decides what happens next (done, fail, keep_running, a throw), events arrive in order,
// close() runs exactly once whatever the ending, and the handle reports the outcome.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <latch>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "procs/procs_support.hpp"
#include "weft/error.hpp"

namespace {

using namespace procs_test;
using ProcsProcess = contract_checked;

TEST_F(ProcsProcess, InitRefusingTheMethodFailsTheHandleWithItsExceptionWithoutAStep) {
  std::atomic<int> steps{0};
  std::atomic<int> closes{0};
  runtime engine({.workers = 2});
  process_handle handle =
      engine.submit(scripted({.init = accept_only("main"),
                              .step =
                                  [&](context&, std::span<event>, step_output& out) {
                                    steps.fetch_add(1);
                                    out.done();
                                  },
                              .close = [&] { closes.fetch_add(1); }}),
                    "no_such_method");
  try {
    handle.wait_for(generous);
    ADD_FAILURE() << "a refused init should fail the handle";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("no_such_method"), std::string::npos) << error.what();
  }
  stop_and_check_clean(engine);
  EXPECT_EQ(steps.load(), 0) << "no step after a refused init";
  EXPECT_EQ(closes.load(), 1) << "close() runs once even when init refused";
}

TEST_F(ProcsProcess, InitSeesTheMethodAndInputItWasSubmittedWith) {
  std::string seen;
  runtime engine({.workers = 2});
  process_handle handle = engine.submit(
      scripted({.init =
                    [&](context& self, std::string_view method, std::string_view input) {
                      EXPECT_NE(self.self(), weft::procs::no_pid);
                      EXPECT_EQ(&self.owner(), &engine);
                      seen = std::string(method) + "(" + std::string(input) + ")";
                    },
                .step = [&](context&, std::span<event>,
                            step_output& out) { out.done("result of " + seen); }}),
      "transfer", "42 coins");
  EXPECT_EQ(handle.wait_for(generous), "result of transfer(42 coins)");
  stop_and_check_clean(engine);
}

TEST_F(ProcsProcess, DoneResultReachesWait) {
  runtime engine({.workers = 2});
  process_handle handle =
      engine.submit(scripted({.step = [](context&, std::span<event>, step_output& out) {
        out.done("the answer is 42");
      }}));
  EXPECT_EQ(handle.wait_for(generous), "the answer is 42");
  EXPECT_TRUE(handle.done());
  EXPECT_EQ(handle.wait(), "the answer is 42") << "waiting again gives the same result";
  stop_and_check_clean(engine);
}

TEST_F(ProcsProcess, FailWithAReasonBecomesTheHandlesError) {
  runtime engine({.workers = 2});
  process_handle handle =
      engine.submit(scripted({.step = [](context&, std::span<event>, step_output& out) {
        out.fail("the ledger does not balance");
      }}));
  std::exception_ptr error = error_of(handle);
  ASSERT_TRUE(error) << "fail() should fail the handle";
  EXPECT_TRUE(holds<weft::error>(error)) << message_of(error);
  EXPECT_NE(message_of(error).find("the ledger does not balance"), std::string::npos)
      << message_of(error);
  stop_and_check_clean(engine);
}

struct ledger_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

TEST_F(ProcsProcess, FailWithAnExceptionKeepsItsType) {
  runtime engine({.workers = 2});
  process_handle handle =
      engine.submit(scripted({.step = [](context&, std::span<event>, step_output& out) {
        out.fail(std::make_exception_ptr(ledger_error("overdrawn")));
      }}));
  EXPECT_THROW(
      {
        try {
          handle.wait_for(generous);
        } catch (const ledger_error& error) {
          EXPECT_STREQ(error.what(), "overdrawn");
          throw;
        }
      },
      ledger_error);
  stop_and_check_clean(engine);
}

TEST_F(ProcsProcess, AThrowingStepFailsTheProcessWithThatException) {
  std::atomic<int> steps{0};
  std::atomic<int> closes{0};
  runtime engine({.workers = 2});
  process_handle handle =
      engine.submit(scripted({.step =
                                  [&](context&, std::span<event>, step_output& out) {
                                    if (steps.fetch_add(1) == 0) {
                                      out.keep_running();
                                      return;
                                    }
                                    throw ledger_error("thrown in the second step");
                                  },
                              .close = [&] { closes.fetch_add(1); }}));
  std::exception_ptr error = error_of(handle);
  EXPECT_TRUE(holds<ledger_error>(error)) << message_of(error);
  EXPECT_EQ(message_of(error), "thrown in the second step");
  stop_and_check_clean(engine);
  EXPECT_EQ(steps.load(), 2) << "no step after the throwing one";
  EXPECT_EQ(closes.load(), 1);
}

TEST_F(ProcsProcess, KeepRunningStepsAgainWithoutAnyEvent) {
  int steps = 0;  // plain: the steps of one process happen-after each other
  runtime engine({.workers = 2});
  process_handle handle =
      engine.submit(scripted({.step = [&](context&, std::span<event> events, step_output& out) {
        EXPECT_TRUE(events.empty()) << "nobody sent anything";
        if (++steps == 100) {
          out.done(std::to_string(steps));
        } else {
          out.keep_running();
        }
      }}));
  EXPECT_EQ(handle.wait_for(generous), "100");
  stop_and_check_clean(engine);
}

// Messages sent to itself during a step, then a command completed inline right after the
// step: the next steps see them in exactly that order.
TEST_F(ProcsProcess, EventsComeInArrivalOrder) {
  runtime engine({.workers = 2});
  engine.on_command("echo", [](const command& asked, completion done) {
    done.complete("echo of " + asked.payload);
  });
  std::vector<std::string> seen;
  process_handle handle =
      engine.submit(scripted({.step = [&, started = false](context& self, std::span<event> events,
                                                           step_output& out) mutable {
        if (!started) {
          started = true;
          for (int index = 1; index <= 5; ++index) {
            self.owner().send(self.self(), "message " + std::to_string(index));
          }
          out.yield("echo", 77, "ping");
          out.wait();
          return;
        }
        for (event& arrived : events) {
          if (arrived.type == event_type::message) {
            seen.push_back(std::move(arrived.data));
          } else if (arrived.type == event_type::yield_complete) {
            EXPECT_EQ(arrived.tag, 77u);
            seen.push_back(std::move(arrived.data));
          }
        }
        if (seen.size() == 6) {
          out.done();
        }
      }}));
  handle.wait_for(generous);
  stop_and_check_clean(engine);
  EXPECT_EQ(seen, (std::vector<std::string>{"message 1", "message 2", "message 3", "message 4",
                                            "message 5", "echo of ping"}));
}

// Every way of ending, a thousand processes: each one's close() runs exactly once.
TEST_F(ProcsProcess, CloseRunsExactlyOncePerProcessWhateverTheEnding) {
  constexpr int count = 1000;
  std::vector<std::atomic<int>> closes(count);
  std::vector<process_handle> handles;
  runtime engine({.workers = 4});
  for (int index = 0; index < count; ++index) {
    const int ending = index % 5;
    script actions{.init = accept_only("main"),
                   .step =
                       [ending, polls = 0](context&, std::span<event>, step_output& out) mutable {
                         switch (ending) {
                           case 0:
                             out.done("fine");
                             break;
                           case 1:
                             out.fail("refused");
                             break;
                           case 2:
                             throw ledger_error("thrown");
                           default:
                             if (++polls < 3) {
                               out.keep_running();
                             } else {
                               out.done("after three steps");
                             }
                         }
                       },
                   .close = [&closes, index] { closes[index].fetch_add(1); }};
    // Every fifth process (ending 4 with an odd index) is refused at init instead.
    const bool refused = ending == 4 && index % 2 == 1;
    handles.push_back(engine.submit(scripted(std::move(actions)), refused ? "wrong" : "main"));
  }
  int succeeded = 0;
  int failed = 0;
  for (process_handle& handle : handles) {
    if (error_of(handle)) {
      ++failed;
    } else {
      ++succeeded;
    }
  }
  stop_and_check_clean(engine);
  EXPECT_EQ(succeeded + failed, count);
  EXPECT_EQ(failed, count / 5 * 2 + count / 10);
  for (int index = 0; index < count; ++index) {
    ASSERT_EQ(closes[index].load(), 1) << "process " << index << " closed a wrong number of times";
  }
}

TEST_F(ProcsProcess, APlainFunctionIsAOneStepProcess) {
  runtime engine({.workers = 2});
  process_handle fine = engine.submit(std::function<std::string()>([] { return "computed"; }));
  process_handle broken = engine.submit(
      std::function<std::string()>([]() -> std::string { throw ledger_error("no input"); }));
  EXPECT_NE(fine.id(), weft::procs::no_pid);
  EXPECT_EQ(fine.wait_for(generous), "computed");
  std::exception_ptr error = error_of(broken);
  EXPECT_TRUE(holds<ledger_error>(error)) << message_of(error);
  EXPECT_EQ(message_of(error), "no input");
  stop_and_check_clean(engine);
}

TEST_F(ProcsProcess, IdsAreDistinctAndNonZeroAlsoAcrossReusedSlots) {
  std::set<pid> ids;
  constexpr int rounds = 10;
  constexpr int per_round = 100;
  runtime engine({.workers = 2});
  for (int round = 0; round < rounds; ++round) {
    std::vector<process_handle> handles;
    for (int index = 0; index < per_round; ++index) {
      handles.push_back(engine.submit(std::function<std::string()>([] { return ""; })));
      EXPECT_TRUE(handles.back().valid());
      EXPECT_NE(handles.back().id(), weft::procs::no_pid);
      ids.insert(handles.back().id());
    }
    // Finishing them frees their slots for the next round's processes.
    for (process_handle& handle : handles) {
      handle.wait_for(generous);
    }
  }
  EXPECT_EQ(ids.size(), static_cast<std::size_t>(rounds * per_round))
      << "a pid was handed out twice";
  stop_and_check_clean(engine);
}

// The context handed to init is the process object's own: a process may keep a reference to
// it for its whole life, and self() is the pid its handle names, through every step and across
// slots reused by earlier processes.
class context_keeper : public weft::procs::process {
 public:
  void init(context& self, std::string_view, std::string_view) override {
    const auto* begin = reinterpret_cast<const char*>(this);
    const auto* where = reinterpret_cast<const char*>(&self);
    inside_ = where >= begin && where < begin + sizeof(*this);
    kept_ = &self;
  }
  void step(std::span<event>, step_output& out) override {
    if (++steps_ < 4) {
      out.keep_running();
      return;
    }
    // The result names the pid the context held and whether it stayed put.
    out.done(std::to_string(kept_->self()) + (inside_ ? " inside" : " outside"));
  }

 private:
  context* kept_ = nullptr;
  bool inside_ = false;
  int steps_ = 0;
};

TEST_F(ProcsProcess, TheContextIsTheProcessObjectsOwnAndNamesItsPidForItsWholeLife) {
  runtime engine({.workers = 2});
  for (int round = 0; round < 3; ++round) {
    std::vector<process_handle> handles;
    for (int index = 0; index < 50; ++index) {
      handles.push_back(engine.submit(std::make_unique<context_keeper>()));
    }
    for (process_handle& handle : handles) {
      EXPECT_EQ(handle.wait_for(generous), std::to_string(handle.id()) + " inside");
    }
  }
  stop_and_check_clean(engine);
}

TEST_F(ProcsProcess, WaitForTimesOutAndTheProcessKeepsRunning) {
  runtime engine({.workers = 2});
  process_handle handle =
      engine.submit(scripted({.step = [](context&, std::span<event> events, step_output& out) {
        for (event& arrived : events) {
          if (arrived.type == event_type::message) {
            out.done("woken by " + arrived.data);
            return;
          }
        }
        out.wait();
      }}));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(handle.wait_for(20ms), weft::timeout_error);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 20ms);
  EXPECT_FALSE(handle.done()) << "a timed-out wait leaves the process running";
  engine.send(handle.id(), "the test");
  EXPECT_EQ(handle.wait_for(generous), "woken by the test");
  stop_and_check_clean(engine);
}

TEST_F(ProcsProcess, ManyThreadsWaitingOnCopiesOfOneHandleAllGetTheResult) {
  runtime engine({.workers = 2});
  process_handle handle =
      engine.submit(scripted({.step = [](context&, std::span<event> events, step_output& out) {
        for (event& arrived : events) {
          if (arrived.type == event_type::message) {
            out.done(std::move(arrived.data));
          }
        }
      }}));
  std::atomic<int> got_it{0};
  std::latch waiting(4);
  std::vector<std::thread> waiters;
  for (int index = 0; index < 4; ++index) {
    waiters.emplace_back([&, copy = handle] {
      waiting.count_down();
      if (copy.wait_for(generous) == "for everyone") {
        got_it.fetch_add(1);
      }
    });
  }
  waiting.wait();
  engine.send(handle.id(), "for everyone");
  for (std::thread& waiter : waiters) {
    waiter.join();
  }
  EXPECT_EQ(got_it.load(), 4);
  stop_and_check_clean(engine);
}

// duration::max() is how callers spell "no limit": it must not overflow into a deadline in the
// past (a timeout_error at once).
TEST_F(ProcsProcess, WaitForWithTheLargestLimitWaitsForTheEnd) {
  std::atomic<bool> about_to_wait{false};
  runtime engine({.workers = 2});
  process_handle handle =
      engine.submit(scripted({.step = [](context&, std::span<event> events, step_output& out) {
        for (event& arrived : events) {
          if (arrived.type == event_type::message) {
            out.done(std::move(arrived.data));
          }
        }
      }}));
  std::thread sender([&] {
    spin_until([&] { return about_to_wait.load(); });
    engine.send(handle.id(), "the end");
  });
  about_to_wait.store(true);
  std::string result;
  EXPECT_NO_THROW(result = handle.wait_for(std::chrono::steady_clock::duration::max()));
  sender.join();
  EXPECT_EQ(handle.wait_for(generous), "the end");
  EXPECT_EQ(result, "the end");
  stop_and_check_clean(engine);
}

// step_output on its own: wait by default, the last status call wins, yields keep their order,
// and clear() forgets everything but the capacity (so no payload leaks into the next step).
TEST_F(ProcsProcess, StepOutputRecordsAStepAndClearsForTheNext) {
  step_output out;
  EXPECT_EQ(out.status(), weft::procs::step_status::wait);
  EXPECT_TRUE(out.commands().empty());
  out.yield("fetch", 1, "a long payload that must not leak into the next step");
  out.yield("store", 2);
  out.keep_running();
  out.done("finished");
  EXPECT_EQ(out.status(), weft::procs::step_status::done);
  EXPECT_EQ(out.result(), "finished");
  ASSERT_EQ(out.commands().size(), 2u);
  EXPECT_EQ(out.commands()[0].type, "fetch");
  EXPECT_EQ(out.commands()[0].tag, 1u);
  EXPECT_EQ(out.commands()[1].type, "store");
  EXPECT_EQ(out.commands()[1].payload, "");
  out.clear();
  EXPECT_EQ(out.status(), weft::procs::step_status::wait);
  EXPECT_TRUE(out.commands().empty());
  EXPECT_EQ(out.result(), "");
  EXPECT_FALSE(out.error());
  out.yield("store", 3);
  ASSERT_EQ(out.commands().size(), 1u);
  EXPECT_EQ(out.commands()[0].payload, "") << "a reused command kept the old payload";
  out.fail("broken");
  EXPECT_EQ(out.status(), weft::procs::step_status::failed);
  EXPECT_NE(message_of(out.error()).find("broken"), std::string::npos);
}

TEST_F(ProcsProcess, AnEmptyHandleIsNotValidAndWaitingOnItIsMisuse) {
  process_handle empty;
  EXPECT_FALSE(empty.valid());
  EXPECT_EQ(empty.id(), weft::procs::no_pid);
  EXPECT_THROW(empty.wait(), std::logic_error);
  EXPECT_THROW(empty.wait_for(1ms), std::logic_error);
}

TEST_F(ProcsProcess, SubmittingNothingOrRegisteringAnEmptyHandlerIsMisuse) {
  runtime engine({.workers = 1});
  EXPECT_THROW(engine.submit(std::unique_ptr<process>()), std::logic_error);
  EXPECT_THROW(engine.submit(std::function<std::string()>()), std::logic_error);
  EXPECT_THROW(engine.on_command("empty", weft::procs::command_handler()), std::logic_error);
  stop_and_check_clean(engine);
}

TEST_F(ProcsProcess, ALocalQueueCapacityThatIsNotAPowerOfTwoIsMisuse) {
  EXPECT_THROW(runtime({.workers = 2, .local_queue_capacity = 100}), std::logic_error);
}

TEST_F(ProcsProcess, ZeroWorkersMeansOnePerHardwareThread) {
  runtime engine;
  EXPECT_EQ(engine.workers(), std::max(1u, std::thread::hardware_concurrency()));
  stop_and_check_clean(engine);
}

// Options at their edges (zeros, a one-slot queue) are either refused as misuse when the
// runtime is made, or they work: a process submitted from outside, one submitted from a step
// and a ping-pong between the two all finish.
TEST_F(ProcsProcess, EdgeOptionsAreRefusedOrWork) {
  const std::vector<std::pair<std::string, runtime_options>> cases = {
      {"global_batch = 0", runtime_options{.workers = 1, .global_batch = 0}},
      {"global_queue_interval = 0", runtime_options{.workers = 1, .global_queue_interval = 0}},
      {"next_slot_limit = 0", runtime_options{.workers = 1, .next_slot_limit = 0}},
      {"local_queue_capacity = 1", runtime_options{.workers = 2, .local_queue_capacity = 1}},
      {"local_queue_capacity = 0", runtime_options{.workers = 2, .local_queue_capacity = 0}},
      {"spin_time = 0, yield_rounds = 0",
       runtime_options{.workers = 2, .spin_time = 0us, .yield_rounds = 0}},
  };

  for (const auto& [name, options] : cases) {
    SCOPED_TRACE(name);
    std::unique_ptr<runtime> engine;
    try {
      engine = std::make_unique<runtime>(options);
    } catch (const std::logic_error&) {
      continue;  // refused as misuse: fine
    }
    process_handle parent =
        engine->submit(scripted({.step = [](context& self, std::span<event>, step_output& out) {
          process_handle child = self.owner().submit(
              std::function<std::string()>([] { return std::string("child"); }));
          out.done(std::to_string(child.id()));
        }}));
    std::string child_id;
    EXPECT_NO_THROW(child_id = parent.wait_for(5s));
    std::atomic<int> closes{0};
    process_handle waiting = engine->submit(wait_for_cancel(closes));
    engine->cancel(waiting.id());
    EXPECT_NO_THROW(waiting.wait_for(5s));
    stop_and_check_clean(*engine);
  }
}

}  // namespace

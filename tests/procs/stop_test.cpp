// Ending processes and the runtime: cancel asks once, terminate ends at once, stop cancels
// everything, waits its grace, forces the stubborn and joins its workers; after stop nothing
// is accepted, and work racing stop either takes effect or is refused, never lost or hung.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <latch>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "procs/procs_support.hpp"
#include "weft/error.hpp"

namespace {

using namespace procs_test;
using weft::procs::runtime_stopped_error;
using weft::procs::unknown_process_error;
using ProcsStop = contract_checked;

std::size_t threads_of_this_process() {
  std::size_t count = 0;
  for ([[maybe_unused]] const auto& entry :
       std::filesystem::directory_iterator("/proc/self/task")) {
    ++count;
  }
  return count;
}

// On its cancel it yields a command and finishes only when that completes, so it keeps
// stepping after the cancel: a second cancel event would be seen and counted.
std::unique_ptr<process> cooperative(std::atomic<int>& cancels, std::atomic<int>& closes) {
  return scripted({.step =
                       [&cancels](context&, std::span<event> events, step_output& out) {
                         for (const event& arrived : events) {
                           if (arrived.type == event_type::cancel) {
                             cancels.fetch_add(1);
                             out.yield("wind_down", 1);
                           } else if (arrived.type == event_type::yield_complete) {
                             out.done("wound down");
                           }
                         }
                       },
                   .close = [&closes] { closes.fetch_add(1); }});
}

TEST_F(ProcsStop, StopCancelsEveryProcessOnceAndCooperativeOnesFinish) {
  constexpr int count = 200;
  std::atomic<int> cancels{0};
  std::atomic<int> closes{0};
  runtime engine({.workers = 4});
  engine.on_command("wind_down", [](const command&, completion done) { done.complete(); });
  std::vector<process_handle> handles;
  for (int index = 0; index < count; ++index) {
    handles.push_back(engine.submit(cooperative(cancels, closes)));
  }
  EXPECT_EQ(engine.live(), static_cast<std::size_t>(count));
  EXPECT_TRUE(engine.stop(generous)) << "every process finished by itself";
  EXPECT_EQ(engine.live(), 0u);
  EXPECT_EQ(cancels.load(), count) << "exactly one cancel event per process";
  EXPECT_EQ(closes.load(), count);
  for (const process_handle& handle : handles) {
    EXPECT_TRUE(handle.done()) << "stop returned before a process finished";
    EXPECT_EQ(handle.wait_for(generous), "wound down");
  }
}

TEST_F(ProcsStop, ASecondCancelIsANoOp) {
  completion_box box;
  std::atomic<int> cancels{0};
  std::atomic<int> closes{0};
  runtime engine({.workers = 2});
  engine.on_command("wind_down",
                    [&](const command&, completion done) { box.put(std::move(done)); });
  process_handle handle = engine.submit(cooperative(cancels, closes));
  engine.cancel(handle.id());
  std::optional<completion> winding = box.take();  // it handled the first cancel
  ASSERT_TRUE(winding.has_value());
  engine.cancel(handle.id());
  winding->complete();
  EXPECT_EQ(handle.wait_for(generous), "wound down");
  stop_and_check_clean(engine);
  EXPECT_EQ(cancels.load(), 1);
  EXPECT_EQ(closes.load(), 1);
}

// A process that ignores its cancel: it keeps waiting for events that never come, or keeps
// running forever.
std::unique_ptr<process> stubborn(bool keeps_running, std::atomic<int>& steps,
                                  std::atomic<int>& closes) {
  return scripted({.step =
                       [keeps_running, &steps](context&, std::span<event>, step_output& out) {
                         steps.fetch_add(1);
                         if (keeps_running) {
                           out.keep_running();
                         } else {
                           out.wait();
                         }
                       },
                   .close = [&closes] { closes.fetch_add(1); }});
}

void expect_forced_at_the_deadline(bool keeps_running) {
  std::atomic<int> steps{0};
  std::atomic<int> closes{0};
  std::atomic<int> cooperative_closes{0};
  runtime engine({.workers = 2});
  process_handle obstinate = engine.submit(stubborn(keeps_running, steps, closes));
  process_handle polite = engine.submit(wait_for_cancel(cooperative_closes, "bye"));
  ASSERT_TRUE(spin_until([&] { return steps.load() >= 1; }));
  constexpr auto grace = 50ms;
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(engine.stop(grace)) << "a process had to be forced";
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, grace) << "stop forced before the grace ran out";
  EXPECT_LT(took, grace + 5s) << "stop overran its grace by far";
  EXPECT_EQ(engine.live(), 0u);
  EXPECT_EQ(closes.load(), 1);
  EXPECT_EQ(cooperative_closes.load(), 1);
  const int steps_at_stop = steps.load();
  std::exception_ptr error = error_of(obstinate);
  EXPECT_TRUE(holds<weft::cancelled_error>(error)) << message_of(error);
  EXPECT_EQ(polite.wait_for(generous), "bye") << "the cooperative one finished by itself";
  EXPECT_EQ(steps.load(), steps_at_stop) << "no step after stop returned";
}

TEST_F(ProcsStop, AStubbornWaitingProcessIsForcedAtTheDeadline) {
  expect_forced_at_the_deadline(false);
}

TEST_F(ProcsStop, AStubbornRunningProcessIsForcedAtTheDeadline) {
  expect_forced_at_the_deadline(true);
}

TEST_F(ProcsStop, SubmitAndSendAfterStopThrowRuntimeStopped) {
  std::atomic<int> closes{0};
  runtime engine({.workers = 2});
  process_handle handle = engine.submit(wait_for_cancel(closes));
  stop_and_check_clean(engine);
  EXPECT_THROW(engine.submit(wait_for_cancel(closes)), runtime_stopped_error);
  EXPECT_THROW(engine.submit(std::function<std::string()>([] { return ""; })),
               runtime_stopped_error);
  EXPECT_THROW(engine.send(handle.id(), "late"), runtime_stopped_error);
  EXPECT_THROW(engine.try_send(handle.id(), "late"), runtime_stopped_error)
      << "try_send only turns unknown_process_error into false";
  EXPECT_EQ(closes.load(), 1) << "the refused process was never started, so never closed";
}

// Threads keep submitting and sending while the main thread stops the runtime: every
// submit either succeeds (and its process ends, closed once) or throws runtime_stopped_error.
TEST_F(ProcsStop, SubmitAndSendRacingStopTakeEffectOrAreRefused) {
  constexpr int threads = 4;
  std::atomic<int> closes{0};
  std::atomic<int> submitted{0};
  std::atomic<int> unexpected{0};
  std::vector<std::vector<process_handle>> accepted(threads);
  runtime engine({.workers = 2});
  std::vector<std::thread> racers;
  for (int index = 0; index < threads; ++index) {
    racers.emplace_back([&, index] {
      for (;;) {
        try {
          process_handle handle = engine.submit(wait_for_cancel(closes));
          accepted[index].push_back(handle);
          submitted.fetch_add(1);
          engine.send(handle.id(), "hello");
        } catch (const runtime_stopped_error&) {
          return;
        } catch (const unknown_process_error&) {
          // The send lost to stop's cancel: the process already finished. Keep racing.
        } catch (...) {
          unexpected.fetch_add(1);
          return;
        }
      }
    });
  }
  ASSERT_TRUE(spin_until([&] { return submitted.load() >= 200; }));
  EXPECT_TRUE(engine.stop(generous));
  for (std::thread& racer : racers) {
    racer.join();
  }
  EXPECT_EQ(unexpected.load(), 0);
  EXPECT_EQ(engine.live(), 0u);
  int resolved = 0;
  for (const auto& handles : accepted) {
    for (const process_handle& handle : handles) {
      EXPECT_EQ(handle.wait_for(generous), "cancelled");
      ++resolved;
    }
  }
  EXPECT_EQ(resolved, submitted.load());
  EXPECT_EQ(closes.load(), submitted.load()) << "each accepted process closed exactly once";
}

TEST_F(ProcsStop, TheDestructorStopsAndHandlesOutliveTheRuntime) {
  std::atomic<int> closes{0};
  process_handle handle;
  {
    runtime engine({.workers = 2});
    handle = engine.submit(wait_for_cancel(closes, "ended by the destructor"));
  }
  EXPECT_EQ(closes.load(), 1);
  EXPECT_TRUE(handle.done());
  EXPECT_EQ(handle.wait(), "ended by the destructor");
}

TEST_F(ProcsStop, TerminateEndsAWaitingProcessWithCancelledError) {
  std::atomic<int> steps{0};
  std::atomic<int> closes{0};
  runtime engine({.workers = 2});
  process_handle handle = engine.submit(stubborn(false, steps, closes));
  ASSERT_TRUE(spin_until([&] { return steps.load() >= 1; }));
  engine.terminate(handle.id());
  std::exception_ptr error = error_of(handle);
  EXPECT_TRUE(holds<weft::cancelled_error>(error)) << message_of(error);
  EXPECT_FALSE(engine.try_send(handle.id(), "after the end"));
  stop_and_check_clean(engine);
  EXPECT_EQ(closes.load(), 1);
  EXPECT_EQ(steps.load(), 1) << "no step after terminate";
}

TEST_F(ProcsStop, TerminateEndsARunningProcessAfterItsCurrentStep) {
  std::atomic<int> steps{0};
  std::atomic<int> closes{0};
  runtime engine({.workers = 2});
  process_handle handle = engine.submit(stubborn(true, steps, closes));
  ASSERT_TRUE(spin_until([&] { return steps.load() >= 10; }));
  engine.terminate(handle.id());
  std::exception_ptr error = error_of(handle);
  EXPECT_TRUE(holds<weft::cancelled_error>(error)) << message_of(error);
  stop_and_check_clean(engine);  // the fixture checks close ran after the last step, once
  EXPECT_EQ(closes.load(), 1);
}

TEST_F(ProcsStop, TerminateOrCancelOfAnUnknownPidThrows) {
  const pid never_issued = (pid{4242} << 32) | 99;
  runtime engine({.workers = 2});
  EXPECT_THROW(engine.terminate(never_issued), unknown_process_error);
  EXPECT_THROW(engine.cancel(never_issued), unknown_process_error);
  for (const auto& [operation, call] :
       {std::pair<std::string, std::function<void()>>{"terminate pid 99.4242",
                                                      [&] { engine.terminate(never_issued); }},
        {"cancel to pid 99.4242", [&] { engine.cancel(never_issued); }}}) {
    try {
      call();
    } catch (const unknown_process_error& error) {
      EXPECT_NE(std::string(error.what()).find(operation + ": no such live process"),
                std::string::npos)
          << error.what();
    }
  }
  process_handle finished = engine.submit(std::function<std::string()>([] { return ""; }));
  finished.wait_for(generous);
  EXPECT_THROW(engine.terminate(finished.id()), unknown_process_error);
  EXPECT_THROW(engine.cancel(finished.id()), unknown_process_error);
  stop_and_check_clean(engine);
}

TEST_F(ProcsStop, StopIsIdempotent) {
  std::atomic<int> closes{0};
  runtime engine({.workers = 2});
  engine.submit(wait_for_cancel(closes));
  EXPECT_TRUE(engine.stop(generous));
  EXPECT_TRUE(engine.stop(generous));
  EXPECT_TRUE(engine.stop(0ms));
  EXPECT_EQ(engine.live(), 0u);
  EXPECT_EQ(closes.load(), 1);
}

TEST_F(ProcsStop, NoWorkerThreadOutlivesStop) {
  // A first thread makes the runtime start what it starts lazily with the first thread (TSan's
  // background thread), so that only the runtime's own threads make a difference below.
  std::thread([] {}).join();
  // A joined thread's task can linger in /proc/self/task for a moment after join() returns
  // (the kernel releases it after the thread has cleared its tid): take the count once it has
  // settled, the lowest seen over a short while.
  std::size_t before = threads_of_this_process();
  for (int look = 0; look < 20; ++look) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    before = std::min(before, threads_of_this_process());
  }
  runtime engine({.workers = 4});
  EXPECT_EQ(engine.workers(), 4u);
  std::atomic<int> closes{0};
  for (int index = 0; index < 16; ++index) {
    engine.submit(wait_for_cancel(closes));
  }
  stop_and_check_clean(engine);
  // The same lingering after stop() joined the workers: wait (bounded) for it to pass.
  const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (threads_of_this_process() > before && std::chrono::steady_clock::now() < limit) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(threads_of_this_process(), before) << "a thread of the runtime is still alive";
  EXPECT_EQ(closes.load(), 16);
}

TEST_F(ProcsStop, StopWithNothingToDoReturnsTrueAtOnce) {
  runtime engine({.workers = 3});
  EXPECT_EQ(engine.live(), 0u);
  stop_and_check_clean(engine);
}

// stop() joins the workers, so from a step it would wait for itself: misuse, not a deadlock.
TEST_F(ProcsStop, StopFromAStepIsMisuse) {
  runtime engine({.workers = 2});
  process_handle handle =
      engine.submit(scripted({.step = [](context& self, std::span<event>, step_output& out) {
        try {
          self.owner().stop(1s);
          out.done("stop returned");
        } catch (const std::logic_error&) {
          out.done("refused");
        }
      }}));
  EXPECT_EQ(handle.wait_for(generous), "refused");
  stop_and_check_clean(engine);
}

// terminate() from the process's own step: the step finishes, nothing after it runs, and the
// outcome is cancelled_error even though the step asked for done.
TEST_F(ProcsStop, TerminatingItselfInAStepEndsItAfterThatStep) {
  std::atomic<int> steps{0};
  std::atomic<int> closes{0};
  runtime engine({.workers = 2});
  process_handle handle =
      engine.submit(scripted({.step =
                                  [&](context& self, std::span<event>, step_output& out) {
                                    steps.fetch_add(1);
                                    self.owner().terminate(self.self());
                                    out.done("asked for done");
                                  },
                              .close = [&] { closes.fetch_add(1); }}));
  std::exception_ptr error = error_of(handle);
  EXPECT_TRUE(holds<weft::cancelled_error>(error)) << message_of(error);
  stop_and_check_clean(engine);
  EXPECT_EQ(steps.load(), 1);
  EXPECT_EQ(closes.load(), 1);
}

// A step terminated while it runs: the commands it yields are dropped, not handed to their
// handlers (terminate means no further effects), and the outcome is cancelled_error.
TEST_F(ProcsStop, CommandsYieldedByATerminatedStepNeverReachTheirHandlers) {
  std::atomic<int> handled{0};
  std::atomic<bool> in_step{false};
  std::atomic<bool> terminated{false};
  std::atomic<int> closes{0};
  runtime engine({.workers = 2});
  engine.on_command("effect", [&](const command&, completion done) {
    handled.fetch_add(1);
    done.complete();
  });
  process_handle handle =
      engine.submit(scripted({.step =
                                  [&](context&, std::span<event>, step_output& out) {
                                    in_step.store(true);
                                    EXPECT_TRUE(spin_until([&] { return terminated.load(); }));
                                    out.yield("effect", 1);
                                    out.wait();
                                  },
                              .close = [&] { closes.fetch_add(1); }}));
  ASSERT_TRUE(spin_until([&] { return in_step.load(); }));
  engine.terminate(handle.id());
  terminated.store(true);
  std::exception_ptr error = error_of(handle);
  EXPECT_TRUE(holds<weft::cancelled_error>(error)) << message_of(error);
  stop_and_check_clean(engine);
  EXPECT_EQ(handled.load(), 0) << "a handler ran for a command of a terminated step";
  EXPECT_EQ(closes.load(), 1);
}

// Processes finishing by themselves (on a message) while other threads terminate them: each
// is closed once and its handle holds either its result or cancelled_error.
TEST_F(ProcsStop, TerminateRacingTheProcessesOwnEndClosesOnce) {
  const int count = static_cast<int>(scaled(2000, 500));
  std::atomic<int> closes{0};
  std::atomic<int> unexpected{0};
  std::vector<process_handle> handles;
  runtime engine({.workers = 4});
  for (int index = 0; index < count; ++index) {
    handles.push_back(
        engine.submit(scripted({.step =
                                    [](context&, std::span<event> events, step_output& out) {
                                      for (const event& arrived : events) {
                                        if (arrived.type == event_type::message) {
                                          out.done("finished by itself");
                                        }
                                      }
                                    },
                                .close = [&] { closes.fetch_add(1); }})));
  }
  std::latch start(2);
  auto race = [&](bool terminates) {
    start.arrive_and_wait();
    for (const process_handle& handle : handles) {
      try {
        if (terminates) {
          engine.terminate(handle.id());
        } else {
          engine.send(handle.id(), "finish");
        }
      } catch (const weft::procs::unknown_process_error&) {
        // The other thread's action ended it first.
      } catch (...) {
        unexpected.fetch_add(1);
      }
    }
  };
  std::thread terminator(race, true);
  std::thread sender(race, false);
  terminator.join();
  sender.join();
  int finished = 0;
  int terminated = 0;
  for (const process_handle& handle : handles) {
    std::exception_ptr error = error_of(handle);
    if (!error) {
      ++finished;
    } else if (holds<weft::cancelled_error>(error)) {
      ++terminated;
    } else {
      ADD_FAILURE() << "unexpected outcome: " << message_of(error);
    }
  }
  stop_and_check_clean(engine);
  EXPECT_EQ(unexpected.load(), 0);
  EXPECT_EQ(finished + terminated, count);
  EXPECT_EQ(closes.load(), count);
}

// A process that submits a child at every step, racing stop: the submits stop being accepted
// (the step sees runtime_stopped_error), and every process that was accepted ends, closed
// once.
TEST_F(ProcsStop, StopEndsProcessesThatKeepSubmittingChildren) {
  std::atomic<int> accepted{0};
  std::atomic<int> refused{0};
  std::atomic<int> closes{0};
  std::function<std::unique_ptr<process>()> make_forker;
  runtime engine({.workers = 2});
  make_forker = [&]() -> std::unique_ptr<process> {
    return scripted({.step =
                         [&](context& self, std::span<event> events, step_output& out) {
                           for (const event& arrived : events) {
                             if (arrived.type == event_type::cancel) {
                               out.done("cancelled");
                               return;
                             }
                           }
                           if (accepted.load() < 2000) {
                             try {
                               self.owner().submit(make_forker());
                               accepted.fetch_add(1);
                             } catch (const weft::procs::runtime_stopped_error&) {
                               refused.fetch_add(1);
                             }
                           }
                           out.keep_running();
                         },
                     .close = [&] { closes.fetch_add(1); }});
  };
  engine.submit(make_forker());
  ASSERT_TRUE(spin_until([&] { return accepted.load() >= 100; }));
  EXPECT_TRUE(engine.stop(generous));
  EXPECT_EQ(engine.live(), 0u);
  EXPECT_EQ(closes.load(), accepted.load() + 1);
}

// "Later calls return at once (true)": also after a first stop that had to force a process.
TEST_F(ProcsStop, AStopAfterAForcedStopReturnsTrueAtOnce) {
  std::atomic<int> steps{0};
  std::atomic<int> closes{0};
  runtime engine({.workers = 2});
  engine.submit(stubborn(false, steps, closes));
  ASSERT_TRUE(spin_until([&] { return steps.load() >= 1; }));
  EXPECT_FALSE(engine.stop(10ms));
  EXPECT_TRUE(engine.stop(generous)) << "a later stop returns true";
  EXPECT_EQ(engine.live(), 0u);
  EXPECT_EQ(closes.load(), 1);
}

// Two threads stopping at once: both return once everything ended, and nothing ends twice.
TEST_F(ProcsStop, ConcurrentStopsBothReturnAfterTheEnd) {
  std::atomic<int> closes{0};
  std::vector<process_handle> handles;
  runtime engine({.workers = 2});
  for (int index = 0; index < 50; ++index) {
    handles.push_back(engine.submit(wait_for_cancel(closes)));
  }
  std::latch start(2);
  std::atomic<int> returned{0};
  auto stopper = [&] {
    start.arrive_and_wait();
    engine.stop(generous);
    EXPECT_EQ(engine.live(), 0u) << "a stop returned before every process ended";
    returned.fetch_add(1);
  };
  std::thread first(stopper);
  std::thread second(stopper);
  first.join();
  second.join();
  EXPECT_EQ(returned.load(), 2);
  EXPECT_EQ(closes.load(), 50);
  for (const process_handle& handle : handles) {
    EXPECT_TRUE(handle.done());
  }
}

// duration::max() as the grace means "wait as long as it takes": it must not overflow into a
// deadline in the past, which would force processes that were about to finish.
TEST_F(ProcsStop, StopWithTheLargestGraceWaitsForCooperativeProcesses) {
  std::atomic<int> cancels{0};
  std::atomic<int> closes{0};
  completer_threads completers(1);
  std::vector<process_handle> handles;
  runtime engine({.workers = 2});
  engine.on_command("wind_down", [&](const command&, completion done) {
    completers.hand_over(std::move(done), "");
  });
  for (int index = 0; index < 20; ++index) {
    handles.push_back(engine.submit(cooperative(cancels, closes)));
  }
  EXPECT_TRUE(engine.stop(std::chrono::steady_clock::duration::max()))
      << "cooperative processes were forced";
  EXPECT_EQ(engine.live(), 0u);
  for (const process_handle& handle : handles) {
    std::exception_ptr error = error_of(handle);
    EXPECT_FALSE(error) << "forced: " << message_of(error);
  }
  EXPECT_EQ(closes.load(), 20);
}

// terminate() while init() is running: init finishes, but no step follows ("no further step").
TEST_F(ProcsStop, TerminateDuringInitPreventsEveryStep) {
  std::atomic<bool> in_init{false};
  std::atomic<bool> release_init{false};
  std::atomic<int> steps{0};
  std::atomic<int> closes{0};
  runtime engine({.workers = 2});
  process_handle handle =
      engine.submit(scripted({.init =
                                  [&](context&, std::string_view, std::string_view) {
                                    in_init.store(true);
                                    spin_until([&] { return release_init.load(); });
                                  },
                              .step =
                                  [&](context&, std::span<event>, step_output& out) {
                                    steps.fetch_add(1);
                                    out.done("stepped");
                                  },
                              .close = [&] { closes.fetch_add(1); }}));
  ASSERT_TRUE(spin_until([&] { return in_init.load(); }));
  engine.terminate(handle.id());
  release_init.store(true);
  std::exception_ptr error = error_of(handle);
  EXPECT_TRUE(holds<weft::cancelled_error>(error)) << message_of(error);
  stop_and_check_clean(engine);
  EXPECT_EQ(steps.load(), 0) << "a step ran after terminate()";
  EXPECT_EQ(closes.load(), 1);
}

}  // namespace

// runtime::spawn, the handle-less start: the pid works at once, the process runs and closes
// like a submitted one, and a failure nobody can wait for still reaches someone
// (on_detached_failure, or stderr). Also what a spawn relies on underneath: process objects
// from the small-block cache (alignment, placement new), and a woken worker that finds work at
// once no longer passes for a searcher (which kept the other workers asleep).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "procs/procs_support.hpp"
#include "weft/error.hpp"

namespace {

using namespace procs_test;
using ProcsSpawn = contract_checked;

TEST_F(ProcsSpawn, TheProcessRunsClosesOnceAndItsPidTakesMessagesAtOnce) {
  std::atomic<int> closes{0};
  countdown finished(1);
  std::string received;
  runtime engine({.workers = 2});
  pid id = engine.spawn(scripted({.step =
                                      [&](context&, std::span<event> events, step_output& out) {
                                        for (event& arrived : events) {
                                          if (arrived.type == event_type::message) {
                                            received = std::move(arrived.data);
                                            out.done("ignored: nobody holds a handle");
                                            finished.arrive();
                                            return;
                                          }
                                        }
                                        out.wait();
                                      },
                                  .close = [&] { closes.fetch_add(1); }}));
  ASSERT_NE(id, weft::procs::no_pid);
  engine.send(id, "hello");  // before or after its first step: either way it is delivered
  ASSERT_TRUE(finished.wait_for(generous));
  ASSERT_TRUE(spin_until([&] { return engine.live() == 0; }));
  EXPECT_EQ(received, "hello");
  EXPECT_EQ(closes.load(), 1);
  EXPECT_FALSE(engine.try_send(id, "late")) << "a finished detached process takes no messages";
  stop_and_check_clean(engine);
}

TEST_F(ProcsSpawn, SpawnSeesTheMethodAndInputItWasGiven) {
  std::mutex guard;
  std::vector<std::string> seen;
  countdown done(3);
  auto recorder = [&] {
    return scripted({.init =
                         [&](context&, std::string_view method, std::string_view input) {
                           std::lock_guard lock(guard);
                           seen.push_back(std::string(method) + "(" + std::string(input) + ")");
                         },
                     .step =
                         [&](context&, std::span<event>, step_output& out) {
                           out.done();
                           done.arrive();
                         }});
  };
  runtime engine({.workers = 1});
  engine.spawn(recorder());
  engine.spawn(recorder(), "other");
  engine.spawn(recorder(), "main", "with input");
  ASSERT_TRUE(done.wait_for(generous));
  stop_and_check_clean(engine);
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<std::string>{"main()", "main(with input)", "other()"}));
}

TEST_F(ProcsSpawn, AFailureGoesToOnDetachedFailureOnceWithItsPidButACancelDoesNot) {
  std::mutex guard;
  std::vector<std::pair<pid, std::string>> reported;
  std::atomic<int> closes{0};
  runtime_options options{.workers = 2};
  options.on_detached_failure = [&](pid id, std::exception_ptr error) {
    std::lock_guard lock(guard);
    reported.emplace_back(id, message_of(error));
  };
  runtime engine(std::move(options));
  pid thrower = engine.spawn(scripted({.step = [](context&, std::span<event>, step_output&) {
    throw std::runtime_error("step threw");
  }}));
  pid failer = engine.spawn(scripted(
      {.step = [](context&, std::span<event>, step_output& out) { out.fail("step failed"); }}));
  pid refused = engine.spawn(scripted({.init = accept_only("main")}), "unknown_method");
  pid terminated = engine.spawn(wait_for_cancel(closes));
  pid cancelled =
      engine.spawn(scripted({.step = [](context&, std::span<event> events, step_output& out) {
        for (const event& arrived : events) {
          if (arrived.type == event_type::cancel) {
            out.fail(std::make_exception_ptr(weft::cancelled_error("asked to")));
            return;
          }
        }
        out.wait();
      }}));
  engine.terminate(terminated);
  engine.cancel(cancelled);
  ASSERT_TRUE(spin_until([&] { return engine.live() == 0; }));
  stop_and_check_clean(engine);
  std::sort(reported.begin(), reported.end());
  std::vector<std::pair<pid, std::string>> expected{{thrower, "step threw"},
                                                    {failer, "step failed"},
                                                    {refused, "unknown method 'unknown_method'"}};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(reported, expected) << "cancelled_error endings are not failures to report";
  EXPECT_EQ(closes.load(), 1);
}

TEST_F(ProcsSpawn, WithoutAHandlerAFailureIsWrittenToStderrWithThePid) {
  testing::internal::CaptureStderr();
  pid failer = weft::procs::no_pid;
  {
    runtime engine({.workers = 1, .name = "spawn-test"});
    failer = engine.spawn([]() -> std::string { throw std::runtime_error("no one to tell"); });
    ASSERT_TRUE(spin_until([&] { return engine.live() == 0; }));
    stop_and_check_clean(engine);
  }
  std::string written = testing::internal::GetCapturedStderr();
  std::string pid_text = "pid " + std::to_string(static_cast<std::uint32_t>(failer)) + "." +
                         std::to_string(failer >> 32);
  EXPECT_NE(written.find("spawn-test: detached process " + pid_text + " failed: no one to tell"),
            std::string::npos)
      << written;
}

TEST_F(ProcsSpawn, MisuseIsRefusedWithAClearError) {
  runtime engine({.workers = 1});
  try {
    engine.spawn(std::unique_ptr<process>{});
    ADD_FAILURE() << "spawn(nullptr) must throw";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("spawn needs a process"), std::string::npos);
  }
  try {
    engine.spawn(std::function<std::string()>{});
    ADD_FAILURE() << "spawn of an empty function must throw";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("spawn needs a function"), std::string::npos);
  }
  stop_and_check_clean(engine);
  EXPECT_THROW(engine.spawn(scripted({})), weft::procs::runtime_stopped_error);
  EXPECT_EQ(engine.live(), 0u);
}

TEST_F(ProcsSpawn, AChainOfSpawnsFromStepsCompletesAndStopCountsEveryLink) {
  // Each link spawns the next from its step (the next-slot path) and finishes; stop() must
  // count every link as live until it closed (per-worker counting), so it returns true only
  // after the last one, and live() ends at 0.
  constexpr int links = 2000;
  std::atomic<int> closes{0};
  countdown last(1);
  std::function<std::unique_ptr<process>(int)> link = [&](int left) {
    return scripted({.step =
                         [&, left](context& self, std::span<event>, step_output& out) {
                           if (left == 0) {
                             last.arrive();
                           } else {
                             self.owner().spawn(link(left - 1));
                           }
                           out.done();
                         },
                     .close = [&] { closes.fetch_add(1); }});
  };
  runtime engine({.workers = 2});
  engine.spawn(link(links - 1));
  ASSERT_TRUE(last.wait_for(generous));
  stop_and_check_clean(engine);
  EXPECT_EQ(closes.load(), links);
}

// --- process objects come from the small-block cache ----------------------------------------

struct alignas(128) over_aligned_process final : process {
  void init(context&, std::string_view, std::string_view) override {}
  void step(std::span<event>, step_output& out) override { out.done(); }
  unsigned char payload[40] = {};
};

struct plain_process final : process {
  explicit plain_process(std::uint64_t value) : value(value) {}
  void init(context&, std::string_view, std::string_view) override {}
  void step(std::span<event>, step_output& out) override { out.done(std::to_string(value)); }
  std::uint64_t value;
};

TEST_F(ProcsSpawn, ProcessObjectsKeepTheirAlignmentAndPlacementNewStillWorks) {
  std::vector<std::unique_ptr<process>> made;
  for (int index = 0; index < 100; ++index) {
    auto object = std::make_unique<over_aligned_process>();
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(object.get()) % 128, 0u);
    made.push_back(std::move(object));
  }
  made.clear();
  alignas(plain_process) unsigned char storage[sizeof(plain_process)];
  auto* placed = new (storage) plain_process(7);
  EXPECT_EQ(static_cast<void*>(placed), static_cast<void*>(storage));
  placed->~plain_process();
}

TEST_F(ProcsSpawn, ProcessObjectsMadeOnOneThreadAndDroppedByTheWorkersStayIntact) {
  // The spawner allocates, the workers free (producer/consumer through the depot): every
  // result must be the value its own object was built with.
  constexpr std::uint64_t count = scaled(20000, 3000);
  runtime engine({.workers = 2});
  std::vector<process_handle> handles;
  handles.reserve(count);
  for (std::uint64_t index = 0; index < count; ++index) {
    handles.push_back(engine.submit(std::make_unique<plain_process>(index * 7919)));
  }
  for (std::uint64_t index = 0; index < count; ++index) {
    ASSERT_EQ(handles[index].wait_for(generous), std::to_string(index * 7919));
  }
  stop_and_check_clean(engine);
}

// --- idle protocol ----------------------------------------------------------------------------

TEST_F(ProcsSpawn, AWorkerWokenForWorkDoesNotKeepTheOthersAsleep) {
  // Both workers park. A submission wakes one, which takes the process from the global queue
  // and runs it: a step that holds its worker until a second process has run. The second
  // submission must wake the other worker. Before the fix the first one still counted as
  // searching, so nobody was woken and the first step waited out its limit.
  runtime engine({.workers = 2, .spin_time = std::chrono::microseconds(0), .yield_rounds = 0});
  ASSERT_TRUE(spin_until([&] { return engine.stats().parks >= 2; }));
  std::atomic<bool> second_ran{false};
  std::atomic<bool> first_started{false};
  process_handle first = engine.submit([&]() -> std::string {
    first_started.store(true);
    bool met = spin_until([&] { return second_ran.load(); }, generous);
    return met ? "met" : "second never ran while the first held its worker";
  });
  ASSERT_TRUE(spin_until([&] { return first_started.load(); }));
  process_handle second = engine.submit([&]() -> std::string {
    second_ran.store(true);
    return "ran";
  });
  EXPECT_EQ(first.wait_for(generous * 2), "met");
  EXPECT_EQ(second.wait_for(generous), "ran");
  stop_and_check_clean(engine);
}

}  // namespace

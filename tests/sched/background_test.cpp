// spawn_options::background: coroutines that do not keep run() going.
#include <chrono>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::run_clean;

TEST(Background, RunEndsWhenOnlyBackgroundCoroutinesAreLeftAndTheirCleanupRuns) {
  int ticks = 0;
  bool cleaned_up = false;
  std::string reason;
  auto start = std::chrono::steady_clock::now();
  run_clean([&] {
    weft::spawn(
        [&] {
          try {
            for (;;) {
              weft::sleep_for(1ms);
              ++ticks;
            }
          } catch (const weft::cancelled_error& error) {
            reason = error.reason();
            cleaned_up = true;
            throw;
          }
        },
        {.name = "healthcheck", .background = true});
    weft::sleep_for(20ms);
  });
  EXPECT_TRUE(cleaned_up);
  EXPECT_NE(reason.find("every foreground coroutine has ended"), std::string::npos) << reason;
  EXPECT_GT(ticks, 0) << "the background coroutine ran while main was alive";
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST(Background, ABackgroundSleepDoesNotHideADeadlock) {
  // Two foreground coroutines awaiting each other are deadlocked even while a background
  // coroutine sleeps: its timer does not count as something that could wake them.
  weft::run_options options;
  options.deadlock_reporter = [](std::string_view) {};
  weft::scheduler scheduler(std::move(options));
  weft_test::clean_end_check check(scheduler);
  auto start = std::chrono::steady_clock::now();
  EXPECT_THROW(scheduler.run([] {
    weft::spawn([] { weft::sleep_for(1h); }, {.background = true});
    weft::task<void> first;
    weft::task<void> second;
    first = weft::spawn([&] { second.await(); });
    second = weft::spawn([&] { first.await(); });
    first.await();
  }),
               weft::deadlock_error);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST(Background, ForegroundCoroutinesStillRunToTheEnd) {
  std::vector<int> finished;
  run_clean([&] {
    weft::spawn([] { weft::sleep_for(1h); }, {.background = true});
    for (int index = 0; index < 3; ++index) {
      weft::spawn([&finished, index] {
        weft::sleep_for(std::chrono::milliseconds(5 * (index + 1)));
        finished.push_back(index);
      });
    }
  });
  EXPECT_EQ(finished.size(), 3u) << "main returning does not end the run early";
}

}  // namespace

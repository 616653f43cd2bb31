// Two priorities: a high-priority coroutine goes to the head of the run queue and runs before
// normal ones queued earlier; among equals, the order they became ready.
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_support.hpp"
#include "weft/weft.hpp"

namespace {

using weft_test::fifo_options;
using weft_test::run_clean;
using log_type = std::vector<std::string>;

weft::spawn_options high(std::string name) {
  return {.name = std::move(name), .priority = weft::priority::high};
}

TEST(Priority, HighPriorityRunsBeforeNormalOnesQueuedEarlier) {
  log_type log;
  run_clean(
      [&] {
        weft::spawn([&] { log.push_back("normal 1"); });
        weft::spawn([&] { log.push_back("normal 2"); });
        weft::spawn([&] { log.push_back("high"); }, high("urgent"));
      },
      fifo_options());
  EXPECT_EQ(log, (log_type{"high", "normal 1", "normal 2"}));
}

TEST(Priority, HighPriorityCoroutinesKeepTheirOrderAmongThemselves) {
  log_type log;
  run_clean(
      [&] {
        weft::spawn([&] { log.push_back("normal"); });
        weft::spawn([&] { log.push_back("high 1"); }, high("h1"));
        weft::spawn([&] { log.push_back("high 2"); }, high("h2"));
        weft::spawn([&] { log.push_back("high 3"); }, high("h3"));
      },
      fifo_options());
  EXPECT_EQ(log, (log_type{"high 1", "high 2", "high 3", "normal"}));
}

TEST(Priority, HighPriorityCoroutineWokenLaterOvertakesReadyNormalOnes) {
  log_type log;
  run_clean(
      [&] {
        auto gate = weft::spawn([&] { log.push_back("gate"); });
        // Waits on gate, so it becomes ready again only when gate ends.
        weft::spawn(
            [&, gate]() mutable {
              gate.await();
              log.push_back("high after gate");
            },
            high("waiter"));
        weft::spawn([&] {
          log.push_back("normal 1");
          weft::yield();
          log.push_back("normal 1 again");
        });
        weft::spawn([&] { log.push_back("normal 2"); });
      },
      fifo_options());
  // The high one runs first and waits; gate runs; the woken high one overtakes normal 1 and 2.
  EXPECT_EQ(log, (log_type{"gate", "high after gate", "normal 1", "normal 2", "normal 1 again"}));
}

TEST(Priority, RandomOrderStillRunsHighPriorityFirst) {
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    log_type log;
    run_clean(
        [&] {
          for (int i = 0; i < 5; ++i) {
            weft::spawn([&log] { log.push_back("normal"); });
          }
          for (int i = 0; i < 3; ++i) {
            weft::spawn([&log] { log.push_back("high"); }, high("h"));
          }
        },
        weft_test::random_options(seed));
    EXPECT_EQ(log,
              (log_type{"high", "high", "high", "normal", "normal", "normal", "normal", "normal"}))
        << "seed " << seed;
  }
}

}  // namespace

// Chaos order: scheduling_order::random (or WEFT_SCHED=random WEFT_SEED=n in the environment)
// picks a random ready coroutine of the highest ready priority, so tests catch order
// assumptions. Every coroutine still runs exactly once; a seed reproduces its order.
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "test_support.hpp"
#include "weft/weft.hpp"

namespace {

using weft_test::run_clean;

// Twenty coroutines, each logging its number three times with yields in between.
std::vector<int> interleaving(weft::run_options options) {
  std::vector<int> log;
  run_clean(
      [&] {
        for (int i = 0; i < 20; ++i) {
          weft::spawn([&log, i] {
            for (int step = 0; step < 3; ++step) {
              log.push_back(i);
              weft::yield();
            }
          });
        }
      },
      std::move(options));
  return log;
}

void expect_each_ran_three_times(const std::vector<int>& log) {
  ASSERT_EQ(log.size(), 60u);
  std::vector<int> counts(20, 0);
  for (int i : log) {
    ASSERT_GE(i, 0);
    ASSERT_LT(i, 20);
    ++counts[i];
  }
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(counts[i], 3) << "coroutine " << i;
  }
}

TEST(Chaos, EveryCoroutineStillRunsExactlyOnce) {
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    int runs = 0;
    run_clean(
        [&] {
          std::vector<weft::task<int>> tasks;
          for (int i = 0; i < 50; ++i) {
            tasks.push_back(weft::spawn([&runs, i] {
              ++runs;
              weft::yield();
              return i;
            }));
          }
          for (int i = 0; i < 50; ++i) {
            EXPECT_EQ(tasks[i].await(), i);
          }
        },
        weft_test::random_options(seed));
    EXPECT_EQ(runs, 50);
    expect_each_ran_three_times(interleaving(weft_test::random_options(seed)));
  }
}

TEST(Chaos, DifferentSeedsGiveDifferentOrders) {
  std::set<std::vector<int>> orders;
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    orders.insert(interleaving(weft_test::random_options(seed)));
  }
  EXPECT_GE(orders.size(), 2u) << "four seeds gave the same order";
  orders.erase(interleaving(weft_test::fifo_options()));
  EXPECT_FALSE(orders.empty()) << "random order was FIFO order for every seed";
}

TEST(Chaos, SameSeedGivesTheSameOrder) {
  for (std::uint64_t seed : {1u, 7u, 12345u}) {
    EXPECT_EQ(interleaving(weft_test::random_options(seed)),
              interleaving(weft_test::random_options(seed)))
        << "seed " << seed;
  }
}

TEST(Chaos, FifoOrderIsTheSpawnOrder) {
  std::vector<int> expected;
  for (int step = 0; step < 3; ++step) {
    for (int i = 0; i < 20; ++i) {
      expected.push_back(i);
    }
  }
  EXPECT_EQ(interleaving(weft_test::fifo_options()), expected);
}

// Sets environment variables for its lifetime and restores the old values.
class scoped_environment {
 public:
  scoped_environment(std::vector<std::pair<std::string, std::optional<std::string>>> values) {
    for (auto& [name, value] : values) {
      const char* old = std::getenv(name.c_str());
      saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
      set(name, value);
    }
  }
  scoped_environment(const scoped_environment&) = delete;
  scoped_environment& operator=(const scoped_environment&) = delete;
  ~scoped_environment() {
    for (auto& [name, value] : saved_) {
      set(name, value);
    }
  }

 private:
  static void set(const std::string& name, const std::optional<std::string>& value) {
    if (value) {
      ::setenv(name.c_str(), value->c_str(), 1);
    } else {
      ::unsetenv(name.c_str());
    }
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST(Chaos, EnvironmentPicksTheOrderWhenOptionsLeaveItUnset) {
  std::set<std::vector<int>> orders;
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    scoped_environment environment({{"WEFT_SCHED", "random"}, {"WEFT_SEED", std::to_string(seed)}});
    const std::vector<int> first = interleaving({});
    expect_each_ran_three_times(first);
    EXPECT_EQ(interleaving({}), first) << "WEFT_SEED=" << seed << " is not reproducible";
    orders.insert(first);
  }
  EXPECT_GE(orders.size(), 2u) << "WEFT_SCHED=random did not change the order";
}

TEST(Chaos, OptionsOverrideTheEnvironment) {
  scoped_environment environment({{"WEFT_SCHED", "random"}, {"WEFT_SEED", "3"}});
  std::vector<int> expected;
  for (int step = 0; step < 3; ++step) {
    for (int i = 0; i < 20; ++i) {
      expected.push_back(i);
    }
  }
  EXPECT_EQ(interleaving(weft_test::fifo_options()), expected);
}

TEST(Chaos, EnvironmentFifoMeansFifo) {
  scoped_environment environment({{"WEFT_SCHED", "fifo"}, {"WEFT_SEED", std::nullopt}});
  std::vector<int> expected;
  for (int step = 0; step < 3; ++step) {
    for (int i = 0; i < 20; ++i) {
      expected.push_back(i);
    }
  }
  EXPECT_EQ(interleaving({}), expected);
}

}  // namespace

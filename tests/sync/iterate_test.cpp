// weft::iterate: every element gets its call, at most `concurrency` at once, started in range
// order; the first failure cancels the rest and is rethrown; the caller's cancellation reaches the
// calls and waits for their cleanup; children are cancelled or awaited at the end.
#include "weft/sync/iterate.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <list>
#include <ranges>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::destructor_flag;
using weft_test::run_clean;
using weft_test::yield_until;

TEST(Iterate, CallsEveryElementWithAtMostConcurrencyAlive) {
  run_clean([] {
    std::vector<int> values(20);
    for (int index = 0; index < 20; ++index) {
      values[index] = index + 1;
    }
    int alive = 0;
    int most_alive = 0;
    int sum = 0;
    weft::iterate(
        values,
        [&](int value) {
          ++alive;
          most_alive = std::max(most_alive, alive);
          for (int round = 0; round < 3 + value % 4; ++round) {
            weft::yield();
          }
          sum += value;
          --alive;
        },
        3);
    EXPECT_EQ(sum, 210);
    EXPECT_EQ(most_alive, 3);
    EXPECT_EQ(alive, 0);
  });
}

TEST(Iterate, LvalueElementsArePassedByReferenceWithTheirIndex) {
  run_clean([] {
    std::list<std::size_t> cells(6, 0);
    weft::iterate(
        cells,
        [](std::size_t& cell, std::size_t index) {
          weft::yield();
          cell = index * 10;
        },
        2);
    EXPECT_EQ(std::vector<std::size_t>(cells.begin(), cells.end()),
              (std::vector<std::size_t>{0, 10, 20, 30, 40, 50}));
  });
}

TEST(Iterate, ElementsOfAViewAreMovedIntoTheirCalls) {
  run_clean([] {
    std::vector<std::string> seen(5);
    auto names = std::views::iota(0, 5) | std::views::transform([](int index) {
                   return "element " + std::to_string(index);
                 });
    weft::iterate(
        names,
        [&](std::string name, std::size_t index) {
          weft::yield();  // the element must live in the call, not in the loop that made it
          weft::yield();
          seen[index] = std::move(name);
        },
        5);
    EXPECT_EQ(seen, (std::vector<std::string>{"element 0", "element 1", "element 2", "element 3",
                                              "element 4"}));
  });
}

TEST(Iterate, CallsStartInRangeOrderUnderAnySchedulingOrder) {
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    std::vector<std::size_t> started;
    run_clean(
        [&] {
          weft::iterate(
              std::views::iota(std::size_t{0}, std::size_t{40}),
              [&](std::size_t index) {
                started.push_back(index);
                for (std::size_t round = 0; round < index % 3; ++round) {
                  weft::yield();
                }
              },
              4);
        },
        weft_test::random_options(seed));
    std::vector<std::size_t> expected(40);
    for (std::size_t index = 0; index < expected.size(); ++index) {
      expected[index] = index;
    }
    EXPECT_EQ(started, expected) << "seed " << seed;
  }
}

TEST(Iterate, ZeroConcurrencyIsInvalidArgument) {
  run_clean([] {
    int calls = 0;
    try {
      weft::iterate(
          std::vector<int>{1, 2}, [&](int) { ++calls; }, 0);
      ADD_FAILURE() << "iterate accepted concurrency 0";
    } catch (const std::invalid_argument& error) {
      EXPECT_NE(std::string(error.what()).find("concurrency must be at least 1"), std::string::npos)
          << error.what();
    }
    EXPECT_EQ(calls, 0);
  });
}

TEST(Iterate, EmptyRangeReturnsAtOnceWithoutSpawning) {
  run_clean([] {
    const auto spawned_before = weft::current_scheduler().stats().spawned;
    int calls = 0;
    weft::iterate(
        std::vector<int>{}, [&](int) { ++calls; }, 3);
    EXPECT_EQ(calls, 0);
    EXPECT_EQ(weft::current_scheduler().stats().spawned, spawned_before);
  });
}

TEST(Iterate, OutsideACoroutineIsALogicError) {
  EXPECT_THROW(weft::iterate(
                   std::vector<int>{1}, [](int) {}, 1),
               std::logic_error);
}

TEST(Iterate, FirstFailureCancelsTheRunningCallsStartsNoMoreAndIsRethrown) {
  run_clean([] {
    std::vector<std::size_t> started;
    std::size_t cleaned_up = 0;
    try {
      weft::iterate(
          std::views::iota(std::size_t{0}, std::size_t{10}),
          [&](std::size_t index) {
            started.push_back(index);
            if (index == 2) {
              weft::yield();
              throw std::runtime_error("element 2 failed");
            }
            struct count_cleanup {
              std::size_t& count;
              ~count_cleanup() { ++count; }
            } cleanup{cleaned_up};
            weft::sleep_for(1h);
          },
          3);
      ADD_FAILURE() << "iterate did not rethrow the failure";
    } catch (const std::runtime_error& error) {
      EXPECT_STREQ(error.what(), "element 2 failed");
    }
    EXPECT_EQ(started, (std::vector<std::size_t>{0, 1, 2}));
    EXPECT_EQ(cleaned_up, 2u) << "the other running calls were not cancelled and waited for";
  });
}

TEST(Iterate, CancellingTheCallerCancelsTheCallsWaitsForTheirCleanupAndRethrows) {
  run_clean([] {
    std::size_t started = 0;
    std::size_t cleaned_up = 0;
    std::size_t cleaned_up_when_iterate_left = 0;
    auto caller = weft::spawn([&] {
      try {
        weft::iterate(
            std::views::iota(0, 5),
            [&](int) {
              ++started;
              struct count_cleanup {
                std::size_t& count;
                ~count_cleanup() {
                  weft::yield();  // cleanup that itself takes a switch
                  ++count;
                }
              } cleanup{cleaned_up};
              weft::sleep_for(1h);
            },
            2);
      } catch (const weft::cancelled_error&) {
        cleaned_up_when_iterate_left = cleaned_up;
        throw;
      }
    });
    yield_until([&] { return started == 2; });
    caller.cancel("caller no longer needed");
    try {
      caller.await();
      ADD_FAILURE() << "the caller did not end with cancelled_error";
    } catch (const weft::cancelled_error& error) {
      EXPECT_EQ(error.reason(), "caller no longer needed");
    }
    EXPECT_EQ(started, 2u);
    EXPECT_EQ(cleaned_up_when_iterate_left, 2u);
  });
}

TEST(Iterate, ChildrenStillAliveAreCancelledByDefault) {
  run_clean([] {
    weft_test::cancellable child;
    weft::iterate(
        std::vector<int>{1, 2},
        [&](int value) {
          if (value == 1) {
            weft::scope::current()->spawn(std::ref(child));
            yield_until([&] { return child.started; });
          }
        },
        2);
    EXPECT_TRUE(child.started);
    EXPECT_TRUE(child.cleaned_up) << "iterate returned before its child ended";
  });
}

TEST(Iterate, ChildrenAreAwaitedWhenAsked) {
  run_clean([] {
    bool child_done = false;
    weft::iterate(std::vector<int>{1},
                  [&](int) {
                    weft::scope::current()->spawn([&] {
                      for (int round = 0; round < 10; ++round) {
                        weft::yield();
                      }
                      child_done = true;
                    });
                  },
                  1, {.cancel_children = false});
    EXPECT_TRUE(child_done);
  });
}

TEST(Iterate, AChildsFailureFailsTheIteration) {
  run_clean([] {
    try {
      weft::iterate(std::vector<int>{1},
                    [&](int) {
                      weft::scope::current()->spawn([] {
                        weft::yield();
                        throw std::runtime_error("child failed");
                      });
                    },
                    1, {.cancel_children = false});
      ADD_FAILURE() << "iterate did not rethrow the child's failure";
    } catch (const std::runtime_error& error) {
      EXPECT_STREQ(error.what(), "child failed");
    }
  });
}

TEST(Iterate, AFailureCaughtByTheCallerNeverReachesTheCallersScope) {
  run_clean([] {
    weft::scope outer("outer");
    bool caught = false;
    outer.spawn([&] {
      try {
        weft::iterate(
            std::vector<int>{1, 2}, [](int) { throw std::runtime_error("call failed"); }, 2);
      } catch (const std::runtime_error&) {
        caught = true;
      }
    });
    outer.join();  // does not throw: the caller handled it
    EXPECT_TRUE(caught);
    EXPECT_FALSE(outer.failed());
  });
}

TEST(Iterate, CancellingItsScopeFromACallStopsItWithThatReason) {
  run_clean([] {
    std::vector<int> started;
    try {
      weft::iterate(
          std::views::iota(0, 10),
          [&](int value) {
            started.push_back(value);
            if (value == 1) {
              weft::scope::current()->cancel("found it");
            }
            weft::yield();
          },
          1);
      ADD_FAILURE() << "iterate returned normally after being cancelled";
    } catch (const weft::cancelled_error& error) {
      EXPECT_EQ(error.reason(), "found it");
    }
    EXPECT_EQ(started, (std::vector<int>{0, 1}));
  });
}

TEST(Iterate, ItsScopeIsAChildOfTheCallersScopeWithLiveCounts) {
  run_clean([] {
    weft::scope outer("outer");
    std::vector<weft::scope_info> seen;
    int started = 0;
    outer.spawn([&] {
      weft::iterate(std::vector<int>{1, 2},
                    [&](int) {
                      ++started;
                      yield_until([&] { return started == 2; });
                      if (seen.empty()) {
                        seen = outer.children();
                      }
                    },
                    2, {.name = "rows"});
    });
    outer.join();
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_EQ(seen[0].name, "rows");
    EXPECT_EQ(seen[0].live, 2u);
    EXPECT_TRUE(outer.children().empty());
  });
}

}  // namespace

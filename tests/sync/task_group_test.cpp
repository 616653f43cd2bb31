// weft::task_group: never more than `concurrency` tasks run, queued tasks start in spawn order,
// a full queue blocks spawners FIFO with hand-off, and the outcomes come out in completion order
// through next/all/race/any, with the losers cancelled and every count balanced at the end.
#include "weft/sync/task_group.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::destructor_flag;
using weft_test::fifo_options;
using weft_test::run_clean;
using weft_test::yield_until;

using weft_test::cancellable;

void expect_balanced(const weft::task_group_stats& stats) {
  EXPECT_EQ(stats.running, 0u);
  EXPECT_EQ(stats.queued, 0u);
  EXPECT_EQ(stats.blocked_spawners, 0u);
  EXPECT_EQ(stats.succeeded + stats.failed + stats.cancelled, stats.spawned);
}

TEST(TaskGroup, ZeroConcurrencyIsInvalidArgument) {
  run_clean([] {
    try {
      weft::task_group<int> group(0);
      ADD_FAILURE() << "a group that can run nothing was accepted";
    } catch (const std::invalid_argument& error) {
      EXPECT_NE(std::string(error.what()).find("concurrency must be at least 1"), std::string::npos)
          << error.what();
    }
  });
}

TEST(TaskGroup, NeverRunsMoreThanItsConcurrency) {
  run_clean([] {
    weft::task_group<int> group(3);
    int in_flight = 0;
    int most_in_flight = 0;
    for (int index = 0; index < 20; ++index) {
      group.spawn([&, index] {
        ++in_flight;
        most_in_flight = std::max(most_in_flight, in_flight);
        for (int round = 0; round < index % 4 + 1; ++round) {
          weft::yield();
        }
        --in_flight;
        return index;
      });
    }
    EXPECT_EQ(group.stats().running, 3u);
    EXPECT_EQ(group.stats().queued, 17u);
    std::vector<int> values = group.all();
    EXPECT_EQ(values.size(), 20u);
    EXPECT_EQ(most_in_flight, 3);
    EXPECT_EQ(group.stats().max_running, 3u);
    expect_balanced(group.stats());
  });
}

TEST(TaskGroup, QueuedTasksStartInSpawnOrder) {
  run_clean([] {
    weft::task_group<void> group(1);
    std::vector<int> started;
    for (int index = 0; index < 6; ++index) {
      group.spawn([&, index] {
        started.push_back(index);
        weft::yield();
      });
    }
    group.all();
    EXPECT_EQ(started, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  });
}

TEST(TaskGroup, QueuedTasksStartInSpawnOrderWithSeveralSlots) {
  run_clean(
      [] {
        weft::task_group<void> group(2);
        std::vector<int> started;
        for (int index = 0; index < 8; ++index) {
          group.spawn([&, index] {
            started.push_back(index);
            for (int round = 0; round < (index * 7) % 3; ++round) {
              weft::yield();
            }
          });
        }
        group.all();
        EXPECT_EQ(started, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
      },
      fifo_options());
}

TEST(TaskGroup, AFullQueueBlocksSpawnersWhichResumeInArrivalOrder) {
  run_clean(
      [] {
        weft::task_group<int> group(1, 1);
        bool open = false;
        auto gated = [&](int value) {
          return [&open, value] {
            yield_until([&] { return open; });
            return value;
          };
        };
        group.spawn(gated(0));  // runs
        group.spawn(gated(1));  // queued: the queue is full now
        std::vector<int> spawned_by;
        std::vector<weft::task<void>> spawners;
        for (int spawner = 0; spawner < 3; ++spawner) {
          spawners.push_back(weft::spawn([&, spawner] {
            group.spawn(gated(10 + spawner));
            spawned_by.push_back(spawner);
          }));
        }
        yield_until([&] { return group.stats().blocked_spawners == 3; });
        EXPECT_TRUE(spawned_by.empty());
        EXPECT_EQ(group.stats().running + group.stats().queued, 2u);
        open = true;
        std::vector<int> finished;
        while (std::optional<weft::task<int>> ended = group.next()) {
          finished.push_back(ended->await());
        }
        for (auto& spawner : spawners) {
          spawner.await();
        }
        EXPECT_EQ(spawned_by, (std::vector<int>{0, 1, 2}));
        EXPECT_EQ(finished, (std::vector<int>{0, 1, 10, 11, 12}));
        EXPECT_EQ(group.stats().max_running, 1u);
        expect_balanced(group.stats());
      },
      fifo_options());
}

TEST(TaskGroup, FreedRoomIsReservedForTheOldestBlockedSpawner) {
  run_clean(
      [] {
        weft::task_group<void> group(1, 0);
        bool first_open = false;
        bool second_open = false;
        bool blocked_spawner_ran_its_task = false;
        group.spawn([&] { yield_until([&] { return first_open; }); });
        auto blocked = weft::spawn([&] {
          group.spawn([&] {
            yield_until([&] { return second_open; });
            blocked_spawner_ran_its_task = true;
          });
        });
        yield_until([&] { return group.stats().blocked_spawners == 1; });
        first_open = true;
        weft::yield();  // the running task ends and its room is granted to the blocked spawner
        // The room is reserved: this newcomer, running before the blocked spawner does, cannot
        // take it (without the reservation it would start at once).
        EXPECT_THROW(group.spawn([] {}, weft::timeout(5ms)), weft::timeout_error);
        second_open = true;
        blocked.await();
        group.all();
        EXPECT_TRUE(blocked_spawner_ran_its_task);
        EXPECT_EQ(group.stats().spawned, 2u);
        expect_balanced(group.stats());
      },
      fifo_options());
}

TEST(TaskGroup, SpawnGivesUpAfterItsTimeLimitWithoutRunningTheFunction) {
  run_clean([] {
    weft::task_group<void> group(1, 0, "limited");
    cancellable running;
    bool late_ran = false;
    group.spawn([&] { running(); });
    yield_until([&] { return running.started; });
    try {
      group.spawn([&] { late_ran = true; }, weft::timeout(5ms));
      ADD_FAILURE() << "spawn into a full group did not time out";
    } catch (const weft::timeout_error& error) {
      EXPECT_NE(std::string(error.what()).find("task_group 'limited'"), std::string::npos)
          << error.what();
    }
    EXPECT_EQ(group.stats().blocked_spawners, 0u);
    group.cancel();
    group.all();
    EXPECT_FALSE(late_ran);
    EXPECT_TRUE(running.cleaned_up);
    expect_balanced(group.stats());
  });
}

TEST(TaskGroup, ABlockedSpawnerCancelledAfterItsGrantPassesTheRoomOn) {
  run_clean(
      [] {
        weft::task_group<int> group(1, 0);
        bool open = false;
        group.spawn([&] {
          yield_until([&] { return open; });
          return 0;
        });
        auto first = weft::spawn([&] { group.spawn([] { return 1; }); });
        auto second = weft::spawn([&] { group.spawn([] { return 2; }); });
        yield_until([&] { return group.stats().blocked_spawners == 2; });
        open = true;
        weft::yield();  // the room goes to the first spawner, which has not run yet
        first.cancel("changed my mind");
        EXPECT_THROW(first.await(), weft::cancelled_error);
        second.await();
        EXPECT_EQ(group.all(), (std::vector<int>{0, 2}));
        expect_balanced(group.stats());
      },
      fifo_options());
}

TEST(TaskGroup, AllReturnsTheValuesInCompletionOrder) {
  run_clean([] {
    weft::task_group<int> group(4);
    std::vector<int> completion_order;
    for (int index = 0; index < 8; ++index) {
      group.spawn([&, index] {
        for (int round = 0; round < 8 - index; ++round) {
          weft::yield();
        }
        completion_order.push_back(index);
        return index;
      });
    }
    EXPECT_EQ(group.all(), completion_order);
    EXPECT_EQ(completion_order.size(), 8u);
    EXPECT_TRUE(group.all().empty());  // everything was taken
  });
}

TEST(TaskGroup, AllThrowsTheFirstFailureAfterCancellingTheRest) {
  run_clean([] {
    weft::task_group<int> group(2);
    cancellable slow_body;
    cancellable queued_body;
    auto slow = group.spawn([&] {
      slow_body();
      return 0;
    });
    group.spawn([&]() -> int {
      yield_until([&] { return slow_body.started; });
      throw std::runtime_error("broken");
    });
    // Queued behind the two; the failure frees its slot, so it may start before all() sees the
    // failure and cancels it (or be cancelled before it starts).
    auto queued = group.spawn([&] {
      queued_body();
      return 2;
    });
    try {
      group.all();
      ADD_FAILURE() << "all() did not throw";
    } catch (const std::runtime_error& error) {
      EXPECT_STREQ(error.what(), "broken");
    }
    EXPECT_TRUE(slow_body.cleaned_up);
    EXPECT_EQ(queued_body.started, queued_body.cleaned_up);
    EXPECT_THROW(slow.await(), weft::cancelled_error);
    EXPECT_THROW(queued.await(), weft::cancelled_error);
    const weft::task_group_stats stats = group.stats();
    EXPECT_EQ(stats.failed, 1u);
    EXPECT_EQ(stats.cancelled, 2u);
    expect_balanced(stats);
    EXPECT_FALSE(group.closed());  // all() cancelled the tasks, not the group
  });
}

TEST(TaskGroup, RaceReturnsTheFirstToFinishAndCancelsTheLosers) {
  run_clean([] {
    weft::task_group<std::string> group(3);
    cancellable first_loser;
    cancellable second_loser;
    group.spawn([&] {
      first_loser();
      return std::string("slow");
    });
    group.spawn([&] {
      yield_until([&] { return first_loser.started && second_loser.started; });
      return std::string("fast");
    });
    group.spawn([&] {
      second_loser();
      return std::string("slower");
    });
    EXPECT_EQ(group.race(), "fast");
    EXPECT_TRUE(first_loser.cleaned_up);
    EXPECT_TRUE(second_loser.cleaned_up);
    EXPECT_EQ(group.stats().cancelled, 2u);
    EXPECT_FALSE(group.next().has_value());  // the losers' outcomes were dropped
    expect_balanced(group.stats());
  });
}

TEST(TaskGroup, RaceRethrowsTheFirstOutcomeWhenItIsAnError) {
  run_clean([] {
    weft::task_group<int> group(2);
    cancellable loser;
    group.spawn([&]() -> int {
      yield_until([&] { return loser.started; });
      throw std::runtime_error("lost fast");
    });
    group.spawn([&] {
      loser();
      return 1;
    });
    try {
      group.race();
      ADD_FAILURE() << "race() did not rethrow the first outcome";
    } catch (const std::runtime_error& error) {
      EXPECT_STREQ(error.what(), "lost fast");
    }
    EXPECT_TRUE(loser.cleaned_up);
  });
}

TEST(TaskGroup, AnyReturnsTheFirstSuccessAndCancelsTheRest) {
  run_clean([] {
    weft::task_group<int> group(3);
    cancellable loser;
    bool failed_first = false;
    group.spawn([&]() -> int {
      failed_first = true;
      throw std::runtime_error("no luck");
    });
    group.spawn([&] {
      yield_until([&] { return loser.started && failed_first; });
      return 7;
    });
    group.spawn([&] {
      loser();
      return 8;
    });
    EXPECT_EQ(group.any(), 7);
    EXPECT_TRUE(loser.cleaned_up);
    const weft::task_group_stats stats = group.stats();
    EXPECT_EQ(stats.succeeded, 1u);
    EXPECT_EQ(stats.failed, 1u);
    EXPECT_EQ(stats.cancelled, 1u);
  });
}

TEST(TaskGroup, AnyWhenEveryTaskFailsCarriesEveryError) {
  run_clean([] {
    weft::task_group<int> group(2);
    for (int index = 0; index < 3; ++index) {
      group.spawn([index]() -> int {
        weft::yield();
        throw std::runtime_error("failure " + std::to_string(index));
      });
    }
    try {
      group.any();
      ADD_FAILURE() << "any() did not throw";
    } catch (const weft::all_failed_error& error) {
      ASSERT_EQ(error.errors().size(), 3u);
      std::vector<std::string> messages;
      for (const std::exception_ptr& each : error.errors()) {
        try {
          std::rethrow_exception(each);
        } catch (const std::runtime_error& failure) {
          messages.push_back(failure.what());
        }
      }
      std::sort(messages.begin(), messages.end());
      EXPECT_EQ(messages, (std::vector<std::string>{"failure 0", "failure 1", "failure 2"}));
      EXPECT_NE(std::string(error.what()).find("every task of the task_group failed (3 errors)"),
                std::string::npos)
          << error.what();
    }
  });
}

TEST(TaskGroup, RaceOrAnyWithoutTasksIsALogicError) {
  run_clean([] {
    weft::task_group<int> group(2);
    EXPECT_THROW(group.race(), std::logic_error);
    EXPECT_THROW(group.any(), std::logic_error);
  });
}

TEST(TaskGroup, NextHandsOutEveryOutcomeInCompletionOrderThenNothing) {
  run_clean([] {
    weft::task_group<int> group(2);
    std::vector<int> completion_order;
    for (int index = 0; index < 5; ++index) {
      group.spawn([&, index]() -> int {
        for (int round = 0; round < (index * 3) % 4; ++round) {
          weft::yield();
        }
        completion_order.push_back(index);
        if (index == 3) {
          throw std::runtime_error("three");
        }
        return index;
      });
    }
    std::vector<int> seen;
    int failures = 0;
    while (std::optional<weft::task<int>> ended = group.next()) {
      EXPECT_TRUE(ended->done());
      try {
        seen.push_back(ended->await());
      } catch (const std::runtime_error&) {
        seen.push_back(3);
        ++failures;
      }
    }
    EXPECT_EQ(seen, completion_order);
    EXPECT_EQ(failures, 1);
    EXPECT_FALSE(group.next().has_value());
  });
}

TEST(TaskGroup, NextWithATimeLimitTimesOut) {
  run_clean([] {
    weft::task_group<int> group(1);
    cancellable running;
    group.spawn([&] {
      running();
      return 0;
    });
    yield_until([&] { return running.started; });
    EXPECT_THROW(group.next(weft::timeout(5ms)), weft::timeout_error);
    group.cancel();
    std::optional<weft::task<int>> ended = group.next();
    ASSERT_TRUE(ended.has_value());
    EXPECT_THROW(ended->await(), weft::cancelled_error);
    EXPECT_TRUE(running.cleaned_up);
  });
}

TEST(TaskGroup, CancelClosesTheGroupAndReleasesBlockedSpawners) {
  run_clean([] {
    weft::task_group<void> group(1, 1, "closing");
    cancellable running;
    bool queued_ran = false;
    group.spawn([&] { running(); });
    auto queued = group.spawn([&] { queued_ran = true; });
    std::string blocked_reason;
    auto blocked = weft::spawn([&] {
      try {
        group.spawn([] {});
      } catch (const weft::scope_closed_error& closed) {
        blocked_reason = closed.reason();
      }
    });
    yield_until([&] { return running.started && group.stats().blocked_spawners == 1; });
    group.cancel("closing time");
    blocked.await();
    EXPECT_EQ(blocked_reason, "closing time");
    EXPECT_THROW(group.spawn([] {}), weft::scope_closed_error);
    group.all();
    EXPECT_TRUE(running.cleaned_up);
    EXPECT_FALSE(queued_ran);
    EXPECT_THROW(queued.await(), weft::cancelled_error);
    EXPECT_TRUE(group.closed());
    expect_balanced(group.stats());
  });
}

TEST(TaskGroup, DestroyingTheGroupCancelsAndWaitsForEveryTask) {
  run_clean([] {
    cancellable running;
    bool queued_ran = false;
    weft::task<int> queued;
    {
      weft::task_group<int> group(1);
      group.spawn([&] {
        running();
        return 0;
      });
      queued = group.spawn([&] {
        queued_ran = true;
        return 1;
      });
      yield_until([&] { return running.started; });
    }
    EXPECT_TRUE(running.cleaned_up);
    EXPECT_FALSE(queued_ran);
    EXPECT_THROW(queued.await(), weft::cancelled_error);
  });
}

TEST(TaskGroup, WaitingOnTheGroupFromOneOfItsTasksIsALogicError) {
  run_clean([] {
    weft::task_group<int> group(2);
    auto inside = group.spawn([&] {
      try {
        group.all();
      } catch (const std::logic_error&) {
        return 1;
      }
      return 0;
    });
    EXPECT_EQ(group.all(), (std::vector<int>{1}));
    EXPECT_EQ(inside.await(), 1);
  });
}

TEST(TaskGroup, AFailureNobodyTookIsReportedWhenTheGroupIsDestroyed) {
  EXPECT_THROW(run_clean([] {
                 weft::task_group<void> group(1);
                 group.spawn([] { throw std::runtime_error("never taken"); });
                 yield_until([&] { return group.stats().failed == 1; });
               }),
               std::runtime_error);
}

TEST(TaskGroup, AFailureNobodyTookGoesToTheParentScope) {
  run_clean([] {
    weft::scope parent("parent");
    {
      weft::task_group<void> group(parent, 1);
      group.spawn([] { throw std::runtime_error("left behind"); });
      yield_until([&] { return group.stats().failed == 1; });
    }
    EXPECT_TRUE(parent.failed());
    EXPECT_THROW(parent.join(), std::runtime_error);
  });
}

TEST(TaskGroup, TheCancellationOfTheEnclosingScopeReachesTheGroupsTasks) {
  run_clean([] {
    weft::scope outer;
    cancellable in_group;
    outer.spawn([&] {
      weft::task_group<void> group(2);  // a child of outer
      group.spawn([&] { in_group(); });
      group.all();
    });
    yield_until([&] { return in_group.started; });
    EXPECT_EQ(outer.stats().live_in_tree, 2u);
    outer.cancel("outer cancelled");
    outer.join();
    EXPECT_TRUE(in_group.cleaned_up);
  });
}

TEST(TaskGroup, CountsBalanceAfterAMixOfEverything) {
  run_clean([] {
    weft::task_group<int> group(3, 4);
    int in_flight = 0;
    int most_in_flight = 0;
    auto producer = weft::spawn([&] {
      for (int index = 0; index < 40; ++index) {
        weft::task<int> spawned = group.spawn([&, index]() -> int {
          ++in_flight;
          most_in_flight = std::max(most_in_flight, in_flight);
          for (int round = 0; round < index % 3; ++round) {
            weft::yield();
          }
          --in_flight;
          if (index % 7 == 0) {
            throw std::runtime_error("sevens fail");
          }
          return index;
        });
        if (index % 5 == 0) {
          spawned.cancel("fives are cancelled");
        }
      }
    });
    yield_until([&] { return group.stats().spawned > 0; });  // next() ends once nothing is left
    int values = 0;
    int failures = 0;
    int cancellations = 0;
    while (std::optional<weft::task<int>> ended = group.next()) {
      try {
        ended->await();
        ++values;
      } catch (const weft::cancelled_error&) {
        ++cancellations;
      } catch (const std::runtime_error&) {
        ++failures;
      }
    }
    producer.await();
    EXPECT_EQ(values + failures + cancellations, 40);
    EXPECT_LE(most_in_flight, 3);
    const weft::task_group_stats stats = group.stats();
    EXPECT_EQ(stats.spawned, 40u);
    EXPECT_EQ(stats.succeeded, static_cast<std::uint64_t>(values));
    EXPECT_EQ(stats.failed, static_cast<std::uint64_t>(failures));
    EXPECT_EQ(stats.cancelled, static_cast<std::uint64_t>(cancellations));
    EXPECT_EQ(stats.unclaimed, 0u);
    expect_balanced(stats);
  });
}

TEST(TaskGroup, CloseSealsTheGroupWhileItsRunningAndQueuedTasksFinish) {
  run_clean([] {
    weft::task_group<int> group(2, weft::task_group<int>::unlimited, "fetchers");
    for (int value = 1; value <= 4; ++value) {
      group.spawn([value] {
        weft::yield();
        weft::yield();
        return value;
      });
    }
    EXPECT_EQ(group.stats().queued, 2u);
    group.close();
    group.close();  // idempotent
    EXPECT_TRUE(group.closed());
    EXPECT_TRUE(group.sealed());
    EXPECT_EQ(group.close_reason(), "");
    try {
      group.spawn([] { return 5; });
      ADD_FAILURE() << "spawn into a sealed group was accepted";
    } catch (const std::logic_error& error) {
      EXPECT_NE(std::string(error.what()).find("task_group 'fetchers' after close()"),
                std::string::npos)
          << error.what();
    }
    std::vector<int> values = group.all();
    std::sort(values.begin(), values.end());
    EXPECT_EQ(values, (std::vector<int>{1, 2, 3, 4}));
    const weft::task_group_stats stats = group.stats();
    EXPECT_EQ(stats.succeeded, 4u);
    EXPECT_EQ(stats.cancelled, 0u);
    EXPECT_EQ(stats.spawned, 4u);
  });
}

TEST(TaskGroup, CloseLetsSpawnersAlreadyBlockedOnAFullQueueIn) {
  run_clean([] {
    weft::task_group<int> group(1, 0, "one at a time");
    bool release = false;
    group.spawn([&] {
      while (!release) {
        weft::yield();
      }
      return 1;
    });
    bool second_spawned = false;
    auto spawner = weft::spawn([&] {
      group.spawn([] { return 2; });  // blocks: no room until the first ends
      second_spawned = true;
    });
    yield_until([&] { return group.stats().blocked_spawners == 1; });
    group.close();
    release = true;
    std::vector<int> values = group.all();
    spawner.await();
    EXPECT_TRUE(second_spawned);
    std::sort(values.begin(), values.end());
    EXPECT_EQ(values, (std::vector<int>{1, 2}));
  });
}

TEST(TaskGroup, CloseFromOneOfItsOwnTasksAndCancelAfterClose) {
  run_clean([] {
    weft::task_group<void> group(4);
    cancellable sleeper;
    group.spawn(std::ref(sleeper));
    group.spawn([&] { group.close(); });
    yield_until([&] { return group.sealed() && sleeper.started; });
    EXPECT_THROW(group.spawn([] {}), std::logic_error);
    group.cancel("closing time");
    group.all();
    EXPECT_TRUE(sleeper.cleaned_up);
    EXPECT_EQ(group.close_reason(), "closing time");
  });
}

}  // namespace

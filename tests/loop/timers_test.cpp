// weft::loop::event_loop timers: delay, repeat, off_delay/off_repeat, delete_all_timers,
// timer_count, and the timer rules of event_loop.hpp.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "../../src/loop/timer_heap.hpp"  // src/ is not on the test include path
#include "../../src/loop/watcher_table.hpp"
#include "loop/loop_support.hpp"

namespace {

using namespace std::chrono_literals;
using weft::loop::event_loop;
using weft::loop::watcher_id;
using weft_loop_test::seconds_since;
using weft_loop_test::with_loop;
using clock_type = std::chrono::steady_clock;

TEST(LoopTimers, DelayRunsOnceAfterItsDuration) {
  with_loop([](event_loop& loop) {
    int runs = 0;
    auto start = clock_type::now();
    double ran_after = 0;
    loop.delay(0.02, [&] {
      ++runs;
      ran_after = seconds_since(start);
    });
    EXPECT_EQ(loop.timer_count(), 1u);
    loop.run();
    EXPECT_EQ(runs, 1);
    EXPECT_GE(ran_after, 0.02);
    EXPECT_LT(ran_after, 5.0);
  });
}

TEST(LoopTimers, ChronoDurationsOfAnyUnitWork) {
  with_loop([](event_loop& loop) {
    std::vector<std::string> order;
    auto start = clock_type::now();
    loop.delay(std::chrono::microseconds(15'000), [&] { order.push_back("us"); });
    loop.delay(5ms, [&] { order.push_back("ms"); });
    loop.delay(std::chrono::duration<double>(0.025), [&] { order.push_back("double s"); });
    loop.delay(std::chrono::nanoseconds(1), [&] { order.push_back("ns"); });
    loop.run();
    EXPECT_EQ(order, (std::vector<std::string>{"ns", "ms", "us", "double s"}));
    EXPECT_GE(seconds_since(start), 0.025);
  });
}

TEST(LoopTimers, RepeatRunsEveryIntervalUntilRemoved) {
  with_loop([](event_loop& loop) {
    int runs = 0;
    watcher_id id{};
    auto start = clock_type::now();
    id = loop.repeat(2ms, [&] {
      if (++runs == 5) {
        EXPECT_TRUE(loop.off_repeat(id));
        EXPECT_FALSE(loop.off_repeat(id)) << "a second off finds nothing";
      }
    });
    loop.run();
    EXPECT_EQ(runs, 5);
    EXPECT_GE(seconds_since(start), 0.010) << "five runs of a 2 ms repeat take 10 ms at least";
  });
}

TEST(LoopTimers, IdsAreDistinctAndNeverReused) {
  with_loop([](event_loop& loop) {
    std::set<watcher_id> seen;
    std::vector<watcher_id> removed;
    for (int round = 0; round < 2000; ++round) {
      watcher_id delay = loop.delay(1.0, [] {});
      watcher_id repeat = loop.repeat(1.0, [] {});
      watcher_id deferred = loop.defer([] {});
      for (watcher_id id : {delay, repeat, deferred}) {
        EXPECT_NE(id, watcher_id::none);
        EXPECT_TRUE(seen.insert(id).second) << "an id was handed out twice";
      }
      // Removing frees the slots at once, so the next round reuses them: ids must still differ.
      EXPECT_TRUE(loop.off_delay(delay));
      EXPECT_TRUE(loop.off_repeat(repeat));
      EXPECT_TRUE(loop.off_defer(deferred));
      removed.push_back(delay);
    }
    for (watcher_id old : removed) {
      EXPECT_FALSE(loop.off_delay(old));
      EXPECT_FALSE(loop.reference(old)) << "a stale id names nothing";
    }
    EXPECT_EQ(loop.timer_count(), 0u);
    loop.run();
  });
}

// 2^32 watchers through one slot cannot be run here; the slot table's rule is checked directly.
TEST(LoopTimers, ASlotWhoseGenerationWouldWrapIsRetiredRatherThanReused) {
  using weft::loop::detail::watcher_kind;
  weft::loop::detail::watcher_table table;
  std::uint32_t slot = table.allocate();
  auto& w = table.at(slot);
  w.kind = watcher_kind::delay;
  w.generation = 0xFFFFFFFFu;  // its last generation
  watcher_id last = table.id_of(slot);
  EXPECT_EQ(table.find(last), &w);
  table.invalidate(w);
  table.recycle(slot);
  EXPECT_EQ(table.find(last), nullptr);
  std::uint32_t next = table.allocate();
  EXPECT_NE(next, slot) << "a wrapped slot is never handed out again";
  table.at(next).kind = watcher_kind::delay;
  table.invalidate(table.at(next));
  table.recycle(next);
  EXPECT_EQ(table.allocate(), next) << "ordinary slots are reused";
}

TEST(LoopTimers, OffReturnsWhetherATimerWasRemoved) {
  with_loop([](event_loop& loop) {
    bool ran = false;
    watcher_id fired = loop.delay(0.0, [&] { ran = true; });
    watcher_id pending = loop.delay(1h, [] {});
    watcher_id deferred = loop.defer([] {});
    EXPECT_TRUE(loop.off_repeat(pending)) << "off_repeat removes a delay too";
    EXPECT_FALSE(loop.off_delay(pending));
    EXPECT_FALSE(loop.off_delay(deferred)) << "not a timer";
    EXPECT_FALSE(loop.off_delay(watcher_id::none));
    EXPECT_FALSE(loop.off_delay(static_cast<watcher_id>(~0ull)));
    loop.run();
    EXPECT_TRUE(ran);
    EXPECT_FALSE(loop.off_delay(fired)) << "it fired already";
  });
}

TEST(LoopTimers, OneShotLeavesTimerCountJustBeforeItsCallbackRuns) {
  with_loop([](event_loop& loop) {
    watcher_id other = loop.delay(1h, [] {});
    watcher_id self{};
    std::size_t count_inside = 99;
    bool off_inside = true;
    self = loop.delay(1ms, [&] {
      count_inside = loop.timer_count();
      off_inside = loop.off_delay(self);
      loop.off_delay(other);
    });
    EXPECT_EQ(loop.timer_count(), 2u);
    loop.run();
    EXPECT_EQ(count_inside, 1u) << "only the hour-long one is left while it runs";
    EXPECT_FALSE(off_inside) << "its id stops working before its callback runs";
  });
}

TEST(LoopTimers, TimersSetTogetherFireInOrderOfTheirDelays) {
  with_loop([](event_loop& loop) {
    std::mt19937 random(7);
    // Timers set with no tick between them start from one clock reading (see TIMERS in
    // event_loop.hpp): they fire by delay, equal delays in the order they were set.
    std::vector<std::pair<long, int>> expected;
    std::vector<std::pair<long, int>> fired;
    for (int index = 0; index < 500; ++index) {
      long after = static_cast<long>(random() % 30) * 1000;  // many equal delays
      expected.emplace_back(after, index);
      loop.delay(std::chrono::microseconds(after),
                 [&fired, after, index] { fired.emplace_back(after, index); });
    }
    loop.run();
    std::stable_sort(expected.begin(), expected.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    EXPECT_EQ(fired, expected);
  });
}

TEST(LoopTimers, TimersWithTheSameDelayFireInTheOrderTheyWereSet) {
  with_loop([](event_loop& loop) {
    std::vector<int> order;
    for (int index = 0; index < 200; ++index) {
      loop.delay(3ms, [&order, index] { order.push_back(index); });
    }
    loop.run();
    ASSERT_EQ(order.size(), 200u);
    EXPECT_TRUE(std::is_sorted(order.begin(), order.end()));
  });
}

// The clock cannot be made to give two timers the same nanosecond through the API, so the tie
// rule is checked on the loop's heap itself.
TEST(LoopTimers, EqualDeadlinesComeOutInTheOrderTheyWereSet) {
  weft::loop::detail::timer_heap heap;
  std::mt19937 random(3);
  std::vector<weft::loop::detail::timer_node> nodes;
  for (std::uint64_t sequence = 1; sequence <= 1000; ++sequence) {
    std::int64_t deadline = static_cast<std::int64_t>(random() % 4);  // many ties
    nodes.push_back({deadline, sequence, static_cast<std::uint32_t>(sequence)});
  }
  std::shuffle(nodes.begin(), nodes.end(), random);
  // Three intervals: the nodes of one go to its run while they come in order and to the heap
  // when they do not, so both halves and their ties are exercised.
  for (const auto& node : nodes) {
    heap.push(node, static_cast<std::int64_t>(node.sequence % 3) * 1'000'000);
  }
  heap.retain([](const weft::loop::detail::timer_node& node) { return node.sequence % 7 != 0; });
  std::vector<std::pair<std::int64_t, std::uint64_t>> popped;
  while (!heap.empty()) {
    popped.emplace_back(heap.top().deadline, heap.top().sequence);
    heap.pop();
  }
  EXPECT_EQ(popped.size(), 1000u - 1000u / 7);
  EXPECT_TRUE(std::is_sorted(popped.begin(), popped.end()))
      << "by deadline, and by the order set among equal deadlines";
}

// The queue against a plain ordered set, in the shapes the loop gives it: a clock that only
// moves forward, a few common intervals (their runs) and many rare ones (more than the runs'
// table: collisions go to the heap), timers armed from an earlier reading (out of their run's
// order), pops between pushes, and lazy cancellation swept by retain(). Every timer must come
// out exactly once, in (deadline, sequence) order.
TEST(LoopTimers, TheQueueKeepsDeadlineOrderAcrossItsRunsAndItsHeap) {
  using weft::loop::detail::timer_node;
  weft::loop::detail::timer_heap queue;
  std::mt19937_64 random(19);
  std::set<std::pair<std::int64_t, std::uint64_t>> expected;
  std::set<std::uint64_t> cancelled;
  std::int64_t now = 1'000'000;
  std::uint64_t sequence = 1;
  std::size_t popped = 0;
  auto check_top = [&] {
    ASSERT_FALSE(queue.empty());
    ASSERT_FALSE(expected.empty());
    EXPECT_EQ(queue.top().deadline, expected.begin()->first);
    EXPECT_EQ(queue.top().sequence, expected.begin()->second);
    EXPECT_EQ(queue.top().slot, static_cast<std::uint32_t>(queue.top().sequence));
  };
  for (int round = 0; round < 200; ++round) {
    for (int index = 0; index < 100; ++index) {
      now += static_cast<std::int64_t>(random() % 3);
      std::uint64_t pick = random() % 10;
      std::int64_t interval = pick < 7 ? static_cast<std::int64_t>(pick) * 1'000'000  // common
                                       : static_cast<std::int64_t>(random() % 1000) * 7;
      std::int64_t read_at = random() % 8 == 0 ? now - 50 : now;  // an earlier reading
      timer_node node{read_at + interval, sequence, static_cast<std::uint32_t>(sequence)};
      ++sequence;
      queue.push(node, interval);
      expected.emplace(node.deadline, node.sequence);
      if (random() % 5 == 0) {
        cancelled.insert(node.sequence);
      }
    }
    ASSERT_EQ(queue.size(), expected.size());
    if (round % 10 == 9) {
      queue.retain([&](const timer_node& node) { return cancelled.count(node.sequence) == 0; });
      std::erase_if(expected, [&](const auto& entry) { return cancelled.count(entry.second); });
      cancelled.clear();
      ASSERT_EQ(queue.size(), expected.size());
    }
    for (std::uint64_t take = random() % 120; take > 0 && !expected.empty(); --take) {
      check_top();
      queue.pop();
      expected.erase(expected.begin());
      ++popped;
    }
  }
  std::size_t visited = 0;
  queue.for_each([&](const timer_node& node) {
    ++visited;
    EXPECT_EQ(expected.count({node.deadline, node.sequence}), 1u);
  });
  EXPECT_EQ(visited, expected.size());
  while (!expected.empty()) {
    check_top();
    queue.pop();
    expected.erase(expected.begin());
    ++popped;
  }
  EXPECT_TRUE(queue.empty());
  EXPECT_GT(popped, 10'000u);
}

TEST(LoopTimers, NothingFiresEarly) {
  with_loop([](event_loop& loop) {
    std::mt19937 random(11);
    int early = 0;
    int fired = 0;
    for (int index = 0; index < 300; ++index) {
      auto after = std::chrono::microseconds(random() % 20'000);
      auto set_at = clock_type::now();
      loop.delay(after, [&, set_at, after] {
        ++fired;
        if (clock_type::now() < set_at + after) {
          ++early;
        }
      });
    }
    loop.delay(0.0123456789, [&, set_at = clock_type::now()] {
      ++fired;
      if (clock_type::now() < set_at + std::chrono::nanoseconds(12'345'679)) {
        ++early;
      }
    });
    loop.run();
    EXPECT_EQ(fired, 301);
    EXPECT_EQ(early, 0);
  });
}

TEST(LoopTimers, ATimerSetLateInALongTickDoesNotFireEarly) {
  // A loop time cached at the tick's start (libuv's uv_now) would put this deadline 3 ms
  // before call time + 2 ms; the loop takes its time after the call instead.
  with_loop([](event_loop& loop) {
    clock_type::time_point set_at{};
    clock_type::time_point fired_at{};
    loop.defer([&] {
      auto start = clock_type::now();
      while (clock_type::now() < start + 3ms) {
        // a callback that works for 3 ms
      }
      set_at = clock_type::now();
      loop.delay(2ms, [&] { fired_at = clock_type::now(); });
    });
    loop.run();
    EXPECT_GE(fired_at, set_at + 2ms);
  });
}

TEST(LoopTimers, RepeatDoesNotPileUpAfterAStall) {
  with_loop([](event_loop& loop) {
    std::vector<clock_type::time_point> runs;
    watcher_id id{};
    id = loop.repeat(2ms, [&] {
      runs.push_back(clock_type::now());
      if (runs.size() == 3) {
        // A stall of fifteen intervals (a busy callback, not a wait).
        auto until = clock_type::now() + 30ms;
        while (clock_type::now() < until) {
        }
      }
      if (runs.size() == 6) {
        loop.off_repeat(id);
      }
    });
    loop.run();
    ASSERT_EQ(runs.size(), 6u);
    // After the stall it fires once, then again about an interval later (re-armed from the
    // start of the tick, a little before its callback reads the clock): no burst of missed
    // runs, which would come microseconds apart.
    EXPECT_GE(runs[4] - runs[3], 1ms);
    EXPECT_GE(runs[5] - runs[4], 1ms);
  });
}

TEST(LoopTimers, ZeroIntervalRepeatRunsOncePerTick) {
  with_loop([](event_loop& loop) {
    int ticks = 0;
    int repeats = 0;
    watcher_id id = loop.repeat(0.0, [&] { ++repeats; });
    // One defer per tick counts the ticks; defers run before timers, so the one of tick 100
    // removes the repeat before its turn in that tick.
    std::function<void()> count_tick = [&] {
      if (++ticks == 100) {
        EXPECT_TRUE(loop.off_repeat(id));
        return;
      }
      loop.defer(count_tick);
    };
    loop.defer(count_tick);
    loop.run();
    EXPECT_EQ(ticks, 100);
    EXPECT_EQ(repeats, 99) << "once in each of the first 99 ticks, never more";
  });
}

TEST(LoopTimers, HugeDurationsNeverFireAndDoNotOverflow) {
  with_loop([](event_loop& loop) {
    int fired = 0;
    loop.delay(1e300, [&] { ++fired; });
    loop.delay(std::numeric_limits<double>::infinity(), [&] { ++fired; });
    loop.delay(std::chrono::hours::max(), [&] { ++fired; });
    loop.delay(std::chrono::nanoseconds::max(), [&] { ++fired; });
    loop.delay(std::chrono::duration<double>(1e30), [&] { ++fired; });
    loop.repeat(1e300, [&] { ++fired; });
    EXPECT_EQ(loop.timer_count(), 6u);
    std::size_t removed = 0;
    loop.delay(20ms, [&] { removed = loop.delete_all_timers(); });
    loop.run();
    EXPECT_EQ(fired, 0);
    EXPECT_EQ(removed, 6u);
  });
}

TEST(LoopTimers, NegativeOrNaNDurationsAreInvalidArgumentsNamingTheValue) {
  with_loop([](event_loop& loop) {
    auto message_of = [](auto&& call) -> std::string {
      try {
        call();
      } catch (const std::invalid_argument& error) {
        return error.what();
      }
      return "no exception";
    };
    std::string negative = message_of([&] { loop.delay(-1.5, [] {}); });
    EXPECT_NE(negative.find("delay"), std::string::npos) << negative;
    EXPECT_NE(negative.find("-1.5"), std::string::npos) << negative;
    std::string not_a_number =
        message_of([&] { loop.repeat(std::numeric_limits<double>::quiet_NaN(), [] {}); });
    EXPECT_NE(not_a_number.find("repeat"), std::string::npos) << not_a_number;
    EXPECT_NE(not_a_number.find("NaN"), std::string::npos) << not_a_number;
    std::string chrono_negative = message_of([&] { loop.delay(-5ms, [] {}); });
    EXPECT_NE(chrono_negative.find("-0.005"), std::string::npos) << chrono_negative;
    std::string chrono_nan =
        message_of([&] { loop.delay(std::chrono::duration<double>(std::nan("")), [] {}); });
    EXPECT_NE(chrono_nan.find("NaN"), std::string::npos) << chrono_nan;
    EXPECT_THROW(loop.delay(1.0, nullptr), std::invalid_argument) << "an empty callback";
    EXPECT_EQ(loop.timer_count(), 0u) << "nothing was registered";
    loop.run();
  });
}

TEST(LoopTimers, TimerSetDuringATickRunsInALaterTick) {
  with_loop([](event_loop& loop) {
    std::vector<std::string> order;
    loop.delay(0.0, [&] {
      order.push_back("first");
      loop.delay(0.0, [&] { order.push_back("zero delay set in the tick"); });
      // A defer queued now runs at the start of the next tick: the zero delay must come after.
      loop.defer([&] { order.push_back("next tick"); });
    });
    loop.run();
    EXPECT_EQ(order,
              (std::vector<std::string>{"first", "next tick", "zero delay set in the tick"}));
  });
}

TEST(LoopTimers, TimerCancelledByAnEarlierCallbackOfTheSameTickDoesNotRun) {
  with_loop([](event_loop& loop) {
    bool second_ran = false;
    watcher_id second{};
    bool removed = false;
    loop.delay(0.0, [&] { removed = loop.off_delay(second); });
    second = loop.delay(0.0, [&] { second_ran = true; });
    loop.run();
    EXPECT_TRUE(removed);
    EXPECT_FALSE(second_ran);
  });
}

TEST(LoopTimers, DeleteAllTimersRemovesDelaysAndRepeatsOnly) {
  with_loop([](event_loop& loop) {
    int fired = 0;
    bool deferred_ran = false;
    for (int index = 0; index < 10; ++index) {
      loop.delay(10ms, [&] { ++fired; });
      loop.repeat(1ms, [&] { ++fired; });
    }
    loop.defer([&] { deferred_ran = true; });
    EXPECT_EQ(loop.timer_count(), 20u);
    EXPECT_EQ(loop.delete_all_timers(), 20u);
    EXPECT_EQ(loop.timer_count(), 0u);
    EXPECT_EQ(loop.delete_all_timers(), 0u);
    loop.run();
    EXPECT_EQ(fired, 0);
    EXPECT_TRUE(deferred_ran);
  });
}

TEST(LoopTimers, ManyCancelledTimersAreForgotten) {
  with_loop([](event_loop& loop) {
    // Far more cancels than live timers: the lazily removed nodes must not pile up or fire.
    int fired = 0;
    for (int round = 0; round < 50; ++round) {
      std::vector<watcher_id> ids;
      for (int index = 0; index < 2000; ++index) {
        ids.push_back(loop.delay(std::chrono::seconds(1 + index % 60), [&] { ++fired; }));
      }
      for (watcher_id id : ids) {
        ASSERT_TRUE(loop.off_delay(id));
      }
    }
    int ran = 0;
    loop.delay(1ms, [&] { ++ran; });
    loop.run();
    EXPECT_EQ(fired, 0);
    EXPECT_EQ(ran, 1);
  });
}

TEST(LoopTimers, TimersRunInsideWeftToo) {
  weft_test::run_clean([] {
    event_loop loop;
    int delays = 0;
    int repeats = 0;
    loop.delay(2ms, [&] { ++delays; });
    watcher_id id{};
    id = loop.repeat(1ms, [&] {
      if (++repeats == 4) {
        loop.off_repeat(id);
      }
    });
    loop.run();
    EXPECT_EQ(delays, 1);
    EXPECT_EQ(repeats, 4);
    EXPECT_EQ(loop.timer_count(), 0u);
  });
}

// The loop's timer comes due while the scheduler is too busy to look; the scheduler then
// blocks in the driver with nothing else due for an hour and an fd keeping it alive. The timer
// must still wake the idle loop (libuv 1.44 runs timers that are already due at the start of a
// blocking poll and then blocks anyway: the loop nudges the driver when its timer fires).
TEST(LoopTimers, ATimerThatComesDueWhileTheSchedulerIsBusyStillWakesTheLoop) {
  weft_loop_test::socket_pair pair;
  weft_test::run_clean([&] {
    event_loop loop;
    loop.on_readable(pair.ends[0], [] {});
    bool fired = false;
    loop.delay(2ms, [&] {
      fired = true;
      loop.off_readable(pair.ends[0]);
    });
    auto busy = weft::spawn([] {
      weft::yield();  // the loop goes idle, its driver timer armed
      auto until = clock_type::now() + 20ms;
      while (clock_type::now() < until) {  // busy: nobody polls the driver meanwhile
      }
      weft::sleep_for(std::chrono::hours(1));
    });
    auto start = clock_type::now();
    loop.run();
    EXPECT_TRUE(fired);
    EXPECT_LT(seconds_since(start), 5.0);
    busy.cancel();
    EXPECT_THROW(busy.await(), weft::cancelled_error);
  });
}

}  // namespace

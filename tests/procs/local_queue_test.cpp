// A worker's local run queue: FIFO for its owner, a hard capacity with overflow of the oldest
// half to the global queue, steals of half the items in one claim, and every item handed out
// exactly once while the owner and thieves race (also with random yields between the atomic
// steps). Plain threads: the queue is below the coroutine layer, so no run_clean here.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "procs/queue_items.hpp"

namespace {

using weft::procs::detail::global_queue;
using weft::procs::detail::local_queue;

using weft_procs_test::make_items;
using weft_procs_test::work_item;

std::vector<std::size_t> drain(local_queue<work_item>& queue) {
  std::vector<std::size_t> indexes;
  while (work_item* item = queue.pop()) {
    indexes.push_back(item->index);
  }
  return indexes;
}

std::vector<std::size_t> drain(global_queue<work_item>& queue) {
  std::vector<std::size_t> indexes;
  while (work_item* item = queue.pop()) {
    indexes.push_back(item->index);
  }
  return indexes;
}

using indexes = std::vector<std::size_t>;

TEST(LocalQueue, OwnerAlonePopsInFifoOrderAcrossTheRingsWrap) {
  local_queue<work_item> queue(4);
  auto items = make_items(9);
  for (std::size_t round = 0; round < 3; ++round) {
    for (std::size_t offset = 0; offset < 3; ++offset) {
      ASSERT_TRUE(queue.push_back(&items[round * 3 + offset]));
    }
    EXPECT_EQ(drain(queue), (indexes{round * 3, round * 3 + 1, round * 3 + 2}));
  }
  EXPECT_EQ(queue.pop(), nullptr);
  EXPECT_TRUE(queue.empty_hint());
}

TEST(LocalQueue, DefaultCapacityIs256) {
  local_queue<work_item> queue;
  EXPECT_EQ(queue.capacity(), 256u);
}

TEST(LocalQueue, FullQueueRefusesPushBackAndKeepsItsItems) {
  local_queue<work_item> queue(8);
  auto items = make_items(10);
  for (std::size_t index = 0; index < 8; ++index) {
    ASSERT_TRUE(queue.push_back(&items[index]));
  }
  EXPECT_FALSE(queue.push_back(&items[8]));
  EXPECT_EQ(queue.size_hint(), 8u);
  ASSERT_EQ(queue.pop(), &items[0]);
  EXPECT_TRUE(queue.push_back(&items[8]));
  EXPECT_FALSE(queue.push_back(&items[9]));
  EXPECT_EQ(drain(queue), (indexes{1, 2, 3, 4, 5, 6, 7, 8}));
}

TEST(LocalQueue, PushOverflowMovesTheOldestHalfAndTheItemToTheGlobalQueueInOrder) {
  local_queue<work_item> queue(8);
  global_queue<work_item> global;
  auto items = make_items(9);
  for (std::size_t index = 0; index < 8; ++index) {
    ASSERT_TRUE(queue.push_back(&items[index]));
  }
  queue.push_overflow(&items[8], global);
  EXPECT_EQ(global.size_hint(), 5u);
  EXPECT_EQ(queue.size_hint(), 4u);
  EXPECT_EQ(drain(global), (indexes{0, 1, 2, 3, 8}));
  EXPECT_EQ(drain(queue), (indexes{4, 5, 6, 7}));
}

TEST(LocalQueue, PushOverflowAppendsLocallyWhenRoomAppeared) {
  local_queue<work_item> queue(8);
  global_queue<work_item> global;
  auto items = make_items(4);
  for (std::size_t index = 0; index < 3; ++index) {
    ASSERT_TRUE(queue.push_back(&items[index]));
  }
  queue.push_overflow(&items[3], global);
  EXPECT_TRUE(global.empty_hint());
  EXPECT_EQ(drain(queue), (indexes{0, 1, 2, 3}));
}

TEST(LocalQueue, StealTakesHalfRoundedUpAndReturnsTheLastItTook) {
  local_queue<work_item> victim(8);
  local_queue<work_item> thief(8);
  auto items = make_items(5);
  for (std::size_t index = 0; index < 5; ++index) {
    ASSERT_TRUE(victim.push_back(&items[index]));
  }
  // 5 items: the thief claims 3 (0, 1, 2), runs 2 at once and queues 0 and 1 in order.
  EXPECT_EQ(victim.steal_into(thief), &items[2]);
  EXPECT_EQ(thief.size_hint(), 2u);
  EXPECT_EQ(victim.size_hint(), 2u);
  EXPECT_EQ(drain(thief), (indexes{0, 1}));
  // 2 items: half rounded up is 1, returned directly; the thief's queue stays empty.
  EXPECT_EQ(victim.steal_into(thief), &items[3]);
  EXPECT_TRUE(thief.empty_hint());
  EXPECT_EQ(victim.steal_into(thief), &items[4]);
  EXPECT_EQ(victim.steal_into(thief), nullptr);
  EXPECT_EQ(victim.pop(), nullptr);
}

TEST(LocalQueue, StealIsCappedByTheDestinationsFreeSlots) {
  local_queue<work_item> victim(8);
  local_queue<work_item> thief(4);
  auto items = make_items(11);
  for (std::size_t index = 0; index < 8; ++index) {
    ASSERT_TRUE(victim.push_back(&items[index]));
  }
  for (std::size_t index = 8; index < 11; ++index) {
    ASSERT_TRUE(thief.push_back(&items[index]));
  }
  // Half of 8 is 4, but the thief has room for one more item plus the one it returns.
  EXPECT_EQ(victim.steal_into(thief), &items[1]);
  EXPECT_EQ(drain(thief), (indexes{8, 9, 10, 0}));
  EXPECT_EQ(drain(victim), (indexes{2, 3, 4, 5, 6, 7}));
}

TEST(LocalQueue, SizeHintFollowsPushesPopsAndSteals) {
  local_queue<work_item> queue(16);
  local_queue<work_item> thief(16);
  auto items = make_items(10);
  EXPECT_TRUE(queue.empty_hint());
  for (std::size_t index = 0; index < 10; ++index) {
    ASSERT_TRUE(queue.push_back(&items[index]));
  }
  EXPECT_EQ(queue.size_hint(), 10u);
  queue.pop();
  EXPECT_EQ(queue.size_hint(), 9u);
  queue.steal_into(thief);  // takes 5: 4 queued in the thief, 1 returned
  EXPECT_EQ(queue.size_hint(), 4u);
  EXPECT_EQ(thief.size_hint(), 4u);
  EXPECT_FALSE(queue.empty_hint());
}

TEST(LocalQueue, MisuseIsALogicError) {
  EXPECT_THROW(local_queue<work_item>(6), std::logic_error);
  EXPECT_THROW(local_queue<work_item>(1), std::logic_error);
  EXPECT_THROW(local_queue<work_item>(0), std::logic_error);
  local_queue<work_item> queue(4);
  global_queue<work_item> global;
  EXPECT_THROW(queue.push_back(nullptr), std::logic_error);
  EXPECT_THROW(queue.push_overflow(nullptr, global), std::logic_error);
  EXPECT_THROW(queue.steal_into(queue), std::logic_error);
}

TEST(ProcsChaos, TheTestSwitchTurnsRandomYieldsOnAndOff) {
  using namespace weft::procs::detail;
  const bool before = chaos_enabled();
  set_chaos_for_testing(true);
  EXPECT_TRUE(chaos_enabled());
  for (int call = 0; call < 100; ++call) {
    chaos_point();
  }
  set_chaos_for_testing(false);
  EXPECT_FALSE(chaos_enabled());
  set_chaos_for_testing(before);
}

// --- races between the owner and thieves -------------------------------------------------

#if defined(WEFT_SANITIZE_THREAD)
constexpr std::size_t plain_item_count = 150'000;
constexpr std::size_t chaos_item_count = 20'000;
#elif defined(WEFT_SANITIZE_ADDRESS)
constexpr std::size_t plain_item_count = 200'000;
constexpr std::size_t chaos_item_count = 20'000;
#else
constexpr std::size_t plain_item_count = 1'000'000;
constexpr std::size_t chaos_item_count = 30'000;
#endif

constexpr std::size_t thief_count = 3;

struct race_outcome {
  std::size_t consumed = 0;
  std::size_t wrong_payloads = 0;  // items whose producer-written data the consumer missed
  std::size_t consumed_by_thieves = 0;
  std::size_t overflowed_batches = 0;
  std::size_t first_overflow_size = 0;            // global queue's length after the first overflow
  std::vector<std::size_t> items_not_taken_once;  // indexes whose counter is not exactly 1
};

// The owner (queue 0) pushes item_count items, popping one item for every two it pushes (and
// one more whenever its ring is full without overflow); thieves 1..3 steal from the other
// queues in turn into their own, and with overflow also pop batches from the global queue.
// Each thread drains its own queue before looking elsewhere and stops once the owner is done
// and every queue looks empty: whatever another thread still holds, that thread runs.
race_outcome race_owner_against_thieves(std::size_t item_count, std::size_t capacity,
                                        bool overflow) {
  auto items = make_items(item_count);
  std::vector<std::unique_ptr<local_queue<work_item>>> queues;
  for (std::size_t index = 0; index <= thief_count; ++index) {
    queues.push_back(std::make_unique<local_queue<work_item>>(capacity));
  }
  global_queue<work_item> global;
  std::atomic<std::size_t> thieves_running{0};
  std::atomic<bool> thieves_may_start{false};
  std::atomic<bool> owner_done_pushing{false};
  std::atomic<std::size_t> consumed{0};
  std::atomic<std::size_t> wrong_payloads{0};
  std::atomic<std::size_t> consumed_by_thieves{0};
  std::atomic<std::size_t> overflowed_batches{0};
  std::size_t first_overflow_size = 0;  // written by the owner, read after join

  auto consume = [&](work_item* item, std::size_t worker) {
    if (item->payload != item->index + 1) {
      wrong_payloads.fetch_add(1, std::memory_order_relaxed);
    }
    item->payload = 0;
    item->taken.fetch_add(1, std::memory_order_relaxed);
    consumed.fetch_add(1, std::memory_order_relaxed);
    if (worker != 0) {
      consumed_by_thieves.fetch_add(1, std::memory_order_relaxed);
    }
  };
  auto everything_looks_empty = [&] {
    for (auto& queue : queues) {
      if (!queue->empty_hint()) {
        return false;
      }
    }
    return global.empty_hint();
  };
  // Runs until the owner is done and nothing is left anywhere.
  auto work_until_quiet = [&](std::size_t worker) {
    local_queue<work_item>& own = *queues[worker];
    std::size_t next_victim = worker;
    for (;;) {
      while (work_item* item = own.pop()) {
        consume(item, worker);
      }
      work_item* found = nullptr;
      for (std::size_t attempt = 0; attempt < thief_count && found == nullptr; ++attempt) {
        next_victim = (next_victim + 1) % queues.size();
        if (next_victim == worker) {
          next_victim = (next_victim + 1) % queues.size();
        }
        found = queues[next_victim]->steal_into(own);
      }
      if (found == nullptr && overflow) {
        found = global.pop_batch(own, capacity / 2);
      }
      if (found != nullptr) {
        consume(found, worker);
        continue;
      }
      if (owner_done_pushing.load(std::memory_order_acquire) && everything_looks_empty()) {
        return;
      }
      std::this_thread::yield();
    }
  };

  std::vector<std::thread> thieves;
  for (std::size_t thief = 1; thief <= thief_count; ++thief) {
    thieves.emplace_back([&, thief] {
      thieves_running.fetch_add(1, std::memory_order_relaxed);
      while (!thieves_may_start.load(std::memory_order_acquire)) {
        std::this_thread::yield();
      }
      work_until_quiet(thief);
    });
  }

  std::thread owner([&] {
    local_queue<work_item>& own = *queues[0];
    // Racing only makes sense once the thieves are on a CPU (thread start-up is slow).
    while (thieves_running.load(std::memory_order_relaxed) < thief_count) {
      std::this_thread::yield();
    }
    // With overflow, the ring is filled (no pops) before the thieves start, so that the
    // first overflow is certain rather than left to the timing.
    const std::size_t start_thieves_at = overflow ? capacity : 0;
    for (std::size_t index = 0; index < item_count; ++index) {
      work_item* item = &items[index];
      item->payload = index + 1;
      if (overflow) {
        if (!own.push_back(item)) {
          own.push_overflow(item, global);
          overflowed_batches.fetch_add(1, std::memory_order_relaxed);
        }
      } else {
        while (!own.push_back(item)) {
          if (work_item* popped = own.pop()) {
            consume(popped, 0);
          }
        }
      }
      if (index == start_thieves_at) {
        first_overflow_size = global.size_hint();
        thieves_may_start.store(true, std::memory_order_release);
      }
      // Alternating phases: the ring fills up (one pop per two pushes), then hovers near
      // empty (two pops per push), where the owner's pop and the thieves' steals fight over
      // the same last item.
      // On an oversubscribed machine the owner would otherwise run whole phases alone.
      if (index % 512 == 0) {
        std::this_thread::yield();
      }
      if (index > start_thieves_at) {
        const bool hovering_near_empty = (index / 1024) % 2 == 1;
        const int pops = hovering_near_empty ? 2 : static_cast<int>(index % 2);
        for (int pop = 0; pop < pops; ++pop) {
          if (work_item* popped = own.pop()) {
            consume(popped, 0);
          }
        }
      }
    }
    thieves_may_start.store(true, std::memory_order_release);
    // Let at least one steal land before the owner empties its own ring, so that every run
    // exercises stealing (bounded, so that a broken steal fails the test instead of hanging).
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (consumed_by_thieves.load(std::memory_order_relaxed) == 0 && !own.empty_hint() &&
           std::chrono::steady_clock::now() < give_up) {
      std::this_thread::yield();
    }
    owner_done_pushing.store(true, std::memory_order_release);
    work_until_quiet(0);
  });

  owner.join();
  for (auto& thief : thieves) {
    thief.join();
  }

  race_outcome outcome;
  outcome.consumed = consumed.load();
  outcome.wrong_payloads = wrong_payloads.load();
  outcome.consumed_by_thieves = consumed_by_thieves.load();
  outcome.overflowed_batches = overflowed_batches.load();
  outcome.first_overflow_size = first_overflow_size;
  for (std::size_t index = 0; index < item_count; ++index) {
    if (items[index].taken.load() != 1) {
      outcome.items_not_taken_once.push_back(index);
    }
  }
  return outcome;
}

// Plain runs and runs with random yields between the queue's atomic steps.
class LocalQueueRace : public weft_procs_test::chaos_parameter_test {
 protected:
  std::size_t item_count() const {
    return chaos_parameter_test::item_count(plain_item_count, chaos_item_count);
  }
};

std::string describe(const std::vector<std::size_t>& bad) {
  std::string text;
  for (std::size_t index = 0; index < bad.size() && index < 10; ++index) {
    text += std::to_string(bad[index]) + " ";
  }
  return text;
}

TEST_P(LocalQueueRace, OwnerAndThreeThievesTakeEveryItemExactlyOnce) {
  const race_outcome outcome = race_owner_against_thieves(item_count(), 256, false);
  EXPECT_EQ(outcome.consumed, item_count());
  EXPECT_EQ(outcome.wrong_payloads, 0u);
  EXPECT_TRUE(outcome.items_not_taken_once.empty())
      << outcome.items_not_taken_once.size()
      << " items not taken exactly once, e.g. #: " << describe(outcome.items_not_taken_once);
  EXPECT_GT(outcome.consumed_by_thieves, 0u);
}

TEST_P(LocalQueueRace, WithOverflowToTheGlobalQueueEveryItemIsTakenExactlyOnce) {
  const race_outcome outcome = race_owner_against_thieves(item_count(), 16, true);
  EXPECT_EQ(outcome.consumed, item_count());
  EXPECT_EQ(outcome.wrong_payloads, 0u);
  EXPECT_TRUE(outcome.items_not_taken_once.empty())
      << outcome.items_not_taken_once.size()
      << " items not taken exactly once, e.g. #: " << describe(outcome.items_not_taken_once);
  EXPECT_EQ(outcome.first_overflow_size, 16u / 2 + 1);
  EXPECT_GT(outcome.overflowed_batches, 0u);
  EXPECT_GT(outcome.consumed_by_thieves, 0u);
}

INSTANTIATE_TEST_SUITE_P(Procs, LocalQueueRace, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "chaos" : "plain");
                         });

}  // namespace

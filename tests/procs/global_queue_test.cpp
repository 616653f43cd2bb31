// The global run queue: FIFO across single and batch pushes, batch pops limited by the caller
// and by the destination's room, misuse reported, and every item handed out exactly once to
// concurrent producers and consumers (also with random yields in the local queues' steps).
// Plain threads: the queue is below the coroutine layer, so no run_clean here.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
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

using indexes = std::vector<std::size_t>;

indexes drain(global_queue<work_item>& queue) {
  indexes popped;
  while (work_item* item = queue.pop()) {
    popped.push_back(item->index);
  }
  return popped;
}

indexes drain(local_queue<work_item>& queue) {
  indexes popped;
  while (work_item* item = queue.pop()) {
    popped.push_back(item->index);
  }
  return popped;
}

// Links items[first .. first+count-1] through next_ready, as a batch push expects.
void link_chain(work_item* items, std::size_t first, std::size_t count) {
  for (std::size_t index = first; index + 1 < first + count; ++index) {
    items[index].next_ready = &items[index + 1];
  }
}

TEST(GlobalQueue, PopsInFifoOrderAcrossSingleAndBatchPushes) {
  global_queue<work_item> queue;
  auto items = make_items(7);
  EXPECT_TRUE(queue.empty_hint());
  EXPECT_EQ(queue.pop(), nullptr);
  queue.push(&items[0]);
  link_chain(items.get(), 1, 4);
  queue.push_batch(&items[1], &items[4], 4);
  queue.push(&items[5]);
  queue.push_batch(&items[6], &items[6], 1);
  EXPECT_EQ(queue.size_hint(), 7u);
  EXPECT_EQ(drain(queue), (indexes{0, 1, 2, 3, 4, 5, 6}));
  EXPECT_TRUE(queue.empty_hint());
  // Emptied and refilled: the tail was reset along with the head.
  queue.push(&items[3]);
  queue.push(&items[2]);
  EXPECT_EQ(drain(queue), (indexes{3, 2}));
}

TEST(GlobalQueue, PopBatchReturnsTheFirstAndQueuesUpToMaxMinusOneInOrder) {
  global_queue<work_item> queue;
  local_queue<work_item> destination(16);
  auto items = make_items(10);
  for (std::size_t index = 0; index < 10; ++index) {
    queue.push(&items[index]);
  }
  EXPECT_EQ(queue.pop_batch(destination, 3), &items[0]);
  EXPECT_EQ(queue.size_hint(), 7u);
  EXPECT_EQ(drain(destination), (indexes{1, 2}));
  EXPECT_EQ(queue.pop_batch(destination, 1), &items[3]);
  EXPECT_TRUE(destination.empty_hint());
  // Asking for more than there is takes what there is.
  EXPECT_EQ(queue.pop_batch(destination, 100), &items[4]);
  EXPECT_EQ(drain(destination), (indexes{5, 6, 7, 8, 9}));
  EXPECT_TRUE(queue.empty_hint());
  EXPECT_EQ(queue.pop(), nullptr);
}

TEST(GlobalQueue, PopBatchIsCappedByTheDestinationsFreeSlots) {
  global_queue<work_item> queue;
  local_queue<work_item> destination(4);
  auto items = make_items(12);
  ASSERT_TRUE(destination.push_back(&items[10]));
  ASSERT_TRUE(destination.push_back(&items[11]));
  for (std::size_t index = 0; index < 10; ++index) {
    queue.push(&items[index]);
  }
  // Room for 2 in the destination plus the one returned.
  EXPECT_EQ(queue.pop_batch(destination, 8), &items[0]);
  EXPECT_EQ(queue.size_hint(), 7u);
  EXPECT_EQ(drain(destination), (indexes{10, 11, 1, 2}));
  EXPECT_EQ(drain(queue), (indexes{3, 4, 5, 6, 7, 8, 9}));
}

TEST(GlobalQueue, PopBatchOnAnEmptyQueueLeavesTheDestinationAlone) {
  global_queue<work_item> queue;
  local_queue<work_item> destination(4);
  auto items = make_items(1);
  ASSERT_TRUE(destination.push_back(&items[0]));
  EXPECT_EQ(queue.pop_batch(destination, 4), nullptr);
  EXPECT_EQ(drain(destination), (indexes{0}));
}

TEST(GlobalQueue, MisuseIsALogicError) {
  global_queue<work_item> queue;
  local_queue<work_item> destination(4);
  auto items = make_items(2);
  EXPECT_THROW(queue.push(nullptr), std::logic_error);
  EXPECT_THROW(queue.push_batch(nullptr, &items[0], 1), std::logic_error);
  EXPECT_THROW(queue.push_batch(&items[0], nullptr, 1), std::logic_error);
  EXPECT_THROW(queue.push_batch(&items[0], &items[0], 0), std::logic_error);
  queue.push(&items[1]);
  EXPECT_THROW(queue.pop_batch(destination, 0), std::logic_error);
  EXPECT_EQ(queue.size_hint(), 1u);
}

#if defined(WEFT_SANITIZE_THREAD)
constexpr std::size_t plain_item_count = 150'000;
constexpr std::size_t chaos_item_count = 20'000;
#elif defined(WEFT_SANITIZE_ADDRESS)
constexpr std::size_t plain_item_count = 100'000;
constexpr std::size_t chaos_item_count = 20'000;
#else
constexpr std::size_t plain_item_count = 400'000;
constexpr std::size_t chaos_item_count = 50'000;
#endif

class GlobalQueueRace : public weft_procs_test::chaos_parameter_test {
 protected:
  std::size_t item_count() const {
    return chaos_parameter_test::item_count(plain_item_count, chaos_item_count);
  }
};

// Two producers push their halves, alternating single pushes and chains of 1..7; two
// consumers alternate pop and pop_batch (into their own local queue, which they drain), and
// stop once both producers are done and the queue is empty.
TEST_P(GlobalQueueRace, ConcurrentProducersAndConsumersTakeEveryItemExactlyOnce) {
  const std::size_t count = item_count();
  auto items = make_items(count);
  global_queue<work_item> queue;
  std::atomic<int> producers_done{0};
  std::atomic<std::size_t> consumed{0};
  std::atomic<std::size_t> wrong_payloads{0};

  auto produce = [&](std::size_t begin, std::size_t end) {
    std::size_t index = begin;
    std::size_t round = 0;
    while (index < end) {
      if (round % 2 == 0) {
        items[index].payload = index + 1;
        queue.push(&items[index++]);
      } else {
        const std::size_t chain = std::min<std::size_t>(1 + round % 7, end - index);
        for (std::size_t offset = 0; offset < chain; ++offset) {
          items[index + offset].payload = index + offset + 1;
        }
        link_chain(items.get(), index, chain);
        queue.push_batch(&items[index], &items[index + chain - 1], chain);
        index += chain;
      }
      ++round;
    }
    producers_done.fetch_add(1, std::memory_order_release);
  };
  auto consume_until_done = [&] {
    local_queue<work_item> own(8);
    auto take = [&](work_item* item) {
      if (item->payload != item->index + 1) {
        wrong_payloads.fetch_add(1, std::memory_order_relaxed);
      }
      item->payload = 0;
      item->taken.fetch_add(1, std::memory_order_relaxed);
      consumed.fetch_add(1, std::memory_order_relaxed);
    };
    for (std::size_t round = 0;; ++round) {
      work_item* item = nullptr;
      if (round % 2 == 0) {
        item = queue.pop();
      } else if ((item = queue.pop_batch(own, 5)) != nullptr) {
        while (work_item* queued = own.pop()) {
          take(queued);
        }
      }
      if (item != nullptr) {
        take(item);
        continue;
      }
      if (producers_done.load(std::memory_order_acquire) == 2 && queue.empty_hint()) {
        return;
      }
      std::this_thread::yield();
    }
  };

  std::thread first_producer(produce, 0, count / 2);
  std::thread second_producer(produce, count / 2, count);
  std::thread first_consumer(consume_until_done);
  std::thread second_consumer(consume_until_done);
  first_producer.join();
  second_producer.join();
  first_consumer.join();
  second_consumer.join();

  EXPECT_EQ(consumed.load(), count);
  EXPECT_EQ(wrong_payloads.load(), 0u);
  std::size_t not_once = 0;
  for (std::size_t index = 0; index < count; ++index) {
    if (items[index].taken.load() != 1) {
      ++not_once;
    }
  }
  EXPECT_EQ(not_once, 0u) << "items not taken exactly once";
  EXPECT_TRUE(queue.empty_hint());
}

INSTANTIATE_TEST_SUITE_P(Procs, GlobalQueueRace, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "chaos" : "plain");
                         });

}  // namespace

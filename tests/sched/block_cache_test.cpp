// The small-block allocator (weft/detail/blocks.hpp) behind coroutine control blocks, scope
// members and procs processes: a live block is never handed out twice, blocks keep their
// contents while live, and the producer/consumer pattern (one thread allocates, another frees,
// so blocks travel back through the depot) neither corrupts nor loses anything. TSan checks the
// depot's hand-off in the tsan preset.
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "weft/detail/blocks.hpp"

namespace {

using weft::detail::allocate_block;
using weft::detail::deallocate_block;

// Fills a block with a pattern derived from `seed`, and checks it.
void stamp(void* block, std::size_t size, std::uint64_t seed) {
  auto* bytes = static_cast<unsigned char*>(block);
  for (std::size_t index = 0; index < size; ++index) {
    bytes[index] = static_cast<unsigned char>(seed * 131 + index);
  }
}
bool stamped(const void* block, std::size_t size, std::uint64_t seed) {
  const auto* bytes = static_cast<const unsigned char*>(block);
  for (std::size_t index = 0; index < size; ++index) {
    if (bytes[index] != static_cast<unsigned char>(seed * 131 + index)) {
      return false;
    }
  }
  return true;
}

TEST(BlockCache, LiveBlocksAreDistinctAlignedAndKeepTheirContentsAcrossRefills) {
  // Enough blocks per size to go through the thread's lists, the depot and fresh memory, with
  // frees in between so that recycled blocks are handed out again.
  const std::size_t sizes[] = {8, 64, 100, 192, 1000, 1024, 4096};
  for (std::size_t size : sizes) {
    std::vector<void*> live;
    std::set<void*> addresses;
    for (int round = 0; round < 3; ++round) {
      for (std::uint64_t index = 0; index < 700; ++index) {
        void* block = allocate_block(size);
        ASSERT_EQ(reinterpret_cast<std::uintptr_t>(block) % alignof(std::max_align_t), 0u);
        ASSERT_TRUE(addresses.insert(block).second) << "a live block was handed out twice";
        stamp(block, size, reinterpret_cast<std::uintptr_t>(block));
        live.push_back(block);
      }
      // Free every other one, oldest first, and check the others survived.
      std::vector<void*> kept;
      for (std::size_t index = 0; index < live.size(); ++index) {
        void* block = live[index];
        ASSERT_TRUE(stamped(block, size, reinterpret_cast<std::uintptr_t>(block)));
        if (index % 2 == 0) {
          addresses.erase(block);
          deallocate_block(block, size);
        } else {
          kept.push_back(block);
        }
      }
      live = std::move(kept);
    }
    for (void* block : live) {
      ASSERT_TRUE(stamped(block, size, reinterpret_cast<std::uintptr_t>(block)));
      deallocate_block(block, size);
    }
  }
}

TEST(BlockCache, BlocksAllocatedOnOneThreadAndFreedOnAnotherStayIntact) {
  // The procs pattern: a spawner allocates, a worker frees. The consumer checks every block's
  // stamp before freeing it; the producer keeps allocating (refilling from the depot what the
  // consumer gave back) and checks that no live block is handed out twice.
  constexpr std::size_t total = 200000;
  constexpr std::size_t size = 48;
  std::mutex guard;
  std::condition_variable changed;
  std::deque<std::pair<void*, std::uint64_t>> handed;
  std::set<void*> live;  // under guard: blocks allocated and not yet freed
  bool duplicate = false;
  std::size_t corrupt = 0;
  std::thread consumer([&] {
    for (std::size_t done = 0; done < total; ++done) {
      std::pair<void*, std::uint64_t> item;
      {
        std::unique_lock lock(guard);
        changed.wait(lock, [&] { return !handed.empty(); });
        item = handed.front();
        handed.pop_front();
        live.erase(item.first);
      }
      if (!stamped(item.first, size, item.second)) {
        ++corrupt;
      }
      deallocate_block(item.first, size);
    }
  });
  for (std::uint64_t index = 0; index < total; ++index) {
    void* block = allocate_block(size);
    stamp(block, size, index);
    std::lock_guard lock(guard);
    if (!live.insert(block).second) {
      duplicate = true;
    }
    handed.emplace_back(block, index);
    changed.notify_one();
  }
  consumer.join();
  EXPECT_FALSE(duplicate) << "a block was handed out while still live";
  EXPECT_EQ(corrupt, 0u) << "blocks were written to while live";
  EXPECT_TRUE(live.empty());
}

}  // namespace

// coroutine::set_prefetch_hint: the scheduler prefetches what a queued coroutine's hint points at
// while the coroutine before it runs (scheduler_core::prefetch_successors), whatever the number of
// coroutines alive, and with it, once more are alive than a core's cache holds, the stack of a
// suspended one. A prefetch never faults and nothing reads through a hint, so a hint may point
// anywhere, at memory already freed or that no read may touch, and it changes no order.
#include <sys/mman.h>

#include <vector>

#include <gtest/gtest.h>

#include "test_support.hpp"
#include "weft/sched/detail/coroutine.hpp"
#include "weft/weft.hpp"

namespace {

using weft_test::fifo_options;
using weft_test::run_clean;

// A page that any read faults on (PROT_NONE), kept reserved for the test so that nothing else
// can be mapped there meanwhile.
struct unreadable_page {
  unreadable_page()
      : at(static_cast<const char*>(
            ::mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0))) {}
  ~unreadable_page() {
    if (at != MAP_FAILED) {
      ::munmap(const_cast<char*>(at), 4096);
    }
  }
  unreadable_page(const unreadable_page&) = delete;
  unreadable_page& operator=(const unreadable_page&) = delete;
  const char* at;
};

TEST(PrefetchHint, HintsAtUnreadableMemoryNeverFaultAndChangeNoOrder) {
  unreadable_page page;
  ASSERT_NE(page.at, MAP_FAILED);
  const char* nowhere = page.at;
  // Past the threshold of the stack prefetch too (256 coroutines alive), every coroutine hinted
  // both while it has never run (a server's resumed connection) and while it is suspended (one
  // waiting for its socket), at the unreadable page and at its last line.
  constexpr int count = 600;
  std::vector<int> order;
  run_clean(
      [&] {
        std::vector<weft::task<void>> members;
        members.reserve(count);
        for (int index = 0; index < count; ++index) {
          members.push_back(weft::spawn([&, index] {
            order.push_back(index);
            weft::detail::running_coroutine(weft::current_scheduler())
                ->set_prefetch_hint(nowhere + 4096 - 64);
            weft::yield();
            order.push_back(count + index);
          }));
          members.back().control_block()->set_prefetch_hint(nowhere);
        }
        for (auto& member : members) {
          member.await();
        }
      },
      fifo_options());
  ASSERT_EQ(order.size(), 2u * count);
  for (int index = 0; index < 2 * count; ++index) {
    EXPECT_EQ(order[static_cast<std::size_t>(index)], index) << "at " << index;
  }
}

}  // namespace

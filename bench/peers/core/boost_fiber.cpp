// Peer: Boost.Fiber with its default round_robin scheduler, on one thread.
//
// Every fiber gets a 256 KiB stack from slab_stack_allocator below: large MAP_NORESERVE slabs
// carved into stacks, free stacks kept in a list outside the stacks. That is the same size and
// the same strategy as weft's default stacks (lazily committed, pooled, no guard pages past a
// budget), so the numbers compare the fiber runtimes rather than two stack allocators. (Boost's
// own fixedsize_stack would mmap and munmap per fiber; pooled_fixedsize_stack writes a free-list
// link into every stack and so commits an extra page per fiber.)
//
// yield_switch: two fibers call this_fiber::yield() in a loop, main joins both; ns per switch =
//   timed wall time / number of yields.
// spawn_run_complete: batches of fibers with empty bodies; all but the last are detached, main
//   joins the last (the ready queue is FIFO, so the batch has finished); ns = wall time / count.
// suspended_memory: N fibers block on one condition variable; RSS from /proc/self/statm before
//   creating them and once all are blocked; bytes per fiber = RSS delta / N.
// sleep_timers: N fibers each this_fiber::sleep_for a duration from the shared splitmix64 draw;
//   main joins all; result = wall time from before the first spawn to the last join, minus the
//   longest drawn sleep, in ms.
#include <sys/mman.h>

#include <boost/context/stack_context.hpp>
#include <boost/fiber/all.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "bench_util.hpp"

namespace {

class stack_slabs {
 public:
  static constexpr std::size_t stack_size = 256 * 1024;
  static constexpr std::size_t stacks_per_slab = 64;

  void* take() {
    if (free_.empty()) {
      grow();
    }
    void* base = free_.back();
    free_.pop_back();
    return base;
  }
  void give_back(void* base) { free_.push_back(base); }

 private:
  void grow() {
    std::size_t bytes = stack_size * stacks_per_slab;
    void* slab = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (slab == MAP_FAILED) {
      std::perror("mmap stack slab");
      std::exit(1);
    }
    // Pushed highest first so that stacks are handed out in address order.
    for (std::size_t index = stacks_per_slab; index-- > 0;) {
      free_.push_back(static_cast<char*>(slab) + index * stack_size);
    }
  }

  std::vector<void*> free_;
};

stack_slabs slabs;

// Boost.Context StackAllocator concept: allocate() returns the stack's top and size.
class slab_stack_allocator {
 public:
  boost::context::stack_context allocate() {
    boost::context::stack_context context;
    context.size = stack_slabs::stack_size;
    context.sp = static_cast<char*>(slabs.take()) + stack_slabs::stack_size;
    return context;
  }
  void deallocate(boost::context::stack_context& context) noexcept {
    slabs.give_back(static_cast<char*>(context.sp) - context.size);
  }
};

template <class Function>
boost::fibers::fiber make_fiber(Function&& function) {
  return boost::fibers::fiber(std::allocator_arg, slab_stack_allocator{},
                              std::forward<Function>(function));
}

double time_yields(std::uint64_t switches) {
  std::uint64_t rounds = switches / 2;
  auto body = [rounds] {
    for (std::uint64_t round = 0; round < rounds; ++round) {
      boost::this_fiber::yield();
    }
  };
  auto start = bench::clock::now();
  boost::fibers::fiber a = make_fiber(body);
  boost::fibers::fiber b = make_fiber(body);
  a.join();
  b.join();
  auto end = bench::clock::now();
  return bench::nanoseconds_between(start, end);
}

}  // namespace

int main(int argc, char** argv) {
  bench::arguments arguments = bench::parse_arguments(argc, argv);
  bench::sizes sizes = bench::sizes_for(arguments);

  if (arguments.wants("suspended_memory")) {
    boost::fibers::mutex mutex;
    boost::fibers::condition_variable gate;
    boost::fibers::condition_variable all_done;
    bool open = false;
    std::uint64_t finished = 0;
    std::uint64_t count = sizes.suspended;
    std::uint64_t before = bench::resident_bytes();
    for (std::uint64_t index = 0; index < count; ++index) {
      make_fiber([&] {
        std::unique_lock<boost::fibers::mutex> lock(mutex);
        gate.wait(lock, [&] { return open; });
        if (++finished == count) {
          all_done.notify_one();
        }
      }).detach();
    }
    boost::this_fiber::yield();  // every new fiber runs once and blocks on the gate
    std::uint64_t after = bench::resident_bytes();
    {
      std::unique_lock<boost::fibers::mutex> lock(mutex);
      open = true;
      gate.notify_all();
      all_done.wait(lock, [&] { return finished == count; });
    }
    bench::report("suspended_memory", "B",
                  static_cast<double>(after - before) / static_cast<double>(count));
  }

  if (arguments.wants("yield_switch")) {
    time_yields(sizes.warmup_switches);
    double elapsed = time_yields(sizes.switches);
    bench::report("yield_switch", "ns", elapsed / static_cast<double>(sizes.switches));
  }

  if (arguments.wants("spawn_run_complete")) {
    std::uint64_t count = sizes.spawn_batches * sizes.spawn_batch;
    auto start = bench::clock::now();
    for (std::uint64_t batch = 0; batch < sizes.spawn_batches; ++batch) {
      for (std::uint64_t index = 1; index < sizes.spawn_batch; ++index) {
        make_fiber([] {}).detach();
      }
      make_fiber([] {}).join();
    }
    auto end = bench::clock::now();
    bench::report("spawn_run_complete", "ns",
                  bench::nanoseconds_between(start, end) / static_cast<double>(count));
  }

  if (arguments.wants("sleep_timers")) {
    bench::splitmix64 random(bench::sleep_seed);
    std::vector<std::uint64_t> sleeps(sizes.sleepers);
    std::uint64_t longest = 0;
    for (std::uint64_t& sleep : sleeps) {
      sleep = random.next() % (sizes.max_sleep_ms + 1);
      longest = std::max(longest, sleep);
    }
    std::vector<boost::fibers::fiber> fibers;
    fibers.reserve(sizes.sleepers);
    auto start = bench::clock::now();
    for (std::uint64_t sleep : sleeps) {
      fibers.push_back(
          make_fiber([sleep] { boost::this_fiber::sleep_for(std::chrono::milliseconds(sleep)); }));
    }
    for (boost::fibers::fiber& fiber : fibers) {
      fiber.join();
    }
    auto end = bench::clock::now();
    bench::report("sleep_timers", "ms",
                  bench::milliseconds_between(start, end) - static_cast<double>(longest));
  }
  return 0;
}

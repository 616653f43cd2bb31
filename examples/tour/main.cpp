// A short tour of weft's coroutine core: run by `make demo`.
//
//   1. 100,000 coroutines spawned and finished (most of them start in place, on the stack of
//      the one that just ended, without a context switch);
//   2. a yield ping-pong between two coroutines, one context switch per yield;
//   3. a sleep: the scheduler blocks in the libuv reactor when nothing is runnable;
//   4. a deliberate deadlock, caught, reported and turned into weft::deadlock_error;
// then the scheduler's statistics.
#include <weft/weft.hpp>

#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>

namespace {

using std::chrono::duration;
using std::chrono::steady_clock;

double elapsed_ns(steady_clock::time_point since) {
  return duration<double, std::nano>(steady_clock::now() - since).count();
}

void print_stats(const char* title, const weft::scheduler_stats& stats) {
  std::printf(
      "  %s: %llu spawned, %llu finished, %llu started in place, %llu switches, "
      "%llu stacks mapped (%llu guarded), %llu reactor waits\n",
      title, static_cast<unsigned long long>(stats.spawned),
      static_cast<unsigned long long>(stats.finished),
      static_cast<unsigned long long>(stats.started_in_place),
      static_cast<unsigned long long>(stats.switches),
      static_cast<unsigned long long>(stats.stacks_allocated),
      static_cast<unsigned long long>(stats.stacks_guarded),
      static_cast<unsigned long long>(stats.reactor_waits));
}

}  // namespace

int main() {
  std::printf("weft tour\n\n");

  // 1. Spawn and finish 100k coroutines.
  {
    constexpr int count = 100'000;
    weft::scheduler scheduler;
    long finished = 0;
    auto start = steady_clock::now();
    scheduler.run([&] {
      // In batches, as a server would: each yield lets the batch run (in place, one stack).
      for (int batch = 0; batch < count / 1000; ++batch) {
        for (int index = 0; index < 1000; ++index) {
          weft::spawn([&] { ++finished; });
        }
        weft::yield();
      }
    });
    std::printf("1. %d coroutines spawned and finished in %.1f ms (%.0f ns each)\n", count,
                elapsed_ns(start) / 1e6, elapsed_ns(start) / count);
    print_stats("stats", scheduler.stats());
    if (finished != count) {
      std::printf("unexpected: %ld finished\n", finished);
      return 1;
    }
  }

  // 2. Yield ping-pong.
  {
    constexpr int rounds = 1'000'000;
    weft::scheduler scheduler;
    auto start = steady_clock::now();
    scheduler.run([&] {
      auto ping = weft::spawn(
          [] {
            for (int round = 0; round < rounds; ++round) weft::yield();
          },
          {.name = "ping"});
      auto pong = weft::spawn(
          [] {
            for (int round = 0; round < rounds; ++round) weft::yield();
          },
          {.name = "pong"});
      ping.await();
      pong.await();
    });
    auto switches = scheduler.stats().switches;
    std::printf("\n2. ping-pong: %d yields each, %llu switches, %.1f ns per switch\n", rounds,
                static_cast<unsigned long long>(switches), elapsed_ns(start) / switches);
  }

  // 3. Sleeping coroutines wake in deadline order.
  {
    std::string order;
    weft::run([&] {
      for (int delay : {30, 10, 20}) {
        weft::spawn([&order, delay] {
          weft::sleep_for(std::chrono::milliseconds(delay));
          order += std::to_string(delay) + "ms ";
        });
      }
    });
    std::printf("\n3. three sleepers (30, 10, 20 ms) woke as: %s\n", order.c_str());
  }

  // 4. A deadlock: two coroutines awaiting each other.
  {
    weft::run_options options;
    options.deadlock_reporter = [](std::string_view report) {
      std::printf("\n4. deadlock report:\n%.*s", static_cast<int>(report.size()), report.data());
    };
    weft::scheduler scheduler(std::move(options));
    try {
      scheduler.run([] {
        weft::task<void> first;
        weft::task<void> second;
        first = weft::spawn([&] { second.await(); }, {.name = "first"});
        second = weft::spawn([&] { first.await(); }, {.name = "second"});
        first.await();
      });
      std::printf("unexpected: the deadlock went unnoticed\n");
      return 1;
    } catch (const weft::deadlock_error& error) {
      std::printf("   run() threw weft::deadlock_error: %s\n", error.what());
    }
    print_stats("stats", scheduler.stats());
  }
  return 0;
}

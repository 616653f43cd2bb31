// The weft side of the `core` comparison suite (bench/run.py runs it beside the peers in
// bench/peers/core/). Every benchmark runs on a fresh weft::scheduler with default options:
// default 256 KiB lazily committed stacks, the default guard budget, FIFO order.
//
// yield_switch: main spawns two coroutines that each call weft::yield() in a loop and awaits
//   both; with only those two runnable, every yield is one switch to the other. ns per switch =
//   timed wall time / number of yields (the scheduler's own switch count is printed to stderr as
//   a cross-check).
// spawn_run_complete: main spawns batches of coroutines with empty bodies, drops the handles of
//   all but the last (detached) and awaits the last; spawn is lazy and FIFO, so when the last
//   has finished the whole batch has. ns per coroutine = wall time / count.
// suspended_memory: main spawns one "gate" coroutine sleeping for a day and N coroutines that
//   await the gate, yields once so that all of them start and suspend, and reads RSS from
//   /proc/self/statm before spawning and then; bytes per coroutine = RSS delta / N. The gate is
//   then cancelled (it catches the cancellation and returns), which wakes every waiter.
// sleep_timers: main spawns N coroutines that weft::sleep_for a duration from the shared
//   splitmix64 draw (the same durations in every program) and awaits them all in order; result
//   = wall time from before the first spawn to after the last await, minus the longest drawn
//   sleep, in ms.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <vector>
#include <weft/weft.hpp>

#include "bench_util.hpp"

namespace {

void report_stats(const char* benchmark, const weft::scheduler_stats& stats) {
  std::fprintf(stderr,
               "# %s: switches=%llu spawned=%llu started_in_place=%llu max_live=%llu "
               "stacks_allocated=%llu stacks_guarded=%llu reactor_polls=%llu reactor_waits=%llu\n",
               benchmark, static_cast<unsigned long long>(stats.switches),
               static_cast<unsigned long long>(stats.spawned),
               static_cast<unsigned long long>(stats.started_in_place),
               static_cast<unsigned long long>(stats.max_live_coroutines),
               static_cast<unsigned long long>(stats.stacks_allocated),
               static_cast<unsigned long long>(stats.stacks_guarded),
               static_cast<unsigned long long>(stats.reactor_polls),
               static_cast<unsigned long long>(stats.reactor_waits));
}

double time_yields(std::uint64_t switches) {
  std::uint64_t rounds = switches / 2;
  weft::scheduler scheduler;
  double elapsed = scheduler.run([rounds] {
    auto body = [rounds] {
      for (std::uint64_t round = 0; round < rounds; ++round) {
        weft::yield();
      }
    };
    auto start = bench::clock::now();
    weft::task<void> a = weft::spawn(body, {.name = "ping"});
    weft::task<void> b = weft::spawn(body, {.name = "pong"});
    a.await();
    b.await();
    return bench::nanoseconds_between(start, bench::clock::now());
  });
  std::uint64_t counted = scheduler.stats().switches;
  if (counted + 16 < switches || counted > switches + 16) {
    std::fprintf(stderr, "# yield_switch: scheduler counted %llu switches for %llu yields\n",
                 static_cast<unsigned long long>(counted),
                 static_cast<unsigned long long>(switches));
  }
  report_stats("yield_switch", scheduler.stats());
  return elapsed;
}

void suspended_memory(const bench::sizes& sizes) {
  std::uint64_t count = sizes.suspended;
  std::uint64_t woken = 0;
  weft::scheduler scheduler;
  double per_coroutine = scheduler.run([&] {
    std::uint64_t before = bench::resident_bytes();
    weft::task<void> gate = weft::spawn(
        [] {
          try {
            weft::sleep_for(std::chrono::hours(24));
          } catch (const weft::cancelled_error&) {
            // opening the gate: return normally so every waiter wakes without an exception
          }
        },
        {.name = "gate"});
    for (std::uint64_t index = 0; index < count; ++index) {
      weft::spawn([gate, &woken]() mutable {
        gate.await();
        ++woken;
      });
    }
    weft::yield();  // every coroutine spawned above starts and suspends on the gate
    std::uint64_t after = bench::resident_bytes();
    gate.cancel("benchmark over");
    return static_cast<double>(after - before) / static_cast<double>(count);
  });
  report_stats("suspended_memory", scheduler.stats());
  if (woken != count) {
    std::fprintf(stderr, "suspended_memory: only %llu of %llu waiters woke\n",
                 static_cast<unsigned long long>(woken), static_cast<unsigned long long>(count));
    std::exit(1);
  }
  bench::report("suspended_memory", "B", per_coroutine);
}

void spawn_run_complete(const bench::sizes& sizes) {
  std::uint64_t count = sizes.spawn_batches * sizes.spawn_batch;
  weft::scheduler scheduler;
  double elapsed = scheduler.run([&] {
    auto start = bench::clock::now();
    for (std::uint64_t batch = 0; batch < sizes.spawn_batches; ++batch) {
      for (std::uint64_t index = 1; index < sizes.spawn_batch; ++index) {
        weft::spawn([] {});
      }
      weft::spawn([] {}).await();
    }
    return bench::nanoseconds_between(start, bench::clock::now());
  });
  report_stats("spawn_run_complete", scheduler.stats());
  bench::report("spawn_run_complete", "ns", elapsed / static_cast<double>(count));
}

void sleep_timers(const bench::sizes& sizes) {
  bench::splitmix64 random(bench::sleep_seed);
  std::vector<std::uint64_t> sleeps(sizes.sleepers);
  std::uint64_t longest = 0;
  for (std::uint64_t& sleep : sleeps) {
    sleep = random.next() % (sizes.max_sleep_ms + 1);
    longest = std::max(longest, sleep);
  }
  weft::scheduler scheduler;
  double elapsed = scheduler.run([&] {
    std::vector<weft::task<void>> tasks;
    tasks.reserve(sleeps.size());
    auto start = bench::clock::now();
    for (std::uint64_t sleep : sleeps) {
      tasks.push_back(weft::spawn([sleep] { weft::sleep_for(std::chrono::milliseconds(sleep)); }));
    }
    for (weft::task<void>& task : tasks) {
      task.await();
    }
    return bench::milliseconds_between(start, bench::clock::now());
  });
  report_stats("sleep_timers", scheduler.stats());
  bench::report("sleep_timers", "ms", elapsed - static_cast<double>(longest));
}

}  // namespace

int main(int argc, char** argv) {
  bench::arguments arguments = bench::parse_arguments(argc, argv);
  bench::sizes sizes = bench::sizes_for(arguments);
  try {
    // Memory first: later benchmarks leave pooled stacks behind, which would hide new commits.
    if (arguments.wants("suspended_memory")) {
      suspended_memory(sizes);
    }
    if (arguments.wants("yield_switch")) {
      time_yields(sizes.warmup_switches);
      double elapsed = time_yields(sizes.switches);
      bench::report("yield_switch", "ns", elapsed / static_cast<double>(sizes.switches));
    }
    if (arguments.wants("spawn_run_complete")) {
      spawn_run_complete(sizes);
    }
    if (arguments.wants("sleep_timers")) {
      sleep_timers(sizes);
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_core_weft: %s\n", error.what());
    return 1;
  }
  return 0;
}

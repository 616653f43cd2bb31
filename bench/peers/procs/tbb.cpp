// Peer: oneTBB's task_group, the task-parallel side of suite `procs` (bench/run.py runs it with
// --workers W pinned to W cores). Only the workloads that are plain fork/join fit TBB (tasks
// there cannot wait for a message or yield to others): spawn_many_*, chained_spawn, fan_out_in
// and skewed_cpu. Sizes and units are those of bench/procs/weft_procs.cpp (keep them in step).
//
// Everything runs inside a tbb::task_arena of W slots (the main thread takes one, W - 1 TBB
// workers the others; tbb::global_control caps the process at W threads). Every workload runs
// once untimed at its smoke size (warm-up), then timed, from before the first run() to after
// task_group::wait() returned.
//
// spawn_many_*: N task_group::run of a task that increments an atomic counter; wait(); the
//   counter is checked. ns per task.
// chained_spawn: each task runs the next on the same task_group, 1000 deep; the last sets a
//   flag; wait() per chain, 100 chains. ns per spawn.
// fan_out_in: 10k tasks each compute a value (xorshift of its index) into its own slot; after
//   wait() the main thread sums the slots and checks the sum. ns per child.
// skewed_cpu: 10k tasks that each spin ~10 us (xorshift rounds calibrated at start) and add
//   their result to an atomic checksum, all run from the one root; ms until wait() returns.
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "bench_util.hpp"
#include "procs_workload.hpp"

namespace {

using procs_workload::calibrate_spin;
using procs_workload::child_value;
using procs_workload::xorshift;

struct task_sizes {
  std::size_t spawn_many_10k, spawn_many_10k_reps;
  std::size_t spawn_many_100k, spawn_many_100k_reps;
  std::size_t chain_depth, chains;
  std::size_t fan_children, fan_reps;
  std::size_t skewed_tasks;
};

task_sizes sizes_for(bool smoke) {
  if (smoke) {
    return {1000, 1, 2000, 1, 100, 5, 1000, 1, 200};
  }
  return {10'000, 20, 100'000, 3, 1000, 100, 10'000, 20, 10'000};
}

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "bench_procs_tbb: %s\n", message.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

double spawn_many(std::size_t tasks) {
  std::atomic<std::size_t> finished{0};
  tbb::task_group group;
  auto start = bench::clock::now();
  for (std::size_t index = 0; index < tasks; ++index) {
    group.run([&finished] { finished.fetch_add(1, std::memory_order_relaxed); });
  }
  group.wait();
  double elapsed = bench::nanoseconds_between(start, bench::clock::now());
  if (finished.load() != tasks) {
    fail("spawn_many: " + std::to_string(finished.load()) + " of " + std::to_string(tasks) +
         " tasks ran");
  }
  return elapsed;
}

void chain_link(tbb::task_group& group, std::size_t links_after, std::atomic<bool>& reached) {
  if (links_after == 0) {
    reached.store(true, std::memory_order_relaxed);
    return;
  }
  group.run([&group, links_after, &reached] { chain_link(group, links_after - 1, reached); });
}

double chained_spawn(std::size_t depth, std::size_t chains) {
  tbb::task_group group;
  auto start = bench::clock::now();
  for (std::size_t chain = 0; chain < chains; ++chain) {
    std::atomic<bool> reached{false};
    group.run([&group, depth, &reached] { chain_link(group, depth - 1, reached); });
    group.wait();
    if (!reached.load()) {
      fail("chained_spawn: wait() returned before the chain's end");
    }
  }
  return bench::nanoseconds_between(start, bench::clock::now());
}

double fan_out_in(std::size_t children) {
  std::vector<std::uint64_t> values(children);
  tbb::task_group group;
  auto start = bench::clock::now();
  for (std::size_t index = 0; index < children; ++index) {
    group.run([&values, index] { values[index] = child_value(index); });
  }
  group.wait();
  std::uint64_t sum = 0;
  for (std::uint64_t value : values) {
    sum += value;
  }
  double elapsed = bench::nanoseconds_between(start, bench::clock::now());
  std::uint64_t expected = 0;
  for (std::size_t index = 0; index < children; ++index) {
    expected += child_value(index);
  }
  if (sum != expected) {
    fail("fan_out_in: sum " + std::to_string(sum) + ", expected " + std::to_string(expected));
  }
  return elapsed;
}

double skewed_cpu(std::size_t tasks, std::uint64_t rounds) {
  std::atomic<std::uint64_t> checksum{0};
  tbb::task_group group;
  auto start = bench::clock::now();
  for (std::size_t index = 0; index < tasks; ++index) {
    group.run([&checksum, index, rounds] {
      checksum.fetch_add(xorshift(index + 1, rounds), std::memory_order_relaxed);
    });
  }
  group.wait();
  double elapsed = bench::nanoseconds_between(start, bench::clock::now());
  std::fprintf(stderr, "# skewed_cpu: checksum %llu\n",
               static_cast<unsigned long long>(checksum.load()));
  return elapsed;
}

}  // namespace

int main(int argc, char** argv) {
  // bench::parse_arguments plus --workers W.
  std::size_t workers = 1;
  std::vector<char*> rest{argv[0]};
  for (int index = 1; index < argc; ++index) {
    if (std::string_view(argv[index]) == "--workers" && index + 1 < argc) {
      char* end = nullptr;
      long count = std::strtol(argv[++index], &end, 10);
      if (*end != '\0' || count < 1) {
        fail(std::string("--workers wants a positive count, not '") + argv[index] + "'");
      }
      workers = static_cast<std::size_t>(count);
    } else {
      rest.push_back(argv[index]);
    }
  }
  bench::arguments arguments = bench::parse_arguments(static_cast<int>(rest.size()), rest.data());
  const task_sizes s = sizes_for(arguments.smoke);
  const task_sizes w = sizes_for(true);  // warm-up sizes

  tbb::global_control threads(tbb::global_control::max_allowed_parallelism, workers);
  tbb::task_arena arena(static_cast<int>(workers));
  arena.execute([&] {
    for (auto [name, tasks, reps, warm_tasks] :
         {std::tuple{"spawn_many_10k", s.spawn_many_10k, s.spawn_many_10k_reps, w.spawn_many_10k},
          std::tuple{"spawn_many_100k", s.spawn_many_100k, s.spawn_many_100k_reps,
                     w.spawn_many_100k}}) {
      if (!arguments.wants(name)) {
        continue;
      }
      spawn_many(warm_tasks);
      double total = 0;
      for (std::size_t rep = 0; rep < reps; ++rep) {
        total += spawn_many(tasks);
      }
      bench::report(name, "ns/task", total / static_cast<double>(tasks * reps));
    }
    if (arguments.wants("chained_spawn")) {
      chained_spawn(w.chain_depth, w.chains);
      bench::report(
          "chained_spawn", "ns/spawn",
          chained_spawn(s.chain_depth, s.chains) / static_cast<double>(s.chain_depth * s.chains));
    }
    if (arguments.wants("fan_out_in")) {
      fan_out_in(w.fan_children);
      double total = 0;
      for (std::size_t rep = 0; rep < s.fan_reps; ++rep) {
        total += fan_out_in(s.fan_children);
      }
      bench::report("fan_out_in", "ns/child",
                    total / static_cast<double>(s.fan_children * s.fan_reps));
    }
    if (arguments.wants("skewed_cpu")) {
      std::uint64_t rounds = calibrate_spin();
      skewed_cpu(w.skewed_tasks, rounds);
      bench::report("skewed_cpu", "ms", skewed_cpu(s.skewed_tasks, rounds) / 1e6);
    }
  });
  return 0;
}

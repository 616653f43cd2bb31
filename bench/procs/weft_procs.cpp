// The weft side of suite `procs` (bench/run.py runs it beside the peers in bench/peers/procs/;
// bench/procs/README.md describes the workloads): weft::procs processes on a work-stealing
// runtime of W workers (--workers W; run.py pins the program to W cores).
//
// Every workload runs on a fresh weft::procs::runtime with default options but the worker
// count: once untimed at its smoke size (warm-up), then timed; the runtime is stopped at the
// end (stop must return true: every process finished by itself). The timed span runs inside
// one root process (submitted from main, so it runs on a worker) from its first step, before
// its first spawn, to the step in which the last child's report arrives. Children are
// started with runtime::spawn (they return a pid and no handle: nobody waits on them, as
// nobody waits on a goroutine) and report to the root the way a process would in an
// application: with runtime::send (a message event from the child's pid) when they have
// something to say, or through a procs::wait_group when the root only counts them (spawn_many,
// like Go's WaitGroup there).
//
// spawn_many_*: the root spawns N processes, each with one unit of the root's wait_group; a
//   child's one step counts its unit down and finishes; the last wakes the root. ns per task.
// yield_many: 200 processes each return keep_running 1000 times (one step more to report).
//   ns per yield.
// ping_pong: 1000 pairs of processes; the pinger sends an 8-byte counter to its ponger, which
//   sends it back + 1 (checked); 100 round trips per pair. ns per round trip = wall time /
//   (pairs * round trips).
// chained_spawn: each process spawns the next and finishes, 1000 deep; the last messages the
//   root, which then starts the next chain; 100 chains. ns per spawn.
// fan_out_in: 10k processes each compute a value (xorshift of its index) and send it (8 bytes)
//   to the root, which sums them (checked against a sum computed in main). ns per child.
// skewed_cpu: the root spawns, in one step, 10k processes that each spin ~10 us (xorshift
//   rounds calibrated once at start and printed to stderr); ms until all are done.
// wake_latency_p50/p99: main (a thread outside the runtime) ticks a relay process every
//   30 us (and not before the last sample was taken); the relay sends a steady_clock timestamp
//   to an idle process, which records now - sent: the wake-up of an idle process by a send
//   inside the runtime, the same hop as Go's and Tokio's. 10k samples; ns.
// wake_latency_external_p50/p99: the same, but main sends the timestamp itself: a send from a
//   thread outside the runtime, so the worker that runs the recorder is woken from its futex
//   (on one core, the kernel must first switch from the sender to it).
// idle_cpu: one process waiting for an event that never comes; CPU time (getrusage) of the
//   whole program over 1 s (after 100 ms to settle). ms.
//
// Sizes: keep in step with bench/peers/procs/go/main.go and bench/peers/procs/tokio/src/main.rs.
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>
#include <weft/procs/process.hpp>
#include <weft/procs/runtime.hpp>

#include "bench_util.hpp"
#include "procs_processes.hpp"

namespace {

using namespace procs_bench;
using procs_workload::calibrate_spin;
using procs_workload::spin_target;

struct procs_sizes {
  std::size_t spawn_many_10k, spawn_many_10k_reps;
  std::size_t spawn_many_100k, spawn_many_100k_reps;
  std::size_t yield_tasks, yields_per_task, yield_reps;
  std::size_t ping_pairs, ping_round_trips;
  std::size_t chain_depth, chains;
  std::size_t fan_children, fan_reps;
  std::size_t skewed_tasks;
  std::size_t wake_samples;
  std::size_t idle_ms;
};

procs_sizes sizes_for(bool smoke) {
  if (smoke) {
    return {1000, 1,       // spawn_many_10k: tasks, rounds
            2000, 1,       // spawn_many_100k: tasks, rounds
            20,   100, 1,  // yield_many: tasks, yields each, rounds
            20,   20,      // ping_pong: pairs, round trips each
            100,  5,       // chained_spawn: depth, chains
            1000, 1,       // fan_out_in: children, rounds
            200,           // skewed_cpu: tasks
            200,           // wake_latency: samples
            100};          // idle_cpu: ms
  }
  return {10'000,  20,       // spawn_many_10k
          100'000, 3,        // spawn_many_100k
          200,     1000, 5,  // yield_many
          1000,    100,      // ping_pong
          1000,    100,      // chained_spawn
          10'000,  20,       // fan_out_in
          10'000,            // skewed_cpu
          10'000,            // wake_latency
          1000};             // idle_cpu
}

constexpr std::chrono::microseconds wake_gap{30};

struct procs_arguments {
  bench::arguments common;
  std::size_t workers = 1;
};

// bench::parse_arguments plus --workers W.
procs_arguments parse_procs_arguments(int argc, char** argv) {
  procs_arguments parsed;
  std::vector<char*> rest{argv[0]};
  for (int index = 1; index < argc; ++index) {
    if (std::string_view(argv[index]) == "--workers" && index + 1 < argc) {
      char* end = nullptr;
      long count = std::strtol(argv[++index], &end, 10);
      if (*end != '\0' || count < 1) {
        std::fprintf(stderr, "--workers wants a positive count, not '%s'\n", argv[index]);
        std::exit(2);
      }
      parsed.workers = static_cast<std::size_t>(count);
    } else {
      rest.push_back(argv[index]);
    }
  }
  parsed.common = bench::parse_arguments(static_cast<int>(rest.size()), rest.data());
  return parsed;
}

// Runs `root` to completion on `engine`; the root's elapsed ns.
double run_root(procs::runtime& engine, std::unique_ptr<procs::process> root) {
  return std::stod(engine.submit(std::move(root)).wait());
}

double spawn_many(procs::runtime& engine, std::size_t tasks) {
  return run_root(engine, std::make_unique<spawn_many_root>(tasks));
}

double yield_many(procs::runtime& engine, std::size_t tasks, std::size_t yields) {
  return run_root(engine,
                  std::make_unique<counting_root>(tasks, [yields](auto& owner, pid root, auto) {
                    owner.spawn(std::make_unique<yielder>(yields, root));
                  }));
}

double ping_pong(procs::runtime& engine, std::size_t pairs, std::size_t round_trips) {
  return run_root(
      engine, std::make_unique<counting_root>(pairs, [round_trips](auto& owner, pid root, auto) {
        pid partner = owner.spawn(std::make_unique<ponger>(round_trips));
        owner.spawn(std::make_unique<pinger>(partner, round_trips, root));
      }));
}

// The sum of the children's values, after the elapsed ns.
std::pair<double, std::uint64_t> computing_children(procs::runtime& engine, std::size_t children,
                                                    std::uint64_t rounds) {
  std::uint64_t sum = 0;
  double elapsed =
      run_root(engine, std::make_unique<counting_root>(
                           children,
                           [rounds](auto& owner, pid root, std::uint64_t index) {
                             owner.spawn(std::make_unique<computing_child>(index, rounds, root));
                           },
                           &sum));
  return {elapsed, sum};
}

double fan_out_in(procs::runtime& engine, std::size_t children) {
  auto [elapsed, sum] = computing_children(engine, children, 4);
  std::uint64_t expected = 0;
  for (std::size_t index = 0; index < children; ++index) {
    expected += child_value(index);
  }
  if (sum != expected) {
    fail("fan_out_in: sum " + std::to_string(sum) + ", expected " + std::to_string(expected));
  }
  return elapsed;
}

double skewed_cpu(procs::runtime& engine, std::size_t tasks, std::uint64_t rounds) {
  auto [elapsed, checksum] = computing_children(engine, tasks, rounds);
  std::fprintf(stderr, "# skewed_cpu: checksum %llu\n", static_cast<unsigned long long>(checksum));
  return elapsed;
}

// Latencies in ns, sorted. inside: main ticks a relay process, which sends the timestamp (a
// send inside the runtime, as Go's goroutine sender); otherwise main sends it (a send from a
// thread outside the runtime).
std::vector<std::uint64_t> wake_latency(procs::runtime& engine, std::size_t samples, bool inside) {
  std::vector<std::uint64_t> latencies;
  latencies.reserve(samples);
  std::atomic<std::size_t> received{0};
  procs::process_handle recorder =
      engine.submit(std::make_unique<latency_recorder>(&latencies, samples, &received));
  procs::process_handle relay;
  if (inside) {
    relay = engine.submit(std::make_unique<latency_relay>(recorder.id(), samples));
  }
  for (std::size_t index = 0; index < samples; ++index) {
    // The recorder must be idle again (and the workers parked) before the next send.
    std::this_thread::sleep_for(wake_gap);
    while (received.load(std::memory_order_acquire) < index) {
      std::this_thread::sleep_for(wake_gap);
    }
    if (inside) {
      engine.send(relay.id(), "tick");
    } else {
      engine.send(recorder.id(), encode(now_ns()));
    }
  }
  recorder.wait();
  if (inside) {
    relay.wait();
  }
  std::sort(latencies.begin(), latencies.end());
  auto at = [&](double fraction) {
    return static_cast<unsigned long long>(
        latencies[static_cast<std::size_t>(fraction * static_cast<double>(samples - 1))]);
  };
  std::fprintf(stderr, "# wake_latency (%zu samples): p50 %llu, p90 %llu, p99 %llu, max %llu ns\n",
               samples, at(0.5), at(0.9), at(0.99), at(1.0));
  return latencies;
}

double cpu_time_ms() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) {
    fail("getrusage failed");
  }
  auto ms = [](const timeval& time) {
    return static_cast<double>(time.tv_sec) * 1e3 + static_cast<double>(time.tv_usec) / 1e3;
  };
  return ms(usage.ru_utime) + ms(usage.ru_stime);
}

double idle_cpu(procs::runtime& engine, std::chrono::milliseconds settle,
                std::chrono::milliseconds span) {
  engine.submit(std::make_unique<idle_process>());
  std::this_thread::sleep_for(settle);
  double before = cpu_time_ms();
  std::this_thread::sleep_for(span);
  return cpu_time_ms() - before;
}

// Runs `measure` on a fresh runtime of `workers`, which is stopped afterwards: stop() must
// find every process finished or finishing by itself.
template <typename Measure>
void with_engine(std::size_t workers, const char* workload, Measure measure) {
  procs::runtime_options options;
  options.workers = workers;
  options.name = "bench_procs_weft";
  procs::runtime engine(options);
  measure(engine);
  procs::runtime::counters totals = engine.stats();
  if (!engine.stop(std::chrono::seconds(5))) {
    fail(std::string(workload) + ": stop() had to force processes (some did not finish)");
  }
  std::fprintf(stderr,
               "# %s: %llu steps, %llu steals moving %llu, %llu global batches, %llu parks\n",
               workload, static_cast<unsigned long long>(totals.steps),
               static_cast<unsigned long long>(totals.steals),
               static_cast<unsigned long long>(totals.stolen),
               static_cast<unsigned long long>(totals.global_batches),
               static_cast<unsigned long long>(totals.parks));
}

// A workload timed by a root process: per_unit(engine, sizes) runs it at those sizes and
// returns the result (the elapsed time divided by the operations it counts).
struct timed_workload {
  const char* name;
  const char* unit;
  std::function<double(procs::runtime&, const procs_sizes&)> per_unit;
};

// `once` (elapsed ns) run `reps` times: the mean ns per operation, `operations` per run.
template <typename Once>
double mean_ns(std::size_t reps, std::size_t operations, Once once) {
  double total = 0;
  for (std::size_t rep = 0; rep < reps; ++rep) {
    total += once();
  }
  return total / static_cast<double>(reps * operations);
}

}  // namespace

int main(int argc, char** argv) {
  procs_arguments arguments = parse_procs_arguments(argc, argv);
  const bench::arguments& common = arguments.common;
  const procs_sizes s = sizes_for(common.smoke);
  const procs_sizes w = sizes_for(true);  // warm-up sizes
  std::uint64_t spin_rounds = common.wants("skewed_cpu") ? calibrate_spin() : 0;
  using sizes = const procs_sizes&;
  const timed_workload timed[] = {
      {"spawn_many_10k", "ns/task",
       [](procs::runtime& engine, sizes z) {
         return mean_ns(z.spawn_many_10k_reps, z.spawn_many_10k,
                        [&] { return spawn_many(engine, z.spawn_many_10k); });
       }},
      {"spawn_many_100k", "ns/task",
       [](procs::runtime& engine, sizes z) {
         return mean_ns(z.spawn_many_100k_reps, z.spawn_many_100k,
                        [&] { return spawn_many(engine, z.spawn_many_100k); });
       }},
      {"yield_many", "ns/yield",
       [](procs::runtime& engine, sizes z) {
         return mean_ns(z.yield_reps, z.yield_tasks * z.yields_per_task,
                        [&] { return yield_many(engine, z.yield_tasks, z.yields_per_task); });
       }},
      {"ping_pong", "ns/roundtrip",
       [](procs::runtime& engine, sizes z) {
         return mean_ns(1, z.ping_pairs * z.ping_round_trips,
                        [&] { return ping_pong(engine, z.ping_pairs, z.ping_round_trips); });
       }},
      {"chained_spawn", "ns/spawn",
       [](procs::runtime& engine, sizes z) {
         return mean_ns(1, z.chain_depth * z.chains, [&] {
           return run_root(engine, std::make_unique<chained_spawn_root>(z.chain_depth, z.chains));
         });
       }},
      {"fan_out_in", "ns/child",
       [](procs::runtime& engine, sizes z) {
         return mean_ns(z.fan_reps, z.fan_children,
                        [&] { return fan_out_in(engine, z.fan_children); });
       }},
      {"skewed_cpu", "ms",
       [&](procs::runtime& engine, sizes z) {
         return skewed_cpu(engine, z.skewed_tasks, spin_rounds) / 1e6;
       }},
  };
  for (const timed_workload& workload : timed) {
    if (common.wants(workload.name)) {
      with_engine(arguments.workers, workload.name, [&](procs::runtime& engine) {
        workload.per_unit(engine, w);
        bench::report(workload.name, workload.unit, workload.per_unit(engine, s));
      });
    }
  }
  for (bool inside : {true, false}) {
    const std::string prefix = inside ? "wake_latency" : "wake_latency_external";
    const std::string p50 = prefix + "_p50";
    const std::string p99 = prefix + "_p99";
    if (!common.wants(p50) && !common.wants(p99)) {
      continue;
    }
    with_engine(arguments.workers, prefix.c_str(), [&](procs::runtime& engine) {
      wake_latency(engine, w.wake_samples / 2, inside);
      std::vector<std::uint64_t> latencies = wake_latency(engine, s.wake_samples, inside);
      for (auto [name, percent] : {std::pair{p50, 50}, {p99, 99}}) {
        if (common.wants(name)) {
          std::size_t rank = latencies.size() * static_cast<std::size_t>(percent) / 100;
          bench::report(name.c_str(), "ns", static_cast<double>(latencies[rank]));
        }
      }
    });
  }
  if (common.wants("idle_cpu")) {
    with_engine(arguments.workers, "idle_cpu", [&](procs::runtime& engine) {
      bench::report("idle_cpu", "ms",
                    idle_cpu(engine, std::chrono::milliseconds(s.idle_ms / 10),
                             std::chrono::milliseconds(s.idle_ms)));
    });
  }
  return 0;
}

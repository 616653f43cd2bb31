// The weft side of the `sync` comparison suite (bench/run.py runs it beside the peers in
// bench/peers/sync/). Every benchmark runs on a fresh weft::scheduler with default options
// (FIFO order, default stacks): once untimed at a tenth of its size (warm-up), then timed; the
// timed span runs inside the main coroutine from before the first spawn to after the last
// await.
//
// channel_pingpong: main and one spawned coroutine, two unbuffered weft::channel<int64_t>
//   (capacity 0: a send returns once a receiver has taken the value). Main sends i on ping and
//   receives on pong; the other receives on ping and sends the value + 1 back on pong; N round
//   trips. A hand-off is one value passing from a sender to a receiver (a round trip is two).
//   ns per hand-off = wall time / (2 N). Main checks every reply.
// channel_buffered_throughput: one spawned coroutine sends 0..N-1 into a weft::channel of
//   capacity 1024; main receives N values and checks their sum. ns per value = wall time / N.
// mutex_handoff_2, mutex_handoff_100: K spawned coroutines (2 or 100) share one weft::mutex and
//   run M rounds each of: lock; check nobody else is inside and mark inside; ++counter;
//   weft::yield() (yield while holding the lock, so every other coroutine gets to try it and
//   blocks); unmark; unlock; weft::yield() (yield after unlocking: weft's unlock already hands
//   the lock to the oldest waiter, the peers need this yield to let the woken waiter take it, and
//   every program runs the same loop). Every acquisition is contended and passes the lock to a
//   waiter. ns per acquisition = wall time / (K M). main checks counter == K M and prints to
//   stderr how many acquisitions changed the owner.
//
// Each benchmark also prints the scheduler's context switches per operation to stderr.
//
// Sizes: keep in step with bench/peers/sync/boost_fiber.cpp and bench/peers/sync/go/main.go.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <vector>
#include <weft/sync/channel.hpp>
#include <weft/sync/mutex.hpp>
#include <weft/weft.hpp>

#include "bench_util.hpp"

namespace {

struct sync_sizes {
  std::int64_t round_trips;      // channel_pingpong
  std::int64_t buffered_values;  // channel_buffered_throughput
  std::int64_t acquisitions;     // mutex_handoff_*: total lock acquisitions, K M
  std::size_t buffer_capacity;
};

sync_sizes sync_sizes_for(const bench::arguments& arguments) {
  if (arguments.smoke) {
    return {10'000, 100'000, 10'000, 1024};
  }
  return {1'000'000, 10'000'000, 1'000'000, 1024};
}

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "bench_sync_weft: %s\n", message.c_str());
  std::exit(1);
}

void report_switches(const std::string& benchmark, const weft::scheduler& scheduler,
                     std::int64_t operations) {
  std::fprintf(stderr, "# %s: %.2f switches per operation (%llu switches, %lld operations)\n",
               benchmark.c_str(),
               static_cast<double>(scheduler.stats().switches) / static_cast<double>(operations),
               static_cast<unsigned long long>(scheduler.stats().switches),
               static_cast<long long>(operations));
}

double channel_pingpong(std::int64_t round_trips) {
  weft::scheduler scheduler;
  double elapsed = scheduler.run([round_trips] {
    weft::channel<std::int64_t> ping(0);
    weft::channel<std::int64_t> pong(0);
    auto start = bench::clock::now();
    weft::task<void> ponger = weft::spawn(
        [&] {
          for (std::int64_t round = 0; round < round_trips; ++round) {
            pong.send(ping.recv() + 1);
          }
        },
        {.name = "ponger"});
    for (std::int64_t round = 0; round < round_trips; ++round) {
      ping.send(round);
      std::int64_t reply = pong.recv();
      if (reply != round + 1) {
        fail("channel_pingpong: sent " + std::to_string(round) + ", got " + std::to_string(reply) +
             " back");
      }
    }
    ponger.await();
    return bench::nanoseconds_between(start, bench::clock::now());
  });
  report_switches("channel_pingpong", scheduler, 2 * round_trips);
  return elapsed;
}

double channel_buffered_throughput(std::int64_t values, std::size_t capacity) {
  weft::scheduler scheduler;
  std::int64_t sum = 0;
  double elapsed = scheduler.run([&] {
    weft::channel<std::int64_t> channel(capacity);
    auto start = bench::clock::now();
    weft::task<void> producer = weft::spawn(
        [&] {
          for (std::int64_t value = 0; value < values; ++value) {
            channel.send(value);
          }
        },
        {.name = "producer"});
    for (std::int64_t index = 0; index < values; ++index) {
      sum += channel.recv();
    }
    producer.await();
    return bench::nanoseconds_between(start, bench::clock::now());
  });
  report_switches("channel_buffered_throughput", scheduler, values);
  std::int64_t expected = values * (values - 1) / 2;
  if (sum != expected) {
    fail("channel_buffered_throughput: sum " + std::to_string(sum) + ", expected " +
         std::to_string(expected));
  }
  return elapsed;
}

double mutex_handoff(std::int64_t contenders, std::int64_t rounds) {
  weft::scheduler scheduler;
  std::int64_t counter = 0;
  std::int64_t owner_changes = 0;
  double elapsed = scheduler.run([&] {
    weft::mutex mutex;
    bool inside = false;
    std::int64_t last_owner = -1;
    std::vector<weft::task<void>> tasks;
    tasks.reserve(static_cast<std::size_t>(contenders));
    auto start = bench::clock::now();
    for (std::int64_t owner = 0; owner < contenders; ++owner) {
      tasks.push_back(weft::spawn([&, owner] {
        for (std::int64_t round = 0; round < rounds; ++round) {
          {
            std::lock_guard<weft::mutex> lock(mutex);
            if (inside) {
              fail("mutex_handoff: two coroutines inside the critical section");
            }
            inside = true;
            ++counter;
            if (owner != last_owner) {
              ++owner_changes;
              last_owner = owner;
            }
            weft::yield();
            inside = false;
          }
          weft::yield();
        }
      }));
    }
    for (weft::task<void>& task : tasks) {
      task.await();
    }
    return bench::nanoseconds_between(start, bench::clock::now());
  });
  std::string name = "mutex_handoff_" + std::to_string(contenders);
  report_switches(name, scheduler, counter);
  std::fprintf(stderr, "# %s: %lld of %lld acquisitions changed owner\n", name.c_str(),
               static_cast<long long>(owner_changes), static_cast<long long>(counter));
  if (counter != contenders * rounds) {
    fail("mutex_handoff: counter " + std::to_string(counter) + ", expected " +
         std::to_string(contenders * rounds));
  }
  return elapsed;
}

}  // namespace

int main(int argc, char** argv) {
  bench::arguments arguments = bench::parse_arguments(argc, argv);
  sync_sizes sizes = sync_sizes_for(arguments);
  try {
    if (arguments.wants("channel_pingpong")) {
      channel_pingpong(sizes.round_trips / 10);
      double elapsed = channel_pingpong(sizes.round_trips);
      bench::report("channel_pingpong", "ns", elapsed / static_cast<double>(2 * sizes.round_trips));
    }
    if (arguments.wants("channel_buffered_throughput")) {
      channel_buffered_throughput(sizes.buffered_values / 10, sizes.buffer_capacity);
      double elapsed = channel_buffered_throughput(sizes.buffered_values, sizes.buffer_capacity);
      bench::report("channel_buffered_throughput", "ns",
                    elapsed / static_cast<double>(sizes.buffered_values));
    }
    for (std::int64_t contenders : {2, 100}) {
      std::string name = "mutex_handoff_" + std::to_string(contenders);
      if (arguments.wants(name)) {
        std::int64_t rounds = sizes.acquisitions / contenders;
        mutex_handoff(contenders, rounds / 10);
        double elapsed = mutex_handoff(contenders, rounds);
        bench::report(name.c_str(), "ns", elapsed / static_cast<double>(contenders * rounds));
      }
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_sync_weft: %s\n", error.what());
    return 1;
  }
  return 0;
}

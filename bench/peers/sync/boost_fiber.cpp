// Peer: Boost.Fiber with its default round_robin scheduler, on one thread (the main fiber plus
// the fibers it creates, default stacks). Every benchmark runs once untimed at a tenth of its
// size (warm-up), then timed; the timed span runs from before the first fiber is created to
// after the last one has been joined.
//
// channel_pingpong: the main fiber and one fiber, two boost::fibers::unbuffered_channel<int64>
//   (rendezvous: push returns once a pop has taken the value). Main pushes i on ping and pops
//   from pong; the fiber pops from ping and pushes the value + 1 back on pong; N round trips. A
//   hand-off is one value passing from a sender to a receiver (a round trip is two). ns per
//   hand-off = wall time / (2 N). Main checks every reply.
// channel_buffered_throughput: one fiber pushes 0..N-1 into a
//   boost::fibers::buffered_channel<int64> constructed with capacity 1024 (Boost keeps one slot
//   free, so it holds 1023 values); main pops N values and checks their sum. ns per value = wall
//   time / N.
// mutex_handoff_2, mutex_handoff_100: K fibers (2 or 100) share one boost::fibers::mutex and
//   run M rounds each of: lock; check nobody else is inside and mark inside; ++counter;
//   this_fiber::yield() (yield while holding the lock, so every other fiber gets to try it and
//   blocks); unmark; unlock; this_fiber::yield() (yield after unlocking, so the waiter that
//   unlock woke takes the lock before the releaser can lock again: fibers::mutex does not hand
//   the lock over, a fiber that locks right after unlock would take it back). Every acquisition
//   is contended and passes the lock to a waiter. ns per acquisition = wall time / (K M). main
//   checks counter == K M and prints to stderr how many acquisitions changed the owner.
//
// Sizes: keep in step with bench/sync/weft_sync.cpp and bench/peers/sync/go/main.go.
#include <boost/fiber/all.hpp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

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
  std::fprintf(stderr, "bench_sync_boost_fiber: %s\n", message.c_str());
  std::exit(1);
}

double channel_pingpong(std::int64_t round_trips) {
  boost::fibers::unbuffered_channel<std::int64_t> ping;
  boost::fibers::unbuffered_channel<std::int64_t> pong;
  auto start = bench::clock::now();
  boost::fibers::fiber ponger([&] {
    for (std::int64_t round = 0; round < round_trips; ++round) {
      pong.push(ping.value_pop() + 1);
    }
  });
  for (std::int64_t round = 0; round < round_trips; ++round) {
    ping.push(round);
    std::int64_t reply = pong.value_pop();
    if (reply != round + 1) {
      fail("channel_pingpong: sent " + std::to_string(round) + ", got " + std::to_string(reply) +
           " back");
    }
  }
  ponger.join();
  return bench::nanoseconds_between(start, bench::clock::now());
}

double channel_buffered_throughput(std::int64_t values, std::size_t capacity) {
  boost::fibers::buffered_channel<std::int64_t> channel(capacity);
  auto start = bench::clock::now();
  boost::fibers::fiber producer([&] {
    for (std::int64_t value = 0; value < values; ++value) {
      channel.push(value);
    }
  });
  std::int64_t sum = 0;
  for (std::int64_t index = 0; index < values; ++index) {
    sum += channel.value_pop();
  }
  producer.join();
  double elapsed = bench::nanoseconds_between(start, bench::clock::now());
  std::int64_t expected = values * (values - 1) / 2;
  if (sum != expected) {
    fail("channel_buffered_throughput: sum " + std::to_string(sum) + ", expected " +
         std::to_string(expected));
  }
  return elapsed;
}

double mutex_handoff(std::int64_t contenders, std::int64_t rounds) {
  boost::fibers::mutex mutex;
  bool inside = false;
  std::int64_t counter = 0;
  std::int64_t last_owner = -1;
  std::int64_t owner_changes = 0;
  std::vector<boost::fibers::fiber> fibers;
  fibers.reserve(static_cast<std::size_t>(contenders));
  auto start = bench::clock::now();
  for (std::int64_t owner = 0; owner < contenders; ++owner) {
    fibers.emplace_back([&, owner] {
      for (std::int64_t round = 0; round < rounds; ++round) {
        mutex.lock();
        if (inside) {
          fail("mutex_handoff: two fibers inside the critical section");
        }
        inside = true;
        ++counter;
        if (owner != last_owner) {
          ++owner_changes;
          last_owner = owner;
        }
        boost::this_fiber::yield();
        inside = false;
        mutex.unlock();
        boost::this_fiber::yield();
      }
    });
  }
  for (boost::fibers::fiber& fiber : fibers) {
    fiber.join();
  }
  double elapsed = bench::nanoseconds_between(start, bench::clock::now());
  std::fprintf(stderr, "# mutex_handoff_%lld: %lld of %lld acquisitions changed owner\n",
               static_cast<long long>(contenders), static_cast<long long>(owner_changes),
               static_cast<long long>(counter));
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
  return 0;
}

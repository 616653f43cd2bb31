// The CPU work of suite procs, shared by the C++ programs (weft and oneTBB) so that both spin
// the same loop: the xorshift rounds, a child's value for fan_out_in, and the calibration of
// skewed_cpu's ~10 us task. The Go and Rust peers repeat the same loop in their languages.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>

#include "bench_util.hpp"

namespace procs_workload {

inline constexpr std::chrono::microseconds spin_target{10};

inline std::uint64_t xorshift(std::uint64_t state, std::uint64_t rounds) {
  for (std::uint64_t round = 0; round < rounds; ++round) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
  }
  return state;
}

inline std::uint64_t child_value(std::uint64_t index) { return xorshift(index + 1, 4); }

// The xorshift rounds that take spin_target on this machine: the fastest of several timings.
inline std::uint64_t calibrate_spin() {
  constexpr std::uint64_t probe = 1 << 20;
  double best_ns = 1e300;
  std::uint64_t sink = 0;
  for (std::uint64_t attempt = 0; attempt < 5; ++attempt) {
    auto start = bench::clock::now();
    sink += xorshift(attempt + 1, probe);
    best_ns = std::min(best_ns, bench::nanoseconds_between(start, bench::clock::now()));
  }
  auto rounds = static_cast<std::uint64_t>(
      static_cast<double>(probe) * std::chrono::duration<double, std::nano>(spin_target).count() /
      best_ns);
  std::fprintf(stderr, "# skewed_cpu: %lld us = %llu xorshift rounds (sink %llu)\n",
               static_cast<long long>(spin_target.count()), static_cast<unsigned long long>(rounds),
               static_cast<unsigned long long>(sink & 1));
  return rounds;
}

}  // namespace procs_workload

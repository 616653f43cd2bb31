// Helpers shared by the C++ programs of the comparison suites (weft and its C++ peers), so that
// every program parses the same flags, reads memory the same way, draws the same random inputs
// and prints results in the one format bench/run.py reads:
//
//   RESULT <benchmark> <unit> <value>
//
// Flags: --smoke (tiny sizes, for CI), --only a,b (run only the named benchmarks; run.py runs
// each benchmark in its own process so that one benchmark's pooled memory or leftover timers
// cannot colour the next one).
#pragma once

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace bench {

using clock = std::chrono::steady_clock;

struct arguments {
  bool smoke = false;
  std::vector<std::string> only;

  // True when the benchmark should run (no --only given, or it is listed).
  bool wants(std::string_view name) const {
    if (only.empty()) {
      return true;
    }
    for (const std::string& wanted : only) {
      if (wanted == name) {
        return true;
      }
    }
    return false;
  }
};

inline arguments parse_arguments(int argc, char** argv) {
  arguments parsed;
  for (int index = 1; index < argc; ++index) {
    std::string_view argument = argv[index];
    if (argument == "--smoke") {
      parsed.smoke = true;
    } else if (argument == "--only" && index + 1 < argc) {
      std::string_view list = argv[++index];
      while (!list.empty()) {
        std::size_t comma = list.find(',');
        parsed.only.emplace_back(list.substr(0, comma));
        list = comma == std::string_view::npos ? std::string_view{} : list.substr(comma + 1);
      }
    } else {
      std::fprintf(stderr, "usage: %s [--smoke] [--only benchmark[,benchmark...]]\n", argv[0]);
      std::exit(2);
    }
  }
  return parsed;
}

// A whole decimal number from 0 to max, for a flag's value: false for anything else (empty, a
// sign, trailing characters, out of range), so that a program refuses "--port 80x" with its
// usage rather than reading 80 or 0.
inline bool parse_count(const char* text, long max, long& value) {
  if (*text < '0' || *text > '9') {
    return false;
  }
  char* end = nullptr;
  errno = 0;
  long parsed = std::strtol(text, &end, 10);
  if (*end != '\0' || errno == ERANGE || parsed > max) {
    return false;
  }
  value = parsed;
  return true;
}

inline void report(const char* name, const char* unit, double value) {
  std::printf("RESULT %s %s %.3f\n", name, unit, value);
  std::fflush(stdout);
}

inline double nanoseconds_between(clock::time_point start, clock::time_point end) {
  return std::chrono::duration<double, std::nano>(end - start).count();
}

inline double milliseconds_between(clock::time_point start, clock::time_point end) {
  return std::chrono::duration<double, std::milli>(end - start).count();
}

// Resident set size of this process in bytes, from /proc/self/statm (second field, in pages).
// Every program of the suite reads the same file, so the numbers are comparable.
inline std::uint64_t resident_bytes() {
  std::FILE* file = std::fopen("/proc/self/statm", "r");
  if (file == nullptr) {
    std::perror("/proc/self/statm");
    std::exit(1);
  }
  unsigned long long size_pages = 0;
  unsigned long long resident_pages = 0;
  if (std::fscanf(file, "%llu %llu", &size_pages, &resident_pages) != 2) {
    std::fprintf(stderr, "cannot parse /proc/self/statm\n");
    std::exit(1);
  }
  std::fclose(file);
  return resident_pages * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
}

// splitmix64: the sleep durations of sleep_timers are drawn from this generator with the same
// seed in every language, so all programs sleep exactly the same set of durations.
class splitmix64 {
 public:
  explicit splitmix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t value = (state_ += 0x9e3779b97f4a7c15ULL);
    value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9ULL;
    value = (value ^ (value >> 27)) * 0x94d049bb133111ebULL;
    return value ^ (value >> 31);
  }

 private:
  std::uint64_t state_;
};

constexpr std::uint64_t sleep_seed = 42;

// The sizes every program uses (the Go and PHP peers repeat these numbers; keep them in step).
struct sizes {
  std::uint64_t switches;         // yield_switch: total switches timed (half per side)
  std::uint64_t warmup_switches;  // yield_switch: untimed switches before timing
  std::uint64_t spawn_batches;    // spawn_run_complete: batches of spawn_batch coroutines
  std::uint64_t spawn_batch;
  std::uint64_t suspended;     // suspended_memory: coroutines alive at once
  std::uint64_t sleepers;      // sleep_timers: coroutines
  std::uint64_t max_sleep_ms;  // sleep_timers: sleeps are uniform in [0, max_sleep_ms]
};

inline sizes sizes_for(const arguments& arguments) {
  if (arguments.smoke) {
    return {100'000, 10'000, 10, 1000, 10'000, 10'000, 50};
  }
  return {10'000'000, 100'000, 1000, 1000, 1'000'000, 1'000'000, 1000};
}

}  // namespace bench

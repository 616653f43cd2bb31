// Helpers shared by the test files.
//
// run_clean() runs a main function on a fresh scheduler and checks, however the run ends, that it
// ended clean: no live coroutine left and every spawned coroutine finished. Tests that assert an
// order pin scheduling_order::fifo with fifo_options(); every other test runs in whatever order
// the environment picks (the suite is also run with WEFT_SCHED=random WEFT_SEED=n).
#pragma once

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "weft/weft.hpp"

namespace weft_test {

// Raises the soft fd limit to at least wanted; false when the hard limit is lower (the test
// then skips, saying so).
inline bool allow_fds(rlim_t wanted) {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    return false;
  }
  if (limit.rlim_cur >= wanted) {
    return true;
  }
  if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < wanted) {
    return false;
  }
  limit.rlim_cur = wanted;
  return ::setrlimit(RLIMIT_NOFILE, &limit) == 0;
}

inline weft::run_options fifo_options() {
  weft::run_options options;
  options.order = weft::scheduling_order::fifo;
  return options;
}

inline weft::run_options random_options(std::uint64_t seed) {
  weft::run_options options;
  options.order = weft::scheduling_order::random;
  options.seed = seed;
  return options;
}

// Checks, when it goes out of scope, that the scheduler's last run left nothing behind.
class clean_end_check {
 public:
  explicit clean_end_check(weft::scheduler& scheduler) : scheduler_(scheduler) {}
  clean_end_check(const clean_end_check&) = delete;
  clean_end_check& operator=(const clean_end_check&) = delete;
  ~clean_end_check() {
    EXPECT_FALSE(scheduler_.running());
    const weft::scheduler_stats& stats = scheduler_.stats();
    EXPECT_EQ(stats.live_coroutines, 0u) << "the run left coroutines alive";
    EXPECT_EQ(stats.finished, stats.spawned) << "not every spawned coroutine finished";
  }

 private:
  weft::scheduler& scheduler_;
};

// Runs main on a fresh scheduler and checks the run ended clean (also when it throws).
template <class Function>
auto run_clean(Function&& main, weft::run_options options = {}) {
  weft::scheduler scheduler(std::move(options));
  clean_end_check check(scheduler);
  return scheduler.run(std::forward<Function>(main));
}

// Yields until condition() holds, or fails the test after a generous time limit (so a broken
// scheduler fails the test instead of hanging it).
template <class Condition>
bool yield_until(Condition&& condition,
                 std::chrono::steady_clock::duration limit = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "condition not reached by yielding within the time limit";
      return false;
    }
    weft::yield();
  }
  return true;
}

// An object whose destructor records that it ran (RAII cleanup on cancellation).
class destructor_flag {
 public:
  explicit destructor_flag(bool& destroyed) : destroyed_(destroyed) {}
  destructor_flag(const destructor_flag&) = delete;
  destructor_flag& operator=(const destructor_flag&) = delete;
  ~destructor_flag() { destroyed_ = true; }

 private:
  bool& destroyed_;
};

// A coroutine body that only ends through cancellation, recording that it started (so a test
// can wait for that: a coroutine cancelled before it starts has no cleanup to run) and that its
// cleanup ran.
struct cancellable {
  bool started = false;
  bool cleaned_up = false;
  void operator()() {
    destructor_flag flag(cleaned_up);
    started = true;
    weft::sleep_for(std::chrono::hours(1));
  }
};

// A fresh directory under /tmp for one test, removed with everything in it at the end.
class temporary_directory {
 public:
  temporary_directory() {
    std::string pattern = "/tmp/weft-test-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("mkdtemp failed");
    }
    path_ = pattern;
  }
  temporary_directory(const temporary_directory&) = delete;
  temporary_directory& operator=(const temporary_directory&) = delete;
  ~temporary_directory() { std::filesystem::remove_all(path_); }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace weft_test

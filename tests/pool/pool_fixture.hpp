// Shared by the pool tests: a fake backend whose resources are numbered connections, and a check
// of the pool's accounting against what the backend says is alive.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <set>
#include <stdexcept>
#include <vector>

#include "weft/pool/pool.hpp"
#include "weft/sched/this_coroutine.hpp"

namespace pool_test {

struct connection {
  int id = -1;
};

// Counts what the pool does to it. down: the factory throws. suspend_in_factory: the factory
// yields once before returning, as a real connect would suspend.
struct backend {
  int next_id = 0;
  int alive = 0;
  bool down = false;
  bool suspend_in_factory = false;
  std::vector<int> destroyed;  // ids, in destruction order
  std::set<int> unhealthy;     // ids the healthcheck reports bad

  weft::pool_options<connection> options(std::size_t max, std::size_t min = 0) {
    weft::pool_options<connection> made;
    made.max = max;
    made.min = min;
    made.factory = [this] {
      if (suspend_in_factory) {
        weft::yield();
      }
      if (down) {
        throw std::runtime_error("backend down: connection refused");
      }
      ++alive;
      return connection{next_id++};
    };
    made.destructor = [this](connection& resource) {
      --alive;
      destroyed.push_back(resource.id);
    };
    made.healthcheck = [this](connection& resource) { return unhealthy.count(resource.id) == 0; };
    return made;
  }
};

// count == idle + active, count + reserved <= max, and the backend agrees on how many live.
inline void expect_accounting(const weft::pool_stats& stats, const backend& server) {
  EXPECT_EQ(stats.count(), stats.idle + stats.active);
  EXPECT_LE(stats.count() + stats.reserved, stats.max);
  EXPECT_EQ(static_cast<std::size_t>(server.alive), stats.count());
  EXPECT_EQ(stats.created - stats.destroyed, stats.count());
}

}  // namespace pool_test

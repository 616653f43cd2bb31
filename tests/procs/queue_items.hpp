// The items the run-queue tests push: identity (index), a plain payload whose publication
// TSan checks, and a counter of how often the item was handed out (exactly once, always).
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>

#include <gtest/gtest.h>

// src/ is not on the test include path; the queues are internal to the library.
#include "../../src/procs/chaos.hpp"
#include "../../src/procs/global_queue.hpp"
#include "../../src/procs/local_queue.hpp"

namespace weft_procs_test {

struct work_item {
  work_item* next_ready = nullptr;
  std::size_t index = 0;
  // Plain (non-atomic) data the producer writes just before pushing and the consumer checks:
  // under TSan, a publication without a happens-before edge shows up as a race on it.
  std::size_t payload = 0;
  std::atomic<int> taken{0};
};

inline std::unique_ptr<work_item[]> make_items(std::size_t count) {
  auto items = std::make_unique<work_item[]>(count);
  for (std::size_t index = 0; index < count; ++index) {
    items[index].index = index;
  }
  return items;
}

// The race tests' fixture: the parameter turns on random yields between the queues' atomic
// steps; WEFT_PROCS_CHAOS=1 in the environment makes the plain runs chaotic too.
class chaos_parameter_test : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    weft::procs::detail::set_chaos_for_testing(
        GetParam() || weft::procs::detail::chaos_requested_by_environment());
  }
  void TearDown() override {
    weft::procs::detail::set_chaos_for_testing(
        weft::procs::detail::chaos_requested_by_environment());
  }
  static std::size_t item_count(std::size_t plain, std::size_t chaotic) {
    return weft::procs::detail::chaos_enabled() ? chaotic : plain;
  }
};

}  // namespace weft_procs_test

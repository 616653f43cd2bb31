// The items the run-queue tests push: identity (index), a plain payload whose publication
// TSan checks, and a counter of how often the item was handed out (exactly once, always).
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>

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

}  // namespace weft_procs_test

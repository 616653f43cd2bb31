// An entry in a scheduler's deadline heap (see src/reactor/timer_queue.hpp). Intrusive: it
// lives in whatever waits for the deadline (a sleeping coroutine's frame, a weft::timer).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace weft::detail {

using timer_clock = std::chrono::steady_clock;

struct timer_entry {
  static constexpr std::size_t not_queued = std::numeric_limits<std::size_t>::max();

  timer_clock::time_point deadline{};
  void (*fire)(timer_entry& entry) = nullptr;
  bool background = false;  // does not keep the reactor alive
  std::uint64_t sequence = 0;
  std::size_t heap_index = not_queued;

  bool queued() const noexcept { return heap_index != not_queued; }
};

}  // namespace weft::detail

// The loop's watchers: one slot per live watcher, in chunks that never move (a callback may
// register watchers while it runs, and must not see its own slot relocate), reused through a
// free list so that a busy loop stops allocating once it reached its peak.
//
// A watcher_id is (generation << 32) | slot. Removing a watcher bumps its slot's generation, so
// every id handed out for the slot before stops matching at once; a slot whose generation would
// wrap is retired instead of reused. Ids are therefore never reused in a loop's life.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <new>
#include <stdexcept>
#include <vector>

#include "weft/detail/unique_function.hpp"
#include "weft/loop/event_loop.hpp"

namespace weft::loop::detail {

enum class watcher_kind : std::uint8_t {
  free,
  delay,
  repeat,
  defer,
  readable,
  writable,
  signal,
  fd_check,  // the loop's own periodic check for fds closed under their watchers
};

// One cache line: ten million timers are 640 MB of slots, so the fields no kind shares are
// overlaid.
struct alignas(64) watcher {
  weft::detail::unique_function<void()> callback;
  std::uint64_t armed_sequence = 0;  // timers: the sequence of its heap node; 0 when not armed
  union {
    std::int64_t interval;     // timers: nanoseconds between runs of a repeat
    std::uint64_t armed_tick;  // fds and signals: the tick it was created in (runs in a later one)
  };
  std::uint32_t generation = 1;
  std::uint32_t next_free = 0;
  int target = -1;  // the fd or the signal number
  watcher_kind kind = watcher_kind::free;
  bool referenced = false;
  bool running = false;  // its callback is executing (a persistent watcher)
  bool zombie = false;   // removed while running: free the slot when the callback returns

  watcher() noexcept : interval(0) {}
};
static_assert(sizeof(watcher) == 64, "keep a timer's slot to one cache line");

class watcher_table {
 public:
  static constexpr std::uint32_t no_slot = std::numeric_limits<std::uint32_t>::max();
  // Slots stay below 2^31 (128 GiB of watchers): the timer heap marks its own nodes above.
  static constexpr std::uint32_t max_slots = std::uint32_t{1} << 31;

  watcher_table() = default;
  watcher_table(const watcher_table&) = delete;
  watcher_table& operator=(const watcher_table&) = delete;
  ~watcher_table() {
    for (std::uint32_t slot = 0; slot < size_; ++slot) {
      at(slot).~watcher();
    }
  }

  watcher& at(std::uint32_t slot) noexcept {
    return chunks_[slot >> chunk_bits].get()[slot & (chunk_size - 1)];
  }
  const watcher& at(std::uint32_t slot) const noexcept {
    return chunks_[slot >> chunk_bits].get()[slot & (chunk_size - 1)];
  }

  // A free slot (its kind is free: the caller fills it in).
  std::uint32_t allocate() {
    if (free_ != no_slot) {
      std::uint32_t slot = free_;
      free_ = at(slot).next_free;
      return slot;
    }
    if (size_ == max_slots) [[unlikely]] {
      throw std::length_error("weft::loop: 2^31 watchers are live at once, the most a loop holds");
    }
    if ((size_ & (chunk_size - 1)) == 0) {
      // Raw storage: a slot is constructed when first handed out, so that a growing table
      // touches each slot's memory once.
      chunks_.emplace_back(static_cast<watcher*>(
          ::operator new(sizeof(watcher) * chunk_size, std::align_val_t(alignof(watcher)))));
    }
    ::new (static_cast<void*>(&chunks_[size_ >> chunk_bits].get()[size_ & (chunk_size - 1)]))
        watcher();
    return size_++;
  }

  // Makes every id of slot stale; the slot itself stays taken until recycle().
  void invalidate(watcher& w) noexcept {
    w.kind = watcher_kind::free;
    ++w.generation;
  }
  // Puts an invalidated slot back on the free list (unless its generation wrapped: retired).
  void recycle(std::uint32_t slot) noexcept {
    watcher& w = at(slot);
    if (w.generation == 0) {
      return;  // 2^32 watchers went through this slot: never hand it out again
    }
    w.next_free = free_;
    free_ = slot;
  }

  watcher_id id_of(std::uint32_t slot) const noexcept {
    return static_cast<watcher_id>((static_cast<std::uint64_t>(at(slot).generation) << 32) | slot);
  }
  // The live watcher id names, or null.
  watcher* find(watcher_id id) noexcept {
    auto raw = static_cast<std::uint64_t>(id);
    auto slot = static_cast<std::uint32_t>(raw);
    if (slot >= size_) {
      return nullptr;
    }
    watcher& w = at(slot);
    if (w.generation != static_cast<std::uint32_t>(raw >> 32) || w.kind == watcher_kind::free) {
      return nullptr;
    }
    return &w;
  }
  static std::uint32_t slot_of(watcher_id id) noexcept {
    return static_cast<std::uint32_t>(static_cast<std::uint64_t>(id));
  }

  std::uint32_t size() const noexcept { return size_; }

 private:
  static constexpr std::uint32_t chunk_bits = 12;
  static constexpr std::uint32_t chunk_size = 1u << chunk_bits;

  struct chunk_free {
    void operator()(watcher* chunk) const noexcept {
      ::operator delete(chunk, std::align_val_t(alignof(watcher)));
    }
  };
  std::vector<std::unique_ptr<watcher, chunk_free>> chunks_;
  std::uint32_t size_ = 0;
  std::uint32_t free_ = no_slot;
};

}  // namespace weft::loop::detail

// Random yields between the atomic steps of the procs runtime's lock-free code, so that
// tests explore interleavings that a quiet machine would almost never produce.
//
// Contract: chaos_point() may be called from any thread and never blocks (it may give up the
// rest of the thread's time slice). It is off unless the environment variable
// WEFT_PROCS_CHAOS=1 was set when the program started (read once, during static
// initialisation); tests switch it with set_chaos_for_testing(). When off, a call costs one
// relaxed load and one predictable branch.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string_view>
#include <thread>

namespace weft::procs::detail {

inline bool chaos_requested_by_environment() noexcept {
  const char* value = std::getenv("WEFT_PROCS_CHAOS");
  return value != nullptr && std::string_view(value) == "1";
}

// Read once at static initialisation. An atomic (not a plain bool) because tests flip it
// while worker threads of an earlier test may still be winding down.
inline std::atomic<bool> chaos_enabled_flag{chaos_requested_by_environment()};

inline bool chaos_enabled() noexcept { return chaos_enabled_flag.load(std::memory_order_relaxed); }

// For tests: turns the random yields on or off for the whole process, overriding the
// environment. Call it while no other thread is inside the code under test, so that the
// switch happens between runs rather than halfway through one.
inline void set_chaos_for_testing(bool enabled) noexcept {
  chaos_enabled_flag.store(enabled, std::memory_order_relaxed);
}

// Per-thread xorshift64: cheap, no shared state (a shared generator would itself serialise
// the threads and hide the races we want to provoke). Seeded lazily from the thread id so
// that threads do not yield in lockstep.
inline std::uint64_t chaos_next_random() noexcept {
  thread_local std::uint64_t state = 0;
  if (state == 0) {
    state = std::hash<std::thread::id>{}(std::this_thread::get_id()) | 1;
    state *= 0x9E3779B97F4A7C15ull;
    state |= 1;
  }
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}

// The random yield itself, out of line and marked cold: inlined, its thread_local and its call
// made every function with a chaos point save and restore registers on its hot path, chaos
// or not.
[[gnu::cold, gnu::noinline]] inline void chaos_yield() noexcept {
  if ((chaos_next_random() & 3u) == 0) {
    std::this_thread::yield();
  }
}

// Yields with probability 1/4 when chaos is on.
inline void chaos_point() noexcept {
  if (chaos_enabled()) [[unlikely]] {
    chaos_yield();
  }
}

}  // namespace weft::procs::detail

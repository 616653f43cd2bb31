// A process's record in the engine: its state word, its inbox, and what the worker running it
// needs. Records live in chunks that are never freed before the engine (type-stable memory), so
// a pid lookup may read a record whose process just finished; the inbox lock and the pid stored
// under it decide whether that record is still the process the pid names.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "procs/chaos.hpp"
#include "weft/procs/process.hpp"

namespace weft::procs::detail {

struct outcome_state;

// A test-and-test-and-set lock for the inbox: held for a push_back or a swap, a few dozen
// nanoseconds, so spinning (then yielding) beats a futex round trip. Acquire on lock, release
// on unlock: everything written under it is visible to the next holder.
class spin_lock {
 public:
  void lock() noexcept {
    for (unsigned spins = 0;; ++spins) {
      if (!held_.exchange(true, std::memory_order_acquire)) {
        return;
      }
      while (held_.load(std::memory_order_relaxed)) {
        if (++spins > 64) {
          std::this_thread::yield();
        }
      }
    }
  }
  void unlock() noexcept { held_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> held_{false};
};

// The state word. The phase says who is responsible for the record:
//   free      in the free list, no process;
//   queued    in exactly one run queue (or the "next" slot), or being submitted;
//   running   a worker is running it (exactly one: the one that popped it);
//   idle      waiting for events (blocked on yields or idle for messages): nobody holds it,
//             and whoever turns it to queued (a CAS) must put it on a run queue;
//   complete  finished; events are refused.
// `notified` is set (under the inbox lock) by an event arriving while the process is running,
// and cleared when the worker drains the inbox (under the same lock); the worker's final CAS
// running -> idle fails while it is set, so the event makes the process run again: never lost,
// and, since it is cleared at the drain, never an empty extra step either.
enum : std::uint32_t {
  phase_free = 0,
  phase_queued = 1,
  phase_running = 2,
  phase_idle = 3,
  phase_complete = 4,
  phase_mask = 7,
  notified_bit = 8,
};

struct process_record {
  std::atomic<std::uint32_t> state{phase_free};
  process_record* next_ready = nullptr;  // global_queue's link, used while queued there

  // Guarded by inbox_lock: the identity of the live process and its incoming events.
  spin_lock inbox_lock;
  pid id = no_pid;         // no_pid unless live
  bool accepting = false;  // events go in only while true
  bool cancel_sent = false;
  std::vector<event> inbox;

  // Written by terminate() / stop's force pass (under inbox_lock), read by the worker.
  std::atomic<bool> forced{false};

  // Owned by whoever holds the record in phase queued/running (one thread at a time; the
  // phase transitions carry the happens-before between them).
  std::uint32_t index = 0;       // slot in the table (constant)
  std::uint32_t generation = 1;  // bumped each time the slot is freed
  std::unique_ptr<process> body;
  context self;
  std::string method;
  std::string input;
  bool initialised = false;
  bool waiting = false;  // its last step asked to wait: an empty drain means no step
  std::vector<event> batch;
  std::shared_ptr<outcome_state> outcome;
};

inline pid make_pid(std::uint32_t generation, std::uint32_t index) noexcept {
  return (static_cast<pid>(generation) << 32) | index;
}
inline std::uint32_t index_of(pid id) noexcept { return static_cast<std::uint32_t>(id); }

}  // namespace weft::procs::detail

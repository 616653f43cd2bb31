// A process's record in the engine: its state word, its inbox, and what the worker running it
// needs. Records live in chunks that are never freed before the engine (type-stable memory), so
// a pid lookup may read a record whose process just finished; the inbox lock and the pid stored
// under it decide whether that record is still the process the pid names.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "procs/chaos.hpp"
#include "procs/spin_lock.hpp"
#include "weft/procs/process.hpp"

namespace weft::procs {

// The context inside a process object (process::context_): bound when the process is launched,
// handed to init by the worker.
struct process_record_access {
  static void bind(process& body, pid id, runtime& owner) noexcept {
    body.context_.self_ = id;
    body.context_.owner_ = &owner;
  }
  static context& context_of(process& body) noexcept { return body.context_; }
};

}  // namespace weft::procs

namespace weft::procs::detail {

struct outcome_state;

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
// and, since it is cleared at the drain, never an empty extra step either. A step that asks to
// keep running ends with a plain store of queued, which drops the bit: its event waits in the
// inbox for the run that store promises (run() gives the argument).
enum : std::uint32_t {
  phase_free = 0,
  phase_queued = 1,
  phase_running = 2,
  phase_idle = 3,
  phase_complete = 4,
  phase_mask = 7,
  notified_bit = 8,
};

// The entry point of a process started with something else than "main" and no input (most
// are not): kept out of the record, and kept for the slot's next process that needs one.
struct entry_point {
  std::string method;
  std::string input;
};

// Two cache lines, aligned to one: a record is launched by one worker and usually run and
// finished by another, so every line it spans is a transfer between their caches (a larger
// record measured 3x slower per spawn on two workers). The first line holds everything a
// launch, a run and a finish of a small process touch, and everything a sender touches under
// the inbox lock (the lock, the identity check, the inbox's vector and the state word): with
// many senders on several cores, the lock's holder pays for each line it pulls while the others
// wait, so the critical section spans this one line plus the slot the event goes to. The second
// line holds the outcome and the entry point, which only submit, a non-default start and the
// end of a submitted process read.
// Records sit side by side in their chunk: without the alignment, one being launched would
// share a line with its neighbour running on another worker. The events of a run are drained
// into the worker's own vector (worker::batch), not kept here.
//
// The live process's pid is make_pid(generation, index) (pid_of): no separate field. A sender
// holding inbox_lock reads generation only after seeing accepting set, and generation changes
// only in free_record, after finish cleared accepting under the same lock, so the two never
// race.
struct alignas(64) process_record {
  // --- line 0 ---
  std::atomic<std::uint32_t> state{phase_free};
  // Guarded by inbox_lock: whether events go in (and so whether generation names the process).
  spin_lock inbox_lock;
  bool accepting = false;  // events go in only while true
  bool cancel_sent = false;
  // Written by terminate() / stop's force pass (under inbox_lock), read by the worker.
  std::atomic<bool> forced{false};
  // Owned by whoever holds the record in phase queued/running (one thread at a time; the
  // phase transitions carry the happens-before between them).
  bool initialised = false;
  bool waiting = false;          // its last step asked to wait: an empty drain means no step
  bool default_entry = true;     // started at "main" with no input: `entry` unused
  bool has_events = false;       // guarded by inbox_lock: `inbox` is not empty
  std::uint32_t index = 0;       // slot in the table (constant)
  std::uint32_t generation = 1;  // bumped each time the slot is freed (see above)
  bool has_outcome = false;      // `outcome` is set (submitted, not spawned)
  process_record* next_ready = nullptr;  // global_queue's link, used while queued there
  std::unique_ptr<process> body;
  std::vector<event> inbox;  // guarded by inbox_lock

  // --- line 1 ---
  std::shared_ptr<outcome_state> outcome;
  std::unique_ptr<entry_point> entry;  // when !default_entry
};
static_assert(sizeof(process_record) == 128, "two cache lines (see the layout above)");
static_assert(offsetof(process_record, inbox) + sizeof(std::vector<event>) <= 64,
              "the inbox is in the first line with its lock (see the layout above)");

inline pid make_pid(std::uint32_t generation, std::uint32_t index) noexcept {
  return (static_cast<pid>(generation) << 32) | index;
}
inline std::uint32_t index_of(pid id) noexcept { return static_cast<std::uint32_t>(id); }
// The pid of the process a record holds, for its holder (the generation changes only when the
// record is freed).
inline pid pid_of(const process_record& record) noexcept {
  return make_pid(record.generation, record.index);
}
// Under record.inbox_lock: whether the record holds the live process `id` (the check every
// event and terminate makes before touching it; see the layout comment for why it is exact).
inline bool holds_live(const process_record& record, pid id) noexcept {
  return record.accepting && pid_of(record) == id;
}

}  // namespace weft::procs::detail

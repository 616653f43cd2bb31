// weft::procs::wait_group: Go's sync.WaitGroup for processes. It counts outstanding units of
// work (most often the children a process spawned) and, each time the count falls to zero,
// wakes one process, the waiter, with a yield_complete event carrying the group's tag.
//
//   // the parent keeps the group (a member) and hands each child one unit:
//   group_.emplace(self, /*tag=*/1);             // std::optional<wait_group>; self: its context
//   wait_group::units batch = group_->add(children);
//   for (...) self.owner().spawn(std::make_unique<child>(batch.take()));
//   out.wait();  // a later step sees {yield_complete, tag 1}: every unit was done
//   // the child keeps its unit as a member: done() when its work is finished, or nothing at
//   // all (the unit is done when the child's object is destroyed, however the child ended).
//
// The same name as weft::wait_group (weft/sync/wait_group.hpp) because it is the same idea,
// Go's WaitGroup: count outstanding work, act when the count falls to zero. Who waits differs,
// and so does the shape: weft::wait_group is for the coroutines of one thread, which add() and
// done() a counter and block in wait(); this one is for processes on the runtime's workers,
// so nothing blocks: add() hands out move-only units, and zero wakes the waiting process with
// an event. A coroutine cannot use this one (there is no wait()), nor a process the other (its
// wait() would block a worker thread).
//
// Why not a message per child: N children reporting to one parent with send() put N events into
// one inbox, each one a lock taken by whichever core the child ran on and a wake-up check; with
// the children spread over several cores, every report moves the parent's inbox between their
// caches. A unit's done() is one atomic decrement of a counter that sits on its own cache line,
// and only the last one delivers an event. Use messages when the children have something to
// say; use a wait_group when the parent only needs to know that they all finished.
//
// Units: each add() hands out the units it counts, as move-only `unit` objects; a unit counts
// down exactly once, at its done() or at its destruction, whichever comes first. So a unit cannot
// be done twice, nor forgotten by a process that was cancelled, terminated or forced at stop:
// its object is destroyed after close(), and its unit with it.
//
// Lifetime: the count lives in a small shared block, not in the wait_group object. Destroying
// the wait_group (say the parent finished first) leaves the units valid: their done() then
// wakes nobody, and the last one frees the block. The block keeps the runtime's engine
// alive, so a unit may also outlive the runtime (its zero event is dropped, as a completion
// for a stopped runtime is).
//
// Rounds: once the waiter has had the zero event, add() may start another round. Adding while
// the count may be reaching zero (from a process that does not hold a unit) races like Go's
// Add after Wait: the zero event may come for the old round with the new units outstanding.
// Add from a process that holds a unit of the group, or from the waiter, and it cannot.
//
// Memory: everything a thread wrote before its unit's done() happens-before the waiter's step
// that receives the zero event (the decrements are release/acquire read-modify-writes of one
// counter, and the last one hands the event over through the waiter's inbox lock), so the
// parent can read what its children left for it without any other synchronisation.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "weft/procs/process.hpp"

namespace weft::procs {

class runtime;
namespace detail {
class engine;

// The block a group and its units share. `word` is 2 per outstanding unit, plus 1 while the
// wait_group object holds the block: whoever takes it to 0 frees the block.
struct wait_group_block {
  // The only field written after construction, alone on its line: the others are read by every
  // done() and so stay shared in every core's cache instead of moving with the counter.
  alignas(64) std::atomic<std::uint64_t> word{1};
  // The runtime's engine, kept alive by the block: a unit may be done after the runtime
  // was destroyed (the event is then dropped), and whoever frees the block lets it go.
  alignas(64) std::shared_ptr<engine> owner;
  pid waiter = no_pid;
  std::uint64_t tag = 0;
};

// The last unit of a round while the group lives: wakes the waiter. Takes copies: the group may
// be destroyed, and its block freed, as soon as the count is zero.
void wait_group_zero(engine& owner, pid waiter, std::uint64_t tag) noexcept;
void wait_group_free(wait_group_block* block) noexcept;

// Counts `units` down on `block` (units > 0) and does what reaching zero asks.
inline void wait_group_release(wait_group_block* block, std::uint64_t units) noexcept {
  engine* owner = block->owner.get();
  pid waiter = block->waiter;
  std::uint64_t tag = block->tag;
  // acq_rel: the release publishes this thread's writes before its done(); the decrement that
  // reaches zero acquires every earlier one (read-modify-writes of one atomic continue each
  // other's release sequences), so it happens-after all of them before it hands the event over
  // (through the waiter's inbox lock, which the waiter's drain acquires) or frees the block.
  std::uint64_t after = block->word.fetch_sub(2 * units, std::memory_order_acq_rel) - 2 * units;
  if (after == 1) {
    wait_group_zero(*owner, waiter, tag);  // no unit left, the group lives: wake its waiter
  } else if (after == 0) {
    wait_group_free(block);  // no unit left and the group is gone: the last one out frees it
  }
}
}  // namespace detail

class wait_group {
 public:
  // One unit of the count: done() or the destructor counts it down, once. Move-only.
  class unit {
   public:
    unit() noexcept = default;  // holds nothing (pending() is false)
    unit(unit&& other) noexcept : block_(other.block_) { other.block_ = nullptr; }
    unit& operator=(unit&& other) noexcept;
    unit(const unit&) = delete;
    unit& operator=(const unit&) = delete;
    ~unit() { done(); }

    // Counts this unit down (the last one wakes the waiter); nothing if already done or empty.
    // Thread-safe against the other units; one unit is used by one thread at a time.
    void done() noexcept;
    bool pending() const noexcept { return block_ != nullptr; }  // false once done or empty

   private:
    friend class wait_group;
    explicit unit(detail::wait_group_block* block) noexcept : block_(block) {}
    detail::wait_group_block* block_ = nullptr;
  };

  // Several units counted at once (one atomic add), handed out by take(). The ones never taken
  // are counted down together when the batch is destroyed. Move-only.
  class units {
   public:
    units() noexcept = default;
    units(units&& other) noexcept;
    units& operator=(units&& other) noexcept;
    units(const units&) = delete;
    units& operator=(const units&) = delete;
    ~units() { release(); }

    // The next unit; std::out_of_range when every unit of the batch was taken.
    unit take();
    // Units not taken yet.
    std::size_t left() const noexcept { return static_cast<std::size_t>(left_); }

   private:
    friend class wait_group;
    units(detail::wait_group_block* block, std::uint64_t count) noexcept
        : block_(block), left_(count) {}
    void release() noexcept;
    detail::wait_group_block* block_ = nullptr;
    std::uint64_t left_ = 0;
  };

  // The waiter is the process whose context this is (its pid, on its runtime).
  wait_group(const context& waiter, std::uint64_t tag);
  // Any process of `owner` as the waiter (the group may be made outside the runtime).
  // std::invalid_argument for no_pid.
  wait_group(runtime& owner, pid waiter, std::uint64_t tag);
  wait_group(wait_group&& other) noexcept : block_(other.block_) { other.block_ = nullptr; }
  wait_group& operator=(wait_group&& other) noexcept;
  wait_group(const wait_group&) = delete;
  wait_group& operator=(const wait_group&) = delete;
  // Lets the block go: units still out keep it, and their done() wakes nobody.
  ~wait_group();

  // One more unit. std::logic_error on a moved-from group.
  unit add();
  // `count` more units at once. std::length_error beyond what the count can hold.
  units add(std::size_t count);

  // The units added and not yet done (a snapshot while others run).
  std::size_t count() const noexcept;
  pid waiter() const noexcept;
  std::uint64_t tag() const noexcept;

 private:
  static detail::wait_group_block* make_block(runtime& owner, pid waiter, std::uint64_t tag);
  detail::wait_group_block* checked_block(const char* operation) const;
  detail::wait_group_block* block_ = nullptr;
};

inline void wait_group::unit::done() noexcept {
  if (block_ != nullptr) {
    detail::wait_group_block* block = block_;
    block_ = nullptr;
    detail::wait_group_release(block, 1);
  }
}

}  // namespace weft::procs

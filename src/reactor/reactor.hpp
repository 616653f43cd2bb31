// The driver interface the scheduler blocks on.
//
// A reactor belongs to one scheduler and is driven only from its thread: poll() runs callbacks
// of events that are due (waking coroutines through scheduler::wake, never switching stacks
// itself); poll(true) first waits until at least one event or timer is due. alive() says
// whether anything registered can still produce an event that counts: deadlock detection
// treats a scheduler whose reactor is not alive and whose coroutines all wait as deadlocked.
// Background sources (issue-tracker example: a pool's healthcheck timer) do not count.
#pragma once

#include <uv.h>

#include <cstddef>
#include <memory>

#include "reactor/timer_queue.hpp"

namespace weft::detail {

class reactor {
 public:
  virtual ~reactor() = default;

  virtual void poll(bool block) = 0;
  virtual bool alive() = 0;

  // Timers: entry.fire runs from poll() once entry.deadline has passed. An entry must stay
  // alive until it fired or was removed.
  virtual void add_timer(timer_entry& entry) = 0;
  virtual void remove_timer(timer_entry& entry) noexcept = 0;

  // Closes the driver's own handles and checks that nothing else is left open; a leftover
  // handle is a std::logic_error naming what was left.
  virtual void close() = 0;

  // Operations whose waiter left before they completed (see weft/reactor/operation.hpp). They
  // are bound to complete soon; close() waits for them before closing the loop.
  void operation_abandoned() noexcept { ++abandoned_; }
  void abandoned_operation_completed() noexcept { --abandoned_; }
  std::size_t abandoned_operations() const noexcept { return abandoned_; }

  // The libuv loop behind the driver (the I/O layer is built on libuv).
  virtual uv_loop_t& uv_loop() noexcept = 0;

 private:
  std::size_t abandoned_ = 0;
};

std::unique_ptr<reactor> make_uv_reactor();

}  // namespace weft::detail

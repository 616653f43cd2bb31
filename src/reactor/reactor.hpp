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
#include <utility>
#include <vector>

#include "reactor/timer_queue.hpp"

namespace weft::detail {

// Per-loop state of an event source (the fd poll registry, the signal handles): created on
// first use, closed with the reactor, before the loop itself closes.
class reactor_extension {
 public:
  virtual ~reactor_extension() = default;
  // Closes every handle the extension owns (uv_close); their callbacks run before the loop
  // closes.
  virtual void close() noexcept = 0;
};

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

  // The extension of type Extension (constructed from uv_loop() on first use).
  template <class Extension>
  Extension& extension() {
    static const char key = 0;
    for (auto& [tag, existing] : extensions_) {
      if (tag == &key) {
        return static_cast<Extension&>(*existing);
      }
    }
    auto created = std::make_unique<Extension>(uv_loop());
    Extension& result = *created;
    extensions_.emplace_back(&key, std::move(created));
    return result;
  }

 protected:
  void close_extensions() noexcept {
    for (auto& [tag, existing] : extensions_) {
      existing->close();
    }
  }
  void destroy_extensions() noexcept { extensions_.clear(); }

 private:
  std::size_t abandoned_ = 0;
  std::vector<std::pair<const void*, std::unique_ptr<reactor_extension>>> extensions_;
};

std::unique_ptr<reactor> make_uv_reactor();

}  // namespace weft::detail

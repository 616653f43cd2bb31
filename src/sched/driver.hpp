// The driver interface: what the scheduler needs of the event machinery it blocks on. The
// scheduler knows nothing else of it; the drivers and the event sources built on them live in
// the reactor layer (src/reactor/), which implements this and provides make_driver().
//
// A driver belongs to one scheduler and is driven only from its thread: poll() runs callbacks
// of events that are due (waking coroutines through the scheduler's wake, never switching
// stacks itself); poll(true) first waits until at least one event or timer is due. alive() says
// whether anything registered can still produce an event that counts: deadlock detection
// treats a scheduler whose driver is not alive and whose coroutines all wait as deadlocked.
// Background sources (a pool's healthcheck timer) do not count.
#pragma once

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "weft/detail/timer_entry.hpp"

namespace weft::detail {

// Per-driver state of an event source (the fd poll registry, the signal handles): created on
// first use, closed with the driver, before the driver closes its own handles.
class driver_extension {
 public:
  virtual ~driver_extension() = default;
  // Closes every handle the extension owns; their callbacks run before the driver closes.
  virtual void close() noexcept = 0;
};

class driver {
 public:
  virtual ~driver() = default;

  // The driver's name, for errors that name it ("uv").
  virtual const char* name() const noexcept = 0;

  virtual void poll(bool block) = 0;
  virtual bool alive() = 0;

  // Timers: entry.fire runs from poll() once entry.deadline has passed. An entry must stay
  // alive until it fired or was removed. The driver arms one timer of its own for the earliest
  // deadline.
  virtual void add_timer(timer_entry& entry) = 0;
  virtual void remove_timer(timer_entry& entry) noexcept = 0;

  // Closes the driver's own handles and checks that nothing else is left open; a leftover
  // handle is a std::logic_error naming what was left.
  virtual void close() = 0;

  // Operations whose waiter left before they completed (see src/reactor/operation.hpp). They
  // are bound to complete soon; close() waits for them before closing.
  void operation_abandoned() noexcept { ++abandoned_; }
  void abandoned_operation_completed() noexcept { --abandoned_; }
  std::size_t abandoned_operations() const noexcept { return abandoned_; }

  // The extension of type Extension, constructed from arguments on first use (later calls
  // ignore them).
  template <class Extension, class... Arguments>
  Extension& extension(Arguments&&... arguments) {
    static const char key = 0;
    for (auto& [tag, existing] : extensions_) {
      if (tag == &key) {
        return static_cast<Extension&>(*existing);
      }
    }
    auto created = std::make_unique<Extension>(std::forward<Arguments>(arguments)...);
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
  std::vector<std::pair<const void*, std::unique_ptr<driver_extension>>> extensions_;
};

// The driver a new scheduler runs on (defined by the reactor layer, which picks it).
std::unique_ptr<driver> make_driver();

}  // namespace weft::detail

#include "weft/reactor/timer.hpp"

#include <stdexcept>
#include <utility>

#include "sched/scheduler_core.hpp"

namespace weft {

timer::timer() : core_(detail::current_core()) {
  if (core_ == nullptr) {
    throw std::logic_error(
        "weft::timer must be created inside weft::run (it belongs to that scheduler)");
  }
  entry_.owner = this;
  entry_.fire = &timer::fire;
}

timer::~timer() { stop(); }

void timer::start(clock::duration after, unique_function<void()> fn, clock::duration repeat) {
  if (detail::current_core() != core_) {
    throw std::logic_error(
        "weft::timer::start called outside the run of the scheduler that made the timer");
  }
  if (!fn) {
    throw std::invalid_argument("weft::timer::start needs a callable, got an empty one");
  }
  stop();
  callback_ = std::move(fn);
  repeat_ = repeat;
  entry_.deadline = detail::saturating_add(clock::now(), after);  // huge: never fires
  core_->driver().add_timer(entry_);
}

void timer::stop() noexcept {
  // After the run ended the reactor forgot every entry, so an entry still marked queued is in
  // a live reactor.
  if (entry_.queued()) {
    core_->driver().remove_timer(entry_);
  }
}

bool timer::armed() const noexcept { return entry_.queued(); }

void timer::fire(detail::timer_entry& fired) {
  timer& self = *static_cast<entry&>(fired).owner;
  if (self.repeat_ > clock::duration::zero()) {
    // Re-arm first, from the planned deadline so a periodic timer does not drift; the callback
    // may stop() it.
    self.entry_.deadline = detail::saturating_add(self.entry_.deadline, self.repeat_);
    self.core_->driver().add_timer(self.entry_);
  }
  try {
    self.callback_();
  } catch (...) {
    self.core_->report_uncaught(std::current_exception());
  }
}

}  // namespace weft

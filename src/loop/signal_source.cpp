#include "loop/signal_source.hpp"

#include <chrono>
#include <csignal>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "sched/scheduler_core.hpp"
#include "weft/error.hpp"
#include "weft/reactor/signals.hpp"
#include "weft/sched/this_coroutine.hpp"
#include "weft/sched/timeout.hpp"

namespace weft::loop::detail {

signal_source::signal_source() : numbers_(NSIG) {}

void signal_source::check_number(int signal_number, const char* operation) {
  if (signal_number <= 0 || signal_number >= NSIG || signal_number == SIGKILL ||
      signal_number == SIGSTOP) {
    throw std::invalid_argument(std::string("weft::loop::event_loop::") + operation + ": " +
                                std::to_string(signal_number) +
                                " is not a signal that can be caught");
  }
}

void signal_source::watch(int signal_number, watcher_id id) {
  number& n = numbers_[signal_number];
  n.id = id;
  catch_now(signal_number);
  if (listener_ != nullptr && !n.helper.valid()) {
    spawn_helper(signal_number);
  }
}

void signal_source::catch_now(int signal_number) {
  // The helper starts waiting only when it first runs, after the current tick: a signal raised
  // before that would meet its default disposition (often: terminate the process). A wait that
  // has already timed out installs weft's handler now, without suspending, and hands over a
  // delivery that was pending. Only a running coroutine may do it; outside weft the signal is
  // caught once the loop runs.
  weft::detail::scheduler_core* core = weft::detail::current_core();
  if (core == nullptr || core->current() == nullptr ||
      core->current()->state() != weft::detail::coroutine_state::running) {
    return;
  }
  weft::protect([&] {  // a pending cancellation is for the caller's next real wait
    try {
      int delivered = weft::signals::wait({signal_number}, weft::timeout(std::chrono::seconds(0)));
      keep(delivered);
    } catch (const weft::timeout_error&) {
      // nothing pending: the handler is installed, which is all this was for
    }
  });
}

void signal_source::unwatch(int signal_number) noexcept {
  if (signal_number <= 0 || signal_number >= NSIG) {
    return;
  }
  number& n = numbers_[signal_number];
  n.id = watcher_id::none;
  if (n.pending) {
    n.pending = false;
    --pending_count_;
  }
  // A helper waiting for a signal nobody handles would keep the scheduler's reactor alive.
  retire_helper(n);
}

void signal_source::start(readiness_listener& listener) {
  listener_ = &listener;
  for (int signal_number = 1; signal_number < NSIG; ++signal_number) {
    if (numbers_[signal_number].id != watcher_id::none) {
      catch_now(signal_number);  // caught from the first tick on
      spawn_helper(signal_number);
    }
  }
}

void signal_source::stop() {
  listener_ = nullptr;
  for (number& n : numbers_) {
    retire_helper(n);
  }
  for (weft::task<void>& retired : retired_) {
    while (!retired.done()) {
      try {
        retired.await();
      } catch (...) {
        // Its cancellation, or this coroutine's: keep waiting for the cancelled helper.
      }
    }
  }
  retired_.clear();
}

void signal_source::spawn_helper(int signal_number) {
  numbers_[signal_number].helper = weft::spawn(
      [this, signal_number] { helper_main(*this, signal_number); },
      {.name = "weft::loop signal " + std::to_string(signal_number), .background = true});
}

void signal_source::retire_helper(number& n) noexcept {
  if (!n.helper.valid()) {
    return;
  }
  try {
    std::erase_if(retired_, [](const weft::task<void>& retired) { return retired.done(); });
    n.helper.cancel("the event loop no longer watches this signal");
    retired_.push_back(std::move(n.helper));
  } catch (...) {
    // cancel() throws only from a foreign thread; the loop checked its thread already.
  }
  n.helper = weft::task<void>();
}

void signal_source::helper_main(signal_source& self, int signal_number) {
  try {
    for (;;) {
      weft::signals::wait({signal_number});
      self.keep(signal_number);
      if (self.listener_ != nullptr) {
        self.listener_->readiness_arrived();
      }
    }
  } catch (const weft::cancelled_error&) {
    throw;
  } catch (...) {
    if (self.listener_ != nullptr) {
      self.listener_->source_failed(std::current_exception());
    }
  }
}

}  // namespace weft::loop::detail

// weft::loop::event_loop: the public calls, the thread and fork checks, and the registration of
// watchers. Running and the tick are in dispatch.cpp and tick.cpp.
#include "weft/loop/event_loop.hpp"

#include <pthread.h>
#include <time.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>

#include "loop/loop_core.hpp"

namespace weft::loop {
namespace detail {

constinit __attribute__((tls_model("initial-exec"))) thread_local char loop_thread_identity = 0;
std::atomic<std::uint64_t> fork_generation{0};

std::int64_t coarse_clock_slack() noexcept {
  static const std::int64_t slack = [] {
    timespec resolution{};
    timespec probe{};
    if (::clock_getres(CLOCK_MONOTONIC_COARSE, &resolution) != 0 ||
        ::clock_gettime(CLOCK_MONOTONIC_COARSE, &probe) != 0) {
      return never;
    }
    // Twice the resolution: the reading is the last tick's time, at most one resolution old;
    // the rest is margin against a tick handled late.
    return 2 * (resolution.tv_sec * 1'000'000'000 + resolution.tv_nsec);
  }();
  return slack;
}

std::int64_t coarse_clock_now() noexcept {
  timespec reading{};
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &reading);
  return reading.tv_sec * 1'000'000'000 + reading.tv_nsec;
}

namespace {

constinit thread_local loop_core* thread_loop = nullptr;

void count_fork_in_child() noexcept { fork_generation.fetch_add(1, std::memory_order_relaxed); }

std::string call_name(const char* operation) {
  return std::string("weft::loop::event_loop::") + operation;
}

void check_callback(const callback& fn, const char* operation) {
  if (!fn) {
    throw std::invalid_argument(call_name(operation) + " needs a callable, got an empty one");
  }
}

}  // namespace

void loop_core::throw_wrong_thread(const char* operation) const {
  if (fork_generation_ != current_fork_generation()) {
    throw std::logic_error(call_name(operation) +
                           " called in a child process on a loop made before fork(); create "
                           "event loops after fork (this one can only be destroyed here)");
  }
  throw std::logic_error(call_name(operation) +
                         " called from a thread that does not own the loop; an event_loop is "
                         "used only on the thread that made it (reach it from another thread "
                         "through an eventfd or pipe watched with on_readable)");
}

namespace {
std::uint64_t register_fork_counter() noexcept {
  static const int registered = ::pthread_atfork(nullptr, nullptr, &count_fork_in_child);
  (void)registered;
  return fork_generation.load(std::memory_order_relaxed);
}
}  // namespace

loop_core::loop_core() : owner_(thread_marker()), fork_generation_(register_fork_counter()) {
  if (thread_loop != nullptr && thread_loop->fork_generation_ == fork_generation_) {
    throw std::logic_error(
        "weft::loop::event_loop: this thread already has an event loop; a thread has one at a "
        "time (share it, or run another loop on another thread)");
  }
  thread_loop = this;
  driver_timer_.owner = this;
  driver_timer_.fire = &loop_core::on_driver_timer;
}

loop_core::~loop_core() {
  if (session_ != nullptr) {
    std::fprintf(stderr,
                 "weft::loop::event_loop destroyed while it is being dispatched (from one of its "
                 "callbacks, or while a coroutine runs or suspends in it); aborting\n");
    std::abort();
  }
  for (suspension_state* state = suspensions_; state != nullptr;) {
    suspension_state* next = state->next_;
    state->loop_ = nullptr;
    state->previous_ = state->next_ = nullptr;
    if (state->phase_ == suspension_state::phase::suspended) {
      state->wake_to_dispatch();  // its suspend() finds the loop gone and throws
    }
    state = next;
  }
  if (thread_loop == this) {
    thread_loop = nullptr;
  }
}

// --- watchers --------------------------------------------------------------------------------

std::uint32_t loop_core::new_watcher(watcher_kind kind, callback&& fn, int target) {
  std::uint32_t slot = watchers_.allocate();
  watcher& w = watchers_.at(slot);
  w.callback = std::move(fn);
  w.kind = kind;
  w.target = target;
  w.referenced = true;
  w.armed_tick = tick_;
  w.armed_sequence = 0;
  return slot;
}

void loop_core::release(std::uint32_t slot) noexcept {
  watcher& w = watchers_.at(slot);
  switch (w.kind) {
    case watcher_kind::delay:
    case watcher_kind::repeat:
      --timer_count_;
      if (w.referenced) {
        --referenced_timers_;
      }
      [[fallthrough]];
    case watcher_kind::fd_check:
      if (w.armed_sequence != 0) {
        w.armed_sequence = 0;  // its heap node is stale from now on
        ++stale_nodes_;
      }
      if (w.kind == watcher_kind::fd_check) {
        fd_check_slot_ = watcher_table::no_slot;
      }
      break;
    case watcher_kind::readable:
    case watcher_kind::writable: {
      fd_direction direction =
          w.kind == watcher_kind::readable ? fd_direction::readable : fd_direction::writable;
      // A replacement registered its new id first: leave the fd watched then.
      if (fds_.watcher(w.target, direction) == watchers_.id_of(slot)) {
        fds_.unwatch(w.target, direction);
      }
      break;
    }
    case watcher_kind::signal:
      if (signals_.watcher(w.target) == watchers_.id_of(slot)) {
        signals_.unwatch(w.target);
      }
      break;
    case watcher_kind::defer:  // its queue entry no longer matches
      break;
    case watcher_kind::free:
      return;
  }
  bool referenced = w.referenced;
  w.referenced = false;
  watchers_.invalidate(w);
  // Destroyed last, after the books are straight: a capture's destructor may call the loop.
  callback doomed;
  if (w.running) {
    w.zombie = true;  // the callback is executing: end_running() frees it
  } else {
    doomed = std::move(w.callback);
    watchers_.recycle(slot);
  }
  if (referenced) {
    drop_reference();
  }
}

void loop_core::end_running(std::uint32_t slot) noexcept {
  watcher& w = watchers_.at(slot);
  w.running = false;
  if (w.zombie) {
    w.zombie = false;
    callback doomed = std::move(w.callback);
    watchers_.recycle(slot);
  }
}

void loop_core::arm_timer(std::uint32_t slot, watcher& w, std::int64_t deadline) {
  std::uint64_t sequence = next_sequence_++;
  timers_.push(timer_node{deadline, sequence, slot}, w.interval);
  w.armed_sequence = sequence;
}

void loop_core::arm_after_call(std::uint32_t slot, watcher& w) {
  std::uint64_t sequence = next_sequence_++;
  unstarted_.push_back(unstarted_timer{w.interval, sequence, slot});
  w.armed_sequence = sequence;
  if (unstarted_.size() >= unstarted_limit) {
    start_timers(clock_now());  // bounds the list; a clock read per unstarted_limit timers
  }
}

void loop_core::start_timers(std::int64_t now) {
  // now was read after every call that armed these: see unstarted_ in loop_core.hpp. When
  // everything is cancelled (timer_churn), nothing is looked at; otherwise the nodes go to the
  // heap without a look at their watchers (a cancelled one is a stale node like any other):
  // with ten million timers that look is a second pass over 640 MB of slots.
  compact_if_worth_it();
  for (const unstarted_timer& timer : unstarted_) {
    timers_.push(timer_node{deadline_after(now, timer.interval), timer.sequence, timer.slot},
                 timer.interval);
  }
  unstarted_.clear();
}

void loop_core::add_reference() {
  if (referenced_++ == 0) {
    if (session_ != nullptr && session_->kind == session_kind::standalone && !keeper_alive_ &&
        !stop_requested_) {
      spawn_keeper();
    }
  }
}

void loop_core::drop_reference() noexcept {
  if (--referenced_ == 0) {
    notify();  // an idle dispatcher may now be done
  }
}

void loop_core::compact_if_worth_it() {
  if (stale_nodes_ < 4096) {
    return;
  }
  std::size_t live = timers_.size() + unstarted_.size() - stale_nodes_;
  if (live == 0) {
    timers_.clear();  // everything was cancelled: nothing to look at
    unstarted_.clear();
    stale_nodes_ = 0;
    return;
  }
  // Rebuild once stale nodes are three times the live ones: the heap stays within four nodes
  // per live timer, and the rebuild (a look at each node's watcher, then a heapify) is O(n) per
  // such growth, so O(1) per cancel. Checked between ticks, not at each cancel: a burst of
  // cancels (a callback dropping its timeouts) then often leaves nothing live, which costs no
  // look at all.
  if (stale_nodes_ > 3 * live) {
    drop_stale_nodes();
  }
}

void loop_core::drop_stale_nodes() {
  auto live = [this](std::uint64_t sequence, std::uint32_t slot) {
    return watchers_.at(slot).armed_sequence == sequence;
  };
  timers_.retain([&](const timer_node& node) { return live(node.sequence, node.slot); });
  std::erase_if(unstarted_,
                [&](const unstarted_timer& timer) { return !live(timer.sequence, timer.slot); });
  stale_nodes_ = 0;
}

void loop_core::source_failed(std::exception_ptr error) noexcept {
  try {
    pending_errors_.push_back(std::move(error));
  } catch (...) {
    std::fprintf(stderr, "weft::loop: out of memory recording a failed event source\n");
    std::abort();
  }
  notify();
}

// --- registration ----------------------------------------------------------------------------

watcher_id loop_core::add_timer(std::int64_t nanoseconds, bool repeating, callback&& fn) {
  const char* operation = repeating ? "repeat" : "delay";
  check_thread(operation);
  check_callback(fn, operation);
  std::uint32_t slot =
      new_watcher(repeating ? watcher_kind::repeat : watcher_kind::delay, std::move(fn), -1);
  watcher& w = watchers_.at(slot);
  w.interval = nanoseconds;
  arm_after_call(slot, w);
  ++timer_count_;
  ++referenced_timers_;
  add_reference();
  notify();  // an idle dispatcher re-arms the driver timer if this one comes first
  return watchers_.id_of(slot);
}

bool loop_core::remove_timer(watcher_id id, const char* operation) {
  check_thread(operation);
  watcher* w = watchers_.find(id);
  if (w == nullptr || (w->kind != watcher_kind::delay && w->kind != watcher_kind::repeat)) {
    return false;
  }
  release(watcher_table::slot_of(id));
  return true;
}

std::size_t loop_core::delete_all_timers() {
  check_thread("delete_all_timers");
  std::vector<std::uint32_t> doomed;
  doomed.reserve(timer_count_);
  auto collect = [&](std::uint64_t sequence, std::uint32_t slot) {
    const watcher& w = watchers_.at(slot);
    if (w.armed_sequence == sequence &&
        (w.kind == watcher_kind::delay || w.kind == watcher_kind::repeat)) {
      doomed.push_back(slot);
    }
  };
  timers_.for_each([&](const timer_node& node) { collect(node.sequence, node.slot); });
  for (const unstarted_timer& timer : unstarted_) {
    collect(timer.sequence, timer.slot);
  }
  for (std::uint32_t slot : doomed) {
    release(slot);
  }
  drop_stale_nodes();
  return doomed.size();
}

void loop_core::ensure_fd_check() {
  if (fd_check_slot_ != watcher_table::no_slot) {
    return;
  }
  fd_check_slot_ = new_watcher(watcher_kind::fd_check, callback(), -1);
  watcher& w = watchers_.at(fd_check_slot_);
  w.referenced = false;  // the loop's own chore: keeps nothing alive
  w.interval = closed_fd_check_interval;
  arm_after_call(fd_check_slot_, w);
}

watcher_id loop_core::add_fd(int fd, fd_direction direction, callback&& fn, const char* operation) {
  check_thread(operation);
  check_callback(fn, operation);
  watcher_id previous = fds_.watcher(fd, direction);
  std::uint32_t slot = new_watcher(
      direction == fd_direction::readable ? watcher_kind::readable : watcher_kind::writable,
      std::move(fn), fd);
  watcher_id id = watchers_.id_of(slot);
  try {
    fds_.watch(fd, direction, id, operation, tick_);
  } catch (...) {
    watcher& w = watchers_.at(slot);
    w.referenced = false;
    watchers_.invalidate(w);
    callback doomed = std::move(w.callback);
    watchers_.recycle(slot);
    throw;
  }
  add_reference();
  if (watchers_.find(previous) != nullptr) {
    release(watcher_table::slot_of(previous));  // replaced: one callback per fd and direction
  }
  ensure_fd_check();
  notify();
  return id;
}

bool loop_core::remove_fd(int fd, fd_direction direction) {
  check_thread(direction == fd_direction::readable ? "off_readable" : "off_writable");
  watcher_id id = fds_.watcher(fd, direction);
  if (watchers_.find(id) == nullptr) {
    return false;
  }
  release(watcher_table::slot_of(id));
  return true;
}

watcher_id loop_core::add_signal(int signal_number, callback&& fn) {
  check_thread("on_signal");
  check_callback(fn, "on_signal");
  signal_source::check_number(signal_number, "on_signal");
  watcher_id previous = signals_.watcher(signal_number);
  std::uint32_t slot = new_watcher(watcher_kind::signal, std::move(fn), signal_number);
  watcher_id id = watchers_.id_of(slot);
  signals_.watch(signal_number, id);
  add_reference();
  if (watchers_.find(previous) != nullptr) {
    release(watcher_table::slot_of(previous));
  }
  notify();
  return id;
}

bool loop_core::remove_signal(int signal_number) {
  check_thread("off_signal");
  watcher_id id = signals_.watcher(signal_number);
  if (watchers_.find(id) == nullptr) {
    return false;
  }
  release(watcher_table::slot_of(id));
  return true;
}

watcher_id loop_core::add_defer(callback&& fn) {
  check_thread("defer");
  check_callback(fn, "defer");
  std::uint32_t slot = new_watcher(watcher_kind::defer, std::move(fn), -1);
  watcher_id id = watchers_.id_of(slot);
  defers_.push_back(id);
  add_reference();
  notify();
  return id;
}

bool loop_core::remove_defer(watcher_id id) {
  check_thread("off_defer");
  watcher* w = watchers_.find(id);
  if (w == nullptr || w->kind != watcher_kind::defer) {
    return false;
  }
  release(watcher_table::slot_of(id));
  return true;
}

bool loop_core::set_referenced(watcher_id id, bool referenced) {
  check_thread(referenced ? "reference" : "unreference");
  watcher* w = watchers_.find(id);
  if (w == nullptr || w->kind == watcher_kind::fd_check) {
    return false;
  }
  if (w->referenced == referenced) {
    return true;
  }
  w->referenced = referenced;
  if (w->kind == watcher_kind::delay || w->kind == watcher_kind::repeat) {
    referenced ? ++referenced_timers_ : --referenced_timers_;
  } else if (w->kind == watcher_kind::readable || w->kind == watcher_kind::writable) {
    // Only a referenced fd watcher keeps the driver alive (and so holds off a deadlock report).
    fds_.set_referenced(
        w->target,
        w->kind == watcher_kind::readable ? fd_direction::readable : fd_direction::writable,
        referenced);
  }
  if (referenced) {
    add_reference();
    notify();
  } else {
    drop_reference();
  }
  return true;
}

void loop_core::set_error_handler(error_handler handler) {
  check_thread("set_error_handler");
  handler_ = std::move(handler);
  handler_replaced_ = true;
}

// --- durations -------------------------------------------------------------------------------

[[noreturn]] void throw_negative_duration(const char* operation, double seconds) {
  char value[64];
  std::snprintf(value, sizeof(value), "%g", seconds);
  throw std::invalid_argument(call_name(operation) +
                              ": the duration must be zero or more seconds, got " + value);
}

std::int64_t seconds_to_nanoseconds(double seconds, const char* operation) {
  if (std::isnan(seconds)) {
    throw std::invalid_argument(call_name(operation) +
                                ": the duration must be a number of seconds, got NaN");
  }
  if (seconds < 0) {
    throw_negative_duration(operation, seconds);
  }
  // Rounded up: a timer never fires before the time it was given.
  double nanoseconds = std::ceil(seconds * 1e9);
  if (nanoseconds >= 9.2233720368547758e18) {
    return never;  // too long for the clock (infinity included): never fires
  }
  return static_cast<std::int64_t>(nanoseconds);
}

}  // namespace detail

// --- event_loop ------------------------------------------------------------------------------

event_loop::event_loop() : core_(std::make_unique<detail::loop_core>()) {}
event_loop::~event_loop() = default;

watcher_id event_loop::delay(double seconds, callback fn) {
  return add_timer(detail::seconds_to_nanoseconds(seconds, "delay"), false, std::move(fn));
}
watcher_id event_loop::repeat(double interval_seconds, callback fn) {
  return add_timer(detail::seconds_to_nanoseconds(interval_seconds, "repeat"), true, std::move(fn));
}
watcher_id event_loop::add_timer(std::int64_t nanoseconds, bool repeating, callback&& fn) {
  return core_->add_timer(nanoseconds, repeating, std::move(fn));
}
bool event_loop::off_delay(watcher_id id) { return core_->remove_timer(id, "off_delay"); }
bool event_loop::off_repeat(watcher_id id) { return core_->remove_timer(id, "off_repeat"); }
std::size_t event_loop::delete_all_timers() { return core_->delete_all_timers(); }
std::size_t event_loop::timer_count() const {
  core_->check_thread("timer_count");
  return core_->timer_count();
}

watcher_id event_loop::on_readable(int fd, callback fn) {
  return core_->add_fd(fd, detail::fd_direction::readable, std::move(fn), "on_readable");
}
watcher_id event_loop::on_writable(int fd, callback fn) {
  return core_->add_fd(fd, detail::fd_direction::writable, std::move(fn), "on_writable");
}
bool event_loop::off_readable(int fd) {
  return core_->remove_fd(fd, detail::fd_direction::readable);
}
bool event_loop::off_writable(int fd) {
  return core_->remove_fd(fd, detail::fd_direction::writable);
}

watcher_id event_loop::on_signal(int signal_number, callback fn) {
  return core_->add_signal(signal_number, std::move(fn));
}
bool event_loop::off_signal(int signal_number) { return core_->remove_signal(signal_number); }

watcher_id event_loop::defer(callback fn) { return core_->add_defer(std::move(fn)); }
bool event_loop::off_defer(watcher_id id) { return core_->remove_defer(id); }

bool event_loop::reference(watcher_id id) { return core_->set_referenced(id, true); }
bool event_loop::unreference(watcher_id id) { return core_->set_referenced(id, false); }

void event_loop::run() { core_->run(); }
void event_loop::stop() { core_->stop(); }
void event_loop::set_error_handler(error_handler handler) {
  core_->set_error_handler(std::move(handler));
}

detail::loop_core& event_loop::core_for_suspension() {
  core_->check_thread("suspension");
  return *core_;
}

}  // namespace weft::loop

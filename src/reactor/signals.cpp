// Signals on uv_signal_t: one handle per signal number per scheduler, fanned out to waiters.
#include "weft/reactor/signals.hpp"

#include <pthread.h>
#include <uv.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "reactor/signal_disposition.hpp"
#include "reactor/uv_driver.hpp"
#include "sched/deadline_wait.hpp"
#include "sched/scheduler_core.hpp"
#include "weft/error.hpp"
#include "weft/reactor/detail/operation.hpp"

namespace weft::detail {
namespace {

struct signal_watch {
  uv_signal_t handle{};
  int number = 0;
  intrusive_list waiters;
  std::size_t waiting = 0;
  bool pending = false;  // delivered while nobody waited
  scheduler_core* core = nullptr;
};

class signal_wait;

// What the process did with each signal number before weft caught it, and how many signal
// handles (of every scheduler in the process, on any thread) catch it now: the handles of
// signals::wait, and the child watcher libuv starts on a loop for uv_spawn (SIGCHLD; see
// child_signal_scope). A process has one disposition per signal, and libuv, when the last handle
// of a number stops, leaves it at SIG_DFL, whatever the program had: a program started under
// nohup (SIGHUP ignored) that waited for SIGHUP in one run() would then be killed by the next
// SIGHUP, and a program's own handler (its SIGCHLD handler after a subprocess) would be gone.
// So the first handle of a number (process-wide) keeps the disposition it replaces, and the last
// one to stop puts it back. The lock orders the count with libuv's (un)registration: a handle
// that starts on another thread while the last one stops either registers after the restore
// (and replaces it again) or counts before the stop (which then leaves libuv's handler in
// place).
class caught_signals {
 public:
  static caught_signals& process() {
    static caught_signals instance;
    return instance;
  }

  // Starts handle on number, keeping the disposition it replaces when it is the process's
  // first. Returns libuv's status.
  int start(uv_signal_t& handle, uv_signal_cb callback, int number) {
    std::lock_guard<std::mutex> hold(lock_);
    adopt(number);
    const int status = uv_signal_start(&handle, callback, number);
    if (status != 0) {
      release(number);
    }
    return status;
  }

  // Closes a handle that start() started, restoring the prior disposition when it was the
  // process's last on number. The signal stays blocked for this thread between libuv's
  // SIG_DFL and the restore, so a delivery to this thread in that gap waits and meets the
  // program's disposition, not the default. (A thread of the program that has it unblocked
  // could still take one in the gap of those two system calls.)
  void close(uv_signal_t& handle, uv_close_cb callback, int number) noexcept {
    std::lock_guard<std::mutex> hold(lock_);
    sigset_t only{};
    sigset_t before{};
    sigemptyset(&only);
    sigaddset(&only, number);
    pthread_sigmask(SIG_BLOCK, &only, &before);
    uv_close(reinterpret_cast<uv_handle_t*>(&handle), callback);
    release(number);
    pthread_sigmask(SIG_SETMASK, &before, nullptr);
  }

  // For a handle libuv starts and stops itself (the child watcher): counts it before it
  // starts, and uncounts it once it stopped.
  void adopt_one(int number) {
    std::lock_guard<std::mutex> hold(lock_);
    adopt(number);
  }
  void release_one(int number) noexcept {
    std::lock_guard<std::mutex> hold(lock_);
    release(number);
  }

 private:
  struct entry {
    std::size_t handles = 0;
    struct sigaction prior {};
  };
  // Under lock_. (sigaction cannot fail to read a valid number's disposition.)
  void adopt(int number) noexcept {
    entry& e = numbers_[number];
    if (e.handles++ == 0) {
      sigaction(number, nullptr, &e.prior);
    }
  }
  void release(int number) noexcept {
    entry& e = numbers_[number];
    if (--e.handles == 0) {
      sigaction(number, &e.prior, nullptr);
    }
  }

  std::mutex lock_;
  entry numbers_[NSIG]{};
};

class signal_registry final : public driver_extension {
 public:
  explicit signal_registry(uv_loop_t& loop) : loop_(loop) {}

  signal_watch& watch(int number, scheduler_core& core) {
    auto found = watches_.find(number);
    if (found != watches_.end()) {
      return *found->second;
    }
    auto* created = new signal_watch();
    created->number = number;
    created->core = &core;
    int status = uv_signal_init(&loop_, &created->handle);
    if (status == 0) {
      created->handle.data = created;
      status =
          caught_signals::process().start(created->handle, &signal_registry::on_signal, number);
      if (status < 0) {
        uv_close(reinterpret_cast<uv_handle_t*>(&created->handle), &signal_registry::on_closed);
      }
    } else {
      delete created;
    }
    if (status < 0) {
      throw_uv_error(status, "weft::signals::wait", "signal " + std::to_string(number));
    }
    uv_unref(reinterpret_cast<uv_handle_t*>(&created->handle));
    watches_.emplace(number, created);
    return *created;
  }

  void close() noexcept override {
    for (auto& [number, watch] : watches_) {
      caught_signals::process().close(watch->handle, &signal_registry::on_closed, number);
    }
    watches_.clear();
  }

 private:
  static void on_signal(uv_signal_t* handle, int number);
  static void on_closed(uv_handle_t* handle) { delete static_cast<signal_watch*>(handle->data); }

  uv_loop_t& loop_;
  std::unordered_map<int, signal_watch*> watches_;
};

class signal_wait final : public wait_source {
 public:
  explicit signal_wait(signal_watch& watch) : watch_(&watch) {}

  bool arm(coroutine& waiter) override {
    if (watch_->pending) {
      watch_->pending = false;
      return false;
    }
    waiter_ = &waiter;
    link_.wait = this;
    watch_->waiters.push_back(link_);
    if (watch_->waiting++ == 0) {
      uv_ref(reinterpret_cast<uv_handle_t*>(&watch_->handle));
    }
    return true;
  }
  void disarm() noexcept override {
    if (link_.linked()) {
      intrusive_list::remove(link_);
    }
    if (--watch_->waiting == 0) {
      uv_unref(reinterpret_cast<uv_handle_t*>(&watch_->handle));
    }
  }
  void describe(std::string& out) const override {
    const char* name = ::sigabbrev_np(watch_->number);
    out +=
        "signal " + (name != nullptr ? "SIG" + std::string(name) : std::to_string(watch_->number));
  }
  int number() const noexcept { return watch_->number; }

  struct link : list_node {
    signal_wait* wait = nullptr;
  };
  coroutine* waiter_ = nullptr;
  link link_{};

 private:
  signal_watch* watch_;
};

void signal_registry::on_signal(uv_signal_t* handle, int) {
  auto* watch = static_cast<signal_watch*>(handle->data);
  if (watch->waiters.empty()) {
    watch->pending = true;
    return;
  }
  while (list_node* node = watch->waiters.pop_front()) {
    signal_wait& waiting = *static_cast<signal_wait::link*>(node)->wait;
    watch->core->wake(*waiting.waiter_, &waiting);
  }
}

bool child_watcher_active(uv_loop_t& loop) noexcept {
  return uv_is_active(reinterpret_cast<const uv_handle_t*>(&loop.child_watcher)) != 0;
}

}  // namespace

child_signal_scope::child_signal_scope(uv_loop_t& loop) : loop_(loop) {
  if (!child_watcher_active(loop)) {
    caught_signals::process().adopt_one(SIGCHLD);  // it may start now
  }
}

child_signal_scope::~child_signal_scope() {
  if (!child_watcher_active(loop_)) {
    caught_signals::process().release_one(SIGCHLD);  // stopped, or never started
  }
}

}  // namespace weft::detail

namespace weft::signals {

int wait(std::initializer_list<int> signal_numbers, const timeout& limit) {
  detail::scheduler_core* core = detail::current_core();
  if (core == nullptr) {
    detail::current_uv_loop("weft::signals::wait");  // throws the outside-a-coroutine error
  }
  detail::coroutine& self = core->waiter_or_throw("weft::signals::wait");
  if (signal_numbers.size() == 0) {
    throw std::invalid_argument("weft::signals::wait needs at least one signal number");
  }
  for (int number : signal_numbers) {
    if (number <= 0 || number >= NSIG || number == SIGKILL || number == SIGSTOP) {
      throw std::invalid_argument("weft::signals::wait: " + std::to_string(number) +
                                  " is not a signal that can be caught");
    }
  }
  auto& registry = core->driver().extension<detail::signal_registry>(
      uv_loop_of(core->driver(), "weft::signals"));
  std::vector<detail::signal_wait> waits;
  waits.reserve(signal_numbers.size());
  for (int number : signal_numbers) {
    waits.emplace_back(registry.watch(number, *core));
  }
  std::vector<detail::wait_source*> sources;
  for (auto& each : waits) {
    sources.push_back(&each);
  }
  detail::wait_source& fired =
      detail::wait_with_limit(*core, self, sources, limit, [] { return "waiting for a signal"; });
  return static_cast<detail::signal_wait&>(fired).number();
}

}  // namespace weft::signals

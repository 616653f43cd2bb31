// Helpers shared by the weft::procs test files: a process scripted from lambdas that checks the
// runtime's calling contract on itself, a countdown to wait on with a limit, a thread that
// completes yielded commands from outside the workers, and the sizes scaled for sanitizers.
//
// These tests drive the procs runtime from plain threads (process_handle::wait must not run
// on a weft coroutine), so only coroutine_test.cpp goes through weft_test::run_clean. Every
// test waits on handles, atomics or latches with generous limits, never on sleeps, and ends
// with stop_and_check_clean(): the runtime stopped and no process left alive.
//
// Contract checks: every scripted_process records a violation (init twice, a step before init
// or after close, two steps at once, close twice, destroyed after init without close) in a
// process-wide list; the contract_checked fixture fails the test when one was recorded.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "weft/procs/process.hpp"
#include "weft/procs/runtime.hpp"

namespace procs_test {

using namespace std::chrono_literals;
using weft::procs::command;
using weft::procs::completion;
using weft::procs::context;
using weft::procs::event;
using weft::procs::event_type;
using weft::procs::pid;
using weft::procs::process;
using weft::procs::process_handle;
using weft::procs::runtime;
using weft::procs::runtime_options;
using weft::procs::step_output;

#if defined(WEFT_SANITIZE_ADDRESS) || defined(WEFT_SANITIZE_THREAD)
inline constexpr bool sanitized_build = true;
#else
inline constexpr bool sanitized_build = false;
#endif

// A count for a release build, or the smaller one for ASan and TSan builds (they run the same
// interleavings many times slower).
constexpr std::size_t scaled(std::size_t release, std::size_t sanitized) {
  return sanitized_build ? sanitized : release;
}

// The limit for anything that must happen: far beyond what a working runtime needs, so that
// only a hang reaches it.
inline constexpr std::chrono::seconds generous = 10s;

// --- contract violations -----------------------------------------------------------------

class violation_log {
 public:
  static violation_log& instance() {
    static violation_log log;
    return log;
  }
  void record(std::string what) {
    std::lock_guard lock(mutex_);
    if (entries_.size() < 20) {
      entries_.push_back(std::move(what));
    }
    ++count_;
  }
  std::size_t count() const {
    std::lock_guard lock(mutex_);
    return count_;
  }
  std::string summary() const {
    std::lock_guard lock(mutex_);
    std::string text;
    for (const std::string& entry : entries_) {
      text += entry + "\n";
    }
    return text;
  }
  void reset() {
    std::lock_guard lock(mutex_);
    entries_.clear();
    count_ = 0;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> entries_;
  std::size_t count_ = 0;
};

// A fixture that fails the test when any scripted_process saw its calling contract broken.
class contract_checked : public testing::Test {
 protected:
  void SetUp() override { violation_log::instance().reset(); }
  void TearDown() override {
    EXPECT_EQ(violation_log::instance().count(), 0u) << "process contract violations:\n"
                                                     << violation_log::instance().summary();
  }
};

// --- the scripted process ----------------------------------------------------------------

// What a scripted process does at each call; any may be left empty (init then accepts every
// method, step finishes with done(), close does nothing more than the checks).
struct script {
  std::function<void(context& self, std::string_view method, std::string_view input)> init = {};
  std::function<void(context& self, std::span<event> events, step_output& out)> step = {};
  std::function<void()> close = {};
};

class scripted_process final : public process {
 public:
  explicit scripted_process(script actions) : actions_(std::move(actions)) {}
  ~scripted_process() override {
    if (initialised_ && !closed_) {
      violation_log::instance().record("a process was destroyed after init without close()");
    }
  }

  void init(context& self, std::string_view method, std::string_view input) override {
    if (initialised_) {
      violation_log::instance().record("init() called twice");
    }
    initialised_ = true;
    self_ = &self;
    if (actions_.init) {
      actions_.init(self, method, input);
    }
  }

  void step(std::span<event> events, step_output& out) override {
    if (in_step_.exchange(true, std::memory_order_acquire)) {
      violation_log::instance().record("step() entered while another step of it was running");
    }
    if (!initialised_) {
      violation_log::instance().record("step() before init()");
    }
    if (closed_) {
      violation_log::instance().record("step() after close()");
    }
    ++steps_;  // plain on purpose: TSan reports steps that do not happen-after each other
    struct leave_step {
      std::atomic<bool>& flag;
      ~leave_step() { flag.store(false, std::memory_order_release); }
    } leave{in_step_};
    if (actions_.step) {
      actions_.step(*self_, events, out);
    } else {
      out.done();
    }
  }

  void close() noexcept override {
    if (in_step_.load(std::memory_order_acquire)) {
      violation_log::instance().record("close() while a step was running");
    }
    if (closed_) {
      violation_log::instance().record("close() called twice");
    }
    closed_ = true;
    if (actions_.close) {
      actions_.close();
    }
  }

 private:
  script actions_;
  context* self_ = nullptr;
  bool initialised_ = false;
  bool closed_ = false;
  std::size_t steps_ = 0;
  std::atomic<bool> in_step_{false};
};

inline std::unique_ptr<process> scripted(script actions) {
  return std::make_unique<scripted_process>(std::move(actions));
}

// init() that accepts only `accepted` and refuses every other method as the contract says.
inline std::function<void(context&, std::string_view, std::string_view)> accept_only(
    std::string accepted) {
  return [accepted = std::move(accepted)](context&, std::string_view method, std::string_view) {
    if (method != accepted) {
      throw std::invalid_argument("unknown method '" + std::string(method) + "'");
    }
  };
}

// A process that waits until it is cancelled and then finishes with `result`, counting its
// closes in `closes`.
inline std::unique_ptr<process> wait_for_cancel(std::atomic<int>& closes,
                                                std::string result = "cancelled") {
  return scripted({.step =
                       [result](context&, std::span<event> events, step_output& out) {
                         for (const event& arrived : events) {
                           if (arrived.type == event_type::cancel) {
                             out.done(result);
                             return;
                           }
                         }
                         out.wait();
                       },
                   .close = [&closes] { closes.fetch_add(1, std::memory_order_relaxed); }});
}

// A process that finishes with the data of the first message it gets ("cancelled" on a
// cancel), counting its steps in *steps when given.
inline std::unique_ptr<process> first_message_wins(std::atomic<int>* steps = nullptr) {
  return scripted({.step = [steps](context&, std::span<event> events, step_output& out) {
    if (steps != nullptr) {
      steps->fetch_add(1);
    }
    for (event& arrived : events) {
      if (arrived.type == event_type::message) {
        out.done(std::move(arrived.data));
        return;
      }
      if (arrived.type == event_type::cancel) {
        out.done("cancelled");
        return;
      }
    }
    out.wait();
  }});
}

// From inside a step on a single-worker runtime: submits `count` processes that finish on
// cancel and count, in `misrouted`, every event of type `foreign` they receive. The worker's
// free-slot cache is LIFO, so they take the slots of the processes that ended last (the
// pid-reuse tests send or complete for those old pids and expect `misrouted` to stay 0).
inline void submit_slot_heirs(context& self, int count, event_type foreign,
                              std::atomic<int>& misrouted, std::vector<process_handle>& heirs) {
  for (int index = 0; index < count; ++index) {
    heirs.push_back(self.owner().submit(scripted(
        {.step = [&misrouted, foreign](context&, std::span<event> events, step_output& out) {
          for (const event& arrived : events) {
            if (arrived.type == foreign) {
              misrouted.fetch_add(1);
            } else if (arrived.type == event_type::cancel) {
              out.done();
            }
          }
        }})));
  }
}

// --- waiting -----------------------------------------------------------------------------

// Counts arrivals from any thread; a test thread waits, with a limit, for `target` of them.
class countdown {
 public:
  explicit countdown(std::size_t target) : target_(target) {}
  void arrive() {
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == target_) {
      std::lock_guard lock(mutex_);
      reached_.notify_all();
    }
  }
  bool wait_for(std::chrono::steady_clock::duration limit) {
    std::unique_lock lock(mutex_);
    return reached_.wait_for(lock, limit,
                             [&] { return arrived_.load(std::memory_order_acquire) >= target_; });
  }
  std::size_t arrived() const { return arrived_.load(std::memory_order_acquire); }

 private:
  const std::size_t target_;
  std::atomic<std::size_t> arrived_{0};
  std::mutex mutex_;
  std::condition_variable reached_;
};

// Spins (yielding the thread) until condition() holds; false after `limit`.
template <class Condition>
bool spin_until(Condition&& condition, std::chrono::steady_clock::duration limit = generous) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) {
      return false;
    }
    std::this_thread::yield();
  }
  return true;
}

// --- completions held outside the workers -------------------------------------------------

// A mailbox of completions: command handlers put theirs in, test threads take them out and
// complete them later (from their own thread, in their own order).
class completion_box {
 public:
  void put(completion done) {
    std::lock_guard lock(mutex_);
    held_.push_back(std::move(done));
    arrived_.notify_all();
  }
  // The oldest held completion, waiting up to `limit` for one; nullopt when none came.
  std::optional<completion> take(std::chrono::steady_clock::duration limit = generous) {
    std::unique_lock lock(mutex_);
    if (!arrived_.wait_for(lock, limit, [&] { return !held_.empty(); })) {
      return std::nullopt;
    }
    completion done = std::move(held_.front());
    held_.pop_front();
    return done;
  }
  // Waits until `count` completions are held.
  bool wait_for_count(std::size_t count, std::chrono::steady_clock::duration limit = generous) {
    std::unique_lock lock(mutex_);
    return arrived_.wait_for(lock, limit, [&] { return held_.size() >= count; });
  }
  std::vector<completion> take_all() {
    std::lock_guard lock(mutex_);
    std::vector<completion> all;
    for (completion& done : held_) {
      all.push_back(std::move(done));
    }
    held_.clear();
    return all;
  }

 private:
  std::mutex mutex_;
  std::condition_variable arrived_;
  std::deque<completion> held_;
};

// Threads that complete every completion handed to them as soon as they can, with
// data = the payload the handler passed along: the completions arrive from threads that are
// not workers, at moments that race the yielding process's transition to idle.
class completer_threads {
 public:
  explicit completer_threads(std::size_t count) : lanes_(count) {
    for (std::size_t index = 0; index < count; ++index) {
      threads_.emplace_back([this, index] { serve(lanes_[index]); });
    }
  }
  completer_threads(const completer_threads&) = delete;
  completer_threads& operator=(const completer_threads&) = delete;
  ~completer_threads() { shut_down(); }

  // Completes `done` with `data` on one of the threads (round robin).
  void hand_over(completion done, std::string data) {
    lane& chosen = lanes_[next_.fetch_add(1, std::memory_order_relaxed) % lanes_.size()];
    std::lock_guard lock(chosen.mutex);
    chosen.queue.emplace_back(std::move(done), std::move(data));
    chosen.wake.notify_one();
  }

  // Completes what is still queued, then joins the threads. Call before stopping the
  // runtime when the processes need the completions to finish.
  void shut_down() {
    for (lane& each : lanes_) {
      std::lock_guard lock(each.mutex);
      each.stopping = true;
      each.wake.notify_one();
    }
    for (std::thread& thread : threads_) {
      if (thread.joinable()) {
        thread.join();
      }
    }
  }

 private:
  struct lane {
    std::mutex mutex;
    std::condition_variable wake;
    std::deque<std::pair<completion, std::string>> queue;
    bool stopping = false;
  };

  static void serve(lane& mine) {
    std::unique_lock lock(mine.mutex);
    for (;;) {
      mine.wake.wait(lock, [&] { return mine.stopping || !mine.queue.empty(); });
      if (mine.queue.empty()) {
        return;
      }
      auto [done, data] = std::move(mine.queue.front());
      mine.queue.pop_front();
      lock.unlock();
      done.complete(std::move(data));
      lock.lock();
    }
  }

  std::vector<lane> lanes_;
  std::vector<std::thread> threads_;
  std::atomic<std::size_t> next_{0};
};

// --- ending a test -------------------------------------------------------------------------

// Stops the runtime (every process must finish by itself within the grace) and checks that
// nothing is left alive.
inline void stop_and_check_clean(runtime& engine) {
  EXPECT_TRUE(engine.stop(generous)) << "a process had to be forced at stop";
  EXPECT_EQ(engine.live(), 0u) << "processes left alive after stop";
}

// The message of an exception_ptr's exception ("" for none, "<not a std::exception>").
inline std::string message_of(const std::exception_ptr& error) {
  if (!error) {
    return "";
  }
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& caught) {
    return caught.what();
  } catch (...) {
    return "<not a std::exception>";
  }
}

// Whether the exception_ptr holds an E (or a subclass).
template <class E>
bool holds(const std::exception_ptr& error) {
  if (!error) {
    return false;
  }
  try {
    std::rethrow_exception(error);
  } catch (const E&) {
    return true;
  } catch (...) {
    return false;
  }
}

// Runs handle.wait_for(generous) and returns the exception it threw (nullptr when it
// returned a result).
inline std::exception_ptr error_of(const process_handle& handle) {
  try {
    handle.wait_for(generous);
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

}  // namespace procs_test

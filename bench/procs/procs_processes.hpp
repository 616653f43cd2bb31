// The processes of suite `procs`' weft program (bench/procs/weft_procs.cpp, which drives
// them and documents the workloads): small weft::procs::process classes, one per role, and the
// helpers they share. Children report to the process that started them with
// runtime::send (a message event carrying their pid); roots time themselves and finish with
// the elapsed ns as their result. Included by weft_procs.cpp only.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>
#include <weft/procs/process.hpp>
#include <weft/procs/runtime.hpp>
#include <weft/procs/wait_group.hpp>

#include "bench_util.hpp"
#include "procs_workload.hpp"

namespace procs_bench {

namespace procs = weft::procs;
using procs::context;
using procs::event;
using procs::event_type;
using procs::pid;
using procs::step_output;
using procs_workload::child_value;
using procs_workload::xorshift;

// Called from worker threads too: _Exit, because exit() would run static destructors while
// the workers still run.
[[noreturn]] inline void fail(const std::string& message) {
  std::fprintf(stderr, "bench_procs_weft: %s\n", message.c_str());
  std::fflush(stderr);
  std::_Exit(1);
}

inline std::string encode(std::uint64_t value) {
  std::string bytes(sizeof value, '\0');
  std::memcpy(bytes.data(), &value, sizeof value);
  return bytes;
}

inline std::uint64_t decode(const std::string& bytes) {
  std::uint64_t value = 0;
  if (bytes.size() != sizeof value) {
    fail("a message of " + std::to_string(bytes.size()) + " bytes, expected 8");
  }
  std::memcpy(&value, bytes.data(), sizeof value);
  return value;
}

inline std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(bench::clock::now().time_since_epoch())
          .count());
}

// A process that keeps its context (valid from init to close) to send and submit.
class context_process : public procs::process {
 public:
  void init(context& self, std::string_view, std::string_view) override { self_ = &self; }

 protected:
  procs::runtime& owner() const { return self_->owner(); }
  pid self() const { return self_->self(); }
  void report_to(pid parent, std::string message = {}) const {
    owner().send(parent, std::move(message), self());
  }

 private:
  context* self_ = nullptr;
};

// The root of a timed workload: start() runs in its first step, before the first spawn;
// on_message for each message; it finishes with the elapsed ns as its result once finished()
// says so.
class timed_root : public context_process {
 public:
  void step(std::span<event> events, step_output& out) final {
    if (!started_) {
      started_ = true;
      start_ = bench::clock::now();
      start();
    }
    for (event& arrived : events) {
      if (arrived.type == event_type::message) {
        on_message(arrived);
      } else if (arrived.type == event_type::yield_complete) {
        on_completion(arrived);
      }
    }
    if (finished()) {
      out.done(std::to_string(bench::nanoseconds_between(start_, bench::clock::now())));
    }
  }

 protected:
  virtual void start() = 0;
  virtual void on_message(event& arrived) = 0;
  virtual void on_completion(event&) {}
  virtual bool finished() const = 0;

 private:
  bool started_ = false;
  bench::clock::time_point start_;
};

// Submits the processes of child number `index` of `root` (which must hear from one of them).
using spawn_child = std::function<void(procs::runtime& owner, pid root, std::uint64_t index)>;

// The root of most workloads: spawns every child in its first step, then counts their
// messages until each has reported, adding up the 8-byte values into *sum when given one.
class counting_root : public timed_root {
 public:
  counting_root(std::size_t children, spawn_child spawn, std::uint64_t* sum = nullptr)
      : children_(children), spawn_(std::move(spawn)), sum_(sum) {}

 private:
  void start() override {
    for (std::size_t index = 0; index < children_; ++index) {
      spawn_(owner(), self(), index);
    }
  }
  void on_message(event& arrived) override {
    if (sum_ != nullptr) {
      *sum_ += decode(arrived.data);
    }
    ++finished_;
  }
  bool finished() const override { return finished_ == children_; }

  std::size_t children_;
  spawn_child spawn_;
  std::uint64_t* sum_;  // main's; read after the root's outcome (happens-after its steps)
  std::size_t finished_ = 0;
};

// spawn_many: the root counts its children with a procs::wait_group (Go's version uses
// sync.WaitGroup): one batch of units, one per child; each child's one step counts its unit
// down and finishes; the last one wakes the root with the group's zero event.
class unit_child : public procs::process {
 public:
  explicit unit_child(procs::wait_group::unit unit) : unit_(std::move(unit)) {}
  void init(context&, std::string_view, std::string_view) override {}
  void step(std::span<event>, step_output& out) override {
    unit_.done();
    out.done();
  }

 private:
  procs::wait_group::unit unit_;
};

class spawn_many_root : public timed_root {
 public:
  explicit spawn_many_root(std::size_t children) : children_(children) {}

 private:
  void start() override {
    group_.emplace(owner(), self(), 0);
    procs::wait_group::units batch = group_->add(children_);
    for (std::size_t index = 0; index < children_; ++index) {
      owner().spawn(std::make_unique<unit_child>(batch.take()));
    }
  }
  void on_message(event&) override {}
  void on_completion(event&) override { finished_ = true; }
  bool finished() const override { return finished_; }

  std::size_t children_;
  std::optional<procs::wait_group> group_;
  bool finished_ = false;
};

// yield_many: `yields` steps that ask to run again, then one to report.
class yielder : public context_process {
 public:
  yielder(std::size_t yields, pid parent) : yields_left_(yields), parent_(parent) {}
  void step(std::span<event>, step_output& out) override {
    if (yields_left_ == 0) {
      report_to(parent_);
      out.done();
      return;
    }
    --yields_left_;
    out.keep_running();
  }

 private:
  std::size_t yields_left_;
  pid parent_;
};

// ping_pong: sends every counter back + 1, to whoever sent it.
class ponger : public context_process {
 public:
  explicit ponger(std::size_t round_trips) : round_trips_left_(round_trips) {}
  void step(std::span<event> events, step_output& out) override {
    for (event& arrived : events) {
      if (arrived.type != event_type::message) {
        continue;
      }
      owner().send(arrived.from, encode(decode(arrived.data) + 1), self());
      if (--round_trips_left_ == 0) {
        out.done();
        return;
      }
    }
  }

 private:
  std::size_t round_trips_left_;
};

class pinger : public context_process {
 public:
  pinger(pid partner, std::size_t round_trips, pid parent)
      : partner_(partner), round_trips_(round_trips), parent_(parent) {}
  void step(std::span<event> events, step_output& out) override {
    if (!started_) {
      started_ = true;
      owner().send(partner_, encode(0), self());
    }
    for (event& arrived : events) {
      if (arrived.type != event_type::message) {
        continue;
      }
      std::uint64_t reply = decode(arrived.data);
      if (reply != completed_ + 1) {
        fail("ping_pong: sent " + std::to_string(completed_) + ", got " + std::to_string(reply) +
             " back");
      }
      if (++completed_ == round_trips_) {
        report_to(parent_);
        out.done();
        return;
      }
      owner().send(partner_, encode(completed_), self());
    }
  }

 private:
  pid partner_;
  std::size_t round_trips_;
  pid parent_;
  bool started_ = false;
  std::uint64_t completed_ = 0;
};

// chained_spawn: spawns the next link and finishes; the last link reports to the root.
class chain_link : public context_process {
 public:
  chain_link(std::size_t links_after, pid root) : links_after_(links_after), root_(root) {}
  void step(std::span<event>, step_output& out) override {
    if (links_after_ == 0) {
      report_to(root_);
    } else {
      owner().spawn(std::make_unique<chain_link>(links_after_ - 1, root_));
    }
    out.done();
  }

 private:
  std::size_t links_after_;
  pid root_;
};

// Starts a chain, and the next one each time the last link reports.
class chained_spawn_root : public timed_root {
 public:
  chained_spawn_root(std::size_t depth, std::size_t chains) : depth_(depth), chains_(chains) {}

 private:
  void start() override { start_chain(); }
  void on_message(event&) override {
    if (++finished_ < chains_) {
      start_chain();
    }
  }
  bool finished() const override { return finished_ == chains_; }
  void start_chain() { owner().spawn(std::make_unique<chain_link>(depth_ - 1, self())); }

  std::size_t depth_;
  std::size_t chains_;
  std::size_t finished_ = 0;
};

// fan_out_in and skewed_cpu: sends xorshift(index + 1, rounds) to the parent.
class computing_child : public context_process {
 public:
  computing_child(std::uint64_t index, std::uint64_t rounds, pid parent)
      : index_(index), rounds_(rounds), parent_(parent) {}
  void step(std::span<event>, step_output& out) override {
    report_to(parent_, encode(xorshift(index_ + 1, rounds_)));
    out.done();
  }

 private:
  std::uint64_t index_;
  std::uint64_t rounds_;
  pid parent_;
};

// wake_latency: records now - the timestamp each message carries.
class latency_recorder : public context_process {
 public:
  latency_recorder(std::vector<std::uint64_t>* latencies, std::size_t samples,
                   std::atomic<std::size_t>* received)
      : latencies_(latencies), samples_(samples), received_(received) {}
  void step(std::span<event> events, step_output& out) override {
    for (event& arrived : events) {
      if (arrived.type != event_type::message) {
        continue;
      }
      latencies_->push_back(now_ns() - decode(arrived.data));
      received_->fetch_add(1, std::memory_order_release);
      if (latencies_->size() == samples_) {
        out.done();
        return;
      }
    }
  }

 private:
  std::vector<std::uint64_t>* latencies_;  // main's; read after the outcome
  std::size_t samples_;
  std::atomic<std::size_t>* received_;  // main polls it to keep the sends apart
};

// wake_latency (inside the runtime): woken by a tick from outside, sends a fresh timestamp to
// the idle recorder, `samples` times; the hop measured is this send to the recorder running.
class latency_relay : public context_process {
 public:
  latency_relay(pid recorder, std::size_t samples) : recorder_(recorder), left_(samples) {}
  void step(std::span<event> events, step_output& out) override {
    for (const event& arrived : events) {
      if (arrived.type == event_type::message) {
        report_to(recorder_, encode(now_ns()));
        if (--left_ == 0) {
          out.done();
          return;
        }
      }
    }
  }

 private:
  pid recorder_;
  std::size_t left_;
};

// idle_cpu: waits for an event; finishes on the cancel stop() delivers.
class idle_process : public context_process {
 public:
  void step(std::span<event> events, step_output& out) override {
    for (const event& arrived : events) {
      if (arrived.type == event_type::cancel) {
        out.done();
        return;
      }
    }
  }
};

}  // namespace procs_bench

// weft::procs::wait_group: a parent hears once, with a yield_complete event carrying the
// group's tag, when every unit it handed out is done; a unit counts down exactly once (done() or
// its destruction, so a cancelled child still counts); what the children wrote before their
// done() is visible to the parent's step (TSan checks the plain writes); rounds repeat; a group
// destroyed first leaves its units harmless; misuse is refused with a clear error.
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "procs/procs_support.hpp"
#include "weft/procs/wait_group.hpp"

namespace {

using namespace procs_test;
using weft::procs::wait_group;
using ProcsWaitGroup = contract_checked;

constexpr std::uint64_t group_tag = 0x5eed;

// Counts the zero events (yield_complete with group_tag, carrying neither data nor an error)
// until it has `expected` of them, then finishes with their count; a message or a cancel ends
// it at once with the count so far. Any other event, or a malformed one, is recorded in *odd.
class zero_counter final : public process {
 public:
  zero_counter(int expected, std::atomic<int>* odd) : expected_(expected), odd_(odd) {}
  void init(context&, std::string_view, std::string_view) override {}
  void step(std::span<event> events, step_output& out) override {
    for (const event& arrived : events) {
      if (arrived.type == event_type::yield_complete && arrived.tag == group_tag &&
          arrived.data.empty() && !arrived.error) {
        ++zeros_;
      } else if (arrived.type == event_type::message || arrived.type == event_type::cancel) {
        out.done(std::to_string(zeros_));
        return;
      } else {
        odd_->fetch_add(1);
      }
    }
    if (zeros_ == expected_) {
      out.done(std::to_string(zeros_));
    }
  }

 private:
  int expected_;
  std::atomic<int>* odd_;
  int zeros_ = 0;
};

// Writes round * 1'000'000 + index into its slot and finishes. Every other child calls done()
// in its step; the rest leave the unit to their destruction.
class unit_child final : public process {
 public:
  unit_child(wait_group::unit unit, std::vector<std::uint64_t>* slots, std::size_t index,
             std::uint64_t round)
      : unit_(std::move(unit)), slots_(slots), index_(index), round_(round) {}
  void init(context&, std::string_view, std::string_view) override {}
  void step(std::span<event>, step_output& out) override {
    (*slots_)[index_] = round_ * 1'000'000 + index_;  // plain: the parent reads it after zero
    if (index_ % 2 == 0) {
      unit_.done();
    }
    out.done();
  }

 private:
  wait_group::unit unit_;
  std::vector<std::uint64_t>* slots_;
  std::size_t index_;
  std::uint64_t round_;
};

// Runs `rounds` rounds: each spawns `children` unit_child processes with one batch of units
// and waits for the zero event, then checks every slot holds what that round's child wrote.
// Finishes with "<zero events> <bad slots> <odd events>"; counts its steps in *steps.
class round_parent final : public process {
 public:
  round_parent(std::size_t children, std::uint64_t rounds, std::atomic<int>* steps)
      : children_(children), rounds_(rounds), steps_(steps), slots_(children, 0) {}
  void init(context& self, std::string_view, std::string_view) override { self_ = &self; }
  void step(std::span<event> events, step_output& out) override {
    steps_->fetch_add(1, std::memory_order_relaxed);
    if (!group_) {
      group_.emplace(*self_, group_tag);
      start_round();
      return;
    }
    for (const event& arrived : events) {
      if (arrived.type != event_type::yield_complete || arrived.tag != group_tag ||
          !arrived.data.empty() || arrived.error) {
        ++odd_;
        continue;
      }
      ++zeros_;
      for (std::size_t index = 0; index < children_; ++index) {
        bad_slots_ += slots_[index] == round_ * 1'000'000 + index ? 0 : 1;
      }
      if (group_->count() != 0) {
        ++odd_;
      }
      if (round_ == rounds_) {
        out.done(std::to_string(zeros_) + " " + std::to_string(bad_slots_) + " " +
                 std::to_string(odd_));
        return;
      }
      start_round();
    }
  }

 private:
  void start_round() {
    ++round_;
    wait_group::units batch = group_->add(children_);
    for (std::size_t index = 0; index < children_; ++index) {
      self_->owner().spawn(std::make_unique<unit_child>(batch.take(), &slots_, index, round_));
    }
  }

  std::size_t children_;
  std::uint64_t rounds_;
  std::atomic<int>* steps_;
  context* self_ = nullptr;
  std::optional<wait_group> group_;
  std::vector<std::uint64_t> slots_;
  std::uint64_t round_ = 0;
  int zeros_ = 0;
  int bad_slots_ = 0;
  int odd_ = 0;
};

TEST_F(ProcsWaitGroup, TheParentHearsOnceWhenEveryChildIsDoneAndSeesWhatEachWrote) {
  const std::size_t children = scaled(20'000, 2'000);
  std::atomic<int> steps{0};
  runtime engine({.workers = 2});
  process_handle parent = engine.submit(std::make_unique<round_parent>(children, 1, &steps));
  EXPECT_EQ(parent.wait_for(generous), "1 0 0") << "zero events, bad slots, odd events";
  stop_and_check_clean(engine);
  EXPECT_EQ(steps.load(), 2) << "one step to spawn, one for the zero event: no step per child";
}

TEST_F(ProcsWaitGroup, RoundsRepeatOnTheSameGroup) {
  std::atomic<int> steps{0};
  runtime engine({.workers = 2});
  process_handle parent = engine.submit(std::make_unique<round_parent>(500, 5, &steps));
  EXPECT_EQ(parent.wait_for(generous), "5 0 0") << "zero events, bad slots, odd events";
  stop_and_check_clean(engine);
  EXPECT_EQ(steps.load(), 6);
}

TEST_F(ProcsWaitGroup, AUnitCountsDownOnceAtDoneOrAtItsDestructionWhicheverComesFirst) {
  std::atomic<int> odd{0};
  runtime engine({.workers = 1});
  process_handle waiter = engine.submit(std::make_unique<zero_counter>(1, &odd));
  {
    wait_group group(engine, waiter.id(), group_tag);
    EXPECT_EQ(group.waiter(), waiter.id());
    EXPECT_EQ(group.tag(), group_tag);
    wait_group::unit first = group.add();
    wait_group::unit second = group.add();
    EXPECT_EQ(group.count(), 2u);
    first.done();
    EXPECT_FALSE(first.pending());
    first.done();  // a second done() of the same unit does nothing
    EXPECT_EQ(group.count(), 1u);
    wait_group::unit moved = std::move(second);
    EXPECT_FALSE(second.pending());  // NOLINT(bugprone-use-after-move): the moved-from state
    EXPECT_TRUE(moved.pending());
    EXPECT_EQ(group.count(), 1u) << "a move hands the unit over without counting it down";
    EXPECT_FALSE(waiter.done());
    {
      wait_group::unit last = std::move(moved);
    }  // destroyed pending: counted down, the count is zero, the waiter is woken
    EXPECT_EQ(group.count(), 0u);
    EXPECT_EQ(waiter.wait_for(generous), "1");
  }
  stop_and_check_clean(engine);
  EXPECT_EQ(odd.load(), 0);
}

TEST_F(ProcsWaitGroup, ABatchHandsOutExactlyItsUnitsAndCountsDownTheOnesNotTaken) {
  std::atomic<int> odd{0};
  runtime engine({.workers = 1});
  process_handle waiter = engine.submit(std::make_unique<zero_counter>(1, &odd));
  wait_group group(engine, waiter.id(), group_tag);
  wait_group::unit taken;
  {
    wait_group::units batch = group.add(5);
    EXPECT_EQ(group.count(), 5u);
    EXPECT_EQ(batch.left(), 5u);
    taken = batch.take();
    EXPECT_EQ(batch.left(), 4u);
    EXPECT_EQ(group.count(), 5u) << "taking a unit does not count it down";
    wait_group::units rest = std::move(batch);
    EXPECT_EQ(batch.left(), 0u);  // NOLINT(bugprone-use-after-move): the moved-from state
    EXPECT_THROW((void)batch.take(), std::out_of_range);
    for (int index = 0; index < 4; ++index) {
      (void)rest.take();  // each dropped at once: counted down
    }
    EXPECT_EQ(group.count(), 1u);
    try {
      (void)rest.take();
      ADD_FAILURE() << "a fifth take from what was left of a batch of 5";
    } catch (const std::out_of_range& refused) {
      EXPECT_NE(std::string(refused.what()).find("every unit of this batch was already taken"),
                std::string::npos)
          << refused.what();
    }
    wait_group::units unused = group.add(3);
    EXPECT_EQ(group.count(), 4u);
    EXPECT_EQ(group.add(0).left(), 0u);
  }  // `unused` goes with its 3 units
  EXPECT_EQ(group.count(), 1u);
  EXPECT_FALSE(waiter.done());
  taken.done();
  EXPECT_EQ(waiter.wait_for(generous), "1");
  stop_and_check_clean(engine);
  EXPECT_EQ(odd.load(), 0);
}

TEST_F(ProcsWaitGroup, AGroupDestroyedBeforeItsUnitsWakesNobodyAndItsLastUnitFreesIt) {
  std::atomic<int> odd{0};
  runtime engine({.workers = 2});
  process_handle waiter = engine.submit(std::make_unique<zero_counter>(1, &odd));
  std::vector<wait_group::unit> units;
  {
    wait_group group(engine, waiter.id(), group_tag);
    for (int index = 0; index < 100; ++index) {
      units.push_back(group.add());
    }
  }
  std::thread other([&units] {
    for (std::size_t index = 0; index < units.size(); index += 2) {
      units[index].done();
    }
  });
  for (std::size_t index = 1; index < units.size(); index += 2) {
    units[index].done();
  }
  other.join();
  // The waiter got nothing from the group: a message ends it with its count of zero events.
  engine.send(waiter.id(), "finish");
  EXPECT_EQ(waiter.wait_for(generous), "0");
  stop_and_check_clean(engine);
  EXPECT_EQ(odd.load(), 0);
}

TEST_F(ProcsWaitGroup, AUnitMayOutliveTheRuntimeAndItsZeroEventIsThenDropped) {
  std::atomic<int> odd{0};
  auto engine = std::make_unique<runtime>(runtime_options{.workers = 2});
  process_handle waiter = engine->submit(std::make_unique<zero_counter>(1, &odd));
  std::optional<wait_group> group;
  group.emplace(*engine, waiter.id(), group_tag);
  wait_group::unit first = group->add();
  wait_group::unit second = group->add();
  stop_and_check_clean(*engine);  // the waiter ends on stop's cancel, having heard nothing
  EXPECT_EQ(waiter.wait_for(generous), "0");
  engine.reset();
  first.done();
  second.done();  // the count reaches zero: the event goes to the stopped engine, dropped
  EXPECT_EQ(group->count(), 0u);
  wait_group::unit third = group->add();
  group.reset();
  third.done();  // the last one out frees the block, and with it the engine
  EXPECT_EQ(odd.load(), 0);
}

TEST_F(ProcsWaitGroup, UnitsDoneFromManyThreadsWakeTheWaiterExactlyOnce) {
  const int threads = 4;
  const int per_thread = scaled(20'000, 2'000);
  std::atomic<int> odd{0};
  runtime engine({.workers = 2});
  // Expects 2 zero events: the one this round produces, and one more the test makes below, so
  // that a spurious second event in the first round would show as a finish too early.
  process_handle waiter = engine.submit(std::make_unique<zero_counter>(2, &odd));
  wait_group group(engine, waiter.id(), group_tag);
  std::vector<wait_group::units> batches;
  for (int index = 0; index < threads; ++index) {
    batches.push_back(group.add(static_cast<std::size_t>(per_thread)));
  }
  std::vector<std::thread> workers;
  for (wait_group::units& batch : batches) {
    workers.emplace_back([&batch] {
      while (batch.left() != 0) {
        batch.take().done();
      }
    });
  }
  for (std::thread& worker : workers) {
    worker.join();
  }
  EXPECT_EQ(group.count(), 0u);
  EXPECT_FALSE(waiter.done()) << "more than one zero event for one round";
  group.add().done();  // a second round of one unit
  EXPECT_EQ(waiter.wait_for(generous), "2");
  stop_and_check_clean(engine);
  EXPECT_EQ(odd.load(), 0);
}

// A child that waits for its cancel and never calls done(): its unit goes with its object.
class stubborn_child final : public process {
 public:
  explicit stubborn_child(wait_group::unit unit) : unit_(std::move(unit)) {}
  void init(context&, std::string_view, std::string_view) override {}
  void step(std::span<event> events, step_output& out) override {
    for (const event& arrived : events) {
      if (arrived.type == event_type::cancel) {
        out.fail("cancelled before its work was done");
        return;
      }
    }
    out.wait();
  }

 private:
  wait_group::unit unit_;
};

TEST_F(ProcsWaitGroup, ChildrenThatEndWithoutDoneStillCountDown) {
  constexpr int children = 50;
  std::atomic<int> detached_failures{0};
  runtime engine({.workers = 2, .on_detached_failure = [&](pid, std::exception_ptr) {
                    detached_failures.fetch_add(1);
                  }});
  process_handle parent = engine.submit(
      scripted({.step = [group = std::shared_ptr<wait_group>(), kids = std::vector<pid>()](
                            context& self, std::span<event> events, step_output& out) mutable {
        if (!group) {
          group = std::make_shared<wait_group>(self, group_tag);
          for (int index = 0; index < children; ++index) {
            kids.push_back(self.owner().spawn(std::make_unique<stubborn_child>(group->add())));
          }
          for (std::size_t index = 0; index < kids.size(); ++index) {
            if (index % 2 == 0) {
              self.owner().cancel(kids[index]);  // fails
            } else {
              self.owner().terminate(kids[index]);  // ended without a step
            }
          }
          return;
        }
        for (const event& arrived : events) {
          if (arrived.type == event_type::yield_complete && arrived.tag == group_tag) {
            out.done(std::to_string(group->count()));
          }
        }
      }}));
  EXPECT_EQ(parent.wait_for(generous), "0");
  stop_and_check_clean(engine);
  EXPECT_EQ(detached_failures.load(), children / 2) << "the cancelled half failed";
}

// Holds a unit; above depth 0, adds units for 4 children of its own (one level deeper) before
// it lets its unit go.
class nesting_child final : public process {
 public:
  nesting_child(wait_group* group, wait_group::unit unit, int depth, std::atomic<int>* leaves)
      : group_(group), unit_(std::move(unit)), depth_(depth), leaves_(leaves) {}
  void init(context& self, std::string_view, std::string_view) override { self_ = &self; }
  void step(std::span<event>, step_output& out) override {
    if (depth_ == 0) {
      leaves_->fetch_add(1, std::memory_order_relaxed);
    } else {
      for (int index = 0; index < 4; ++index) {
        self_->owner().spawn(
            std::make_unique<nesting_child>(group_, group_->add(), depth_ - 1, leaves_));
      }
    }
    out.done();
  }

 private:
  context* self_ = nullptr;
  wait_group* group_;
  wait_group::unit unit_;
  int depth_;
  std::atomic<int>* leaves_;
};

TEST_F(ProcsWaitGroup, AChildHoldingAUnitMayAddUnitsForItsOwnChildren) {
  // A tree of fan-out 4, 5 levels below the parent's 4 children: 4 + 16 + ... + 1024 processes,
  // 1024 leaves; one zero event, after the last leaf.
  std::atomic<int> leaves{0};
  std::atomic<int> leaves_at_zero{-1};
  runtime engine({.workers = 2});
  process_handle parent = engine.submit(
      scripted({.step = [&, group = std::shared_ptr<wait_group>(), zeros = 0](
                            context& self, std::span<event> events, step_output& out) mutable {
        if (!group) {
          group = std::make_shared<wait_group>(self, group_tag);
          for (int index = 0; index < 4; ++index) {
            self.owner().spawn(
                std::make_unique<nesting_child>(group.get(), group->add(), 4, &leaves));
          }
          return;
        }
        for (const event& arrived : events) {
          zeros += arrived.type == event_type::yield_complete ? 1 : 0;
        }
        leaves_at_zero.store(leaves.load());
        out.done(std::to_string(zeros));
      }}));
  EXPECT_EQ(parent.wait_for(generous), "1");
  stop_and_check_clean(engine);
  EXPECT_EQ(leaves_at_zero.load(), 1024) << "the zero event came before every leaf was done";
}

TEST_F(ProcsWaitGroup, MisuseIsRefusedWithAClearError) {
  runtime engine({.workers = 1});
  try {
    wait_group refused(engine, weft::procs::no_pid, group_tag);
    ADD_FAILURE() << "a group for no_pid";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("no_pid"), std::string::npos) << error.what();
  }
  context unbound;
  EXPECT_THROW((void)wait_group(unbound, group_tag), std::logic_error);
  wait_group group(engine, 42, group_tag);  // a pid nobody has: its zero event is dropped
  wait_group moved = std::move(group);
  try {
    (void)group.add();  // NOLINT(bugprone-use-after-move): the misuse under test
    ADD_FAILURE() << "add on a moved-from group";
  } catch (const std::logic_error& error) {
    EXPECT_NE(std::string(error.what()).find("moved-from"), std::string::npos) << error.what();
  }
  EXPECT_THROW((void)group.add(3), std::logic_error);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(group.count(), 0u);                        // NOLINT(bugprone-use-after-move)
  moved.add().done();  // to a pid that is not live: dropped, nothing thrown
  EXPECT_EQ(moved.count(), 0u);
  stop_and_check_clean(engine);
}

}  // namespace

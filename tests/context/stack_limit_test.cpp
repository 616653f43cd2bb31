// When no stack can be had for a coroutine (stack_options::max_stacks reached here; the kernel
// refusing memory, mappings or address space takes the same path): the coroutine that cannot
// start ends unstarted with the std::system_error, its task, scope or group sees it, and the
// coroutine whose switch met the failure carries on with its wait intact. With
// spawn_options::stack_at_spawn the spawn itself throws and nothing is made.
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include <gtest/gtest.h>

#include "test_support.hpp"
#include "weft/weft.hpp"

namespace {

using weft_test::clean_end_check;

weft::run_options limited(std::size_t stacks) {
  weft::run_options options = weft_test::fifo_options();
  options.stacks.max_stacks = stacks;
  return options;
}

void expect_no_stack(const std::exception_ptr& error) {
  ASSERT_TRUE(error);
  try {
    std::rethrow_exception(error);
  } catch (const std::system_error& failure) {
    EXPECT_EQ(failure.code(), std::errc::resource_unavailable_try_again);
    EXPECT_NE(std::string(failure.what()).find("max_stacks (4)"), std::string::npos)
        << failure.what();
  }
}

TEST(StackLimit, ACoroutineWithNoStackEndsWithTheErrorAndTheSwitcherWaitsOn) {
  weft::scheduler scheduler(limited(4));
  clean_end_check check(scheduler);
  scheduler.run([] {
    weft::event go;
    int ran = 0;
    std::vector<weft::task<int>> tasks;
    for (int i = 0; i < 8; ++i) {
      tasks.push_back(weft::spawn([&go, &ran, i] {
        ++ran;
        go.wait();
        return i;
      }));
    }
    // main holds one stack and yields: three start and wait, then the five others end
    // unstarted inside the third one's wait (its switch met the failures), which stays intact:
    // set() below releases it and it returns its value.
    weft::yield();
    EXPECT_EQ(ran, 3);
    go.set();
    for (int i = 0; i < 8; ++i) {
      if (i < 3) {
        EXPECT_EQ(tasks[i].await(), i);
      } else {
        EXPECT_THROW(tasks[i].await(), std::system_error) << "task " << i;
        expect_no_stack(tasks[i].exception());
      }
    }
  });
  EXPECT_EQ(scheduler.stats().start_failures, 5u);
}

TEST(StackLimit, ADetachedCoroutineThatCannotStartIsAnUncaughtError) {
  weft::scheduler scheduler(limited(1));
  clean_end_check check(scheduler);
  bool destroyed = false;
  auto flag = std::make_shared<weft_test::destructor_flag>(destroyed);
  EXPECT_THROW(scheduler.run([&] {
    weft::spawn([flag = std::move(flag)] { ADD_FAILURE() << "it ran"; });
    weft::yield();
  }),
               std::system_error);
  EXPECT_TRUE(destroyed) << "the unstarted coroutine's captures were not destroyed";
  EXPECT_EQ(scheduler.stats().start_failures, 1u);
}

TEST(StackLimit, StackAtSpawnThrowsFromSpawnAndMakesNothing) {
  weft::scheduler scheduler(limited(4));
  clean_end_check check(scheduler);
  scheduler.run([] {
    weft::event go;
    std::vector<weft::task<void>> held;
    for (int i = 0; i < 3; ++i) {
      held.push_back(weft::spawn([&go] { go.wait(); }, {.stack_at_spawn = true}));
    }
    bool destroyed = false;
    auto flag = std::make_shared<weft_test::destructor_flag>(destroyed);
    try {
      weft::spawn([flag = std::move(flag)] { ADD_FAILURE() << "it ran"; },
                  {.stack_at_spawn = true});
      ADD_FAILURE() << "spawn did not throw";
    } catch (const std::system_error& failure) {
      expect_no_stack(std::current_exception());
    }
    EXPECT_TRUE(destroyed) << "the refused coroutine's function was not destroyed";
    // In a scope too: the scope never sees a member.
    weft::scope group;
    EXPECT_THROW(group.spawn([] {}, {.stack_at_spawn = true}), std::system_error);
    go.set();
    for (auto& each : held) {
      each.await();
    }
    // Stacks given back: spawning works again, and one given at spawn that starts in place
    // (after the one before it ended) returns its own to the pool.
    int done = 0;
    std::vector<weft::task<void>> again;
    for (int i = 0; i < 6; ++i) {
      again.push_back(weft::spawn([&done] { ++done; }, {.stack_at_spawn = i < 3}));
    }
    for (auto& each : again) {
      each.await();
    }
    EXPECT_EQ(done, 6);
    group.join();
  });
  EXPECT_EQ(scheduler.stats().start_failures, 0u);
  EXPECT_EQ(scheduler.stats().spawned, scheduler.stats().finished);
}

TEST(StackLimit, ACancelledCoroutineHoldingAStackFromSpawnGivesItBack) {
  weft::scheduler scheduler(limited(2));
  clean_end_check check(scheduler);
  scheduler.run([] {
    for (int round = 0; round < 5; ++round) {
      weft::task<void> never = weft::spawn([] {}, {.stack_at_spawn = true});
      never.cancel();
      EXPECT_THROW(never.await(), weft::cancelled_error);
    }
    // Had any of the five kept its stack, the second of these would be refused.
    weft::spawn([] {}, {.stack_at_spawn = true}).await();
  });
}

}  // namespace

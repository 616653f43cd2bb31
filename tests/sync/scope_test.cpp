// weft::scope: joining waits for the whole subtree, cancellation reaches down but never up or
// sideways, destruction cancels and waits, failures fail the scope (or go to its handler) and
// travel to the parent, and misuse is refused at once instead of hanging.
#include "weft/sync/scope.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::destructor_flag;
using weft_test::run_clean;
using weft_test::yield_until;

using weft_test::cancellable;

TEST(Scope, JoinWaitsForEveryCoroutine) {
  run_clean([] {
    weft::scope group("workers");
    int finished = 0;
    for (int worker = 0; worker < 5; ++worker) {
      group.spawn([&, worker] {
        for (int round = 0; round <= worker; ++round) {
          weft::yield();
        }
        ++finished;
      });
    }
    EXPECT_EQ(group.live(), 5u);
    group.join();
    EXPECT_EQ(finished, 5);
    EXPECT_EQ(group.live(), 0u);
    const weft::scope_stats stats = group.stats();
    EXPECT_EQ(stats.spawned, 5u);
    EXPECT_EQ(stats.succeeded, 5u);
    EXPECT_EQ(stats.failed + stats.cancelled, 0u);
  });
}

TEST(Scope, JoinAlsoWaitsForChildScopes) {
  run_clean([] {
    weft::scope parent("parent");
    weft::scope child(parent, "child");
    bool child_work_done = false;
    child.spawn([&] {
      for (int round = 0; round < 10; ++round) {
        weft::yield();
      }
      child_work_done = true;
    });
    EXPECT_EQ(parent.live(), 0u);
    EXPECT_EQ(parent.stats().live_in_tree, 1u);
    parent.join();
    EXPECT_TRUE(child_work_done);
  });
}

TEST(Scope, JoiningAnEmptyScopeReturnsAtOnce) {
  run_clean([] {
    weft::scope empty;
    auto busy = weft::spawn([] {
      for (int round = 0; round < 20; ++round) {
        weft::yield();
      }
    });
    const auto switches = weft::current_scheduler().stats().switches;
    empty.join();
    empty.join(weft::timeout(1ms));
    EXPECT_EQ(weft::current_scheduler().stats().switches, switches);
    busy.await();
  });
}

TEST(Scope, SpawnReturnsTheTaskOfTheCoroutine) {
  run_clean([] {
    weft::scope group;
    weft::task<std::string> greeting = group.spawn([] { return std::string("hello"); });
    EXPECT_EQ(greeting.await(), "hello");
    group.join();
  });
}

TEST(Scope, CancelReachesChildScopesButNotTheParentOrSiblings) {
  run_clean([] {
    weft::scope parent("parent");
    weft::scope child(parent, "child");
    weft::scope grandchild(child, "grandchild");
    weft::scope sibling(parent, "sibling");
    bool released = false;
    cancellable in_child_body;
    cancellable in_grandchild_body;
    int survivors_finished = 0;
    auto survivor = [&] {
      yield_until([&] { return released; });
      ++survivors_finished;
    };
    auto in_parent = parent.spawn(survivor);
    auto in_sibling = sibling.spawn(survivor);
    auto in_child = child.spawn([&] { in_child_body(); });
    auto in_grandchild = grandchild.spawn([&] { in_grandchild_body(); });
    yield_until([&] { return in_child_body.started && in_grandchild_body.started; });

    child.cancel("enough");
    child.join();
    EXPECT_TRUE(in_child_body.cleaned_up);
    EXPECT_TRUE(in_grandchild_body.cleaned_up);
    try {
      in_child.await();
      ADD_FAILURE() << "the child's coroutine was not cancelled";
    } catch (const weft::cancelled_error& cancelled) {
      EXPECT_EQ(cancelled.reason(), "enough");
    }
    EXPECT_THROW(in_grandchild.await(), weft::cancelled_error);
    EXPECT_TRUE(child.closed());
    EXPECT_TRUE(grandchild.closed());
    EXPECT_FALSE(parent.closed());
    EXPECT_FALSE(sibling.closed());

    released = true;
    parent.join();
    EXPECT_EQ(survivors_finished, 2);
    EXPECT_NO_THROW(in_parent.await());
    EXPECT_NO_THROW(in_sibling.await());
    EXPECT_EQ(child.stats().cancelled, 1u);
    EXPECT_EQ(parent.stats().succeeded, 1u);
  });
}

TEST(Scope, SpawnIntoACancelledScopeIsScopeClosedError) {
  run_clean([] {
    weft::scope group("closing");
    group.cancel("shutting the door");
    try {
      group.spawn([] {});
      ADD_FAILURE() << "spawn into a cancelled scope succeeded";
    } catch (const weft::scope_closed_error& closed) {
      EXPECT_EQ(closed.reason(), "shutting the door");
      EXPECT_NE(std::string(closed.what()).find("scope 'closing'"), std::string::npos)
          << closed.what();
    }
    EXPECT_EQ(group.stats().spawned, 0u);
  });
}

TEST(Scope, AScopeMadeUnderAClosedParentStartsClosed) {
  run_clean([] {
    weft::scope parent;
    parent.cancel("gone");
    weft::scope child(parent);
    EXPECT_TRUE(child.closed());
    EXPECT_EQ(child.close_reason(), "gone");
    EXPECT_THROW(child.spawn([] {}), weft::scope_closed_error);
  });
}

TEST(Scope, DestroyingAScopeCancelsItsCoroutinesAndWaitsForThem) {
  run_clean([] {
    cancellable started_body;
    bool never_started_ran = false;
    weft::task<void> started;
    weft::task<void> never_started;
    {
      weft::scope group;
      started = group.spawn([&] { started_body(); });
      yield_until([&] { return started_body.started; });
      never_started = group.spawn([&] { never_started_ran = true; });
    }
    EXPECT_TRUE(started_body.cleaned_up);
    EXPECT_TRUE(started.done());
    EXPECT_THROW(started.await(), weft::cancelled_error);
    EXPECT_TRUE(never_started.done());
    EXPECT_FALSE(never_started_ran);
    EXPECT_THROW(never_started.await(), weft::cancelled_error);
  });
}

TEST(Scope, DestructorWaitsEvenWhenItsCallerIsCancelledMeanwhile) {
  run_clean([] {
    bool destroying = false;
    bool cancel_sent = false;
    bool member_started = false;
    bool cleanup_finished = false;
    bool destructor_returned_after_cleanup = false;
    auto owner = weft::spawn([&] {
      {
        weft::scope group;
        group.spawn([&] {
          try {
            member_started = true;
            weft::sleep_for(1h);
          } catch (const weft::cancelled_error&) {
            // Cleanup that outlasts the owner's own cancellation.
            weft::protect([&] { yield_until([&] { return cancel_sent; }); });
            cleanup_finished = true;
            throw;
          }
        });
        yield_until([&] { return member_started; });
        destroying = true;  // no suspension from here into the destructor's wait
      }
      destructor_returned_after_cleanup = cleanup_finished;
      weft::yield();  // the cancel that arrived while the destructor waited is raised here
      ADD_FAILURE() << "the owner's cancellation was lost";
    });
    yield_until([&] { return destroying; });
    owner.cancel("owner cancelled");
    cancel_sent = true;
    try {
      owner.await();
      ADD_FAILURE() << "the owner was not cancelled";
    } catch (const weft::cancelled_error& cancelled) {
      EXPECT_EQ(cancelled.reason(), "owner cancelled");
    }
    EXPECT_TRUE(destructor_returned_after_cleanup);
  });
}

TEST(Scope, JoiningYourOwnScopeIsALogicErrorAtOnce) {
  run_clean([] {
    weft::scope outer("outer");
    weft::scope inner(outer, "inner");
    std::string own_message;
    bool ancestor_refused = false;
    outer.spawn([&] {
      try {
        outer.join();
      } catch (const std::logic_error& error) {
        own_message = error.what();
      }
    });
    inner.spawn([&] {
      try {
        outer.join(weft::timeout(1h));
      } catch (const std::logic_error&) {
        ancestor_refused = true;
      }
    });
    outer.join();
    EXPECT_NE(own_message.find("join on scope 'outer' from one of its own coroutines"),
              std::string::npos)
        << own_message;
    EXPECT_TRUE(ancestor_refused);
  });
}

TEST(Scope, JoinWithATimeLimitTimesOutAndLeavesTheCoroutinesRunning) {
  run_clean([] {
    weft::scope group("slow");
    cancellable slow;
    group.spawn([&] { slow(); });
    try {
      group.join(weft::timeout(5ms));
      ADD_FAILURE() << "join did not time out";
    } catch (const weft::timeout_error& error) {
      EXPECT_NE(std::string(error.what()).find("scope 'slow'"), std::string::npos) << error.what();
    }
    EXPECT_EQ(group.live(), 1u);
    EXPECT_FALSE(slow.cleaned_up);
    group.cancel();
    group.join();
    EXPECT_TRUE(slow.cleaned_up);
  });
}

TEST(Scope, ExceptionHandlerReceivesErrorsAndTheScopeGoesOn) {
  run_clean([] {
    weft::scope group;
    std::vector<std::string> handled;
    group.set_exception_handler([&](std::exception_ptr error) {
      try {
        std::rethrow_exception(error);
      } catch (const std::runtime_error& failure) {
        handled.push_back(failure.what());
      }
    });
    bool sibling_finished = false;
    group.spawn([] { throw std::runtime_error("first"); });  // task dropped: the scope took it
    auto second = group.spawn([]() -> int {
      weft::yield();
      throw std::runtime_error("second");
    });
    group.spawn([&] {
      for (int round = 0; round < 5; ++round) {
        weft::yield();
      }
      sibling_finished = true;
    });
    EXPECT_NO_THROW(group.join());
    EXPECT_TRUE(sibling_finished);
    std::sort(handled.begin(), handled.end());
    EXPECT_EQ(handled, (std::vector<std::string>{"first", "second"}));
    EXPECT_FALSE(group.failed());
    EXPECT_FALSE(group.closed());
    EXPECT_THROW(second.await(), std::runtime_error);  // the task keeps its own outcome
    EXPECT_EQ(group.spawn([] { return 3; }).await(), 3);
    EXPECT_EQ(group.stats().failed, 2u);
  });
}

TEST(Scope, AFailureCancelsTheSiblingsAndJoinRethrowsIt) {
  run_clean([] {
    weft::scope group("failing");
    cancellable sibling_body;
    auto sibling = group.spawn([&] { sibling_body(); });
    group.spawn([&] {
      yield_until([&] { return sibling_body.started; });
      throw std::runtime_error("boom");
    });
    const std::exception* first = nullptr;
    try {
      group.join();
      ADD_FAILURE() << "join did not rethrow the failure";
    } catch (const std::runtime_error& error) {
      EXPECT_STREQ(error.what(), "boom");
      first = &error;
    }
    EXPECT_TRUE(sibling_body.cleaned_up);
    try {
      sibling.await();
      ADD_FAILURE() << "the sibling was not cancelled";
    } catch (const weft::cancelled_error& cancelled) {
      EXPECT_EQ(cancelled.reason(), "scope 'failing' failed: boom");
    }
    try {
      group.join();  // every join rethrows the same error
    } catch (const std::runtime_error& error) {
      EXPECT_EQ(&error, first);
    }
    EXPECT_TRUE(group.failed());
    EXPECT_THROW(group.spawn([] {}), weft::scope_closed_error);
  });
}

TEST(Scope, AChildScopesFailureFailsTheParentWhichCancelsItsOwnCoroutines) {
  run_clean([] {
    weft::scope parent("parent");
    weft::scope child(parent, "child");
    cancellable in_parent;
    parent.spawn([&] { in_parent(); });
    child.spawn([&] {
      yield_until([&] { return in_parent.started; });
      throw std::runtime_error("deep failure");
    });
    EXPECT_THROW(child.join(), std::runtime_error);
    EXPECT_TRUE(parent.failed());
    try {
      parent.join();
      ADD_FAILURE() << "the parent did not learn of the failure";
    } catch (const std::runtime_error& error) {
      EXPECT_STREQ(error.what(), "deep failure");
    }
    EXPECT_TRUE(in_parent.cleaned_up);
  });
}

TEST(Scope, AParentsHandlerGetsAChildScopesFailureOnce) {
  run_clean([] {
    weft::scope parent("parent");
    int handled = 0;
    parent.set_exception_handler([&](std::exception_ptr) { ++handled; });
    weft::scope* child_parent = nullptr;
    auto owner = parent.spawn([&] {
      weft::scope child;  // made in a coroutine of parent: parent's child
      child_parent = child.parent();
      child.spawn([] { throw std::runtime_error("child failed"); });
      child.join();  // rethrows, and the error leaves this coroutine of parent
    });
    parent.join();
    EXPECT_EQ(child_parent, &parent);
    EXPECT_THROW(owner.await(), std::runtime_error);
    EXPECT_EQ(handled, 1);
    EXPECT_FALSE(parent.failed());
  });
}

TEST(Scope, AScopeMadeOutsideAnyScopeHasNoParent) {
  run_clean([] {
    weft::scope root;
    EXPECT_EQ(root.parent(), nullptr);
    root.spawn([&] {
      weft::scope detached(weft::detached_scope);
      EXPECT_EQ(detached.parent(), nullptr);
      weft::scope nested;
      EXPECT_EQ(nested.parent(), &root);
    });
    root.join();
  });
}

TEST(Scope, AFailureNobodyJoinedIsReportedWhenTheScopeIsDestroyed) {
  EXPECT_THROW(run_clean([] {
                 weft::scope group;
                 auto failing = group.spawn([] { throw std::runtime_error("unseen"); });
                 yield_until([&] { return failing.done(); });
               }),
               std::runtime_error);
}

TEST(Scope, AFailureSeenThroughErrorIsNotReportedAgain) {
  EXPECT_NO_THROW(run_clean([] {
    weft::scope group;
    auto failing = group.spawn([] { throw std::runtime_error("seen"); });
    yield_until([&] { return failing.done(); });
    EXPECT_NE(group.error(), nullptr);
  }));
}

TEST(Scope, ManyCoroutinesInNestedScopesAllEndAndCountsBalance) {
  run_clean([] {
    weft::scope root("root");
    int finished = 0;
    for (int branch = 0; branch < 4; ++branch) {
      root.spawn([&, branch] {
        weft::scope inner;
        for (int leaf = 0; leaf < 8; ++leaf) {
          inner.spawn([&, leaf] {
            for (int round = 0; round < (leaf + branch) % 3; ++round) {
              weft::yield();
            }
            ++finished;
          });
        }
        inner.join();
        EXPECT_EQ(inner.stats().succeeded, 8u);
      });
    }
    root.join();
    EXPECT_EQ(finished, 32);
    const weft::scope_stats stats = root.stats();
    EXPECT_EQ(stats.spawned, 4u);
    EXPECT_EQ(stats.succeeded, 4u);
    EXPECT_EQ(stats.live_in_tree, 0u);
  });
}

TEST(ScopeDeathTest, DestroyedOutsideACoroutineWithLiveCoroutinesAborts) {
  EXPECT_DEATH(run_clean([] {
                 auto* orphaned = new weft::scope("orphaned");
                 orphaned->spawn([] { weft::sleep_for(1h); });
                 // A microtask is no coroutine: nothing there can wait for the scope's coroutine.
                 weft::current_scheduler().add_microtask([orphaned] { delete orphaned; });
                 weft::yield();
               }),
               "scope 'orphaned' destroyed outside a coroutine while 1 of its coroutines");
}

}  // namespace

// weft::scope: joining waits for the whole subtree, cancellation reaches down but never up or
// sideways, destruction cancels and waits, failures fail the scope (or go to its handler) and
// travel to the parent, and misuse is refused at once instead of hanging.
#include "weft/sync/scope.hpp"
#include "weft/sync/task_group.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
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

// --- on_finally, join_or_cancel, children, current ---------------------------------------------

TEST(Scope, OnFinallyRunsOnceWhenACancelledScopeHasEnded) {
  run_clean([] {
    cancellable body;
    int finally_runs = 0;
    bool cleanup_before_finally = false;
    std::size_t live_at_finally = 99;
    {
      weft::scope workers("workers");
      workers.spawn(std::ref(body));
      workers.on_finally([&] {
        ++finally_runs;
        cleanup_before_finally = body.cleaned_up;
        live_at_finally = workers.stats().live_in_tree;
      });
      yield_until([&] { return body.started; });
      workers.cancel("stop");
      EXPECT_EQ(finally_runs, 0) << "ran while a cancelled coroutine was still cleaning up";
      EXPECT_FALSE(workers.done());
      workers.join();
      EXPECT_EQ(finally_runs, 1);
      EXPECT_TRUE(workers.done());
      workers.cancel("again");
    }
    EXPECT_EQ(finally_runs, 1);
    EXPECT_TRUE(cleanup_before_finally);
    EXPECT_EQ(live_at_finally, 0u);
  });
}

TEST(Scope, OnFinallyRunsAtCancelOfAnEmptyScopeAndAtDestructionNotAtJoin) {
  run_clean([] {
    std::vector<std::string> log;
    weft::scope cancelled("cancelled");
    cancelled.on_finally([&] { log.push_back("cancelled"); });
    cancelled.cancel();
    EXPECT_EQ(log, (std::vector<std::string>{"cancelled"}));
    {
      weft::scope joined("joined");
      joined.on_finally([&] { log.push_back("first"); });
      joined.on_finally([&] { log.push_back("second"); });
      joined.spawn([] { weft::yield(); });
      joined.join();
      EXPECT_EQ(log.size(), 1u) << "join alone ran the finally handlers";
      joined.spawn([] {});  // still open after join
      joined.join();
    }
    EXPECT_EQ(log, (std::vector<std::string>{"cancelled", "first", "second"}));
  });
}

TEST(Scope, OnFinallyOnADoneScopeRunsAtOnceAndThrowsToTheCaller) {
  run_clean([] {
    weft::scope workers("workers");
    workers.cancel();
    ASSERT_TRUE(workers.done());
    int runs = 0;
    workers.on_finally([&] { ++runs; });
    EXPECT_EQ(runs, 1);
    try {
      workers.on_finally([] { throw std::runtime_error("late finally failed"); });
      ADD_FAILURE() << "the late handler's exception did not reach its registrant";
    } catch (const std::runtime_error& error) {
      EXPECT_STREQ(error.what(), "late finally failed");
    }
    EXPECT_FALSE(workers.failed());
    EXPECT_THROW(workers.on_finally(nullptr), std::invalid_argument);
  });
}

TEST(Scope, OnFinallyErrorFailsTheScopeOrGoesToItsHandler) {
  run_clean([] {
    cancellable body;
    weft::scope workers("workers");
    workers.spawn(std::ref(body));
    workers.on_finally([] { throw std::runtime_error("finally failed"); });
    yield_until([&] { return body.started; });
    workers.cancel();
    try {
      workers.join();
      ADD_FAILURE() << "join did not rethrow the finally handler's error";
    } catch (const std::runtime_error& error) {
      EXPECT_STREQ(error.what(), "finally failed");
    }

    std::vector<std::string> handled;
    weft::scope handled_scope("handled");
    handled_scope.set_exception_handler(
        [&](std::exception_ptr error) { handled.push_back(weft::detail::what_of(error)); });
    handled_scope.on_finally([] { throw std::runtime_error("finally failed"); });
    handled_scope.cancel();
    EXPECT_EQ(handled, (std::vector<std::string>{"finally failed"}));
    EXPECT_FALSE(handled_scope.failed());
  });
}

TEST(Scope, OnFinallyRunsWhenAFailedScopesLastCoroutineEnds) {
  run_clean([] {
    cancellable body;
    bool finally_ran = false;
    weft::scope workers("workers");
    workers.on_finally([&] { finally_ran = true; });
    workers.spawn(std::ref(body));
    workers.spawn([&] {
      yield_until([&] { return body.started; });
      throw std::runtime_error("worker failed");
    });
    EXPECT_THROW(workers.join(), std::runtime_error);
    EXPECT_TRUE(finally_ran);
    EXPECT_TRUE(body.cleaned_up);
  });
}

TEST(Scope, JoinOrCancelReturnsWhenEverythingEndsInTimeAndLeavesTheScopeOpen) {
  run_clean([] {
    weft::scope workers("workers");
    int finished = 0;
    for (int worker = 0; worker < 3; ++worker) {
      workers.spawn([&] {
        weft::yield();
        ++finished;
      });
    }
    workers.join_or_cancel(weft::timeout(10s));
    EXPECT_EQ(finished, 3);
    EXPECT_FALSE(workers.closed());
    workers.spawn([&] { ++finished; });
    workers.join();
    EXPECT_EQ(finished, 4);
  });
}

TEST(Scope, JoinOrCancelCancelsWhatIsLeftAtTheLimitAndWaitsForItsCleanup) {
  run_clean([] {
    cancellable slow;
    bool quick_done = false;
    bool finally_ran = false;
    weft::scope workers("workers");
    workers.on_finally([&] { finally_ran = true; });
    workers.spawn(std::ref(slow));
    workers.spawn([&] { quick_done = true; });
    try {
      workers.join_or_cancel(weft::timeout(20ms));
      ADD_FAILURE() << "join_or_cancel did not report the time limit";
    } catch (const weft::timeout_error& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find("scope 'workers' join_or_cancel timed out after 20 ms"),
                std::string::npos)
          << message;
      EXPECT_NE(message.find("1 coroutines were still alive"), std::string::npos) << message;
    }
    EXPECT_TRUE(quick_done);
    EXPECT_TRUE(slow.cleaned_up) << "returned before the cancelled coroutine's cleanup";
    EXPECT_TRUE(workers.closed());
    EXPECT_TRUE(workers.done());
    EXPECT_TRUE(finally_ran);
    EXPECT_NE(workers.close_reason().find("not done within the time limit"), std::string::npos)
        << workers.close_reason();
    EXPECT_EQ(workers.stats().cancelled, 1u);
    EXPECT_THROW(workers.spawn([] {}), weft::scope_closed_error);
  });
}

TEST(Scope, JoinOrCancelTakesACustomReasonAndRethrowsAFailure) {
  run_clean([] {
    weft::scope workers("workers");
    cancellable slow;
    workers.spawn(std::ref(slow));
    EXPECT_THROW(workers.join_or_cancel(weft::timeout(5ms), "deadline for the batch"),
                 weft::timeout_error);
    EXPECT_EQ(workers.close_reason(), "deadline for the batch");

    weft::scope failing("failing");
    failing.spawn([] {
      weft::yield();
      throw std::runtime_error("worker failed");
    });
    try {
      failing.join_or_cancel(weft::timeout(10s));
      ADD_FAILURE() << "join_or_cancel did not rethrow the failure";
    } catch (const std::runtime_error& error) {
      EXPECT_STREQ(error.what(), "worker failed");
    }
  });
}

TEST(Scope, ChildrenIsASnapshotOfTheChildScopesWithTheirLiveCounts) {
  run_clean([] {
    weft::scope parent("parent");
    weft::scope first(parent, "first");
    weft::scope second(parent, "second");
    weft::scope grandchild(second, "grandchild");
    cancellable a;
    cancellable b;
    cancellable c;
    first.spawn(std::ref(a));
    first.spawn(std::ref(b));
    grandchild.spawn(std::ref(c));
    EXPECT_TRUE(grandchild.children().empty());
    std::vector<weft::scope_info> children = parent.children();
    ASSERT_EQ(children.size(), 2u);
    EXPECT_EQ(children[0].id, first.id());
    EXPECT_EQ(children[0].name, "first");
    EXPECT_EQ(children[0].live, 2u);
    EXPECT_EQ(children[0].live_in_tree, 2u);
    EXPECT_TRUE(children[0].children.empty());
    EXPECT_EQ(children[1].name, "second");
    EXPECT_EQ(children[1].live, 0u);
    EXPECT_EQ(children[1].live_in_tree, 1u);
    ASSERT_EQ(children[1].children.size(), 1u);
    EXPECT_EQ(children[1].children[0].name, "grandchild");
    EXPECT_EQ(children[1].children[0].id, grandchild.id());
    EXPECT_EQ(children[1].children[0].live, 1u);
    EXPECT_LT(parent.id(), first.id());
    EXPECT_LT(first.id(), second.id());
    first.cancel("enough");
    first.join();
    children = parent.children();
    EXPECT_TRUE(children[0].closed);
    EXPECT_EQ(children[0].close_reason, "enough");
    EXPECT_EQ(children[0].live, 0u);
    parent.cancel();
    parent.join();
  });
}

TEST(Scope, CurrentIsTheScopeTheCallingCoroutineWasSpawnedInto) {
  run_clean([] {
    EXPECT_EQ(weft::scope::current(), nullptr);
    weft::scope workers("workers");
    weft::scope* seen_in_member = nullptr;
    weft::scope* seen_in_plain = &workers;
    weft::scope* seen_in_group = &workers;
    workers.spawn([&] { seen_in_member = weft::scope::current(); });
    weft::spawn([&] { seen_in_plain = weft::scope::current(); }).await();
    weft::task_group<void> group(1);
    group.spawn([&] { seen_in_group = weft::scope::current(); });
    group.all();
    workers.join();
    EXPECT_EQ(seen_in_member, &workers);
    EXPECT_EQ(seen_in_plain, nullptr);
    EXPECT_EQ(seen_in_group, nullptr);
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

// weft::loop::event_loop errors: the error handler, run() without one, the handler's own
// errors, and errors while the loop dispatches in a coroutine.
#include <chrono>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "loop/loop_support.hpp"

namespace {

using namespace std::chrono_literals;
using weft::loop::event_loop;
using weft::loop::watcher_id;
using weft_loop_test::with_loop;

std::string what_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& caught) {
    return caught.what();
  }
}

TEST(LoopErrors, ACallbackErrorGoesToTheHandlerAndTheLoopGoesOn) {
  with_loop([](event_loop& loop) {
    std::vector<std::string> handled;
    std::vector<std::string> order;
    loop.set_error_handler([&](std::exception_ptr error) { handled.push_back(what_of(error)); });
    loop.defer([&] {
      order.push_back("throws");
      throw std::runtime_error("boom");
    });
    loop.defer([&] { order.push_back("next of the same tick"); });
    int repeats = 0;
    watcher_id id{};
    id = loop.repeat(1ms, [&] {
      if (++repeats == 3) {
        loop.off_repeat(id);
      }
      throw std::runtime_error("repeat " + std::to_string(repeats));
    });
    loop.run();
    EXPECT_EQ(order, (std::vector<std::string>{"throws", "next of the same tick"}));
    EXPECT_EQ(handled, (std::vector<std::string>{"boom", "repeat 1", "repeat 2", "repeat 3"}));
  });
}

TEST(LoopErrors, WithoutAHandlerRunThrowsAndALaterRunGoesOn) {
  with_loop([](event_loop& loop) {
    std::vector<std::string> order;
    loop.defer([&] {
      order.push_back("throws");
      throw std::runtime_error("no handler");
    });
    loop.defer([&] { order.push_back("rest of the tick"); });
    loop.delay(0.0, [&] { order.push_back("timer of the tick"); });
    try {
      loop.run();
      ADD_FAILURE() << "run() returned";
    } catch (const std::runtime_error& error) {
      EXPECT_STREQ(error.what(), "no handler");
    }
    EXPECT_EQ(order, std::vector<std::string>{"throws"});
    loop.run();  // the loop is still usable: what the error interrupted runs now
    EXPECT_EQ(order, (std::vector<std::string>{"throws", "rest of the tick", "timer of the tick"}));
  });
}

TEST(LoopErrors, ARepeatThatThrowsWithoutAHandlerStaysRegistered) {
  with_loop([](event_loop& loop) {
    int runs = 0;
    watcher_id id{};
    id = loop.repeat(1ms, [&] {
      if (++runs == 2) {
        loop.off_repeat(id);
        return;
      }
      throw std::runtime_error("first run fails");
    });
    EXPECT_THROW(loop.run(), std::runtime_error);
    EXPECT_EQ(loop.timer_count(), 1u);
    loop.run();
    EXPECT_EQ(runs, 2);
  });
}

TEST(LoopErrors, AnErrorOfTheHandlerItselfEndsRun) {
  with_loop([](event_loop& loop) {
    int handled = 0;
    loop.set_error_handler([&](std::exception_ptr error) {
      ++handled;
      if (what_of(error) == "fatal") {
        throw std::logic_error("the handler gave up on: fatal");
      }
    });
    bool after_ran = false;
    loop.defer([] { throw std::runtime_error("minor"); });
    loop.defer([] { throw std::runtime_error("fatal"); });
    loop.defer([&] { after_ran = true; });
    try {
      loop.run();
      ADD_FAILURE() << "run() returned";
    } catch (const std::logic_error& error) {
      EXPECT_STREQ(error.what(), "the handler gave up on: fatal");
    }
    EXPECT_EQ(handled, 2);
    EXPECT_FALSE(after_ran);
    loop.run();  // the handler is still installed, and the rest runs
    EXPECT_TRUE(after_ran);
  });
}

TEST(LoopErrors, TheHandlerMayReplaceOrRemoveItself) {
  with_loop([](event_loop& loop) {
    std::vector<std::string> seen;
    loop.set_error_handler([&](std::exception_ptr error) {
      seen.push_back("first: " + what_of(error));
      loop.set_error_handler([&](std::exception_ptr next) {
        seen.push_back("second: " + what_of(next));
        loop.set_error_handler(nullptr);
      });
    });
    loop.defer([] { throw std::runtime_error("a"); });
    loop.defer([] { throw std::runtime_error("b"); });
    loop.defer([] { throw std::runtime_error("c"); });
    EXPECT_THROW(loop.run(), std::runtime_error) << "no handler is left for c";
    EXPECT_EQ(seen, (std::vector<std::string>{"first: a", "second: b"}));
  });
}

TEST(LoopErrors, ErrorsLeaveRunInACoroutineToo) {
  weft_test::run_clean([] {
    event_loop loop;
    loop.delay(1ms, [] { throw std::runtime_error("from a timer"); });
    try {
      loop.run();
      ADD_FAILURE() << "run() returned";
    } catch (const std::runtime_error& error) {
      EXPECT_STREQ(error.what(), "from a timer");
    }
    int handled = 0;
    loop.set_error_handler([&](std::exception_ptr) { ++handled; });
    loop.defer([] { throw std::runtime_error("handled"); });
    loop.run();
    EXPECT_EQ(handled, 1);
  });
}

TEST(LoopErrors, CancellingTheDispatchingCoroutineEndsRunWithTheCancellation) {
  weft_test::run_clean([] {
    event_loop loop;
    int handled = 0;
    loop.set_error_handler([&](std::exception_ptr) { ++handled; });
    watcher_id far = loop.delay(1h, [] {});
    auto runner = weft::spawn([&] { loop.run(); });
    weft::yield();  // the runner starts dispatching (and idles: nothing is due for an hour)
    runner.cancel("enough");
    EXPECT_THROW(runner.await(), weft::cancelled_error);
    EXPECT_EQ(handled, 0) << "a cancellation is not a callback error";
    EXPECT_TRUE(loop.off_delay(far));
  });
}

}  // namespace

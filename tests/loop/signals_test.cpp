// weft::loop::event_loop signal watchers: on_signal, off_signal, and the signal rules of
// event_loop.hpp.
#include <csignal>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "loop/loop_support.hpp"

namespace {

using namespace std::chrono_literals;
using weft::loop::event_loop;
using weft::loop::watcher_id;
using weft_loop_test::with_loop;

TEST(LoopSignals, CallbackRunsOnTheLoopThreadAfterTheHandlerReturned) {
  with_loop([](event_loop& loop) {
    bool raise_returned = false;
    bool ran_after_raise = false;
    std::thread::id ran_on;
    int calls = 0;
    loop.on_signal(SIGUSR1, [&] {
      ++calls;
      ran_after_raise = raise_returned;  // inside the OS handler, raise() would not have returned
      ran_on = std::this_thread::get_id();
      std::vector<int> allocates(1000);  // not async-signal-safe: fine outside the handler
      (void)allocates;
      loop.off_signal(SIGUSR1);
    });
    loop.defer([&] {
      ASSERT_EQ(std::raise(SIGUSR1), 0);
      raise_returned = true;
    });
    loop.run();
    EXPECT_EQ(calls, 1);
    EXPECT_TRUE(ran_after_raise);
    EXPECT_EQ(ran_on, std::this_thread::get_id());
  });
}

TEST(LoopSignals, DeliveriesBeforeTheNextTickCoalesce) {
  with_loop([](event_loop& loop) {
    int calls = 0;
    loop.on_signal(SIGUSR2, [&] {
      ++calls;
      loop.delay(20ms, [&] { loop.off_signal(SIGUSR2); });
    });
    loop.defer([] {
      std::raise(SIGUSR2);
      std::raise(SIGUSR2);
      std::raise(SIGUSR2);
    });
    loop.run();
    EXPECT_EQ(calls, 1);
  });
}

TEST(LoopSignals, RegisteringAgainReplacesTheCallback) {
  with_loop([](event_loop& loop) {
    std::vector<std::string> calls;
    watcher_id first = loop.on_signal(SIGUSR1, [&] { calls.push_back("first"); });
    watcher_id second = loop.on_signal(SIGUSR1, [&] {
      calls.push_back("second");
      EXPECT_TRUE(loop.off_signal(SIGUSR1));
      EXPECT_FALSE(loop.off_signal(SIGUSR1));
    });
    EXPECT_NE(first, second);
    EXPECT_FALSE(loop.reference(first));
    loop.defer([] { std::raise(SIGUSR1); });
    loop.run();
    EXPECT_EQ(calls, std::vector<std::string>{"second"});
  });
}

TEST(LoopSignals, EachNumberHasItsOwnCallback) {
  with_loop([](event_loop& loop) {
    std::vector<int> got;
    auto record = [&](int number) {
      return [&, number] {
        got.push_back(number);
        loop.off_signal(number);
      };
    };
    loop.on_signal(SIGUSR1, record(SIGUSR1));
    loop.on_signal(SIGUSR2, [&] {
      got.push_back(SIGUSR2);
      loop.off_signal(SIGUSR2);
      std::raise(SIGUSR1);  // only after SIGUSR2's callback: the order is the test's
    });
    loop.defer([] { std::raise(SIGUSR2); });
    loop.run();
    EXPECT_EQ(got, (std::vector<int>{SIGUSR2, SIGUSR1}));
  });
}

TEST(LoopSignals, UncatchableNumbersAreInvalidArguments) {
  with_loop([](event_loop& loop) {
    for (int number : {SIGKILL, SIGSTOP, 0, -1, NSIG, 1000}) {
      try {
        loop.on_signal(number, [] {});
        ADD_FAILURE() << number << " was accepted";
      } catch (const std::invalid_argument& error) {
        EXPECT_NE(std::string(error.what()).find(std::to_string(number)), std::string::npos)
            << error.what();
      }
    }
    EXPECT_FALSE(loop.off_signal(SIGKILL));
    EXPECT_FALSE(loop.off_signal(-5));
    EXPECT_THROW(loop.on_signal(SIGUSR1, nullptr), std::invalid_argument);
    loop.run();
  });
}

TEST(LoopSignals, SignalWatcherRegisteredDuringATickRunsInALaterTick) {
  with_loop([](event_loop& loop) {
    std::vector<std::string> order;
    loop.on_signal(SIGUSR1, [&] {
      order.push_back("first watcher");
      // Caught from the moment on_signal returns (the raise would otherwise end the process),
      // and delivered in a later tick than the one that registered it.
      loop.on_signal(SIGUSR2, [&] {
        order.push_back("registered in a tick");
        loop.off_signal(SIGUSR2);
      });
      std::raise(SIGUSR2);
      loop.off_signal(SIGUSR1);
      loop.defer([&] { order.push_back("next tick"); });
    });
    loop.defer([] { std::raise(SIGUSR1); });
    loop.run();
    EXPECT_EQ(order,
              (std::vector<std::string>{"first watcher", "next tick", "registered in a tick"}));
  });
}

TEST(LoopSignals, SignalsWorkInsideWeft) {
  weft_test::run_clean([] {
    event_loop loop;
    int calls = 0;
    loop.on_signal(SIGUSR1, [&] {
      ++calls;
      loop.off_signal(SIGUSR1);
    });
    weft::spawn([] {
      weft::yield();  // run() dispatches: the signal is caught from its start
      std::raise(SIGUSR1);
    });
    loop.run();
    EXPECT_EQ(calls, 1);
  });
}

}  // namespace

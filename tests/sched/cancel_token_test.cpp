// Cancel tokens (weft::cancel_on, timeout::cancel_on): any task or future ends a wait with
// wait_cancelled_error when it completes; nothing the wait was for is lost, and the coroutine
// itself goes on.
#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::fifo_options;
using weft_test::run_clean;

// Runs body, expecting wait_cancelled_error; returns its reason.
template <class Body>
std::string cancelled_reason(Body&& body) {
  try {
    body();
  } catch (const weft::wait_cancelled_error& cancelled) {
    return cancelled.reason();
  }
  ADD_FAILURE() << "the wait was not cancelled by its token";
  return {};
}

TEST(CancelToken, AFinishingTaskEndsATaskAwaitAndTheAwaitedTaskKeepsRunning) {
  run_clean([] {
    weft::promise<void> release;
    auto slow = weft::spawn([future = release.get_future()]() mutable {
      future.await();
      return 7;
    });
    auto stopper = weft::spawn([] { weft::yield(); }, {.name = "stopper"});
    std::string reason = cancelled_reason([&] { slow.await(weft::cancel_on(stopper)); });
    EXPECT_NE(reason.find("task " + std::to_string(stopper.id()) + " 'stopper' completed"),
              std::string::npos)
        << reason;
    EXPECT_NE(reason.find("awaiting task " + std::to_string(slow.id())), std::string::npos)
        << reason;
    EXPECT_FALSE(slow.done()) << "the awaited task is left running";
    release.set_value();
    EXPECT_EQ(slow.await(), 7);
  });
}

TEST(CancelToken, ACancelledFutureGivesItsReason) {
  run_clean([] {
    weft::channel<int> values(0);
    weft::promise<void> stop;
    weft::future<void> stop_signal = stop.get_future();
    auto canceller = weft::spawn([&] {
      weft::yield();
      stop_signal.cancel("shutting down");
    });
    std::string reason = cancelled_reason([&] { values.recv(weft::cancel_on(stop.get_future())); });
    EXPECT_NE(reason.find("cancelled by its cancel token: shutting down"), std::string::npos)
        << reason;
    canceller.await();
  });
}

TEST(CancelToken, AFailedTaskGivesItsError) {
  run_clean([] {
    weft::mutex lock;
    std::unique_lock held(lock);
    auto failing = weft::spawn([]() -> int { throw std::runtime_error("disk full"); });
    std::string reason = cancelled_reason([&] {
      auto other = weft::spawn([&] { lock.lock(weft::cancel_on(failing)); });
      other.await();
    });
    EXPECT_NE(reason.find("failed: disk full"), std::string::npos) << reason;
    EXPECT_THROW(failing.await(), std::runtime_error);
  });
}

TEST(CancelToken, TheCoroutineIsNotCancelledAndWaitsAgain) {
  run_clean([] {
    weft::channel<int> values(1);
    weft::promise<void> stop;
    stop.set_value();  // already complete: every wait it limits ends at once...
    EXPECT_THROW(values.recv(weft::cancel_on(stop.get_future())), weft::wait_cancelled_error);
    EXPECT_FALSE(weft::this_coroutine::cancel_requested());
    weft::sleep_for(1ms);  // ...and nothing else: later waits suspend as usual
    values.send(5);
    // ...unless what it waits for is ready: the value is taken, not refused.
    EXPECT_EQ(values.recv(weft::cancel_on(stop.get_future())), 5);
  });
}

TEST(CancelToken, AValueHandedOverAsTheTokenFiresIsKept) {
  run_clean(
      [] {
        weft::channel<int> values(0);
        weft::promise<void> stop;
        auto receiver =
            weft::spawn([&] { return values.recv(weft::cancel_on(stop.get_future())); });
        weft::yield();     // the receiver waits
        stop.set_value();  // wakes it with the token...
        values.send(42);   // ...and the value reaches its still-queued wait before it runs
        EXPECT_EQ(receiver.await(), 42) << "a value handed to a cancelled wait must not be lost";
      },
      fifo_options());
}

TEST(CancelToken, ASenderCancelledByItsTokenTakesItsValueBack) {
  run_clean([] {
    weft::channel<std::string> values(0);
    weft::promise<void> stop;
    auto sender = weft::spawn([&] {
      try {
        values.send("kept", weft::cancel_on(stop.get_future()));
        return std::string("sent");
      } catch (const weft::wait_cancelled_error&) {
        return std::string("refused");
      }
    });
    weft::yield();
    stop.set_value();
    EXPECT_EQ(sender.await(), "refused");
    EXPECT_FALSE(values.try_recv().has_value()) << "a refused send leaves nothing behind";
  });
}

TEST(CancelToken, ADeadlineAndATokenTogetherEndTheWaitWhicheverComesFirst) {
  run_clean([] {
    weft::semaphore permits(0);
    weft::promise<void> never;
    EXPECT_THROW(permits.acquire(weft::timeout(5ms).cancel_on(never.get_future())),
                 weft::timeout_error);
    weft::promise<void> soon;
    auto firing = weft::spawn([&] { soon.set_value(); });
    EXPECT_THROW(permits.acquire(weft::timeout(1h).cancel_on(soon.get_future())),
                 weft::wait_cancelled_error);
    firing.await();
    permits.release();
    permits.acquire(weft::timeout(1h).cancel_on(never.get_future()));  // ready: no wait at all
  });
}

TEST(CancelToken, EndsAnIoWaitAndTheListenerStillAccepts) {
  run_clean([] {
    auto server = weft::tcp::listener::listen("127.0.0.1", 0);
    weft::promise<void> stop;
    auto stopper = weft::spawn([&] {
      weft::sleep_for(2ms);
      stop.set_value();
    });
    EXPECT_THROW(server.accept(weft::cancel_on(stop.get_future())), weft::wait_cancelled_error);
    stopper.await();
    auto client = weft::spawn([&] {
      weft::tcp::stream stream = weft::tcp::connect("127.0.0.1", server.port());
      stream.write_all("hi");
    });
    weft::tcp::stream accepted = server.accept(weft::timeout(10s));
    std::array<char, 2> greeting;
    accepted.read_exactly(greeting);
    EXPECT_EQ(std::string(greeting.data(), 2), "hi");
    client.await();
  });
}

TEST(CancelToken, EndsACombinatorWaitAndLeavesTheInputsRunning) {
  run_clean([] {
    weft::promise<int> slow_value;
    auto slow =
        weft::spawn([future = slow_value.get_future()]() mutable { return future.await(); });
    weft::promise<void> stop;
    auto stopper = weft::spawn([&] { stop.set_value(); });
    EXPECT_THROW(weft::await_all(slow, weft::cancel_on(stop.get_future())),
                 weft::wait_cancelled_error);
    EXPECT_FALSE(slow.done());
    slow_value.set_value(3);
    EXPECT_EQ(slow.await(), 3);
    stopper.await();
  });
}

TEST(CancelToken, ATokenOutlivesTheHandleItWasMadeFrom) {
  run_clean([] {
    weft::semaphore permits(0);
    std::optional<weft::timeout> limit;
    std::optional<weft::promise<void>> stop(std::in_place);
    limit = weft::cancel_on(stop->get_future());  // the timeout keeps the future's state
    auto firing = weft::spawn([&] { stop->set_value(); });
    EXPECT_THROW(permits.acquire(*limit), weft::wait_cancelled_error);
    firing.await();
    stop.reset();
    weft::timeout copy = *limit;  // copies share the token
    limit.reset();
    EXPECT_THROW(permits.acquire(copy), weft::wait_cancelled_error);
  });
}

TEST(CancelToken, ATaskOfAnotherSchedulerIsRefused) {
  run_clean([] {
    weft::task<void> foreign;
    std::thread other([&] { weft::run([&] { foreign = weft::spawn([] {}); }); });
    other.join();
    weft::semaphore permits(0);
    EXPECT_THROW(permits.acquire(weft::cancel_on(foreign)), std::logic_error);
    foreign = {};
  });
}

TEST(CancelToken, APlainThreadWaitWithATokenIsRefused) {
  weft::thread_channel<int> values(1);
  std::optional<weft::timeout> limit;
  run_clean([&] {
    weft::promise<void> stop;
    limit = weft::cancel_on(stop.get_future());
  });
  std::thread plain([&] {
    try {
      values.recv(*limit);
      ADD_FAILURE() << "a plain thread's wait took a token";
    } catch (const std::logic_error& misuse) {
      EXPECT_NE(std::string(misuse.what()).find("cancel token"), std::string::npos)
          << misuse.what();
    }
  });
  plain.join();
  limit.reset();
}

TEST(CancelToken, AnEmptyTaskIsRefusedAsAToken) {
  run_clean([] {
    weft::task<int> empty;
    EXPECT_THROW(weft::cancel_on(empty), std::logic_error);
  });
}

}  // namespace

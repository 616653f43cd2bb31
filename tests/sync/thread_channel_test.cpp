// weft::thread_channel<T>: values between plain threads and the coroutines of schedulers on
// other threads. A coroutine waiting on it blocks only itself; a plain thread blocks on a
// condition variable; nothing is lost, duplicated or woken after its scheduler ended.
#include "weft/sync/thread_channel.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::run_clean;
using weft_test::yield_until;

bool contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

// Waits (suspending, not blocking) until a rendezvous thread_channel has a receiver waiting: only
// then does try_send succeed. Returns whether it did within the time limit.
template <class T>
bool send_when_received(weft::thread_channel<T>& handshake, T value) {
  return yield_until([&] { return handshake.try_send(T(value)); });
}

TEST(ThreadChannel, ManyProducersOnThreadsAndSchedulersFeedOneCoroutineConsumer) {
  static constexpr int plain_threads = 2;
  static constexpr int scheduler_threads = 2;
  static constexpr int coroutines_per_scheduler = 3;
  static constexpr int per_producer = 2000;
  static constexpr int producers = plain_threads + scheduler_threads * coroutines_per_scheduler;
  std::int64_t received_sum = 0;
  int received_count = 0;
  run_clean([&] {
    weft::thread_channel<int> values(16);
    std::atomic<int> producers_done{0};
    // The last producer to finish closes the channel, which ends the consumer's loop.
    auto produce = [values, &producers_done](int producer) mutable {
      for (int index = 1; index <= per_producer; ++index) {
        values.send(producer * per_producer + index);
      }
      if (producers_done.fetch_add(1) + 1 == producers) {
        values.close("all produced");
      }
    };
    auto consumer = weft::spawn([&] {
      for (int value : values) {
        received_sum += value;
        ++received_count;
      }
    });
    std::vector<std::thread> threads;
    for (int producer = 0; producer < plain_threads; ++producer) {
      threads.emplace_back(produce, producer);
    }
    std::vector<weft::thread_task<void>> schedulers;
    for (int thread = 0; thread < scheduler_threads; ++thread) {
      schedulers.push_back(weft::spawn_thread([produce, thread]() mutable {
        std::vector<weft::task<void>> senders;
        for (int index = 0; index < coroutines_per_scheduler; ++index) {
          int producer = plain_threads + thread * coroutines_per_scheduler + index;
          senders.push_back(weft::spawn([produce, producer]() mutable { produce(producer); }));
        }
        for (auto& sender : senders) {
          sender.await();
        }
      }));
    }
    consumer.await();
    for (auto& remote : schedulers) {
      remote.await();
    }
    for (auto& thread : threads) {
      thread.join();  // they closed the channel already, so they are ending
    }
  });
  constexpr std::int64_t total = std::int64_t{producers} * per_producer;
  EXPECT_EQ(received_count, total);
  EXPECT_EQ(received_sum, total * (total + 1) / 2);
}

TEST(ThreadChannel, AWaitingCoroutineDoesNotBlockItsScheduler) {
  run_clean([&] {
    weft::thread_channel<int> values(0);
    std::atomic<int> ticks{0};
    auto consumer = weft::spawn([&] { return values.recv(); });
    auto ticker = weft::spawn([&] {
      for (int tick = 0; tick < 100; ++tick) {
        ticks.fetch_add(1);
        weft::yield();
      }
    });
    // The value is only sent once the ticker has run to the end, which it can only do while the
    // consumer waits if the consumer's wait leaves the scheduler free.
    std::thread producer([&, values]() mutable {
      while (ticks.load() < 100) {
        std::this_thread::yield();
      }
      values.send(42);
    });
    EXPECT_EQ(consumer.await(), 42);
    ticker.await();
    producer.join();
    EXPECT_EQ(ticks.load(), 100);
  });
}

TEST(ThreadChannel, APlainThreadBlocksUntilACoroutineServesIt) {
  run_clean([&] {
    weft::thread_channel<std::string> requests(0);
    weft::thread_channel<std::string> replies(1);
    std::thread client([requests, replies]() mutable {
      requests.send("ping");               // blocks until the coroutine takes it
      std::string reply = replies.recv();  // blocks until the coroutine answers
      requests.send(reply + " seen");
    });
    EXPECT_EQ(requests.recv(), "ping");
    replies.send("pong");
    EXPECT_EQ(requests.recv(weft::timeout(5s)), "pong seen");
    client.join();
  });
}

TEST(ThreadChannel, ACloseFromAnotherThreadWakesABlockedReceiver) {
  run_clean([&] {
    weft::thread_channel<int> values(4);
    std::string reason;
    std::atomic<bool> waiting{false};
    auto consumer = weft::spawn([&] {
      waiting = true;
      try {
        values.recv();
        ADD_FAILURE() << "received from a channel nobody sent to";
      } catch (const weft::channel_closed_error& error) {
        reason = error.reason();
      }
    });
    std::thread closer([&, values]() mutable {
      while (!waiting.load()) {
        std::this_thread::yield();
      }
      values.close("closed elsewhere");
      values.close("second close");
    });
    consumer.await();
    closer.join();
    EXPECT_EQ(reason, "closed elsewhere");
  });
}

TEST(ThreadChannel, BlockedSendersOnEveryKindOfThreadGetTheCloseAndKeepTheirValues) {
  run_clean([&] {
    weft::thread_channel<std::unique_ptr<int>> box(1);
    box.send(std::make_unique<int>(1));
    std::atomic<int> refused{0};
    std::thread plain([box, &refused]() mutable {
      auto value = std::make_unique<int>(2);
      try {
        box.send(std::move(value));
      } catch (const weft::channel_closed_error& error) {
        if (value != nullptr && contains(error.what(), "not delivered")) {
          refused.fetch_add(1);
        }
      }
    });
    auto coroutine = weft::spawn([&] {
      auto value = std::make_unique<int>(3);
      try {
        box.send(std::move(value));
      } catch (const weft::channel_closed_error& error) {
        EXPECT_NE(value, nullptr);
        EXPECT_EQ(error.reason(), "stop");
        refused.fetch_add(1);
      }
    });
    // Both may or may not be blocked yet: either way a send on a closed full channel refuses.
    weft::yield();
    box.close("stop");
    coroutine.await();
    plain.join();
    EXPECT_EQ(refused.load(), 2);
    auto first = box.recv();
    EXPECT_EQ(*first, 1) << "the value buffered before the close is still delivered";
    EXPECT_THROW(box.recv(), weft::channel_closed_error);
  });
}

TEST(ThreadChannel, TimeoutsOnBothSidesLeaveTheChannelConsistent) {
  run_clean([&] {
    weft::thread_channel<int> values(1);
    try {
      values.recv(weft::timeout(5ms));
      FAIL() << "expected timeout_error";
    } catch (const weft::timeout_error& error) {
      EXPECT_TRUE(contains(error.what(), "thread_channel<int>")) << error.what();
      EXPECT_TRUE(contains(error.what(), "recv")) << error.what();
    }
    values.send(1);
    EXPECT_THROW(values.send(2, weft::timeout(5ms)), weft::timeout_error);
    // The same from a plain thread, which waits on a condition variable instead.
    std::thread plain([values]() mutable {
      EXPECT_THROW(values.send(3, weft::timeout(5ms)), weft::timeout_error);
    });
    plain.join();
    EXPECT_EQ(values.size(), 1u);
    EXPECT_EQ(values.recv(), 1);
    std::thread empty(
        [values]() mutable { EXPECT_THROW(values.recv(weft::timeout(5ms)), weft::timeout_error); });
    empty.join();
    EXPECT_FALSE(values.try_recv().has_value()) << "a timed-out value was delivered after all";
    values.send(4);
    EXPECT_EQ(values.recv(weft::timeout(5s)), 4);
  });
}

TEST(ThreadChannel, CancelledReceiverPassesItsValueOn) {
  run_clean([&] {
    weft::thread_channel<int> handshake(0);
    auto receiver = weft::spawn([&] { return handshake.recv(); });
    // try_send on a rendezvous succeeds only into a waiting receiver's hands.
    ASSERT_TRUE(send_when_received(handshake, 7));
    receiver.cancel("leaving");  // before its trigger wakes it
    EXPECT_THROW(receiver.await(), weft::cancelled_error);
    EXPECT_EQ(handshake.try_recv(), 7) << "the value was lost with the cancelled receiver";
    EXPECT_FALSE(handshake.try_recv().has_value());
  });
}

TEST(ThreadChannel, CoroutineSenderCancelledAfterItsValueWasTakenCompletesTheSend) {
  int sends_returned = 0;
  run_clean([&] {
    weft::thread_channel<int> handshake(0);
    auto sender = weft::spawn([&] {
      handshake.send(5);
      ++sends_returned;
      weft::yield();  // the deferred cancellation surfaces here
    });
    std::optional<int> taken;
    ASSERT_TRUE(yield_until([&] { return (taken = handshake.try_recv()).has_value(); }));
    sender.cancel("too late");
    EXPECT_THROW(sender.await(), weft::cancelled_error);
    EXPECT_EQ(taken, 5);
    EXPECT_FALSE(handshake.try_recv().has_value());
  });
  EXPECT_EQ(sends_returned, 1);
}

TEST(ThreadChannel, AWaiterWhoseSchedulerEndedIsNeverWoken) {
  // A scheduler on another thread waits, gives up and ends; values sent afterwards must not
  // touch its (freed) waiter or trigger: they are buffered for the next receiver. ASan and TSan
  // check the "never touched" part.
  run_clean([&] {
    weft::thread_channel<int> values(2);
    auto remote = weft::spawn_thread([values]() mutable {
      auto waiter = weft::spawn([values]() mutable {
        EXPECT_THROW(values.recv(weft::timeout(5ms)), weft::timeout_error);
      });
      waiter.await();
    });
    remote.await();
    values.send(1);
    values.send(2);
    EXPECT_EQ(values.recv(), 1);
    EXPECT_EQ(values.recv(), 2);
  });
}

TEST(ThreadChannel, RangeForOnAPlainThreadDrainsThenEndsAtClose) {
  std::vector<int> received;
  run_clean([&] {
    auto values = weft::thread_channel<int>::unbounded();
    std::thread consumer([values, &received]() mutable {
      for (int value : values) {
        received.push_back(value);
      }
    });
    for (int value = 0; value < 100; ++value) {
      values.send(value);  // unbounded: never blocks
    }
    values.close("done");
    consumer.join();
  });
  std::vector<int> expected(100);
  for (int value = 0; value < 100; ++value) {
    expected[value] = value;
  }
  EXPECT_EQ(received, expected);
}

TEST(ThreadChannel, StressFourThreadsOfManyValuesArriveExactlyOnce) {
  static constexpr int threads_count = 4;
  static constexpr int per_thread = 100000;
  std::int64_t received_sum = 0;
  std::int64_t received_count = 0;
  std::vector<int> last_by_thread(threads_count, -1);
  bool in_order = true;
  run_clean([&] {
    weft::thread_channel<int> values(256);
    std::atomic<int> done{0};
    std::vector<std::thread> producers;
    for (int thread = 0; thread < threads_count; ++thread) {
      producers.emplace_back([values, thread, &done]() mutable {
        for (int index = 0; index < per_thread; ++index) {
          values.send(thread * per_thread + index);
        }
        if (done.fetch_add(1) + 1 == threads_count) {
          values.close("done");
        }
      });
    }
    for (int value : values) {
      received_sum += value;
      ++received_count;
      int thread = value / per_thread;
      in_order = in_order && last_by_thread[thread] < value;
      last_by_thread[thread] = value;
    }
    for (auto& producer : producers) {
      producer.join();
    }
  });
  constexpr std::int64_t total = std::int64_t{threads_count} * per_thread;
  EXPECT_EQ(received_count, total);
  EXPECT_EQ(received_sum, total * (total - 1) / 2);
  EXPECT_TRUE(in_order) << "each thread's values must arrive in the order it sent them";
}

}  // namespace

// weft::channel<T>: rendezvous, bounded and unbounded channels between coroutines of one
// scheduler. FIFO hand-off, close semantics, timeouts, cancellation that loses nothing, and
// deadlock reports that name the channel.
#include "weft/sync/channel.hpp"
#include "weft/sync/scope.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::fifo_options;
using weft_test::run_clean;

bool contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

TEST(Channel, RendezvousHandsTheValueOverBeforeSendReturns) {
  std::vector<std::string> events;
  run_clean(
      [&] {
        weft::channel<int> handshake(0);
        auto sender = weft::spawn([&] {
          events.push_back("about to send");
          handshake.send(42);
          events.push_back("send completed");
        });
        auto receiver = weft::spawn([&] {
          events.push_back("about to recv");
          EXPECT_EQ(handshake.recv(), 42);
          events.push_back("got");
        });
        sender.await();
        receiver.await();
        EXPECT_EQ(handshake.size(), 0u);
        EXPECT_EQ(handshake.capacity(), 0u);
      },
      fifo_options());
  EXPECT_EQ(events,
            (std::vector<std::string>{"about to send", "about to recv", "got", "send completed"}));
}

TEST(Channel, RendezvousSendToAWaitingReceiverDoesNotSuspend) {
  run_clean(
      [&] {
        weft::channel<int> handshake(0);
        std::optional<int> received;
        auto receiver = weft::spawn([&] { received = handshake.recv(); });
        weft::yield();  // the receiver now waits
        bool other_ran = false;
        auto other = weft::spawn([&] { other_ran = true; });
        handshake.send(7);  // straight into the receiver's hands: no suspension
        EXPECT_FALSE(other_ran);
        receiver.await();
        other.await();
        EXPECT_EQ(received, 7);
      },
      fifo_options());
}

TEST(Channel, BoundedSendBlocksWhenFullAndSendersResumeInFifoOrder) {
  std::vector<int> completed;
  std::vector<int> received;
  run_clean(
      [&] {
        weft::channel<int> queue(2);
        queue.send(1);
        queue.send(2);  // full now, and nothing suspended so far
        EXPECT_EQ(queue.size(), 2u);
        std::vector<weft::task<void>> senders;
        for (int value = 3; value <= 5; ++value) {
          senders.push_back(weft::spawn([&, value] {
            queue.send(value);
            completed.push_back(value);
          }));
        }
        weft::yield();  // all three block on the full buffer
        EXPECT_TRUE(completed.empty());
        EXPECT_EQ(queue.size(), 2u);
        for (int round = 0; round < 5; ++round) {
          received.push_back(queue.recv());
          weft::yield();  // a released sender runs
        }
        for (auto& sender : senders) {
          sender.await();
        }
        EXPECT_EQ(queue.size(), 0u);
      },
      fifo_options());
  EXPECT_EQ(received, (std::vector<int>{1, 2, 3, 4, 5}));
  EXPECT_EQ(completed, (std::vector<int>{3, 4, 5}));
}

TEST(Channel, UnboundedSendNeverBlocks) {
  run_clean([&] {
    auto log = weft::channel<int>::unbounded();
    EXPECT_EQ(log.capacity(), weft::channel<int>::unlimited);
    bool other_ran = false;
    auto other = weft::spawn([&] { other_ran = true; });
    for (int value = 0; value < 10000; ++value) {
      log.send(value);
      ASSERT_TRUE(log.try_send(-1 - value));
    }
    EXPECT_FALSE(other_ran) << "a send suspended";
    EXPECT_EQ(log.size(), 20000u);
    for (int value = 0; value < 10000; ++value) {
      ASSERT_EQ(log.recv(), value);
      ASSERT_EQ(log.recv(), -1 - value);
    }
    other.await();
  });
}

TEST(Channel, TrySendAndTryRecvNeverBlock) {
  run_clean([&] {
    weft::channel<std::unique_ptr<int>> box(1);
    auto first = std::make_unique<int>(1);
    auto second = std::make_unique<int>(2);
    EXPECT_TRUE(box.try_send(std::move(first)));
    EXPECT_EQ(first, nullptr);
    EXPECT_FALSE(box.try_send(std::move(second)));  // full: refused, the value stays with us
    ASSERT_NE(second, nullptr);
    EXPECT_EQ(*second, 2);
    std::optional<std::unique_ptr<int>> got = box.try_recv();
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(**got, 1);
    EXPECT_FALSE(box.try_recv().has_value());

    weft::channel<int> handshake(0);
    EXPECT_FALSE(handshake.try_send(1)) << "no receiver waits: a rendezvous cannot take it";
    bool sent = false;
    auto sender = weft::spawn([&] {
      handshake.send(5);
      sent = true;
    });
    // Once the sender blocks, its value can be taken without waiting (which releases it).
    std::optional<int> taken;
    ASSERT_TRUE(weft_test::yield_until([&] { return (taken = handshake.try_recv()).has_value(); }));
    EXPECT_EQ(taken, 5);
    EXPECT_FALSE(sent);
    sender.await();
    EXPECT_TRUE(sent);

    box.close("done");
    EXPECT_THROW(box.try_send(std::make_unique<int>(3)), weft::channel_closed_error);
    EXPECT_THROW(box.try_recv(), weft::channel_closed_error);
  });
}

TEST(Channel, RangeForDrainsBufferedValuesThenEndsAtClose) {
  std::vector<int> received;
  run_clean([&] {
    weft::channel<int> numbers(3);
    auto producer = weft::spawn([&] {
      for (int value = 1; value <= 10; ++value) {
        numbers.send(value);
      }
      numbers.close("producer done");
    });
    for (int value : numbers) {
      received.push_back(value);
    }
    producer.await();
    EXPECT_TRUE(numbers.closed());
  });
  EXPECT_EQ(received, (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
}

TEST(Channel, RecvAfterCloseAndDrainThrowsTheFirstCloseReason) {
  run_clean([&] {
    weft::channel<int> numbers(4);
    numbers.send(1);
    numbers.send(2);
    numbers.close("first reason");
    numbers.close("second reason");  // idempotent: the first reason stays
    EXPECT_TRUE(numbers.closed());
    EXPECT_EQ(numbers.recv(), 1);
    EXPECT_EQ(numbers.recv(), 2);
    try {
      numbers.recv();
      FAIL() << "expected channel_closed_error";
    } catch (const weft::channel_closed_error& error) {
      EXPECT_EQ(error.reason(), "first reason");
      EXPECT_TRUE(contains(error.what(), "channel<int>")) << error.what();
      EXPECT_TRUE(contains(error.what(), "first reason")) << error.what();
    }
  });
}

TEST(Channel, BlockedReceiversAreWokenByCloseWithItsReason) {
  run_clean(
      [&] {
        weft::channel<int> numbers(0);
        int closed_seen = 0;
        std::vector<weft::task<void>> receivers;
        for (int index = 0; index < 3; ++index) {
          receivers.push_back(weft::spawn([&] {
            try {
              numbers.recv();
              ADD_FAILURE() << "received a value from a channel nobody sent to";
            } catch (const weft::channel_closed_error& error) {
              EXPECT_EQ(error.reason(), "shutting down");
              ++closed_seen;
            }
          }));
        }
        weft::yield();  // all three wait
        EXPECT_EQ(closed_seen, 0);
        numbers.close("shutting down");
        for (auto& receiver : receivers) {
          receiver.await();
        }
        EXPECT_EQ(closed_seen, 3);
      },
      fifo_options());
}

TEST(Channel, SendAfterCloseThrowsAtOnceAndKeepsTheValue) {
  run_clean([&] {
    weft::channel<std::unique_ptr<int>> box(4);
    box.close("closed for business");
    auto value = std::make_unique<int>(9);
    try {
      box.send(std::move(value));
      FAIL() << "expected channel_closed_error";
    } catch (const weft::channel_closed_error& error) {
      EXPECT_EQ(error.reason(), "closed for business");
      EXPECT_TRUE(contains(error.what(), "not delivered")) << error.what();
    }
    ASSERT_NE(value, nullptr);
    EXPECT_EQ(*value, 9);
    EXPECT_EQ(box.size(), 0u);
  });
}

TEST(Channel, SendersBlockedAtCloseGetTheErrorAndTheirValuesAreNotDelivered) {
  run_clean(
      [&] {
        weft::channel<int> queue(1);
        queue.send(1);
        int refused = 0;
        std::vector<weft::task<void>> senders;
        for (int value = 2; value <= 3; ++value) {
          senders.push_back(weft::spawn([&, value] {
            try {
              queue.send(value);
              ADD_FAILURE() << "send " << value << " completed on a channel closed while it waited";
            } catch (const weft::channel_closed_error& error) {
              EXPECT_EQ(error.reason(), "stop");
              EXPECT_TRUE(contains(error.what(), "not delivered")) << error.what();
              ++refused;
            }
          }));
        }
        weft::yield();  // both wait for room
        queue.close("stop");
        for (auto& sender : senders) {
          sender.await();
        }
        EXPECT_EQ(refused, 2);
        EXPECT_EQ(queue.recv(), 1) << "the value buffered before the close is still delivered";
        EXPECT_THROW(queue.recv(), weft::channel_closed_error);
      },
      fifo_options());
}

TEST(Channel, TimedOutRecvTakesNothingAndTheChannelStillWorks) {
  run_clean([&] {
    weft::channel<int> numbers(1);
    try {
      numbers.recv(weft::timeout(5ms));
      FAIL() << "expected timeout_error";
    } catch (const weft::timeout_error& error) {
      EXPECT_TRUE(contains(error.what(), "channel<int>")) << error.what();
      EXPECT_TRUE(contains(error.what(), "recv")) << error.what();
    }
    numbers.send(3);
    EXPECT_EQ(numbers.recv(weft::timeout(5s)), 3);
    EXPECT_EQ(numbers.size(), 0u);
  });
}

TEST(Channel, TimedOutSendKeepsItsValueAndLeavesTheBufferAsItWas) {
  run_clean([&] {
    weft::channel<std::string> names(1);
    names.send("kept");
    std::string late = "late";
    EXPECT_THROW(names.send(std::move(late), weft::timeout(5ms)), weft::timeout_error);
    EXPECT_EQ(late, "late") << "a timed-out send must not consume its value";
    EXPECT_EQ(names.size(), 1u);
    EXPECT_EQ(names.recv(), "kept");
    EXPECT_FALSE(names.try_recv().has_value()) << "the timed-out value was delivered after all";
    names.send(std::move(late), weft::timeout(5s));
    EXPECT_EQ(names.recv(), "late");
  });
}

TEST(Channel, ANewSenderNeverOvertakesQueuedSenders) {
  std::vector<int> received;
  run_clean(
      [&] {
        weft::channel<int> queue(1);
        queue.send(0);
        std::vector<weft::task<void>> senders;
        for (int value = 1; value <= 4; ++value) {
          senders.push_back(weft::spawn([&, value] { queue.send(value); }));
        }
        weft::yield();  // they queue in order behind the full buffer
        received.push_back(queue.recv());
        // The freed slot went to the oldest blocked sender: no room for a newcomer.
        EXPECT_FALSE(queue.try_send(99));
        EXPECT_EQ(queue.size(), 1u);
        for (int round = 0; round < 4; ++round) {
          received.push_back(queue.recv());
        }
        for (auto& sender : senders) {
          sender.await();
        }
      },
      fifo_options());
  EXPECT_EQ(received, (std::vector<int>{0, 1, 2, 3, 4}));
}

TEST(Channel, QueuedReceiversAreServedInArrivalOrderAndNotOvertaken) {
  std::vector<std::pair<int, int>> deliveries;  // (receiver, value)
  run_clean(
      [&] {
        weft::channel<int> queue(4);
        std::vector<weft::task<void>> receivers;
        for (int who = 0; who < 3; ++who) {
          receivers.push_back(
              weft::spawn([&, who] { deliveries.emplace_back(who, queue.recv()); }));
        }
        weft::yield();
        for (int value = 10; value < 13; ++value) {
          queue.send(value);
          // The value went to a queued receiver, not into the buffer for anyone to grab.
          EXPECT_FALSE(queue.try_recv().has_value());
        }
        for (auto& receiver : receivers) {
          receiver.await();
        }
      },
      fifo_options());
  EXPECT_EQ(deliveries, (std::vector<std::pair<int, int>>{{0, 10}, {1, 11}, {2, 12}}));
}

TEST(Channel, ManySendersAndReceiversKeepEachSendersOrderAndLoseNothing) {
  static constexpr int senders_count = 4;
  static constexpr int per_sender = 500;
  std::map<int, std::vector<int>> seen_by_sender;  // sender -> its values in arrival order
  run_clean([&] {
    weft::channel<int> queue(3);
    std::vector<std::vector<int>> per_receiver(3);
    std::vector<weft::task<void>> coroutines;
    for (int sender = 0; sender < senders_count; ++sender) {
      coroutines.push_back(weft::spawn([&, sender] {
        for (int index = 0; index < per_sender; ++index) {
          queue.send(sender * per_sender + index);
          if (index % 7 == 0) {
            weft::yield();
          }
        }
      }));
    }
    for (auto& received : per_receiver) {
      coroutines.push_back(weft::spawn([&] {
        for (int value : queue) {
          received.push_back(value);
        }
      }));
    }
    for (int sender = 0; sender < senders_count; ++sender) {
      coroutines[sender].await();
    }
    queue.close("all sent");
    for (auto& coroutine : coroutines) {
      coroutine.await();
    }
    // Each receiver sees every sender's values in increasing order (FIFO end to end).
    for (const auto& received : per_receiver) {
      std::map<int, int> last;
      for (int value : received) {
        int sender = value / per_sender;
        auto previous = last.find(sender);
        EXPECT_TRUE(previous == last.end() || previous->second < value)
            << "value " << value << " arrived after " << previous->second;
        last[sender] = value;
        seen_by_sender[sender].push_back(value);
      }
    }
  });
  for (int sender = 0; sender < senders_count; ++sender) {
    std::vector<int> values = seen_by_sender[sender];
    std::sort(values.begin(), values.end());
    std::vector<int> expected(per_sender);
    std::iota(expected.begin(), expected.end(), sender * per_sender);
    EXPECT_EQ(values, expected) << "sender " << sender << ": values lost or duplicated";
  }
}

TEST(Channel, CancelledReceiverPassesItsValueToTheNextReceiver) {
  run_clean(
      [&] {
        weft::channel<int> queue(0);
        auto first = weft::spawn([&] { return queue.recv(); });
        auto second = weft::spawn([&] { return queue.recv(); });
        weft::yield();
        queue.send(7);            // handed to the first receiver ...
        first.cancel("leaving");  // ... which is cancelled before it runs
        EXPECT_THROW(first.await(), weft::cancelled_error);
        EXPECT_EQ(second.await(), 7);
        EXPECT_EQ(queue.size(), 0u);
      },
      fifo_options());
}

TEST(Channel, CancelledReceiverPutsItsValueBackAtTheFrontOfTheBuffer) {
  std::vector<int> received;
  run_clean(
      [&] {
        weft::channel<int> queue(1);
        auto receiver = weft::spawn([&] { return queue.recv(); });
        weft::yield();  // the receiver waits on the empty buffer
        queue.send(1);  // handed to the receiver, which has not run yet
        queue.send(2);  // buffered behind it
        receiver.cancel("leaving");
        EXPECT_THROW(receiver.await(), weft::cancelled_error);
        // 1 was sent first, so it goes back in front of 2 (even past the capacity of 1).
        EXPECT_EQ(queue.size(), 2u);
        EXPECT_FALSE(queue.try_send(3)) << "the overfull buffer must not take more";
        received.push_back(queue.recv());
        received.push_back(queue.recv());
      },
      fifo_options());
  EXPECT_EQ(received, (std::vector<int>{1, 2}));
}

TEST(Channel, CancelledReceiversLoseAndDuplicateNothing) {
  static constexpr int values = 2000;
  std::int64_t received_sum = 0;
  int received_count = 0;
  int cancelled = 0;
  run_clean([&] {
    weft::channel<int> queue(2);
    auto producer = weft::spawn([&] {
      for (int value = 1; value <= values; ++value) {
        queue.send(value);
      }
      queue.close("done");
    });
    std::vector<weft::task<void>> receivers;
    for (int index = 0; index < 4; ++index) {
      receivers.push_back(weft::spawn([&] {
        for (int value : queue) {
          received_sum += value;
          ++received_count;
        }
      }));
    }
    // Keep cancelling receivers (ready or waiting) and replacing them, while values flow.
    for (int round = 0; round < 200 && !queue.closed(); ++round) {
      weft::yield();
      std::size_t victim = static_cast<std::size_t>(round) % receivers.size();
      receivers[victim].cancel("churn");
      try {
        receivers[victim].await();
      } catch (const weft::cancelled_error&) {
        ++cancelled;
      }
      receivers[victim] = weft::spawn([&] {
        for (int value : queue) {
          received_sum += value;
          ++received_count;
        }
      });
    }
    producer.await();
    for (auto& receiver : receivers) {
      receiver.await();
    }
  });
  EXPECT_GT(cancelled, 0);
  EXPECT_EQ(received_count, values);
  EXPECT_EQ(received_sum, std::int64_t{values} * (values + 1) / 2);
}

TEST(Channel, SenderCancelledAfterItsValueWasTakenCompletesTheSend) {
  int sends_returned = 0;
  bool cancelled_later = false;
  run_clean(
      [&] {
        weft::channel<int> handshake(0);
        auto sender = weft::spawn([&] {
          handshake.send(5);
          ++sends_returned;
          try {
            weft::yield();  // the deferred cancellation surfaces here
          } catch (const weft::cancelled_error& error) {
            EXPECT_EQ(error.reason(), "too late");
            cancelled_later = true;
            throw;
          }
        });
        weft::yield();                       // the sender blocks
        EXPECT_EQ(handshake.try_recv(), 5);  // takes its value and releases it ...
        sender.cancel("too late");           // ... before it runs
        EXPECT_THROW(sender.await(), weft::cancelled_error);
        EXPECT_FALSE(handshake.try_recv().has_value()) << "the value was delivered twice";
      },
      fifo_options());
  EXPECT_EQ(sends_returned, 1);
  EXPECT_TRUE(cancelled_later);
}

TEST(Channel, ARecvNoProducerCanSatisfyEndsInADeadlockThatNamesTheChannel) {
  weft::run_options options;
  std::string reported;
  options.deadlock_reporter = [&](std::string_view report) { reported = report; };
  weft::scheduler scheduler(std::move(options));
  weft_test::clean_end_check check(scheduler);
  std::string recv_error;
  try {
    scheduler.run([&] {
      weft::channel<int> nobody_sends(0);
      try {
        nobody_sends.recv();
      } catch (const weft::cancelled_error& error) {
        recv_error = error.reason();
        throw;
      }
    });
    ADD_FAILURE() << "run returned despite the deadlock";
  } catch (const weft::deadlock_error& error) {
    EXPECT_EQ(error.waiting(), 1u);
    EXPECT_TRUE(contains(error.report(), "channel<int> 0x")) << error.report();
    EXPECT_TRUE(contains(error.report(), "recv: capacity 0, 0 buffered, 0 senders waiting"))
        << error.report();
  }
  EXPECT_EQ(recv_error, "deadlock");
  EXPECT_EQ(reported.empty(), false);
}

TEST(Channel, ASendNoReceiverCanSatisfyIsADeadlockToo) {
  weft::run_options options;
  options.deadlock_reporter = [](std::string_view) {};
  weft::scheduler scheduler(std::move(options));
  weft_test::clean_end_check check(scheduler);
  try {
    scheduler.run([&] {
      weft::channel<std::string> full(1);
      full.send("one");
      full.send("two");
    });
    ADD_FAILURE() << "run returned despite the deadlock";
  } catch (const weft::deadlock_error& error) {
    EXPECT_TRUE(contains(error.report(), "send: capacity 1, 1 buffered, 0 receivers waiting"))
        << error.report();
  }
}

TEST(Channel, CountsBalanceAcrossProducersAndConsumers) {
  static constexpr int producers = 5;
  static constexpr int per_producer = 1000;
  std::int64_t sent_sum = 0;
  std::int64_t received_sum = 0;
  int received_count = 0;
  run_clean([&] {
    weft::channel<int> work(8);
    std::vector<weft::task<void>> producer_tasks;
    for (int producer = 0; producer < producers; ++producer) {
      producer_tasks.push_back(weft::spawn([&, producer] {
        for (int index = 1; index <= per_producer; ++index) {
          int value = producer * 100000 + index;
          work.send(value);
          sent_sum += value;
        }
      }));
    }
    std::vector<weft::task<void>> consumers;
    for (int consumer = 0; consumer < 3; ++consumer) {
      consumers.push_back(weft::spawn([&] {
        while (true) {
          try {
            received_sum += work.recv();
            ++received_count;
          } catch (const weft::channel_closed_error&) {
            return;
          }
        }
      }));
    }
    for (auto& producer : producer_tasks) {
      producer.await();
    }
    work.close("producers done");
    for (auto& consumer : consumers) {
      consumer.await();
    }
    EXPECT_EQ(work.size(), 0u);
  });
  EXPECT_EQ(received_count, producers * per_producer);
  EXPECT_EQ(received_sum, sent_sum);
}

TEST(Channel, CopiesOfTheHandleShareOneChannelThatOutlivesTheCreator) {
  run_clean([&] {
    weft::task<int> receiver;
    {
      weft::channel<int> original(1);
      weft::channel<int> copy = original;
      EXPECT_TRUE(copy == original);
      EXPECT_FALSE(copy == weft::channel<int>(1));
      receiver = weft::spawn([copy]() mutable { return copy.recv(); });
      weft::yield();  // the receiver waits; the handles here go away
      original.send(11);
    }
    EXPECT_EQ(receiver.await(), 11);
  });
}

// --- channels owned by a scope -----------------------------------------------------------------

// Waits on ch's recv (or send, when it is full) and records how that ended.
struct blocked_side {
  bool waiting = false;
  std::string outcome;
};

TEST(Channel, ScopeOwnedChannelClosesWithTheScopesReasonAndWakesBothSides) {
  run_clean([] {
    weft::scope producers("producers");
    weft::channel<int> empty(0, {.owner = &producers});
    weft::channel<int> full(1, {.owner = &producers});
    full.send(1);
    blocked_side receiver;
    blocked_side sender;
    auto receiving = weft::spawn([&] {
      receiver.waiting = true;
      try {
        empty.recv();
        receiver.outcome = "received";
      } catch (const weft::channel_closed_error& closed) {
        receiver.outcome = "closed: " + closed.reason();
      }
    });
    auto sending = weft::spawn([&] {
      sender.waiting = true;
      try {
        full.send(2);
        sender.outcome = "sent";
      } catch (const weft::channel_closed_error& closed) {
        sender.outcome = "closed: " + closed.reason();
      }
    });
    weft_test::yield_until([&] { return receiver.waiting && sender.waiting; });
    weft::yield();
    producers.cancel("producers shut down");
    receiving.await();
    sending.await();
    EXPECT_EQ(receiver.outcome, "closed: producers shut down");
    EXPECT_EQ(sender.outcome, "closed: producers shut down");
    EXPECT_TRUE(empty.closed());
    EXPECT_EQ(full.recv(), 1);  // buffered before the close: still receivable
    EXPECT_THROW(full.recv(), weft::channel_closed_error);
  });
}

TEST(Channel, ScopeOwnedChannelsOfOtherScopesAndOfTheParentAreUnaffected) {
  run_clean([] {
    weft::scope parent("parent");
    weft::scope child(parent, "child");
    weft::scope sibling(parent, "sibling");
    weft::channel<int> of_parent(1, {.owner = &parent});
    weft::channel<int> of_child(1, {.owner = &child});
    weft::channel<int> of_sibling(1, {.owner = &sibling});
    weft::channel<int> unowned(1);
    child.cancel("child done");
    EXPECT_TRUE(of_child.closed());
    EXPECT_FALSE(of_parent.closed());
    EXPECT_FALSE(of_sibling.closed());
    EXPECT_FALSE(unowned.closed());
    parent.cancel("all done");  // reaches the sibling
    EXPECT_TRUE(of_parent.closed());
    EXPECT_TRUE(of_sibling.closed());
    EXPECT_FALSE(unowned.closed());
    try {
      of_sibling.send(1);
      ADD_FAILURE() << "send on a closed channel succeeded";
    } catch (const weft::channel_closed_error& closed) {
      EXPECT_EQ(closed.reason(), "all done");
    }
  });
}

TEST(Channel, ScopeOwnedChannelIsClosedByTheScopesFailureAndItsCoroutinesAreCancelled) {
  run_clean([] {
    weft::scope workers("workers");
    weft::channel<int> jobs(0, {.owner = &workers});
    std::string member_saw;
    bool receiving = false;
    workers.spawn([&] {
      receiving = true;
      try {
        jobs.recv();
      } catch (const weft::cancelled_error&) {
        member_saw = "cancelled";
        throw;
      } catch (const weft::channel_closed_error&) {
        member_saw = "closed";
        throw;
      }
    });
    workers.spawn([&] {
      weft_test::yield_until([&] { return receiving; });
      weft::yield();
      throw std::runtime_error("worker failed");
    });
    EXPECT_THROW(workers.join(), std::runtime_error);
    EXPECT_EQ(member_saw, "cancelled");
    try {
      jobs.recv();
      ADD_FAILURE() << "recv on a closed channel succeeded";
    } catch (const weft::channel_closed_error& closed) {
      EXPECT_TRUE(contains(closed.reason(), "scope 'workers' failed: worker failed"))
          << closed.reason();
    }
  });
}

TEST(Channel, ScopeOwnedChannelOutlivesItsScopeClosedAndUntied) {
  run_clean([] {
    auto survivor = std::make_optional<weft::channel<std::string>>(4);
    {
      weft::scope short_lived("short-lived");
      survivor.emplace(4, weft::channel_options{.owner = &short_lived});
      survivor->send("before");
    }
    EXPECT_TRUE(survivor->closed());
    EXPECT_EQ(survivor->recv(), "before");
    try {
      survivor->recv();
      ADD_FAILURE() << "recv on a drained closed channel succeeded";
    } catch (const weft::channel_closed_error& closed) {
      EXPECT_EQ(closed.reason(), "scope 'short-lived' destroyed");
    }
    survivor.reset();  // the last handle: nothing may still point at the gone scope
  });
}

TEST(Channel, ChannelDestroyedBeforeItsScopeUntiesItself) {
  run_clean([] {
    weft::scope owner("owner");
    {
      weft::channel<int> gone(1, {.owner = &owner});
      gone.send(1);
    }
    auto lives_in_a_coroutine = weft::spawn([&] {
      weft::channel<int> local(1, {.owner = &owner});
      local.send(2);
      return local.recv();
    });
    EXPECT_EQ(lives_in_a_coroutine.await(), 2);
    owner.cancel("after the channels");  // must not touch the freed channels (ASan)
    weft::channel<int> born_closed(1, {.owner = &owner});
    EXPECT_TRUE(born_closed.closed());
    try {
      born_closed.send(3);
      ADD_FAILURE() << "send on a channel of a closed scope succeeded";
    } catch (const weft::channel_closed_error& closed) {
      EXPECT_EQ(closed.reason(), "after the channels");
    }
    auto unbounded = weft::channel<int>::unbounded({.owner = &owner});
    EXPECT_TRUE(unbounded.closed());
  });
}

TEST(Channel, ABlockingRecvOutsideACoroutineIsALogicError) {
  weft::channel<int> numbers(1);
  EXPECT_TRUE(numbers.try_send(1));  // non-blocking calls work anywhere on the thread
  EXPECT_EQ(numbers.recv(), 1);      // so does a recv that need not wait
  try {
    numbers.recv();
    FAIL() << "expected std::logic_error";
  } catch (const std::logic_error& error) {
    EXPECT_TRUE(contains(error.what(), "outside a coroutine")) << error.what();
  }
}

}  // namespace

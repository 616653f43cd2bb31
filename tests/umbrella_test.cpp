// A program that includes only weft/weft.hpp: every public name a user reaches for must be there
// (scripts/check-layers also checks that the umbrella lists every public header). Each test uses
// names from several headers and checks what they did, so a header dropped from the umbrella
// breaks the build and a wrong result fails the test.
#include "weft/weft.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <type_traits>
#include <vector>

using namespace std::chrono_literals;

namespace {

TEST(Umbrella, CoroutinesChannelsAndCombinatorsWorkThroughTheUmbrellaAlone) {
  std::vector<int> seen = weft::run([] {
    weft::channel<int> numbers(2);
    weft::wait_group done;
    done.add(1);
    auto producer = weft::spawn([&] {
      for (int value = 1; value <= 3; ++value) {
        numbers.send(value);
      }
      numbers.close();
      done.done();
    });
    std::vector<int> received;
    for (int value : numbers) {
      received.push_back(value);
    }
    done.wait();
    producer.await();
    auto [a, b] = weft::await_all(weft::spawn([] { return 10; }), weft::spawn([] { return 20; }));
    received.push_back(a.value() + b.value());
    return received;
  });
  EXPECT_EQ(seen, (std::vector<int>{1, 2, 3, 30}));
}

TEST(Umbrella, TimeoutsLocksScopesAndTimersWorkThroughTheUmbrellaAlone) {
  int fired = weft::run([] {
    weft::mutex lock;
    weft::semaphore slots(1);
    weft::event ready;
    int count = 0;
    {
      weft::scope children;
      children.spawn([&] {
        std::lock_guard<weft::mutex> held(lock);
        ++count;
        ready.set();
      });
      ready.wait(weft::timeout(10s));
      children.join();
    }
    slots.acquire();
    slots.release();
    weft::timer alarm;
    alarm.start(1ms, weft::unique_function<void()>([&] { ++count; }));
    weft::sleep_for(20ms);
    EXPECT_TRUE(ready.is_set());
    return count;
  });
  EXPECT_EQ(fired, 2);
}

TEST(Umbrella, NetServerAndClientWorkThroughTheUmbrellaAlone) {
  std::string reply = weft::run([] {
    weft::net::tcp_server server({.host = "127.0.0.1", .protocol = weft::net::frame()});
    server.listen();
    auto serving = weft::spawn([&] {
      server.serve([](weft::net::connection& c) {
        while (auto m = c.receive()) {
          c.send(m->data + "!");
        }
      });
    });
    auto client = weft::net::connect("127.0.0.1", server.port(),
                                     weft::net::connection_options{.protocol = weft::net::frame()});
    client->send("hi");
    auto answer = client->receive(weft::timeout(10s));
    client->close();
    server.stop(1000ms);
    serving.await();
    return answer ? answer->data : std::string();
  });
  EXPECT_EQ(reply, "hi!");
  static_assert(std::is_base_of_v<weft::net::protocol_error, weft::net::message_too_big_error>);
  EXPECT_STREQ(weft::net::text()->name(), "text");
}

TEST(Umbrella, ErrorsAndPublicTypesAreReachable) {
  // Types from the headers with nothing to run here without a server or a process.
  static_assert(std::is_base_of_v<std::runtime_error, weft::error>);
  static_assert(std::is_base_of_v<weft::error, weft::io_error>);
  static_assert(std::is_class_v<weft::pg::connection>);
  static_assert(std::is_class_v<weft::pg::pool>);
  static_assert(std::is_class_v<weft::circuit_breaker>);
  static_assert(std::is_class_v<weft::procs::runtime>);
  static_assert(std::is_class_v<weft::subprocess::options>);
  static_assert(std::is_class_v<weft::stack_options>);
  EXPECT_FALSE(weft::timeout::never().limited());
  EXPECT_TRUE(weft::timeout(1s).limited());
}

}  // namespace

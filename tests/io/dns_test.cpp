// weft::dns: resolution on the resolver's thread pool. No network here: only localhost and
// numeric addresses.
#include <netinet/in.h>
#include <sys/socket.h>
#include <uv.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <future>
#include <string>
#include <vector>

#include "test_support.hpp"
#include "weft/io/dns.hpp"

namespace {

using namespace std::chrono_literals;
using weft_test::run_clean;

TEST(Dns, LocalhostResolvesToALoopbackAddress) {
  run_clean([] {
    auto addresses = weft::dns::resolve("localhost", 8080, weft::timeout(30s));
    ASSERT_FALSE(addresses.empty());
    for (const auto& address : addresses) {
      EXPECT_EQ(address.port, 8080);
      EXPECT_TRUE((address.family == AF_INET && address.ip == "127.0.0.1") ||
                  (address.family == AF_INET6 && address.ip == "::1"))
          << address.ip;
    }
  });
}

TEST(Dns, NumericAddressesAndServicesResolveAsGiven) {
  run_clean([] {
    auto ipv4 = weft::dns::resolve("10.1.2.3", "443");
    ASSERT_EQ(ipv4.size(), 1u);
    EXPECT_EQ(ipv4[0], (weft::dns::address{AF_INET, "10.1.2.3", 443}));
    auto ipv6 = weft::dns::resolve("::1");
    ASSERT_EQ(ipv6.size(), 1u);
    EXPECT_EQ(ipv6[0], (weft::dns::address{AF_INET6, "::1", 0}));
  });
}

TEST(Dns, ReverseOfTheLoopbackAddressIsLocalhost) {
  run_clean([] { EXPECT_EQ(weft::dns::reverse("127.0.0.1", weft::timeout(30s)), "localhost"); });
}

TEST(Dns, ReverseOfSomethingThatIsNoAddressIsAnIoErrorNamingIt) {
  run_clean([] {
    try {
      weft::dns::reverse("not-an-ip");
      ADD_FAILURE() << "reverse of a name must fail";
    } catch (const weft::io_error& error) {
      EXPECT_EQ(error.uv_code(), UV_EINVAL);
      EXPECT_EQ(std::string(error.what()), "reverse not-an-ip: invalid argument");
    }
  });
}

TEST(Dns, AnUnknownServiceIsAnIoErrorNamingHostAndService) {
  run_clean([] {
    try {
      weft::dns::resolve("localhost", "no-such-service-here");
      ADD_FAILURE() << "an unknown service must fail";
    } catch (const weft::io_error& error) {
      EXPECT_EQ(error.operation(), "getaddrinfo");
      EXPECT_EQ(error.subject(), "localhost:no-such-service-here");
    }
  });
}

TEST(Dns, CancelledLookupsLeaveTheRunClean) {
  // Their requests may be queued or running: either way they must free themselves.
  run_clean([] {
    std::vector<weft::task<void>> lookups;
    for (int index = 0; index < 16; ++index) {
      lookups.push_back(weft::spawn([] { weft::dns::resolve("localhost", 80); }));
    }
    weft::yield();
    for (auto& lookup : lookups) {
      lookup.cancel("not needed");
    }
    for (auto& lookup : lookups) {
      try {
        lookup.await();
      } catch (const weft::cancelled_error&) {
      }
    }
  });
}

}  // namespace

namespace {

TEST(Dns, ALookupStuckBehindABusyPoolTimesOut) {
  // Every worker of libuv's pool (4 by default) is held, so the lookup stays queued: the timeout
  // must abandon it (uv_cancel) and the run still end clean.
  constexpr int workers = 4;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> started{0};
  run_clean([&] {
    std::vector<weft::task<void>> blockers;
    for (int index = 0; index < workers; ++index) {
      blockers.push_back(weft::spawn([&] {
        weft::thread_pool::run([&] {
          ++started;
          released.wait();
        });
      }));
    }
    ASSERT_TRUE(weft_test::yield_until([&] { return started.load() == workers; }));
    try {
      weft::dns::resolve("localhost", 80, weft::timeout(20ms));
      ADD_FAILURE() << "the lookup cannot run while the pool is busy";
    } catch (const weft::timeout_error& error) {
      EXPECT_NE(std::string(error.what()).find("getaddrinfo localhost:80"), std::string::npos)
          << error.what();
    }
    release.set_value();
    for (auto& blocker : blockers) {
      blocker.await();
    }
  });
}

}  // namespace

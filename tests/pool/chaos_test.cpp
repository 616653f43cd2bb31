// weft::pool under random load: workers acquire (with timeouts), hold across suspensions,
// release, discard and get cancelled while the factory, the hooks and the healthcheck fail at
// random and the breaker opens and closes. The accounting invariant is checked at every step by
// every worker and by an observer, in random scheduling order for several seeds; at the end the
// pool has destroyed everything it created.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <vector>

#include "pool_fixture.hpp"
#include "test_support.hpp"
#include "weft/pool/pool.hpp"

namespace {

using namespace std::chrono_literals;
using pool_test::backend;
using pool_test::connection;

class dice {
 public:
  explicit dice(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t value = (state_ += 0x9e3779b97f4a7c15ULL);
    value = (value ^ (value >> 30)) * 0xbf58476d1ce4e5b9ULL;
    value = (value ^ (value >> 27)) * 0x94d049bb133111ebULL;
    return value ^ (value >> 31);
  }
  bool one_in(std::uint64_t sides) { return next() % sides == 0; }
  std::uint64_t below(std::uint64_t limit) { return next() % limit; }

 private:
  std::uint64_t state_;
};

void check_invariant(const weft::pool_stats& stats, const backend& server) {
  ASSERT_EQ(stats.count(), stats.idle + stats.active);
  ASSERT_LE(stats.count() + stats.reserved, stats.max);
  ASSERT_EQ(static_cast<std::size_t>(server.alive), stats.count());
  ASSERT_EQ(stats.created - stats.destroyed, stats.count());
}

void run_chaos(std::uint64_t seed) {
  SCOPED_TRACE("seed " + std::to_string(seed));
  backend server;
  dice random(seed);
  std::uint64_t served = 0;
  weft_test::run_clean(
      [&] {
        weft::pool_options<connection> options = server.options(3, 1);
        auto real_factory = options.factory;
        options.factory = [&, real_factory] {
          if (random.one_in(3)) {
            weft::yield();
          }
          if (random.one_in(8)) {
            throw std::runtime_error("flaky connect");
          }
          return real_factory();
        };
        options.before_acquire = [&](connection&) { return !random.one_in(10); };
        options.before_release = [&](connection&) { return !random.one_in(10); };
        options.healthcheck = [&](connection&) { return !random.one_in(4); };
        options.healthcheck_interval = 1ms;
        options.breaker_strategy = std::make_shared<weft::consecutive_failures>(4, 1ms);
        weft::pool<connection> connections(std::move(options));
        bool done = false;
        auto observer = weft::spawn([&] {
          while (!done) {
            check_invariant(connections.stats(), server);
            weft::yield();
          }
        });
        auto one_use = [&] {
          try {
            weft::lease<connection> held =
                random.one_in(5) ? connections.acquire(weft::timeout(0ms)) : connections.acquire();
            check_invariant(connections.stats(), server);
            ++served;
            for (std::uint64_t hold = random.below(3); hold > 0; --hold) {
              weft::yield();
            }
            if (random.one_in(8)) {
              weft::sleep_for(300us);  // long enough for healthchecks and timers to run
            }
            switch (random.below(6)) {
              case 0:
                held.discard();
                break;
              case 1:
                held.discard(std::make_exception_ptr(std::runtime_error("query failed")));
                break;
              default:
                break;  // released by the lease's destructor
            }
          } catch (const weft::timeout_error&) {
          } catch (const weft::service_unavailable_error&) {
            weft::sleep_for(1ms);
          } catch (const std::runtime_error&) {  // the flaky factory
          }
          check_invariant(connections.stats(), server);
        };
        std::vector<weft::task<void>> workers;
        for (int worker = 0; worker < 8; ++worker) {
          workers.push_back(weft::spawn([&] {
            for (int round = 0; round < 30; ++round) {
              if (random.one_in(6)) {
                // A use that gets cancelled wherever it happens to be.
                auto doomed = weft::spawn(one_use);
                for (std::uint64_t wait = random.below(3); wait > 0; --wait) {
                  weft::yield();
                }
                doomed.cancel();
                try {
                  doomed.await();
                } catch (const weft::cancelled_error&) {
                }
              } else {
                one_use();
              }
              check_invariant(connections.stats(), server);
            }
          }));
        }
        for (auto& worker : workers) {
          worker.await();
        }
        done = true;
        observer.await();
        // The background maintenance may be half-way through topping the pool up to its min
        // (its factory call yields): that reservation is in flight, not leaked, and ends within
        // a yield or two. A leaked one never does.
        EXPECT_TRUE(weft_test::yield_until([&] { return connections.stats().reserved == 0; }))
            << "a reservation was never given back";
        weft::pool_stats stats = connections.stats();
        EXPECT_EQ(stats.waiters, 0u);
        EXPECT_EQ(stats.active, 0u) << "every lease came back";
        connections.close();
        EXPECT_EQ(connections.stats().count(), 0u);
      },
      weft_test::random_options(seed));
  EXPECT_EQ(server.alive, 0) << "everything created was destroyed";
  EXPECT_GT(served, 0u);
}

TEST(PoolChaos, TheAccountingHoldsAtEveryStepUnderRandomOrderAndFailures) {
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    run_chaos(seed);
  }
}

}  // namespace

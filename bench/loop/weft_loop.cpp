// bench_loop_weft: weft's program of suite loop, the callback-style event loop
// (weft::loop::event_loop) against the raw C libraries (bench/peers/loop/). Each benchmark runs
// on a fresh event_loop whose run() starts its own scheduler (the standalone mode), on whichever
// driver the scheduler picks (WEFT_DRIVER). Every peer does the same work the idiomatic way of
// its library; the shapes below are the contract.
//
// timers_10m: libuv's million_timers shape, as in suite io (N = 10M, 100k with --smoke): timer i
//   is a one-shot delay of 1 + i * 10 / N ms whose callback increments a counter, all set before
//   run(). The value is ms from just before the first timer is set until run() returned (the
//   last one fired). All N must fire.
// timer_churn: N one-shot timers (1M, 10k with --smoke), timer i set with a delay of
//   60000 + i * 10 / N ms (none can fire), then every one cancelled in the order they were
//   set, then run() (it returns at once). The value is ms from just before the first is set
//   until run() returned, as the peers (bench/peers/loop/loop_peer.h).
// loop_tick: one deferred callback that defers itself again, N times (10M, 100k with --smoke):
//   one callback per tick and nothing else to do. The value is ticks per second over run().
// fd_pingpong: a unix socketpair (SOCK_STREAM, both ends non-blocking). Each end has a persistent
//   readable callback that reads the byte and registers a writable callback on its own end; the
//   writable callback writes one byte and removes itself. A round trip: A writes, B reads and
//   writes back, A reads. Round trips per second over the suite's measuring window (0.25 s of
//   warm-up, then 2 s; 0.01 s and 0.05 s with --smoke), as the peers; then the loop is stopped.
// many_fds: fd_pingpong while 10,000 other fds (5,000 socketpairs, both ends; 50 pairs with
//   --smoke, as the peers) are registered readable and stay idle. Same window; round trips
//   per second.
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <weft/weft.hpp>

#include "bench_util.hpp"

namespace {

using weft::loop::event_loop;

void fail(const char* what) {
  std::perror(what);
  std::exit(1);
}

void timers_10m(bool smoke) {
  const std::uint64_t count = smoke ? 100'000 : 10'000'000;
  std::uint64_t fired = 0;
  event_loop loop;
  auto start = bench::clock::now();
  for (std::uint64_t index = 0; index < count; ++index) {
    auto after = std::chrono::milliseconds(1 + index * 10 / count);
    loop.delay(after, [&fired] { ++fired; });
  }
  loop.run();
  double elapsed = bench::milliseconds_between(start, bench::clock::now());
  if (fired != count) {
    std::fprintf(stderr, "timers_10m: %llu of %llu timers fired\n",
                 static_cast<unsigned long long>(fired), static_cast<unsigned long long>(count));
    std::exit(1);
  }
  bench::report("timers_10m", "ms", elapsed);
}

void timer_churn(bool smoke) {
  const std::uint64_t count = smoke ? 10'000 : 1'000'000;
  std::vector<weft::loop::watcher_id> ids(count);
  bool fired = false;
  event_loop loop;
  auto start = bench::clock::now();
  for (std::uint64_t index = 0; index < count; ++index) {
    auto after = std::chrono::milliseconds(60'000 + index * 10 / count);
    ids[index] = loop.delay(after, [&fired] { fired = true; });
  }
  for (weft::loop::watcher_id id : ids) {
    if (!loop.off_delay(id)) {
      std::fprintf(stderr, "timer_churn: a timer could not be cancelled\n");
      std::exit(1);
    }
  }
  loop.run();
  double elapsed = bench::milliseconds_between(start, bench::clock::now());
  if (fired || loop.timer_count() != 0) {
    std::fprintf(stderr, "timer_churn: a cancelled timer fired or was left behind\n");
    std::exit(1);
  }
  bench::report("timer_churn", "ms", elapsed);
}

void loop_tick(bool smoke) {
  const std::uint64_t count = smoke ? 100'000 : 10'000'000;
  std::uint64_t ticks = 0;
  event_loop loop;
  struct again {
    event_loop& loop;
    std::uint64_t& ticks;
    std::uint64_t count;
    void operator()() const {
      if (++ticks < count) {
        loop.defer(again{loop, ticks, count});
      }
    }
  };
  loop.defer(again{loop, ticks, count});
  auto start = bench::clock::now();
  loop.run();
  double seconds = bench::nanoseconds_between(start, bench::clock::now()) / 1e9;
  if (ticks != count) {
    std::fprintf(stderr, "loop_tick: %llu ticks\n", static_cast<unsigned long long>(ticks));
    std::exit(1);
  }
  bench::report("loop_tick", "ticks/s", static_cast<double>(count) / seconds);
}

// The ping-pong of fd_pingpong and many_fds on loop; returns round trips per second over the
// suite's measuring window (bench/loop/README.md, peer_meter_* in loop_peer.h): counting
// starts at the first round trip at least 0.25 s (0.01 s) after the loop started and ends at
// the first at least 2 s (0.05 s) after that, the clock read at every round trip.
double pingpong(event_loop& loop, bool smoke) {
  const auto warmup = std::chrono::duration<double>(smoke ? 0.01 : 0.25);
  const auto window = std::chrono::duration<double>(smoke ? 0.05 : 2.0);
  int ends[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, ends) != 0) {
    fail("socketpair");
  }
  std::uint64_t counted = 0;
  bool counting = false;
  bench::clock::time_point warmup_end{};
  bench::clock::time_point start{};
  bench::clock::time_point end{};
  auto writable = [&loop](int fd) {
    return [&loop, fd] {
      char byte = 'x';
      if (::write(fd, &byte, 1) != 1) {
        fail("write");
      }
      loop.off_writable(fd);
    };
  };
  for (int index = 0; index < 2; ++index) {
    int fd = ends[index];
    bool counts = index == 0;
    loop.on_readable(fd, [&, fd, counts, writable] {
      char byte;
      ssize_t got = ::read(fd, &byte, 1);
      if (got != 1) {
        if (got < 0 && errno == EAGAIN) {
          return;
        }
        fail("read");
      }
      if (counts) {  // end A counts a round trip per byte it reads
        auto now = bench::clock::now();
        if (counting) {
          ++counted;
          if (now - start >= window) {
            end = now;
            loop.off_readable(ends[0]);
            loop.off_readable(ends[1]);
            loop.stop();  // many_fds' idle watchers are still registered
            return;
          }
        } else if (now >= warmup_end) {
          counting = true;
          start = now;
        }
      }
      loop.on_writable(fd, writable(fd));
    });
  }
  loop.on_writable(ends[0], writable(ends[0]));
  warmup_end = bench::clock::now() + std::chrono::duration_cast<bench::clock::duration>(warmup);
  loop.run();
  double seconds = bench::nanoseconds_between(start, end) / 1e9;
  ::close(ends[0]);
  ::close(ends[1]);
  if (counted == 0 || seconds <= 0) {
    std::fprintf(stderr, "pingpong: the measuring window never closed\n");
    std::exit(1);
  }
  return static_cast<double>(counted) / seconds;
}

void fd_pingpong(bool smoke) {
  event_loop loop;
  bench::report("fd_pingpong", "roundtrips/s", pingpong(loop, smoke));
}

void many_fds(bool smoke) {
  const int pairs = smoke ? 50 : 5000;  // as the peers (bench/peers/loop/loop_peer.h)
  // 10,000 idle fds, the active pair, the loop's own and stdio: more than the usual soft limit.
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
  event_loop loop;
  std::vector<int> idle;
  idle.reserve(2 * pairs);
  std::uint64_t woken = 0;
  for (int pair = 0; pair < pairs; ++pair) {
    int ends[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, ends) != 0) {
      fail("socketpair (raise the open-file limit to 10,020 or more)");
    }
    for (int fd : ends) {
      idle.push_back(fd);
      loop.on_readable(fd, [&woken] { ++woken; });
    }
  }
  double rate = pingpong(loop, smoke);
  for (int fd : idle) {
    loop.off_readable(fd);
    ::close(fd);
  }
  if (woken != 0) {
    std::fprintf(stderr, "many_fds: an idle fd's callback ran\n");
    std::exit(1);
  }
  bench::report("many_fds", "roundtrips/s", rate);
}

}  // namespace

int main(int argc, char** argv) {
  bench::arguments arguments = bench::parse_arguments(argc, argv);
  if (arguments.wants("timers_10m")) {
    timers_10m(arguments.smoke);
  }
  if (arguments.wants("timer_churn")) {
    timer_churn(arguments.smoke);
  }
  if (arguments.wants("loop_tick")) {
    loop_tick(arguments.smoke);
  }
  if (arguments.wants("fd_pingpong")) {
    fd_pingpong(arguments.smoke);
  }
  if (arguments.wants("many_fds")) {
    many_fds(arguments.smoke);
  }
  return 0;
}

// bench_io_weft: weft's program of suite io (contract: bench/io/README.md).
//
// Server (`--port N --mode echo|sink`): one scheduler thread. A coroutine accepts on
// 127.0.0.1:N (backlog 511) and spawns one coroutine per connection (TCP_NODELAY on) that runs
// straight-line code: echo reads up to 64 KiB with read_some and write_all's exactly those bytes
// back; sink reads 64 KiB at a time and discards them (the byte count goes to stderr at exit).
// Both close the connection at end of stream and quietly drop a connection that fails. Once
// listening it prints `READY <port>`; it serves until its standard input reaches end of file
// (watched by a coroutine reading fd 0 through weft::pipe), then exits 0.
//
// timers: libuv's million_timers shape (N = 10M, 100k with --smoke; timer i fires after
// 1 + i * 10 / N ms), on weft::timer (callback timers in weft's deadline heap, as uv_timer_t is
// in libuv's): each firing increments a counter. The value is ms from just before the first
// timer is started until the last one fired. All N must fire.
//
// threadpool_roundtrip: from the main coroutine, weft::thread_pool::run of an empty job, one at a
// time: 1,000 warm-up round trips, then 100,000 (2,000 with --smoke) timed; µs per round trip.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <weft/weft.hpp>

#include "bench_util.hpp"

namespace {

std::uint64_t sunk_bytes = 0;

void serve_connection(weft::tcp::stream connection, bool sink) {
  constexpr std::size_t buffer_size = 64 * 1024;
  auto buffer = std::make_unique<char[]>(buffer_size);
  std::span<char> space(buffer.get(), buffer_size);
  try {
    connection.set_nodelay(true);
    while (std::size_t bytes = connection.read_some(space)) {
      if (sink) {
        sunk_bytes += bytes;
      } else {
        connection.write_all(std::string_view(buffer.get(), bytes));
      }
    }
  } catch (const weft::io_error&) {
    // A reset connection: drop it, keep serving the others.
  }
}

// Returns once standard input reaches end of file (at once if it is not a pipe or terminal).
void wait_for_stdin_end() {
  struct stat info {};
  if (fstat(0, &info) != 0 || !(S_ISFIFO(info.st_mode) || S_ISSOCK(info.st_mode) || isatty(0))) {
    return;
  }
  int fd = dup(0);  // the weft::pipe owns and closes its descriptor
  if (fd < 0) {
    return;
  }
  weft::pipe input = weft::pipe::open(fd);
  char buffer[256];
  try {
    while (input.read_some(buffer) > 0) {
    }
  } catch (const weft::io_error&) {
  }
}

int serve(int port, bool sink) {
  weft::scheduler scheduler;
  scheduler.run([&] {
    weft::tcp::listen_options options;
    options.backlog = 511;
    auto listener =
        weft::tcp::listener::listen("127.0.0.1", static_cast<std::uint16_t>(port), options);
    std::printf("READY %u\n", static_cast<unsigned>(listener.port()));
    std::fflush(stdout);
    weft::spawn(
        [&] {
          for (;;) {
            weft::spawn([connection = listener.accept(), sink]() mutable {
              serve_connection(std::move(connection), sink);
            });
          }
        },
        weft::spawn_options{.name = "acceptor", .background = true});
    wait_for_stdin_end();
    if (sink) {
      std::fprintf(stderr, "sink: %llu bytes\n", static_cast<unsigned long long>(sunk_bytes));
    }
    // No graceful close of the connections is needed (contract): leave at once.
    std::fflush(nullptr);
    std::_Exit(0);
  });
  return 0;
}

void timers(bool smoke) {
  const std::uint64_t count = smoke ? 100'000 : 10'000'000;
  weft::scheduler scheduler;
  std::uint64_t fired = 0;
  double elapsed = 0;
  scheduler.run([&] {
    auto all = std::make_unique<weft::timer[]>(count);
    auto start = bench::clock::now();
    bench::clock::time_point last{};
    for (std::uint64_t index = 0; index < count; ++index) {
      all[index].start(std::chrono::milliseconds(1 + index * 10 / count), [&] {
        if (++fired == count) {
          last = bench::clock::now();
        }
      });
    }
    // The timers fire from the reactor tick; main only checks in now and then. The result is
    // taken from the last firing itself, not from when main notices.
    while (fired < count) {
      weft::sleep_for(std::chrono::milliseconds(1));
    }
    elapsed = bench::milliseconds_between(start, last);
  });
  if (fired != count) {
    std::fprintf(stderr, "timers: only %llu of %llu fired\n",
                 static_cast<unsigned long long>(fired), static_cast<unsigned long long>(count));
    std::exit(1);
  }
  bench::report("timers", "ms", elapsed);
}

void threadpool_roundtrip(bool smoke) {
  const int warmup = 1000;
  const int timed = smoke ? 2000 : 100'000;
  weft::scheduler scheduler;
  double elapsed = 0;
  scheduler.run([&] {
    for (int index = 0; index < warmup; ++index) {
      weft::thread_pool::run([] {});
    }
    auto start = bench::clock::now();
    for (int index = 0; index < timed; ++index) {
      weft::thread_pool::run([] {});
    }
    elapsed = bench::nanoseconds_between(start, bench::clock::now());
  });
  bench::report("threadpool_roundtrip", "us", elapsed / 1000.0 / timed);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::strcmp(argv[1], "--port") == 0) {
    bool sink =
        argc >= 5 && std::strcmp(argv[3], "--mode") == 0 && std::strcmp(argv[4], "sink") == 0;
    return serve(std::atoi(argv[2]), sink);
  }
  bench::arguments arguments = bench::parse_arguments(argc, argv);
  if (arguments.wants("timers")) {
    timers(arguments.smoke);
  }
  if (arguments.wants("threadpool_roundtrip")) {
    threadpool_roundtrip(arguments.smoke);
  }
  return 0;
}

// Guide, page 7: weft::loop::event_loop, the callback style of libuv, libev or Workerman, on
// weft's scheduler: timers, fd watchers, signals, defer, and a bridge to coroutines.
#include <weft/weft.hpp>

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>

using namespace std::chrono_literals;

int main() {
  {
    weft::loop::event_loop loop;
    // Timers never fire early: five beats of a 10 ms repeat take at least 50 ms.
    int beats = 0;
    auto start = std::chrono::steady_clock::now();
    weft::loop::watcher_id heartbeat{};
    heartbeat = loop.repeat(10ms, [&] {
      if (++beats < 5) {
        return;
      }
      loop.off_repeat(heartbeat);
      bool on_time = std::chrono::steady_clock::now() - start >= 50ms;
      std::printf("5 heartbeats, %s\n", on_time ? "50 ms or more after the start" : "too early");
      // Callbacks may spawn coroutines: the part that waits goes there, not in the callback.
      weft::spawn([] {
        weft::sleep_for(5ms);
        std::printf("a coroutine spawned by a callback slept and finished\n");
      });
    });

    // An fd watcher: level-triggered, like poll(2).
    int fds[2];
    if (::pipe(fds) != 0) {
      return 1;
    }
    loop.on_readable(fds[0], [&] {
      char buffer[64];
      ssize_t got = ::read(fds[0], buffer, sizeof buffer);
      std::printf("the pipe said: %.*s\n", static_cast<int>(got), buffer);
      loop.off_readable(fds[0]);  // before the fd is closed
    });
    loop.delay(0.02, [&] { (void)::write(fds[1], "hello", 5); });  // seconds, or a duration

    // A SIGINT handler that does not keep run() going by itself.
    weft::loop::watcher_id interrupt = loop.on_signal(SIGINT, [&] { loop.stop(); });
    loop.unreference(interrupt);

    loop.defer([] { std::printf("deferred: runs at the start of the next tick\n"); });

    loop.run();  // returns when no referenced watcher is left and the coroutines ended
    ::close(fds[0]);
    ::close(fds[1]);
    std::printf("the loop ran dry and returned\n");
  }

  // Inside a coroutine, a suspension parks the coroutine until a callback hands it a value.
  weft::run([] {
    weft::loop::event_loop loop;
    auto parked = loop.suspension<int>();
    loop.delay(10ms, [parked]() mutable { parked.resume(42); });
    std::printf("the suspension got %d from a callback\n", parked.suspend());
  });
  return 0;
}

// Guide, page 1: the first coroutines. weft::run makes this thread a scheduler and runs the
// lambda as the main coroutine; spawn starts others; await waits for one to end.
#include <weft/weft.hpp>

#include <cstdio>
#include <stdexcept>

int main() {
  int total = weft::run([] {
    auto counter = weft::spawn(
        [] {
          int sum = 0;
          for (int step = 1; step <= 3; ++step) {
            std::printf("counter: step %d\n", step);
            sum += step;
            weft::yield();  // let the other ready coroutines run once
          }
          return sum;
        },
        {.name = "counter"});
    auto greeter = weft::spawn(
        [] { std::printf("greeter: hello from '%s'\n", weft::this_coroutine::name().c_str()); },
        {.name = "greeter"});
    // Spawning is lazy: neither coroutine has run yet. They start when main suspends.
    std::printf("main: spawned two coroutines\n");

    int sum = counter.await();  // suspends main until counter returns
    std::printf("main: counter returned %d\n", sum);
    greeter.await();  // already finished: returns at once

    auto failing = weft::spawn([]() -> int { throw std::runtime_error("no answer today"); });
    try {
      failing.await();  // the coroutine's exception is rethrown here
    } catch (const std::runtime_error& error) {
      std::printf("main: failing threw \"%s\"\n", error.what());
    }
    return sum;
  });  // returns once every coroutine has ended
  std::printf("run() returned %d\n", total);
  return total == 6 ? 0 : 1;
}

// Guide, page 2: sleeping, timeouts and cancellation, and blocking work kept off the scheduler.
#include <weft/weft.hpp>

#include <chrono>
#include <cstdio>
#include <numeric>
#include <vector>

using namespace std::chrono_literals;

int main() {
  weft::run([] {
    // Sleeping suspends this coroutine only; the thread runs the others meanwhile.
    auto start = weft::clock::now();
    weft::sleep_for(20ms);
    std::printf("slept %s\n", weft::clock::now() - start >= 20ms ? "at least 20 ms" : "too little");

    // A timeout bounds a wait. The task it waited for keeps running.
    auto slow = weft::spawn(
        [] {
          weft::sleep_for(10s);
          return 1;
        },
        {.name = "slow"});
    try {
      slow.await(weft::timeout(50ms));
    } catch (const weft::timeout_error& error) {
      std::printf("await gave up: %s\n", error.what());
    }

    // Cancelling wakes the coroutine with weft::cancelled_error where it waits; its destructors
    // and catch blocks run, then awaiting it rethrows the cancellation.
    auto worker = weft::spawn(
        [] {
          struct cleanup {
            ~cleanup() { std::printf("worker: cleanup ran\n"); }
          } guard;
          weft::sleep_for(1h);
        },
        {.name = "worker"});
    weft::yield();  // let worker start and fall asleep
    worker.cancel("shutting down");
    slow.cancel("not needed any more");
    auto report = [](auto& task, const char* name) {
      try {
        task.await();
      } catch (const weft::cancelled_error& error) {
        std::printf("%s was cancelled: %s\n", name, error.reason().c_str());
      }
    };
    report(worker, "worker");
    report(slow, "slow");

    // A cancel token ends a wait when another task ends: here, a 30 ms deadline task.
    weft::channel<int> results(1);
    auto deadline = weft::spawn([] { weft::sleep_for(30ms); }, {.name = "deadline"});
    try {
      results.recv(weft::cancel_on(deadline));
    } catch (const weft::cancelled_error& error) {
      std::printf("recv stopped: %s\n", error.reason().c_str());
    }

    // Blocking or CPU-heavy work goes to the thread pool; the scheduler keeps running.
    auto ticker = weft::spawn([] {
      int ticks = 0;
      for (; ticks < 3; ++ticks) weft::sleep_for(1ms);
      return ticks;
    });
    long long sum = weft::thread_pool::run([] {
      std::vector<long long> numbers(5'000'000);
      std::iota(numbers.begin(), numbers.end(), 1);
      return std::accumulate(numbers.begin(), numbers.end(), 0LL);
    });
    std::printf("thread pool summed %lld; the ticker ticked %d times meanwhile\n", sum,
                ticker.await());
  });
  return 0;
}

// Guide, page 4: coroutines that talk through channels, and task groups that bound how many run
// at once and collect their results.
#include <weft/weft.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

using namespace std::chrono_literals;

int main() {
  weft::run([] {
    // A pipeline: one producer, three workers, one result channel.
    weft::channel<int> jobs(4);  // a send waits while 4 values are buffered
    auto results = weft::channel<int>::unbounded();
    auto producer = weft::spawn([jobs]() mutable {
      for (int n = 1; n <= 10; ++n) {
        jobs.send(n);
      }
      jobs.close("no more jobs");  // the workers' loops end once the buffer is drained
    });

    weft::task_group<int> workers(3);
    for (int worker = 0; worker < 3; ++worker) {
      workers.spawn([jobs, results]() mutable {
        int handled = 0;
        for (int n : jobs) {  // receives until the channel is closed and drained
          weft::sleep_for(1ms * n);
          results.send(n * n);
          ++handled;
        }
        return handled;
      });
    }
    std::vector<int> handled = workers.all();  // waits for every worker
    producer.await();
    results.close();
    int sum = 0;
    for (int square : results) {
      sum += square;
    }
    int total = 0;
    for (int count : handled) {
      total += count;
    }
    std::printf("3 workers handled %d jobs; the squares add up to %d\n", total, sum);

    // A task group as a concurrency limit: 20 downloads, at most 4 at a time.
    weft::task_group<std::string> downloads(4);
    int running = 0;
    int peak = 0;
    for (int page = 1; page <= 20; ++page) {
      downloads.spawn([&running, &peak, page] {
        peak = std::max(peak, ++running);
        weft::sleep_for(2ms);  // stands for the network
        --running;
        return "page " + std::to_string(page);
      });
    }
    std::vector<std::string> pages = downloads.all();
    std::printf("downloaded %zu pages, %s\n", pages.size(),
                peak <= 4 ? "never more than 4 at once" : "too many at once");

    // race(): the first result wins and the slower tasks are cancelled.
    weft::task_group<std::string> mirrors(3);
    for (auto [name, delay] :
         {std::pair{"mirror-a", 300ms}, {"mirror-b", 10ms}, {"mirror-c", 200ms}}) {
      mirrors.spawn([name, delay] {
        weft::sleep_for(delay);
        return std::string(name);
      });
    }
    std::printf("fastest: %s\n", mirrors.race().c_str());
  });
  return 0;
}

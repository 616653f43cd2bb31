// Guide, page 6: weft::procs::runtime runs work on every core: plain functions, and
// step-driven processes that yield commands and wait for their results without holding a
// thread.
#include <weft/weft.hpp>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace procs = weft::procs;

// A workflow: asks the "square" command for each of 1..n at once, then adds up the answers.
// Between steps it holds no thread; each step may run on a different worker.
class sum_of_squares : public procs::process {
 public:
  void init(procs::context&, std::string_view method, std::string_view input) override {
    count_ = std::stoi(std::string(input));
  }

  void step(std::span<procs::event> events, procs::step_output& out) override {
    if (!started_) {
      started_ = true;
      for (int n = 1; n <= count_; ++n) {
        out.yield("square", static_cast<std::uint64_t>(n), std::to_string(n));
      }
      pending_ = count_;
    }
    for (procs::event& event : events) {
      if (event.type == procs::event_type::cancel) {
        out.fail("cancelled");
        return;
      }
      if (event.type == procs::event_type::yield_complete) {
        sum_ += std::stol(event.data);
        --pending_;
      }
    }
    if (pending_ == 0) {
      out.done(std::to_string(sum_));
    } else {
      out.wait();  // step again when the next answers arrive
    }
  }

 private:
  bool started_ = false;
  int count_ = 0;
  int pending_ = 0;
  long sum_ = 0;
};

int main() {
  procs::runtime engine;  // one worker thread per hardware thread
  std::printf("a runtime with %zu workers\n", engine.workers());

  // Commands are how processes reach the world: a handler completes them, here at once, or
  // later from any thread (a database callback, a timer).
  engine.on_command("square", [](const procs::command& asked, procs::completion done) {
    long n = std::stol(asked.payload);
    done.complete(std::to_string(n * n));
  });

  // Plain functions, spread over the workers.
  std::vector<procs::process_handle> jobs;
  for (int i = 0; i < 1000; ++i) {
    jobs.push_back(engine.submit([i] { return std::to_string(i); }));
  }
  long sum = 0;
  for (const procs::process_handle& job : jobs) {
    sum += std::stol(job.wait());  // blocks this thread until the job is done
  }
  std::printf("1000 functions ran; their results add up to %ld\n", sum);

  procs::process_handle workflow = engine.submit(std::make_unique<sum_of_squares>(), "main", "10");
  std::printf("sum of the squares of 1..10: %s\n", workflow.wait().c_str());

  // From a weft coroutine, await() suspends the coroutine instead of blocking the thread.
  weft::run([&] {
    auto big = engine.submit(std::make_unique<sum_of_squares>(), "main", "100");
    std::printf("awaited in a coroutine: the squares of 1..100 add up to %s\n",
                big.await().c_str());
  });

  engine.stop(std::chrono::seconds(5));  // cancels what is left and joins the workers
  return 0;
}

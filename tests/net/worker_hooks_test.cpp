// Per-worker start and stop hooks: where per-worker resources (a pg::pool, a cache) are made
// and closed, on the worker's own thread and scheduler.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "net/net_support.hpp"
#include "weft/sched/this_coroutine.hpp"

namespace {

using namespace net_test;
using weft::net::connection;

// The resource a worker makes in on_worker_start: handlers of that worker find it.
thread_local std::string* worker_resource = nullptr;

TEST(NetWorkerHooks, EachWorkerStartsBeforeItsFirstConnectionAndStopsAfterItsLast) {
  auto options = local_options();
  options.workers = 2;
  std::mutex mutex;
  std::vector<std::string> events;
  std::set<std::thread::id> start_threads;
  std::atomic<int> started{0};
  options.on_worker_start = [&](unsigned worker) {
    weft::sleep_for(std::chrono::milliseconds(20));  // a hook may suspend (open a pool)
    worker_resource = new std::string("worker " + std::to_string(worker));
    std::lock_guard<std::mutex> lock(mutex);
    events.push_back("start " + std::to_string(worker));
    start_threads.insert(std::this_thread::get_id());
    ++started;
  };
  options.on_worker_stop = [&](unsigned worker) {
    std::lock_guard<std::mutex> lock(mutex);
    events.push_back("stop " + std::to_string(worker) + " had " +
                     (worker_resource != nullptr ? *worker_resource : std::string("nothing")));
    delete worker_resource;
    worker_resource = nullptr;
  };
  running_server running(options, [&](weft::net::tcp_server& server) {
    server.serve([&](connection& c) {
      while (auto m = c.receive()) {
        // Same thread as this worker's start hook, so its resource is here.
        c.send(worker_resource != nullptr &&
                       *worker_resource == "worker " + std::to_string(c.worker())
                   ? std::string("ok")
                   : std::string("missing"));
      }
    });
  });
  ASSERT_TRUE(eventually([&] { return started.load() == 2; }));
  for (int index = 0; index < 8; ++index) {
    int fd = connect_to(running.port());
    send_all(fd, "x");
    EXPECT_EQ(read_bytes(fd, 2), "ok");
    ::close(fd);
  }
  running.stop(std::chrono::milliseconds(1000));
  running.wait();
  std::lock_guard<std::mutex> lock(mutex);
  EXPECT_EQ(start_threads.size(), 2u) << "each worker's hook runs on its own thread";
  std::multiset<std::string> seen(events.begin(), events.end());
  EXPECT_EQ(seen, (std::multiset<std::string>{"start 0", "start 1", "stop 0 had worker 0",
                                              "stop 1 had worker 1"}));
  // A worker's stop comes after its start.
  for (unsigned worker = 0; worker < 2; ++worker) {
    auto start = std::find(events.begin(), events.end(), "start " + std::to_string(worker));
    auto stop = std::find_if(events.begin(), events.end(), [&](const std::string& e) {
      return e.rfind("stop " + std::to_string(worker), 0) == 0;
    });
    EXPECT_LT(start, stop);
  }
}

TEST(NetWorkerHooks, AFailedStartEndsServeWithItsErrorAndStillRunsTheStopHook) {
  auto options = local_options();
  options.workers = 2;
  std::atomic<int> stops{0};
  options.on_worker_start = [](unsigned worker) {
    if (worker == 1) {
      throw std::runtime_error("cache for worker 1 could not be opened");
    }
  };
  options.on_worker_stop = [&](unsigned) { ++stops; };
  weft::net::tcp_server server(options);
  try {
    server.serve([](connection&) {});
    ADD_FAILURE() << "serve() should rethrow the start hook's error";
  } catch (const std::runtime_error& failure) {
    EXPECT_STREQ(failure.what(), "cache for worker 1 could not be opened");
  }
  EXPECT_EQ(stops.load(), 2) << "the failed worker undoes its partial start, the other stops";
}

}  // namespace

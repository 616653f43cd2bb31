// Suite `pool` peer for the pg_ benchmarks (see bench/pool/weft_pg_select1.cpp): the classic
// blocking way. 8 threads, each with its own PGconn (blocking mode), each looping one query and
// checking the value:
//   pg_select1, pg_select1_leased: PQexec("SELECT 1") (the simple query protocol: one message,
//                                  the cheapest exchange libpq has; the peer has no other way
//                                  to run it, so both rows measure the same loop);
//   pg_select1_params:             PQexecParams("SELECT $1::int", "1") (the extended protocol).
// Same private server (started the same way, on the cores this process is not pinned to), same
// warm-up and timed window; queries completed in the window / its length.
#include <libpq-fe.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.hpp"
#include "pg/pg_private_server.hpp"

namespace {

constexpr int threads = 8;

// One counter per thread on its own cache line: the threads never share a written line.
struct alignas(64) thread_counter {
  std::atomic<std::int64_t> completed{0};
};

enum class protocol { simple, extended };

const char* const one_text = "1";

double select1_per_second(const std::string& conninfo, protocol used,
                          std::chrono::milliseconds warmup, std::chrono::milliseconds measured) {
  std::vector<PGconn*> sessions;
  for (int index = 0; index < threads; ++index) {
    PGconn* session = PQconnectdb(conninfo.c_str());
    if (PQstatus(session) != CONNECTION_OK) {
      std::string why = PQerrorMessage(session);
      PQfinish(session);
      for (PGconn* opened : sessions) {
        PQfinish(opened);
      }
      throw std::runtime_error("connect: " + why);
    }
    sessions.push_back(session);
  }
  std::vector<thread_counter> counters(threads);
  std::atomic<bool> stop{false};
  std::atomic<bool> failed{false};
  std::vector<std::thread> workers;
  for (int index = 0; index < threads; ++index) {
    workers.emplace_back([&, index] {
      PGconn* session = sessions[static_cast<std::size_t>(index)];
      while (!stop.load(std::memory_order_relaxed)) {
        PGresult* result = used == protocol::simple
                               ? PQexec(session, "SELECT 1")
                               : PQexecParams(session, "SELECT $1::int", 1, nullptr, &one_text,
                                              nullptr, nullptr, 0);
        bool right = PQresultStatus(result) == PGRES_TUPLES_OK && PQntuples(result) == 1 &&
                     std::strcmp(PQgetvalue(result, 0, 0), "1") == 0;
        PQclear(result);
        if (!right) {
          std::fprintf(stderr, "libpq_threads: SELECT 1 failed: %s", PQerrorMessage(session));
          failed = true;
          return;
        }
        counters[static_cast<std::size_t>(index)].completed.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  auto total = [&] {
    std::int64_t sum = 0;
    for (const thread_counter& counter : counters) {
      sum += counter.completed.load(std::memory_order_relaxed);
    }
    return sum;
  };
  std::this_thread::sleep_for(warmup);
  std::int64_t completed_before = total();
  auto start = bench::clock::now();
  std::this_thread::sleep_for(measured);
  std::int64_t completed_after = total();
  auto end = bench::clock::now();
  stop = true;
  for (std::thread& worker : workers) {
    worker.join();
  }
  for (PGconn* session : sessions) {
    PQfinish(session);
  }
  if (failed) {
    throw std::runtime_error("a query failed");
  }
  std::fprintf(stderr, "# %s libpq_threads: %lld queries in %.3f s\n",
               used == protocol::simple ? "PQexec" : "PQexecParams",
               static_cast<long long>(completed_after - completed_before),
               bench::nanoseconds_between(start, end) / 1e9);
  return static_cast<double>(completed_after - completed_before) /
         (bench::nanoseconds_between(start, end) / 1e9);
}

}  // namespace

int main(int argc, char** argv) {
  bench::arguments arguments = bench::parse_arguments(argc, argv);
  bool simple = arguments.wants("pg_select1");
  bool leased = arguments.wants("pg_select1_leased");
  bool extended = arguments.wants("pg_select1_params");
  if (!simple && !leased && !extended) {
    return 0;
  }
  try {
    weft_pg_test::private_server server({.server_on_other_cores = true});
    auto warmup = std::chrono::milliseconds(arguments.smoke ? 50 : 200);
    auto measured = std::chrono::milliseconds(arguments.smoke ? 200 : 1000);
    if (simple) {
      bench::report("pg_select1", "queries/s",
                    select1_per_second(server.conninfo(), protocol::simple, warmup, measured));
    }
    if (extended) {
      bench::report("pg_select1_params", "queries/s",
                    select1_per_second(server.conninfo(), protocol::extended, warmup, measured));
    }
    if (leased) {
      bench::report("pg_select1_leased", "queries/s",
                    select1_per_second(server.conninfo(), protocol::simple, warmup, measured));
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_pool_libpq_threads: %s\n", error.what());
    return 1;
  }
  return 0;
}

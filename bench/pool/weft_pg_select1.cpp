// Suite `pool` (bench/run.py), benchmarks pg_select1, pg_select1_params and pg_select1_leased:
// queries per second of `SELECT 1` through weft::pg::pool against a real PostgreSQL 15 server.
// Peer: bench/peers/pool/libpq_threads.cpp (blocking libpq, one thread per connection).
//
// The program starts a private server of its own (tests/pg/pg_private_server.cpp: a copy of a
// template data dir, unix socket, fsync off) on the cores this process is NOT pinned to (run.py
// pins the program to one core, so the client gets that core and the server the others), and
// stops it at the end. One scheduler thread: 50 coroutines share a pool of max 8 connections;
// each loops one query, checking the value:
//   pg_select1:        db.query("SELECT 1"): pool::query, which pipelines the coroutines'
//                      queries over the pool's connections once all are in use (see
//                      weft/pg/pool.hpp). The extended protocol (Parse, Bind, Describe, Execute,
//                      Sync: what pipelining needs), against the peer's cheaper simple-protocol
//                      PQexec;
//   pg_select1_params: db.query("SELECT $1::int", 1), as the peer's PQexecParams;
//   pg_select1_leased: db.acquire()->query("SELECT 1"), one query per exclusive lease (no
//                      pipelining: what a coroutine holding its own connection gets).
// The pool is made with reset_on_release = false: its default DISCARD ALL whenever a connection
// goes back is a second round trip that a throughput-minded user turns off (sessions here hold
// no state). Untimed warm-up (all 8 connections open and in use), then the queries completed in
// the timed window / its length.
//
// Sizes: warm-up 0.2 s, timed 1 s (smoke: 0.05 s and 0.2 s).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>
#include <weft/pg/pool.hpp>
#include <weft/weft.hpp>

#include "bench_util.hpp"
#include "pg/pg_private_server.hpp"

namespace {

constexpr int coroutines = 50;
constexpr std::size_t connections = 8;

enum class way { shared, shared_params, leased };

double select1_per_second(const std::string& conninfo, way used, const char* name,
                          std::chrono::milliseconds warmup, std::chrono::milliseconds measured) {
  weft::scheduler scheduler;
  return scheduler.run([&] {
    weft::pg::pool_options options;
    options.conninfo = conninfo;
    options.max = connections;
    options.reset_on_release = false;
    weft::pg::pool db(std::move(options));
    std::int64_t completed = 0;
    bool stop = false;
    std::vector<weft::task<void>> workers;
    workers.reserve(coroutines);
    for (int worker = 0; worker < coroutines; ++worker) {
      workers.push_back(weft::spawn([&] {
        while (!stop) {
          int value = used == way::shared          ? db.query("SELECT 1").value<int>()
                      : used == way::shared_params ? db.query("SELECT $1::int", 1).value<int>()
                                                   : db.acquire()->query("SELECT 1").value<int>();
          if (value != 1) {
            throw std::runtime_error("SELECT 1 did not return 1");
          }
          ++completed;
        }
      }));
    }
    weft::sleep_for(warmup);
    std::int64_t completed_before = completed;
    auto start = bench::clock::now();
    weft::sleep_for(measured);
    std::int64_t completed_after = completed;
    auto end = bench::clock::now();
    stop = true;
    for (weft::task<void>& worker : workers) {
      worker.await();
    }
    weft::pool_stats stats = db.stats();
    std::fprintf(stderr, "# %s weft: %lld queries in %.3f s, %llu connections created\n", name,
                 static_cast<long long>(completed_after - completed_before),
                 bench::nanoseconds_between(start, end) / 1e9,
                 static_cast<unsigned long long>(stats.created));
    if (stats.created != connections) {
      throw std::runtime_error("the pool opened " + std::to_string(stats.created) +
                               " connections, expected " + std::to_string(connections));
    }
    db.close();
    return static_cast<double>(completed_after - completed_before) /
           (bench::nanoseconds_between(start, end) / 1e9);
  });
}

}  // namespace

int main(int argc, char** argv) {
  bench::arguments arguments = bench::parse_arguments(argc, argv);
  struct variant {
    const char* name;
    way used;
  };
  const variant variants[] = {{"pg_select1", way::shared},
                              {"pg_select1_params", way::shared_params},
                              {"pg_select1_leased", way::leased}};
  bool any = false;
  for (const variant& each : variants) {
    any = any || arguments.wants(each.name);
  }
  if (!any) {
    return 0;
  }
  try {
    weft_pg_test::private_server server({.server_on_other_cores = true});
    auto warmup = std::chrono::milliseconds(arguments.smoke ? 50 : 200);
    auto measured = std::chrono::milliseconds(arguments.smoke ? 200 : 1000);
    for (const variant& each : variants) {
      if (arguments.wants(each.name)) {
        bench::report(
            each.name, "queries/s",
            select1_per_second(server.conninfo(), each.used, each.name, warmup, measured));
      }
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_pool_weft_pg: %s\n", error.what());
    return 1;
  }
  return 0;
}

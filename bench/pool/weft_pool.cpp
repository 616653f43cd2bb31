// The `pool` suite (bench/run.py): weft::pool's acquire/release cost. weft only: no peer runtime
// has a comparable pool on one thread (Go's database/sql pool needs a driver, bb8/deadpool need
// Tokio's multi-threaded runtime), so the numbers stand on their own against the targets below.
// Every benchmark runs on a fresh weft::scheduler with default options (FIFO order): once untimed
// at a tenth of its size (warm-up), then timed inside the main coroutine.
//
// acquire_release_uncontended: one coroutine, a pool of max 1 holding one int, N iterations of
//   { lease = acquire(); checksum += *lease; } (the lease's end releases it). The pool has a
//   factory, a destructor and trivial before_acquire / before_release hooks (both return true),
//   so each pair calls two hooks. Built from callables (pool_options: std::function holding
//   lambdas). ns per acquire+release pair = wall time / N. Target: at most 40 ns.
// acquire_release_uncontended_c: the same through pool_c_options (plain function pointers and a
//   void* context), to show the C-compatible path costs nothing extra.
// acquire_release_contended, contended_service_spread: 1000 coroutines share a pool of max 10.
//   Each loops: acquire; count one service; weft::yield() while holding it (so every release
//   has waiters and hands off); release. They stop once N services were counted in all.
//   acquire_release_contended = wall time / N, in ns per pair, scheduling included.
//   contended_service_spread = the most services any coroutine got / the fewest (1.00 is
//   perfectly fair; FIFO hand-off should keep it near 1). Both numbers come from one run and are
//   printed as two RESULT lines; the spread is also printed on stderr with the min and max.
//
// Each benchmark prints the scheduler's context switches per pair to stderr.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>
#include <weft/pool/pool.hpp>
#include <weft/weft.hpp>

#include "bench_util.hpp"

namespace {

struct pool_sizes {
  std::int64_t uncontended_pairs;
  std::int64_t contended_pairs;
  int contenders;
  std::size_t contended_max;
};

pool_sizes pool_sizes_for(const bench::arguments& arguments) {
  if (arguments.smoke) {
    return {100'000, 100'000, 1000, 10};
  }
  return {20'000'000, 2'000'000, 1000, 10};
}

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "bench_pool_weft: %s\n", message.c_str());
  std::exit(1);
}

void report_switches(const char* benchmark, const weft::scheduler& scheduler, std::int64_t pairs) {
  std::fprintf(stderr, "# %s: %.2f switches per pair (%llu switches, %lld pairs)\n", benchmark,
               static_cast<double>(scheduler.stats().switches) / static_cast<double>(pairs),
               static_cast<unsigned long long>(scheduler.stats().switches),
               static_cast<long long>(pairs));
}

// The C-style hooks: what a C library would register.
struct c_context {
  int made = 0;
};
int c_factory(void* context) { return ++static_cast<c_context*>(context)->made; }
void c_destructor(void*, int*) {}
bool c_accept(void*, int*) { return true; }

weft::pool<int> callable_pool() {
  weft::pool_options<int> options;
  options.max = 1;
  options.factory = [made = 0]() mutable { return ++made; };
  options.destructor = [](int&) {};
  options.before_acquire = [](int&) { return true; };
  options.before_release = [](int&) { return true; };
  return weft::pool<int>(std::move(options));
}

weft::pool<int> c_pool(c_context& context) {
  weft::pool_c_options<int> options;
  options.max = 1;
  options.context = &context;
  options.factory = &c_factory;
  options.destructor = &c_destructor;
  options.before_acquire = &c_accept;
  options.before_release = &c_accept;
  return weft::pool<int>(options);
}

double uncontended(std::int64_t pairs, bool c_style, const char* name) {
  weft::scheduler scheduler;
  std::int64_t checksum = 0;
  double elapsed = scheduler.run([&] {
    c_context context;
    weft::pool<int> resources = c_style ? c_pool(context) : callable_pool();
    resources.acquire().release();  // create the one resource before timing
    auto start = bench::clock::now();
    for (std::int64_t pair = 0; pair < pairs; ++pair) {
      weft::lease<int> held = resources.acquire();
      checksum += *held;
    }
    double nanoseconds = bench::nanoseconds_between(start, bench::clock::now());
    if (resources.stats().created != 1) {
      fail(std::string(name) + ": the pool created " + std::to_string(resources.stats().created) +
           " resources, expected 1");
    }
    return nanoseconds;
  });
  if (checksum != pairs) {
    fail(std::string(name) + ": checksum " + std::to_string(checksum) + ", expected " +
         std::to_string(pairs));
  }
  report_switches(name, scheduler, pairs);
  return elapsed;
}

struct contended_result {
  double nanoseconds;
  double spread;
};

contended_result contended(std::int64_t pairs, int contenders, std::size_t max) {
  weft::scheduler scheduler;
  std::vector<std::int64_t> services(static_cast<std::size_t>(contenders), 0);
  std::int64_t total = 0;
  double elapsed = scheduler.run([&] {
    weft::pool_options<int> options;
    options.max = max;
    options.factory = [made = 0]() mutable { return ++made; };
    weft::pool<int> resources(std::move(options));
    std::vector<weft::task<void>> tasks;
    tasks.reserve(services.size());
    auto start = bench::clock::now();
    for (int contender = 0; contender < contenders; ++contender) {
      tasks.push_back(weft::spawn([&, contender] {
        for (;;) {
          weft::lease<int> held = resources.acquire();
          if (total >= pairs) {
            return;
          }
          ++total;
          ++services[static_cast<std::size_t>(contender)];
          weft::yield();
        }
      }));
    }
    for (weft::task<void>& task : tasks) {
      task.await();
    }
    double nanoseconds = bench::nanoseconds_between(start, bench::clock::now());
    weft::pool_stats stats = resources.stats();
    if (stats.created != max || stats.active != 0) {
      fail("acquire_release_contended: created " + std::to_string(stats.created) + ", active " +
           std::to_string(stats.active) + "; expected " + std::to_string(max) + " and 0");
    }
    return nanoseconds;
  });
  if (total != pairs) {
    fail("acquire_release_contended: " + std::to_string(total) + " services, expected " +
         std::to_string(pairs));
  }
  auto [fewest, most] = std::minmax_element(services.begin(), services.end());
  if (*fewest == 0) {
    fail("acquire_release_contended: a coroutine was never served");
  }
  double spread = static_cast<double>(*most) / static_cast<double>(*fewest);
  report_switches("acquire_release_contended", scheduler, pairs);
  std::fprintf(stderr,
               "# contended_service_spread: %.3f (fewest %lld, most %lld services per coroutine, "
               "%d coroutines, max %zu)\n",
               spread, static_cast<long long>(*fewest), static_cast<long long>(*most), contenders,
               max);
  return {elapsed, spread};
}

}  // namespace

int main(int argc, char** argv) {
  bench::arguments arguments = bench::parse_arguments(argc, argv);
  pool_sizes sizes = pool_sizes_for(arguments);
  try {
    for (bool c_style : {false, true}) {
      const char* name = c_style ? "acquire_release_uncontended_c" : "acquire_release_uncontended";
      if (arguments.wants(name)) {
        uncontended(sizes.uncontended_pairs / 10, c_style, name);
        double elapsed = uncontended(sizes.uncontended_pairs, c_style, name);
        bench::report(name, "ns", elapsed / static_cast<double>(sizes.uncontended_pairs));
      }
    }
    if (arguments.wants("acquire_release_contended") ||
        arguments.wants("contended_service_spread")) {
      contended(sizes.contended_pairs / 10, sizes.contenders, sizes.contended_max);
      contended_result result =
          contended(sizes.contended_pairs, sizes.contenders, sizes.contended_max);
      bench::report("acquire_release_contended", "ns",
                    result.nanoseconds / static_cast<double>(sizes.contended_pairs));
      bench::report("contended_service_spread", "ratio", result.spread);
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_pool_weft: %s\n", error.what());
    return 1;
  }
  return 0;
}

// Peer: raw libuv (C, callbacks) for the io suite's benchmarks that need no network. Pinned by
// bench/run.py like every program of the suite: timers to one core, threadpool_roundtrip to
// two (the pool's worker threads get a core of their own, as weft's would).
//
//   uv_loop [--smoke] [--only timers|threadpool_roundtrip]
//
// timers (libuv's benchmark-million-timers shape): N uv_timer_t (10M; 100k with --smoke) in
//   one array allocated up front, on one loop. Timer i is started with a timeout of
//   1 + i * 10 / N ms (consecutive runs of N/10 timers share a timeout, 1 to 10 ms), all from
//   the same cached loop time, then uv_run fires them all (each callback only counts).
//   Result: ms from before the first uv_timer_init to uv_run's return (start + fire; closing
//   the handles afterwards is not timed). Starting 10M timers takes far longer than 10 ms, so
//   the number is CPU work, not the timeouts.
// threadpool_roundtrip: uv_queue_work with an empty work callback; its after-work callback (on
//   the loop) queues the next one, so exactly one job is in flight. 1,000 warm-up round trips,
//   then N (100k; 2k with --smoke) timed ones. Result: µs per round trip (loop -> pool thread
//   -> loop). libuv's default pool (4 threads).

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

static int smoke;

static void report(const char* name, const char* unit, double value) {
  printf("RESULT %s %s %.3f\n", name, unit, value);
  fflush(stdout);
}

// ---- timers ----------------------------------------------------------------------------------

static uint64_t timers_fired;

static void on_timer(uv_timer_t* timer) {
  (void)timer;
  ++timers_fired;
}

static void timers(void) {
  const uint64_t count = smoke ? 100000 : 10000000;
  const uint64_t spread_ms = 10;
  uv_loop_t* loop = uv_default_loop();
  uv_timer_t* handles = malloc(count * sizeof *handles);
  if (handles == NULL) {
    fprintf(stderr, "uv_loop: out of memory\n");
    exit(1);
  }
  uint64_t start = uv_hrtime();
  for (uint64_t index = 0; index < count; ++index) {
    uv_timer_init(loop, &handles[index]);
    uv_timer_start(&handles[index], on_timer, 1 + index * spread_ms / count, 0);
  }
  uv_run(loop, UV_RUN_DEFAULT);
  uint64_t end = uv_hrtime();
  if (timers_fired != count) {
    fprintf(stderr, "uv_loop: %llu of %llu timers fired\n", (unsigned long long)timers_fired,
            (unsigned long long)count);
    exit(1);
  }
  report("timers", "ms", (double)(end - start) / 1e6);
  for (uint64_t index = 0; index < count; ++index) {
    uv_close((uv_handle_t*)&handles[index], NULL);
  }
  uv_run(loop, UV_RUN_DEFAULT);
  free(handles);
}

// ---- threadpool_roundtrip --------------------------------------------------------------------

static uint64_t round_trips_left;
static uint64_t timed_round_trips;
static uint64_t timed_start;
static uv_work_t work;

static void empty_job(uv_work_t* request) { (void)request; }

static void after_job(uv_work_t* request, int status) {
  (void)status;
  if (round_trips_left == timed_round_trips) {
    timed_start = uv_hrtime();  // the warm-up is over
  }
  if (round_trips_left-- == 0) {
    return;
  }
  uv_queue_work(request->loop, request, empty_job, after_job);
}

static void threadpool_roundtrip(void) {
  const uint64_t warmup = 1000;
  timed_round_trips = smoke ? 2000 : 100000;
  round_trips_left = warmup + timed_round_trips - 1;  // the first job is queued below
  uv_loop_t* loop = uv_default_loop();
  uv_queue_work(loop, &work, empty_job, after_job);
  uv_run(loop, UV_RUN_DEFAULT);
  uint64_t end = uv_hrtime();
  report("threadpool_roundtrip", "us", (double)(end - timed_start) / 1e3 / (double)timed_round_trips);
}

int main(int argc, char** argv) {
  const char* only = NULL;
  for (int index = 1; index < argc; ++index) {
    if (strcmp(argv[index], "--smoke") == 0) {
      smoke = 1;
    } else if (strcmp(argv[index], "--only") == 0 && index + 1 < argc) {
      only = argv[++index];
    } else {
      fprintf(stderr, "usage: uv_loop [--smoke] [--only timers|threadpool_roundtrip]\n");
      return 2;
    }
  }
  if (only == NULL || strstr(only, "timers") != NULL) {
    timers();
  }
  if (only == NULL || strstr(only, "threadpool_roundtrip") != NULL) {
    threadpool_roundtrip();
  }
  return 0;
}

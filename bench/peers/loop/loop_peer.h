// Shared by the four raw peers of suite loop (uv_loop_raw.c, ev_loop_raw.c, event_loop_raw.c,
// poll_loop_raw.c): the flags, the sizes, the timer deadline scheme, the measuring window and
// the socketpairs, so that every peer does exactly the work bench/loop/README.md
// describes (and weft's program copies). Header-only C; single-threaded programs.
//
//   PROGRAM [--smoke] [--only timers_10m|timer_churn|loop_tick|fd_pingpong|many_fds]
//
// Each benchmark asked for (all when --only is absent) prints one `RESULT <name> <unit> <value>`
// line on stdout; errors go to stderr with exit status 1.
#ifndef WEFT_BENCH_LOOP_PEER_H
#define WEFT_BENCH_LOOP_PEER_H

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

// ---- sizes (full / --smoke) ------------------------------------------------------------------

static int peer_smoke;

// timers_10m: timers armed, then fired.
static inline uint64_t peer_timer_count(void) { return peer_smoke ? 100000 : 10000000; }
// timer_churn: timers armed, then cancelled.
static inline uint64_t peer_churn_count(void) { return peer_smoke ? 10000 : 1000000; }
// many_fds: idle socketpairs (both ends watched for readable: twice as many fds).
static inline int peer_idle_pairs(void) { return peer_smoke ? 50 : 5000; }
// loop_tick, fd_pingpong, many_fds: seconds of warm-up, then of measurement.
static inline double peer_warmup_s(void) { return peer_smoke ? 0.01 : 0.25; }
static inline double peer_measure_s(void) { return peer_smoke ? 0.05 : 2.0; }

// Timer i of n in timers_10m: libuv's million_timers shape, as suite io's `timers` (integer
// arithmetic: runs of n/10 timers share a delay, 1 to 10 ms, in the order they are armed).
static inline uint64_t peer_timer_delay_ms(uint64_t index, uint64_t count) {
  return 1 + index * 10 / count;
}
// Timer i of n in timer_churn: the same shape 60 s later, so that none can fire before it is
// cancelled.
static inline uint64_t peer_churn_delay_ms(uint64_t index, uint64_t count) {
  return 60000 + index * 10 / count;
}

// ---- output and errors -----------------------------------------------------------------------

static const char* peer_name = "loop_peer";

__attribute__((noreturn, format(printf, 1, 2))) static inline void peer_die(const char* format,
                                                                            ...) {
  va_list arguments;
  va_start(arguments, format);
  fprintf(stderr, "%s: error: ", peer_name);
  vfprintf(stderr, format, arguments);
  fputc('\n', stderr);
  va_end(arguments);
  exit(1);
}

static inline void peer_report(const char* name, const char* unit, double value) {
  printf("RESULT %s %s %.3f\n", name, unit, value);
  fflush(stdout);
}

static inline void* peer_alloc(size_t size) {
  void* memory = malloc(size);
  if (memory == NULL) {
    peer_die("out of memory (%zu bytes)", size);
  }
  return memory;
}

// ---- flags -----------------------------------------------------------------------------------

static const char* peer_only;

static inline void peer_parse(int argc, char** argv, const char* name) {
  peer_name = name;
  for (int index = 1; index < argc; ++index) {
    if (strcmp(argv[index], "--smoke") == 0) {
      peer_smoke = 1;
    } else if (strcmp(argv[index], "--only") == 0 && index + 1 < argc) {
      peer_only = argv[++index];
    } else {
      fprintf(stderr,
              "usage: %s [--smoke] [--only timers_10m|timer_churn|loop_tick|fd_pingpong|"
              "many_fds]\n",
              name);
      exit(2);
    }
  }
}

static inline int peer_wants(const char* benchmark) {
  return peer_only == NULL || strcmp(peer_only, benchmark) == 0;
}

// ---- clock -----------------------------------------------------------------------------------

static inline uint64_t peer_now_ns(void) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

// The measuring window of loop_tick, fd_pingpong and many_fds. The benchmark calls
// meter_count() once per event (a tick, a round trip); the clock is read every `stride` events
// (1024 for ticks, 1 for round trips): the warm-up ends at the first reading past
// warmup_s, the window at the first reading measure_s after that, and the rate is the events
// between those two readings over the time between them.
struct peer_meter {
  uint64_t warmup_end_ns;
  uint64_t measure_ns;
  uint64_t start_ns;  // 0 while warming up
  uint64_t end_ns;
  uint64_t events;  // counted in the window
  uint32_t stride;
  uint32_t until_check;
};

static inline void peer_meter_start(struct peer_meter* meter, uint32_t stride) {
  meter->warmup_end_ns = peer_now_ns() + (uint64_t)(peer_warmup_s() * 1e9);
  meter->measure_ns = (uint64_t)(peer_measure_s() * 1e9);
  meter->start_ns = 0;
  meter->end_ns = 0;
  meter->events = 0;
  meter->stride = stride;
  meter->until_check = stride;
}

// Counts one event; nonzero once the window is over (the caller then stops its loop).
static inline int peer_meter_count(struct peer_meter* meter) {
  if (meter->start_ns != 0) {
    ++meter->events;
  }
  if (--meter->until_check != 0) {
    return 0;
  }
  meter->until_check = meter->stride;
  uint64_t now = peer_now_ns();
  if (meter->start_ns == 0) {
    if (now >= meter->warmup_end_ns) {
      meter->start_ns = now;
    }
    return 0;
  }
  if (now - meter->start_ns < meter->measure_ns) {
    return 0;
  }
  meter->end_ns = now;
  return 1;
}

static inline double peer_meter_rate(const struct peer_meter* meter) {
  if (meter->end_ns == 0 || meter->events == 0) {
    peer_die("the measuring window never closed");
  }
  return (double)meter->events * 1e9 / (double)(meter->end_ns - meter->start_ns);
}

// ---- fds -------------------------------------------------------------------------------------

// Makes sure `needed` more descriptors can be opened (many_fds opens 10k): raises the soft
// RLIMIT_NOFILE up to the hard one.
static inline void peer_reserve_fds(int needed) {
  struct rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) {
    peer_die("getrlimit: %s", strerror(errno));
  }
  rlim_t wanted = (rlim_t)needed + 64;
  if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur < wanted) {
    if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < wanted) {
      peer_die("many_fds needs %llu descriptors; the hard RLIMIT_NOFILE is %llu (ulimit -Hn)",
               (unsigned long long)wanted, (unsigned long long)limit.rlim_max);
    }
    limit.rlim_cur = wanted;
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
      peer_die("setrlimit(RLIMIT_NOFILE, %llu): %s", (unsigned long long)wanted, strerror(errno));
    }
  }
}

// A connected pair of non-blocking AF_UNIX stream sockets.
static inline void peer_socketpair(int fds[2]) {
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) != 0) {
    peer_die("socketpair: %s", strerror(errno));
  }
}

// The ping-pong's one-byte messages: a short read or write is an error (one byte in flight
// can neither fill a socket buffer nor arrive in pieces), and so is a spurious wake-up.
static inline void peer_read_byte(int fd) {
  char byte;
  ssize_t got = read(fd, &byte, 1);
  if (got != 1) {
    peer_die("read(%d) returned %zd: %s", fd, got, got < 0 ? strerror(errno) : "end of stream");
  }
}

static inline void peer_write_byte(int fd) {
  char byte = 'p';
  ssize_t put = write(fd, &byte, 1);
  if (put != 1) {
    peer_die("write(%d) returned %zd: %s", fd, put, put < 0 ? strerror(errno) : "nothing");
  }
}

#endif

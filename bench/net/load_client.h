// What the net suite's load client (bench/net/load_client*.c) shares between its files: options,
// failure, the clock, the latency histogram, the server's CPU time from /proc, connecting and
// the WebSocket handshake. One thread; nothing here is thread-safe or needs to be.
#pragma once

#include <stddef.h>
#include <stdint.h>

enum mode { MODE_ECHO, MODE_WS, MODE_PIPE };

struct options {
  int port;  // the server (the proxy in pipe mode) on 127.0.0.1
  enum mode mode;
  int connections;   // echo, ws: 1..10000
  size_t size;       // message payload (echo, ws) or write chunk (pipe) in bytes
  double seconds;    // the measured window
  double warmup;     // before it
  double stall;      // no progress for this long: fail
  const char* name;  // the benchmark's name in the RESULT lines
  int server_pid;    // sample this process's CPU time over the window (0: do not)
  int sink_port;     // pipe: listen here for the proxy's upstream connection
};

// Prints "load_client: error: ..." on stderr and exits 1.
void fail(const char* format, ...) __attribute__((noreturn, format(printf, 1, 2)));

// CLOCK_MONOTONIC in seconds, and in nanoseconds.
double now(void);
uint64_t now_ns(void);

// Adds or modifies an epoll registration; fails on error.
void watch(int epoll, int fd, uint32_t events, void* data, int operation);

// A non-blocking TCP socket connecting to 127.0.0.1:port (connect in progress or done).
int start_connect(int port);

// Waits (up to `limit_s`) until every fd in `fds` has finished connecting; fails naming the
// port when one is refused or the limit passes. Connections are started in batches of at most
// 256 in flight, so that 1000 connections arriving at once do not overflow a backlog.
void connect_all(int port, int* fds, int count, double limit_s);

// The server's user + system CPU time so far, in seconds (all its threads: /proc/PID/stat).
// Fails when the process is gone.
double server_cpu_seconds(int pid);

// Latencies in nanoseconds, log-linear buckets: exact below 128 ns, then 64 buckets per power
// of two (at most 1.6% above the true value when a percentile is read back).
#define HISTOGRAM_BUCKETS (58 * 64 + 128)
struct histogram {
  uint64_t counts[HISTOGRAM_BUCKETS];
  uint64_t total;
};
void histogram_add(struct histogram* histogram, uint64_t nanoseconds);
// The smallest recorded bucket's upper bound below which `fraction` of the samples lie (ns).
uint64_t histogram_percentile(const struct histogram* histogram, double fraction);

// ws mode (load_client_ws.c): sends every connection's upgrade request, then reads and checks
// every answer (101 and the right Sec-WebSocket-Accept) within --stall seconds; fails otherwise.
void handshake_all(const struct options* options, const int* fds);

// pipe mode (load_client_pipe.c).
void run_pipe(const struct options* options);

// The load client's shared helpers (declared in load_client.h): failure, clocks, epoll
// registration, connecting, the server's CPU time from /proc and the latency histogram.

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "load_client.h"

void fail(const char* format, ...) {
  va_list arguments;
  va_start(arguments, format);
  fputs("load_client: error: ", stderr);
  vfprintf(stderr, format, arguments);
  fputc('\n', stderr);
  va_end(arguments);
  exit(1);
}

double now(void) {
  struct timespec time;
  clock_gettime(CLOCK_MONOTONIC, &time);
  return (double)time.tv_sec + (double)time.tv_nsec * 1e-9;
}

uint64_t now_ns(void) {
  struct timespec time;
  clock_gettime(CLOCK_MONOTONIC, &time);
  return (uint64_t)time.tv_sec * 1000000000u + (uint64_t)time.tv_nsec;
}

void watch(int epoll, int fd, uint32_t events, void* data, int operation) {
  struct epoll_event event;
  memset(&event, 0, sizeof event);
  event.events = events;
  event.data.ptr = data;
  if (epoll_ctl(epoll, operation, fd, &event) != 0) {
    fail("epoll_ctl: %s", strerror(errno));
  }
}

int start_connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
  if (fd < 0) {
    fail("socket: %s", strerror(errno));
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  struct sockaddr_in address;
  memset(&address, 0, sizeof address);
  address.sin_family = AF_INET;
  address.sin_port = htons((uint16_t)port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr*)&address, sizeof address) != 0 && errno != EINPROGRESS) {
    fail("connect to 127.0.0.1:%d: %s", port, strerror(errno));
  }
  return fd;
}

void connect_all(int port, int* fds, int count, double limit_s) {
  enum { batch = 256 };
  int epoll = epoll_create1(EPOLL_CLOEXEC);
  if (epoll < 0) {
    fail("epoll_create1: %s", strerror(errno));
  }
  double deadline = now() + limit_s;
  int started = 0;
  int done = 0;
  struct epoll_event events[batch];
  while (done < count) {
    while (started < count && started - done < batch) {
      fds[started] = start_connect(port);
      watch(epoll, fds[started], EPOLLOUT, &fds[started], EPOLL_CTL_ADD);
      ++started;
    }
    double left = deadline - now();
    if (left <= 0) {
      fail("%d of %d connections to 127.0.0.1:%d not established after %.0f s", count - done, count,
           port, limit_s);
    }
    int ready = epoll_wait(epoll, events, batch, (int)(left * 1000) + 1);
    if (ready < 0 && errno != EINTR) {
      fail("epoll_wait: %s", strerror(errno));
    }
    for (int index = 0; index < ready; ++index) {
      int fd = *(int*)events[index].data.ptr;
      int error = 0;
      socklen_t length = sizeof error;
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
      if (error != 0) {
        fail("connect to 127.0.0.1:%d: %s", port, strerror(error));
      }
      if (epoll_ctl(epoll, EPOLL_CTL_DEL, fd, NULL) != 0) {
        fail("epoll_ctl: %s", strerror(errno));
      }
      ++done;
    }
  }
  close(epoll);
}

double server_cpu_seconds(int pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE* file = fopen(path, "r");
  if (file == NULL) {
    fail("the server (pid %d) is gone: %s: %s", pid, path, strerror(errno));
  }
  char text[1024];
  size_t length = fread(text, 1, sizeof text - 1, file);
  fclose(file);
  text[length] = '\0';
  // The command name (field 2) is in parentheses and may hold spaces: count fields from the
  // last ')'. Field 3 is the state; utime and stime are fields 14 and 15, in clock ticks, and
  // cover every thread of the process (the thread group's totals).
  char* rest = strrchr(text, ')');
  unsigned long long utime = 0;
  unsigned long long stime = 0;
  if (rest == NULL || sscanf(rest + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
                             &utime, &stime) != 2) {
    fail("cannot read utime and stime from %s", path);
  }
  return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

// Bucket i < 128 holds exactly i ns; above, a value whose highest set bit is m (>= 7) falls in
// bucket (m - 5) * 64 + (v >> (m - 6)) - 64, i.e. its top 7 bits (64 buckets per power of two).
static int bucket_of(uint64_t value) {
  if (value < 128) {
    return (int)value;
  }
  int top = 63 - __builtin_clzll(value);
  return (top - 5) * 64 + (int)(value >> (top - 6)) - 64;
}

static uint64_t bucket_upper_bound(int bucket) {
  if (bucket < 128) {
    return (uint64_t)bucket;
  }
  int top = (bucket + 64) / 64 + 4;  // inverts bucket_of
  uint64_t leading = (uint64_t)((bucket + 64) % 64 + 64);
  return ((leading + 1) << (top - 6)) - 1;
}

void histogram_add(struct histogram* histogram, uint64_t nanoseconds) {
  ++histogram->counts[bucket_of(nanoseconds)];
  ++histogram->total;
}

uint64_t histogram_percentile(const struct histogram* histogram, double fraction) {
  uint64_t rank = (uint64_t)((double)histogram->total * fraction);
  if (rank >= histogram->total) {
    rank = histogram->total - 1;
  }
  uint64_t seen = 0;
  for (int bucket = 0; bucket < HISTOGRAM_BUCKETS; ++bucket) {
    seen += histogram->counts[bucket];
    if (seen > rank) {
      return bucket_upper_bound(bucket);
    }
  }
  return 0;
}

// The load client's pipe mode (see load_client.c for the others and bench/net/README.md):
//
//   load_client --port N --mode pipe --sink-port Q [--size 65536] [--seconds S] [--warmup W]
//               [--server-pid P] [--name NAME]
//
// The client is both ends of a proxied stream. It listens on 127.0.0.1:Q (the sink), connects to
// the proxy on 127.0.0.1:N, accepts the connection the proxy opens to Q, and then, in one epoll
// loop, writes B-byte chunks (default 64 KiB) into the proxy as fast as the socket takes them and
// reads what comes out at the sink, checking every byte against the pattern it sent (byte i of the
// stream is i mod 251, so a lost, repeated or reordered block is caught wherever it lands). Bytes
// read at the sink over the S seconds after the warm-up give
//   RESULT NAME Gbit/s X             bits / 1e9 / measured seconds
//   RESULT NAME.cpu us/MB Z          with --server-pid: the proxy's utime + stime over the window
//                                    per 1e6 bytes it delivered, in microseconds
// Then the client half-closes its side; the proxy must pass the end of stream on (the sink reads
// to end of file and must have received exactly what was sent), and once the client closes the
// sink, the proxy must end the client's connection too (both directions are piped). It fails when
// the proxy does not connect to the sink within T seconds (--stall, default 5), nothing arrives at
// the sink for T seconds, a byte differs, the proxy sends bytes back, or an end is not passed on.

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "load_client.h"

enum { PERIOD = 251, READ_SIZE = 64 * 1024, READS_PER_WAKE = 16 };

// Tags for the epoll registrations.
static int listener_tag, client_tag, sink_tag;

static int listen_sink(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    fail("socket: %s", strerror(errno));
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in address;
  memset(&address, 0, sizeof address);
  address.sin_family = AF_INET;
  address.sin_port = htons((uint16_t)port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, (struct sockaddr*)&address, sizeof address) != 0) {
    fail("the sink cannot listen on 127.0.0.1:%d: %s", port, strerror(errno));
  }
  if (listen(fd, 4) != 0) {
    fail("listen: %s", strerror(errno));
  }
  return fd;
}

// Waits (bounded) until fd is readable; fails with `what` when the time is up.
static void wait_readable(int fd, double deadline, const char* what) {
  double left = deadline - now();
  if (left <= 0) {
    fail("%s", what);
  }
  struct pollfd readable = {.fd = fd, .events = POLLIN};
  poll(&readable, 1, (int)(left * 1000) + 1);
}

void run_pipe(const struct options* options) {
  size_t size = options->size;
  size_t pattern_size = (size > READ_SIZE ? size : READ_SIZE) + PERIOD;
  unsigned char* pattern = malloc(pattern_size);
  unsigned char* buffer = malloc(READ_SIZE);
  if (pattern == NULL || buffer == NULL) {
    fail("out of memory");
  }
  for (size_t byte = 0; byte < pattern_size; ++byte) {
    pattern[byte] = (unsigned char)(byte % PERIOD);
  }
  int listener = listen_sink(options->sink_port);
  int client = -1;
  connect_all(options->port, &client, 1, 5.0);
  int sink = -1;
  int epoll = epoll_create1(EPOLL_CLOEXEC);
  if (epoll < 0) {
    fail("epoll_create1: %s", strerror(errno));
  }
  // The proxy may connect to the sink at once or only when the first bytes arrive: start
  // writing, and accept the sink's connection whenever it comes.
  watch(epoll, listener, EPOLLIN, &listener_tag, EPOLL_CTL_ADD);
  watch(epoll, client, EPOLLIN | EPOLLOUT, &client_tag, EPOLL_CTL_ADD);

  uint64_t written = 0;
  uint64_t received = 0;
  uint64_t received_at_start = 0;
  double start = now();
  double measure_from = start + options->warmup;
  double measure_until = measure_from + options->seconds;
  double measured_start = 0;
  double cpu_at_start = 0;
  double last_progress = start;
  int measuring = 0;
  struct epoll_event events[4];
  for (;;) {
    double time = now();
    if (!measuring && time >= measure_from) {
      // The window never ends in the iteration that opened it.
      measuring = 1;
      measured_start = time;
      received_at_start = received;
      if (options->server_pid > 0) {
        cpu_at_start = server_cpu_seconds(options->server_pid);
      }
    } else if (measuring && time >= measure_until && received != received_at_start) {
      double cpu =
          options->server_pid > 0 ? server_cpu_seconds(options->server_pid) - cpu_at_start : 0;
      double elapsed = now() - measured_start;
      double bytes = (double)(received - received_at_start);
      printf("RESULT %s Gbit/s %.3f\n", options->name, bytes * 8 / 1e9 / elapsed);
      if (options->server_pid > 0) {
        printf("RESULT %s.cpu us/MB %.4f\n", options->name, cpu * 1e6 / (bytes / 1e6));
      }
      fprintf(stderr,
              "load_client: %zu-byte writes through the proxy, %.0f bytes at the sink in %.3f s; "
              "proxy CPU %.3f s (%.0f%% of its core)\n",
              size, bytes, elapsed, cpu, cpu * 100 / elapsed);
      break;
    }
    if (time - last_progress > options->stall) {
      fail(sink < 0 ? "the proxy did not connect to the sink (127.0.0.1:%d) within %.1f s"
                    : "nothing arrived at the sink (127.0.0.1:%d) for %.1f s (proxy stalled)",
           options->sink_port, options->stall);
    }
    double next = measuring ? measure_until : measure_from;
    int timeout_ms = (int)((next - time) * 1000) + 1;
    timeout_ms = timeout_ms < 1 ? 1 : timeout_ms > 100 ? 100 : timeout_ms;
    int ready = epoll_wait(epoll, events, 4, timeout_ms);
    if (ready < 0 && errno != EINTR) {
      fail("epoll_wait: %s", strerror(errno));
    }
    for (int index = 0; index < ready; ++index) {
      void* tag = events[index].data.ptr;
      uint32_t what = events[index].events;
      if (tag == &listener_tag) {
        sink = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (sink < 0) {
          fail("accept on the sink: %s", strerror(errno));
        }
        watch(epoll, listener, 0, &listener_tag, EPOLL_CTL_DEL);
        watch(epoll, sink, EPOLLIN, &sink_tag, EPOLL_CTL_ADD);
      } else if (tag == &client_tag) {
        if (what & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
          ssize_t got = recv(client, buffer, READ_SIZE, 0);
          if (got > 0) {
            fail("the proxy sent %zd bytes back to the client (the sink sent nothing)", got);
          }
          if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
            fail("the proxy closed or reset the client's connection (%s)",
                 got == 0 ? "end of stream" : strerror(errno));
          }
        }
        for (;;) {
          ssize_t sent = send(client, pattern + written % PERIOD, size, MSG_NOSIGNAL);
          if (sent > 0) {
            written += (uint64_t)sent;
            continue;
          }
          if (sent < 0 && errno == EINTR) {
            continue;
          }
          if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            break;
          }
          fail("send to the proxy: %s", sent < 0 ? strerror(errno) : "0 bytes");
        }
      } else {
        for (int reads = 0; reads < READS_PER_WAKE; ++reads) {
          ssize_t got = recv(sink, buffer, READ_SIZE, 0);
          if (got > 0) {
            if (received + (uint64_t)got > written ||
                memcmp(buffer, pattern + received % PERIOD, (size_t)got) != 0) {
              fail("the sink received bytes that differ from those sent, at stream offset %llu",
                   (unsigned long long)received);
            }
            received += (uint64_t)got;
            last_progress = now();
            continue;
          }
          if (got == 0) {
            fail("the proxy ended the sink's stream after %llu bytes, before the client did",
                 (unsigned long long)received);
          }
          if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
            break;
          }
          fail("recv at the sink: %s", strerror(errno));
        }
      }
    }
  }

  // The end of the stream must pass through: half-close, then the sink reads to end of file.
  if (shutdown(client, SHUT_WR) != 0) {
    fail("shutdown: %s", strerror(errno));
  }
  double deadline = now() + options->stall;
  for (;;) {
    ssize_t got = recv(sink, buffer, READ_SIZE, 0);
    if (got > 0) {
      if (received + (uint64_t)got > written ||
          memcmp(buffer, pattern + received % PERIOD, (size_t)got) != 0) {
        fail("the sink received bytes that differ from those sent, at stream offset %llu",
             (unsigned long long)received);
      }
      received += (uint64_t)got;
      continue;
    }
    if (got == 0) {
      break;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      fail("recv at the sink after the end of stream: %s", strerror(errno));
    }
    wait_readable(sink, deadline, "the proxy did not pass the end of stream on to the sink");
  }
  if (received != written) {
    fail("the sink received %llu bytes, the client sent %llu", (unsigned long long)received,
         (unsigned long long)written);
  }
  // And the other direction: the sink's end must reach the client.
  close(sink);
  deadline = now() + options->stall;
  for (;;) {
    ssize_t got = recv(client, buffer, READ_SIZE, 0);
    if (got == 0) {
      break;
    }
    if (got > 0) {
      fail("the proxy sent %zd bytes back to the client (the sink sent nothing)", got);
    }
    if (errno == ECONNRESET) {
      fail("the proxy reset the client's connection instead of passing the sink's end on");
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      fail("recv from the proxy: %s", strerror(errno));
    }
    wait_readable(client, deadline,
                  "the proxy did not end the client's connection after the sink closed");
  }
  close(client);
  close(listener);
  close(epoll);
  free(buffer);
  free(pattern);
}

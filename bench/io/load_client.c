// The io suite's one load client, used against every server (weft's and the peers'): C, epoll,
// non-blocking sockets, one thread. bench/run.py pins it to one core and the server to another.
// It only ever connects to 127.0.0.1.
//
//   load_client --port N --mode pingpong [--connections 100] [--size 512] [--seconds S]
//               [--warmup W]
//     Opens the connections (all must be established before anything is sent). Each connection
//     sends a request of --size bytes and waits for all of it to come back, byte for byte,
//     before it sends the next (one outstanding request per connection). The first W seconds
//     (default 1) are warm-up; then it counts the requests completed in the next S seconds and
//     prints
//       RESULT tcp_echo_pingpong requests/s <completed requests / measured seconds>
//
//   load_client --port N --mode pump [--size 65536] [--seconds S] [--warmup W]
//     One connection writes --size-byte chunks as fast as the socket accepts them to a server
//     that reads and discards ("sink" mode). Bytes accepted by the kernel are counted over S
//     seconds after the warm-up (once the socket buffers are full, the rate at which the kernel
//     accepts bytes is the rate at which the server reads them; the buffers are a few MiB, a
//     rounding error against seconds of traffic). Then it half-closes the connection and waits
//     for the server to close its side, which proves the server read everything up to the end.
//       RESULT tcp_pump Gbit/s <bits / 1e9 / measured seconds>
//
// Every request carries its connection and sequence number in its first 16 bytes, so a stale,
// reordered, short or corrupted echo is caught. The client fails (exit code 1, a message on
// stderr) when a connection is refused or reset, when the server closes a connection early,
// sends bytes nobody asked for, echoes something else, or makes no progress for 5 seconds
// (--stall N to change). Every wait is bounded: the client never runs longer than
// warm-up + seconds + a few seconds.

#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum mode { PINGPONG, PUMP };

struct options {
  int port;
  enum mode mode;
  int connections;
  size_t size;
  double seconds;
  double warmup;
  double stall;
};

struct connection {
  int fd;
  int index;
  uint64_t sequence;  // of the request in flight
  size_t sent;        // bytes of the request written so far
  size_t received;    // bytes of its echo read so far
  int want_write;     // EPOLLOUT registered
  unsigned char* request;
  unsigned char* response;
};

static void fail(const char* format, ...) {
  va_list arguments;
  va_start(arguments, format);
  fputs("load_client: error: ", stderr);
  vfprintf(stderr, format, arguments);
  fputc('\n', stderr);
  va_end(arguments);
  exit(1);
}

static double now(void) {
  struct timespec time;
  clock_gettime(CLOCK_MONOTONIC, &time);
  return (double)time.tv_sec + (double)time.tv_nsec * 1e-9;
}

static void usage(void) {
  fprintf(stderr,
          "usage: load_client --port N --mode pingpong|pump [--connections C] [--size BYTES]\n"
          "                   [--seconds S] [--warmup S] [--stall S]\n");
  exit(2);
}

static double parse_number(const char* text, const char* flag) {
  char* end = NULL;
  double value = strtod(text, &end);
  if (end == text || *end != '\0' || value < 0) {
    fprintf(stderr, "load_client: bad value %s for %s\n", text, flag);
    exit(2);
  }
  return value;
}

static struct options parse(int argc, char** argv) {
  struct options options = {0, PINGPONG, -1, 0, 5.0, 1.0, 5.0};
  int mode_given = 0;
  for (int index = 1; index < argc; ++index) {
    const char* flag = argv[index];
    if (index + 1 >= argc) {
      usage();
    }
    const char* value = argv[++index];
    if (strcmp(flag, "--port") == 0) {
      options.port = (int)parse_number(value, flag);
    } else if (strcmp(flag, "--mode") == 0) {
      mode_given = 1;
      if (strcmp(value, "pingpong") == 0) {
        options.mode = PINGPONG;
      } else if (strcmp(value, "pump") == 0) {
        options.mode = PUMP;
      } else {
        usage();
      }
    } else if (strcmp(flag, "--connections") == 0) {
      options.connections = (int)parse_number(value, flag);
    } else if (strcmp(flag, "--size") == 0) {
      options.size = (size_t)parse_number(value, flag);
    } else if (strcmp(flag, "--seconds") == 0) {
      options.seconds = parse_number(value, flag);
    } else if (strcmp(flag, "--warmup") == 0) {
      options.warmup = parse_number(value, flag);
    } else if (strcmp(flag, "--stall") == 0) {
      options.stall = parse_number(value, flag);
    } else {
      usage();
    }
  }
  if (!mode_given || options.port <= 0 || options.port > 65535 || options.seconds <= 0) {
    usage();
  }
  if (options.connections < 0) {
    options.connections = options.mode == PINGPONG ? 100 : 1;
  }
  if (options.size == 0) {
    options.size = options.mode == PINGPONG ? 512 : 65536;
  }
  if (options.connections < 1 || options.connections > 10000 ||
      (options.mode == PUMP && options.connections != 1)) {
    fail("--connections must be 1..10000 (exactly 1 for pump)");
  }
  if (options.mode == PINGPONG && options.size < 16) {
    fail("--size must be at least 16 bytes in pingpong mode");
  }
  return options;
}

static void watch(int epoll, int fd, uint32_t events, void* data, int operation) {
  struct epoll_event event;
  memset(&event, 0, sizeof event);
  event.events = events;
  event.data.ptr = data;
  if (epoll_ctl(epoll, operation, fd, &event) != 0) {
    fail("epoll_ctl: %s", strerror(errno));
  }
}

// Opens `count` connections to 127.0.0.1:port, non-blocking, all established within 5 s.
static void connect_all(int epoll, const struct options* options, struct connection* connections,
                        int count) {
  struct sockaddr_in address;
  memset(&address, 0, sizeof address);
  address.sin_family = AF_INET;
  address.sin_port = htons((uint16_t)options->port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int pending = 0;
  for (int index = 0; index < count; ++index) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
    if (fd < 0) {
      fail("socket: %s", strerror(errno));
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    connections[index].fd = fd;
    connections[index].index = index;
    if (connect(fd, (struct sockaddr*)&address, sizeof address) == 0) {
      continue;
    }
    if (errno != EINPROGRESS) {
      fail("connect to 127.0.0.1:%d: %s", options->port, strerror(errno));
    }
    watch(epoll, fd, EPOLLOUT, &connections[index], EPOLL_CTL_ADD);
    ++pending;
  }
  double deadline = now() + 5.0;
  struct epoll_event events[256];
  while (pending > 0) {
    double left = deadline - now();
    if (left <= 0) {
      fail("%d of %d connections to 127.0.0.1:%d not established after 5 s", pending, count,
           options->port);
    }
    int ready = epoll_wait(epoll, events, 256, (int)(left * 1000) + 1);
    if (ready < 0 && errno != EINTR) {
      fail("epoll_wait: %s", strerror(errno));
    }
    for (int index = 0; index < ready; ++index) {
      struct connection* connection = events[index].data.ptr;
      int error = 0;
      socklen_t length = sizeof error;
      getsockopt(connection->fd, SOL_SOCKET, SO_ERROR, &error, &length);
      if (error != 0) {
        fail("connect to 127.0.0.1:%d: %s", options->port, strerror(error));
      }
      if (epoll_ctl(epoll, EPOLL_CTL_DEL, connection->fd, NULL) != 0) {
        fail("epoll_ctl: %s", strerror(errno));
      }
      --pending;
    }
  }
}

// ---- pingpong --------------------------------------------------------------------------------

static void stamp(struct connection* connection, size_t size) {
  uint64_t words[2] = {(uint64_t)connection->index, connection->sequence};
  memcpy(connection->request, words, sizeof words);
  // A byte that changes with the sequence at the end too, so a truncated-then-padded echo fails.
  connection->request[size - 1] = (unsigned char)(connection->sequence * 31u + 7u);
  connection->sent = 0;
  connection->received = 0;
}

// Writes what is left of the request; registers for EPOLLOUT when the socket is full.
static void send_request(int epoll, struct connection* connection, size_t size) {
  while (connection->sent < size) {
    ssize_t written = send(connection->fd, connection->request + connection->sent,
                           size - connection->sent, MSG_NOSIGNAL);
    if (written > 0) {
      connection->sent += (size_t)written;
      continue;
    }
    if (written < 0 && errno == EINTR) {
      continue;
    }
    if (written < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!connection->want_write) {
        connection->want_write = 1;
        watch(epoll, connection->fd, EPOLLIN | EPOLLOUT, connection, EPOLL_CTL_MOD);
      }
      return;
    }
    fail("connection %d: send: %s", connection->index, written < 0 ? strerror(errno) : "0");
  }
  if (connection->want_write) {
    connection->want_write = 0;
    watch(epoll, connection->fd, EPOLLIN, connection, EPOLL_CTL_MOD);
  }
}

// Reads what has arrived; returns 1 when the whole echo is in (and checked).
static int receive_response(struct connection* connection, size_t size) {
  for (;;) {
    // Room for one byte more than expected: a server that sends extra bytes is caught.
    ssize_t got = recv(connection->fd, connection->response + connection->received,
                       size + 1 - connection->received, 0);
    if (got > 0) {
      connection->received += (size_t)got;
      if (connection->received > size) {
        fail("connection %d: the server sent more bytes than were sent to it", connection->index);
      }
      if (connection->received < size) {
        continue;
      }
      if (connection->sent < size) {
        fail("connection %d: the server answered before the request was complete",
             connection->index);
      }
      if (memcmp(connection->request, connection->response, size) != 0) {
        fail("connection %d: request %llu: the echo differs from the request", connection->index,
             (unsigned long long)connection->sequence);
      }
      return 1;
    }
    if (got == 0) {
      fail("connection %d: the server closed the connection after %zu of %zu bytes of an echo",
           connection->index, connection->received, size);
    }
    if (errno == EINTR) {
      continue;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      return 0;
    }
    fail("connection %d: recv: %s", connection->index, strerror(errno));
  }
}

static void run_pingpong(const struct options* options) {
  int epoll = epoll_create1(EPOLL_CLOEXEC);
  if (epoll < 0) {
    fail("epoll_create1: %s", strerror(errno));
  }
  int count = options->connections;
  size_t size = options->size;
  struct connection* connections = calloc((size_t)count, sizeof *connections);
  unsigned char* buffers = malloc((size_t)count * (2 * size + 1));
  if (connections == NULL || buffers == NULL) {
    fail("out of memory");
  }
  connect_all(epoll, options, connections, count);
  for (int index = 0; index < count; ++index) {
    struct connection* connection = &connections[index];
    connection->request = buffers + (size_t)index * (2 * size + 1);
    connection->response = connection->request + size;
    for (size_t byte = 0; byte < size; ++byte) {
      connection->request[byte] = (unsigned char)(byte * 7 + (size_t)index);
    }
    watch(epoll, connection->fd, EPOLLIN, connection, EPOLL_CTL_ADD);
  }

  uint64_t completed = 0;
  uint64_t completed_at_start = 0;
  double start = now();
  double measure_from = start + options->warmup;
  double measure_until = measure_from + options->seconds;
  double measured_start = 0;
  double last_progress = start;
  int measuring = 0;
  for (int index = 0; index < count; ++index) {
    stamp(&connections[index], size);
    send_request(epoll, &connections[index], size);
  }
  struct epoll_event events[512];
  for (;;) {
    double time = now();
    if (!measuring && time >= measure_from) {
      measuring = 1;
      measured_start = time;
      completed_at_start = completed;
    } else if (measuring && time >= measure_until && completed != completed_at_start) {
      // As in pump mode: the window never ends in the iteration that opened it, and an empty
      // window is extended until an echo completes (bounded by the stall check below).
      double elapsed = time - measured_start;
      printf("RESULT tcp_echo_pingpong requests/s %.3f\n",
             (double)(completed - completed_at_start) / elapsed);
      fprintf(stderr, "load_client: %d connections, %zu-byte requests, %llu requests in %.3f s\n",
              count, size, (unsigned long long)(completed - completed_at_start), elapsed);
      break;
    }
    if (time - last_progress > options->stall) {
      fail("no echo completed for %.1f s (server stalled)", options->stall);
    }
    double next = measuring ? measure_until : measure_from;
    int timeout_ms = (int)((next - time) * 1000) + 1;
    if (timeout_ms < 1) {
      timeout_ms = 1;
    }
    if (timeout_ms > 100) {
      timeout_ms = 100;
    }
    int ready = epoll_wait(epoll, events, 512, timeout_ms);
    if (ready < 0) {
      if (errno == EINTR) {
        continue;
      }
      fail("epoll_wait: %s", strerror(errno));
    }
    for (int index = 0; index < ready; ++index) {
      struct connection* connection = events[index].data.ptr;
      if ((events[index].events & EPOLLOUT) && connection->sent < size) {
        send_request(epoll, connection, size);
      }
      if (events[index].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
        if (receive_response(connection, size)) {
          ++completed;
          ++connection->sequence;
          stamp(connection, size);
          send_request(epoll, connection, size);
        }
      }
    }
    if (ready > 0) {
      last_progress = now();
    }
  }
  for (int index = 0; index < count; ++index) {
    close(connections[index].fd);
  }
  close(epoll);
  free(buffers);
  free(connections);
}

// ---- pump ------------------------------------------------------------------------------------

static void run_pump(const struct options* options) {
  int epoll = epoll_create1(EPOLL_CLOEXEC);
  if (epoll < 0) {
    fail("epoll_create1: %s", strerror(errno));
  }
  struct connection connection;
  memset(&connection, 0, sizeof connection);
  connect_all(epoll, options, &connection, 1);
  size_t size = options->size;
  unsigned char* chunk = malloc(size);
  if (chunk == NULL) {
    fail("out of memory");
  }
  for (size_t byte = 0; byte < size; ++byte) {
    chunk[byte] = (unsigned char)(byte * 13 + 1);
  }
  watch(epoll, connection.fd, EPOLLOUT, &connection, EPOLL_CTL_ADD);

  uint64_t written_total = 0;
  uint64_t written_at_start = 0;
  size_t offset = 0;  // into the current chunk
  double start = now();
  double measure_from = start + options->warmup;
  double measure_until = measure_from + options->seconds;
  double measured_start = 0;
  double last_progress = start;
  int measuring = 0;
  struct epoll_event events[4];
  for (;;) {
    // Write until the socket is full.
    uint64_t before = written_total;
    for (;;) {
      ssize_t written = send(connection.fd, chunk + offset, size - offset, MSG_NOSIGNAL);
      if (written > 0) {
        written_total += (uint64_t)written;
        offset = (offset + (size_t)written) % size;
        continue;
      }
      if (written < 0 && errno == EINTR) {
        continue;
      }
      if (written < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        break;
      }
      fail("send: %s", written < 0 ? strerror(errno) : "0 bytes");
    }
    double time = now();
    if (written_total != before) {
      last_progress = time;
    } else if (time - last_progress > options->stall) {
      fail("the server read nothing for %.1f s (stalled)", options->stall);
    }
    if (!measuring && time >= measure_from) {
      // The window never ends in the iteration that opened it: with the tiny windows of smoke
      // runs, both instants can pass during one round of writes.
      measuring = 1;
      measured_start = time;
      written_at_start = written_total;
    } else if (measuring && time >= measure_until) {
      double elapsed = time - measured_start;
      double bytes = (double)(written_total - written_at_start);
      if (bytes == 0) {
        // Nothing was written yet in the window (the socket buffers were full): keep measuring
        // until the server reads; the stall check above bounds the wait.
        goto wait;
      }
      printf("RESULT tcp_pump Gbit/s %.3f\n", bytes * 8 / 1e9 / elapsed);
      fprintf(stderr, "load_client: %zu-byte writes, %.0f bytes in %.3f s\n", size, bytes, elapsed);
      break;
    }
  wait:;
    double next = measuring ? measure_until : measure_from;
    int timeout_ms = (int)((next - time) * 1000) + 1;
    if (timeout_ms < 1) {
      timeout_ms = 1;
    }
    if (timeout_ms > 100) {
      timeout_ms = 100;
    }
    int ready = epoll_wait(epoll, events, 4, timeout_ms);
    if (ready < 0 && errno != EINTR) {
      fail("epoll_wait: %s", strerror(errno));
    }
    if (ready > 0 && (events[0].events & (EPOLLERR | EPOLLHUP))) {
      int error = 0;
      socklen_t length = sizeof error;
      getsockopt(connection.fd, SOL_SOCKET, SO_ERROR, &error, &length);
      fail("the server closed or reset the connection (%s)",
           error != 0 ? strerror(error) : "hang-up");
    }
  }

  // Half-close and wait (bounded) for the server to close its side: it has read to the end.
  if (shutdown(connection.fd, SHUT_WR) != 0) {
    fail("shutdown: %s", strerror(errno));
  }
  watch(epoll, connection.fd, EPOLLIN, &connection, EPOLL_CTL_MOD);
  double deadline = now() + options->stall;
  for (;;) {
    char discard[4096];
    ssize_t got = recv(connection.fd, discard, sizeof discard, 0);
    if (got == 0) {
      break;
    }
    if (got > 0) {
      fail("the sink server sent data back");
    }
    if (errno == ECONNRESET) {
      fail("the server reset the connection instead of closing it after end of stream");
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      fail("recv: %s", strerror(errno));
    }
    double left = deadline - now();
    if (left <= 0) {
      fail("the server did not close the connection within %.1f s of the end of the stream",
           options->stall);
    }
    epoll_wait(epoll, events, 4, (int)(left * 1000) + 1);
  }
  close(connection.fd);
  close(epoll);
  free(chunk);
}

int main(int argc, char** argv) {
  struct options options = parse(argc, argv);
  signal(SIGPIPE, SIG_IGN);
  if (options.mode == PINGPONG) {
    run_pingpong(&options);
  } else {
    run_pump(&options);
  }
  fflush(stdout);
  return 0;
}

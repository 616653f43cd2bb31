// Reference point, not a server: the least an HTTP/1.1 keep-alive server on Linux can do per
// request, the floor of suite http's table. No parsing, no routing, no header beyond the four a
// client needs and the Date that RFC 9110 (6.6.1) asks of every origin server with a clock, as
// weft, nginx, h2o, Go, Node and Beast send it (refreshed once a second, written in place: the
// response has the same size as weft's, which matters where the load client is the bottleneck,
// as in hello_pipelined, since it parses every byte: bench/http/README.md): one thread, one
// level-triggered epoll set, and per readable socket one read() into a 64 KiB buffer, a scan for
// the end of each request's headers ("\r\n\r\n", found across read boundaries too), and one write()
// carrying one copy of the same fixed response per request found (pipelined requests are answered
// in one write). Requests must have no body (the suite sends GETs only). weft's server makes the
// same system calls per batch of requests, so it cannot be faster than this by more than the
// user-space time this skips. The same floor on io_uring, no system call per request:
// bench/peers/net/uring_echo.c --mode hello|static.
//
//   bench_http_bare --port N --mode hello|static --root DIR
//
// hello: every request gets "hello\n" (text/plain). static: every request gets the same 4 KiB
// body, read once at start from DIR/4k.txt (the file every other server serves from disk;
// this one never looks at the path). Contract (READY line, stdin EOF): bench/http/README.md.
// A write the socket cannot take whole is finished through EPOLLOUT before the connection is
// read again; a connection is closed at end of stream or on an error.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "http_floor.h"

#define BUFFER_SIZE (64 * 1024)
#define MAX_EVENTS 256

// Per connection (indexed by fd): how much of "\r\n\r\n" the bytes read so far end with, and
// the part of the last response batch the socket did not take yet.
struct connection {
  int matched;
  char* pending;
  size_t pending_size;
  size_t pending_sent;
};

static char input[BUFFER_SIZE];
static char* output;
static size_t output_capacity;
static struct connection* connections;
static size_t connection_count;
static void die(const char* what) {
  fprintf(stderr, "bench_http_bare: %s: %s\n", what, strerror(errno));
  exit(1);
}

static struct connection* connection_of(int fd) {
  if ((size_t)fd >= connection_count) {
    size_t count = connection_count ? connection_count : 1024;
    while (count <= (size_t)fd) {
      count *= 2;
    }
    connections = realloc(connections, count * sizeof *connections);
    if (connections == NULL) {
      die("realloc");
    }
    memset(connections + connection_count, 0, (count - connection_count) * sizeof *connections);
    connection_count = count;
  }
  return &connections[fd];
}

static void close_connection(int fd) {
  struct connection* state = connection_of(fd);
  free(state->pending);
  memset(state, 0, sizeof *state);
  close(fd);  // closing removes it from the epoll set
}

// Sends what is pending; 1 when all of it is gone, 0 when the socket is full, -1 on an error.
static int flush_pending(int fd, struct connection* state) {
  while (state->pending_sent < state->pending_size) {
    ssize_t wrote =
        write(fd, state->pending + state->pending_sent, state->pending_size - state->pending_sent);
    if (wrote > 0) {
      state->pending_sent += (size_t)wrote;
    } else if (wrote < 0 && errno == EINTR) {
      continue;
    } else if (wrote < 0 && errno == EAGAIN) {
      return 0;
    } else {
      return -1;
    }
  }
  free(state->pending);
  state->pending = NULL;
  state->pending_size = state->pending_sent = 0;
  return 1;
}

// Reads once and answers every complete request in what arrived with one write.
static void serve_readable(int poller, int fd) {
  struct connection* state = connection_of(fd);
  ssize_t got = read(fd, input, sizeof input);
  if (got == 0 || (got < 0 && errno != EAGAIN && errno != EINTR)) {
    close_connection(fd);
    return;
  }
  if (got < 0) {
    return;
  }
  size_t requests = floor_count_requests(&state->matched, input, (size_t)got);
  if (requests == 0) {
    return;
  }
  size_t size = requests * floor_response_size;
  if (size > output_capacity) {
    output_capacity = size * 2;
    free(output);
    output = malloc(output_capacity);
    if (output == NULL) {
      die("malloc");
    }
  }
  for (size_t index = 0; index < requests; ++index) {
    memcpy(output + index * floor_response_size, floor_response, floor_response_size);
  }
  ssize_t wrote = write(fd, output, size);
  if (wrote < 0 && errno != EAGAIN && errno != EINTR) {
    close_connection(fd);
    return;
  }
  size_t sent = wrote > 0 ? (size_t)wrote : 0;
  if (sent == size) {
    return;
  }
  // The socket is full: keep the rest, stop reading until it is sent.
  state->pending = malloc(size - sent);
  if (state->pending == NULL) {
    die("malloc");
  }
  memcpy(state->pending, output + sent, size - sent);
  state->pending_size = size - sent;
  state->pending_sent = 0;
  struct epoll_event writable = {.events = EPOLLOUT, .data.fd = fd};
  epoll_ctl(poller, EPOLL_CTL_MOD, fd, &writable);
}

static void serve_writable(int poller, int fd) {
  struct connection* state = connection_of(fd);
  int flushed = flush_pending(fd, state);
  if (flushed < 0) {
    close_connection(fd);
  } else if (flushed > 0) {
    struct epoll_event readable = {.events = EPOLLIN, .data.fd = fd};
    epoll_ctl(poller, EPOLL_CTL_MOD, fd, &readable);
  }
}

int main(int argc, char** argv) {
  int port = 0;
  int is_static = -1;
  const char* root = NULL;
  for (int index = 1; index < argc; index += 2) {
    if (index + 1 >= argc) {
      fprintf(stderr, "bench_http_bare: %s wants a value\n", argv[index]);
      return 2;
    }
    if (strcmp(argv[index], "--port") == 0) {
      port = atoi(argv[index + 1]);
    } else if (strcmp(argv[index], "--mode") == 0) {
      if (strcmp(argv[index + 1], "hello") == 0) {
        is_static = 0;
      } else if (strcmp(argv[index + 1], "static") == 0) {
        is_static = 1;
      } else {
        fprintf(stderr, "bench_http_bare: --mode must be hello or static, got %s\n",
                argv[index + 1]);
        return 2;
      }
    } else if (strcmp(argv[index], "--root") == 0) {
      root = argv[index + 1];
    } else {
      fprintf(stderr, "bench_http_bare: unknown option %s\n", argv[index]);
      return 2;
    }
  }
  if (port <= 0 || port > 65535 || is_static < 0 || (is_static && root == NULL)) {
    fprintf(stderr, "usage: bench_http_bare --port N --mode hello|static --root DIR\n");
    return 2;
  }
  floor_build_response(is_static, root, "bench_http_bare");
  floor_refresh_date();
  int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listener < 0) {
    die("socket");
  }
  int one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(listener, (struct sockaddr*)&address, sizeof address) != 0) {
    die("bind");
  }
  if (listen(listener, 4096) != 0) {
    die("listen");
  }
  int poller = epoll_create1(EPOLL_CLOEXEC);
  if (poller < 0) {
    die("epoll_create1");
  }
  struct epoll_event interest = {.events = EPOLLIN, .data.fd = listener};
  epoll_ctl(poller, EPOLL_CTL_ADD, listener, &interest);
  interest.data.fd = STDIN_FILENO;  // end of file on stdin: stop
  if (epoll_ctl(poller, EPOLL_CTL_ADD, STDIN_FILENO, &interest) != 0) {
    return 0;  // not a pipe or terminal: already at its end
  }
  printf("READY %d\n", port);
  fflush(stdout);
  for (;;) {
    struct epoll_event ready[MAX_EVENTS];
    int count = epoll_wait(poller, ready, MAX_EVENTS, -1);
    if (count < 0) {
      if (errno == EINTR) {
        continue;
      }
      die("epoll_wait");
    }
    floor_refresh_date();
    for (int index = 0; index < count; ++index) {
      int fd = ready[index].data.fd;
      if (fd == STDIN_FILENO) {
        if (read(STDIN_FILENO, input, sizeof input) <= 0) {
          return 0;
        }
      } else if (fd == listener) {
        for (;;) {
          int accepted = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (accepted < 0) {
            break;
          }
          setsockopt(accepted, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          connection_of(accepted)->matched = 0;
          struct epoll_event added = {.events = EPOLLIN, .data.fd = accepted};
          epoll_ctl(poller, EPOLL_CTL_ADD, accepted, &added);
        }
      } else if (connection_of(fd)->pending != NULL) {
        serve_writable(poller, fd);  // nothing is read before the last batch is sent
      } else {
        serve_readable(poller, fd);
      }
    }
  }
}

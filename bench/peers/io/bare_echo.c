// Reference point, not a runtime: the least a TCP echo server on Linux can do per request, so
// the io suite's table shows where the kernel's own cost lies. No library, no buffering policy,
// no fairness: one thread, one level-triggered epoll set, each socket registered once, and per
// readable socket one read() and one write() of what it returned (the load client keeps at most
// one request per connection in flight, so a write of a few hundred bytes always fits in the
// socket buffer). weft's TCP layer makes the same system calls per request (one read, one
// write, one epoll_wait per batch of ready sockets), so no server can be faster on this path
// than this one by more than its user-space time, which is a few percent of the total here.
//
//   bare_echo --port N [--mode echo|sink]
//
// Listens on 127.0.0.1:N (backlog 511), prints "READY N" once listening, and serves until it
// is killed or its standard input reaches end of file (run.py holds a pipe open and closes it).
// echo: writes back what it read (a short write is finished with blocking-style retries on
// EAGAIN through poll, which never happens with one request in flight); sink: reads and
// discards. TCP_NODELAY on accepted sockets; a connection is closed at end of stream or on an
// error.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUFFER_SIZE (64 * 1024)
#define MAX_EVENTS 256

static char buffer[BUFFER_SIZE];

static void die(const char* what) {
  fprintf(stderr, "bare_echo: %s: %s\n", what, strerror(errno));
  exit(1);
}

// Writes all of [data, data + size) to a non-blocking socket; 0 on success, -1 on error.
static int write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t wrote = write(fd, data, size);
    if (wrote > 0) {
      data += wrote;
      size -= (size_t)wrote;
    } else if (wrote < 0 && errno == EAGAIN) {
      struct pollfd wait = {.fd = fd, .events = POLLOUT};
      poll(&wait, 1, -1);
    } else if (wrote < 0 && errno == EINTR) {
      continue;
    } else {
      return -1;
    }
  }
  return 0;
}

int main(int argc, char** argv) {
  int port = 0;
  int echo = 1;
  for (int index = 1; index + 1 < argc; index += 2) {
    if (strcmp(argv[index], "--port") == 0) {
      port = atoi(argv[index + 1]);
    } else if (strcmp(argv[index], "--mode") == 0) {
      if (strcmp(argv[index + 1], "echo") == 0) {
        echo = 1;
      } else if (strcmp(argv[index + 1], "sink") == 0) {
        echo = 0;
      } else {
        fprintf(stderr, "bare_echo: --mode must be echo or sink, got %s\n", argv[index + 1]);
        return 2;
      }
    } else {
      fprintf(stderr, "bare_echo: unknown option %s\n", argv[index]);
      return 2;
    }
  }
  if (port <= 0 || port > 65535) {
    fprintf(stderr, "usage: bare_echo --port N [--mode echo|sink]\n");
    return 2;
  }
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
  if (listen(listener, 511) != 0) {
    die("listen");
  }
  int poller = epoll_create1(EPOLL_CLOEXEC);
  if (poller < 0) {
    die("epoll_create1");
  }
  struct epoll_event interest = {.events = EPOLLIN, .data.fd = listener};
  epoll_ctl(poller, EPOLL_CTL_ADD, listener, &interest);
  interest.data.fd = STDIN_FILENO;  // end of file on stdin: stop
  epoll_ctl(poller, EPOLL_CTL_ADD, STDIN_FILENO, &interest);
  printf("READY %d\n", port);
  fflush(stdout);
  unsigned long long sunk = 0;
  for (;;) {
    struct epoll_event ready[MAX_EVENTS];
    int count = epoll_wait(poller, ready, MAX_EVENTS, -1);
    if (count < 0) {
      if (errno == EINTR) {
        continue;
      }
      die("epoll_wait");
    }
    for (int index = 0; index < count; ++index) {
      int fd = ready[index].data.fd;
      if (fd == STDIN_FILENO) {
        ssize_t got = read(STDIN_FILENO, buffer, sizeof buffer);
        if (got <= 0) {
          if (!echo) {
            fprintf(stderr, "bare_echo: sank %llu bytes\n", sunk);
          }
          return 0;
        }
        continue;
      }
      if (fd == listener) {
        for (;;) {
          int accepted = accept4(listener, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (accepted < 0) {
            break;
          }
          setsockopt(accepted, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          struct epoll_event added = {.events = EPOLLIN, .data.fd = accepted};
          epoll_ctl(poller, EPOLL_CTL_ADD, accepted, &added);
        }
        continue;
      }
      ssize_t got = read(fd, buffer, sizeof buffer);
      if (got > 0) {
        if (!echo) {
          sunk += (unsigned long long)got;
        } else if (write_all(fd, buffer, (size_t)got) != 0) {
          close(fd);  // closing removes it from the epoll set
        }
      } else if (got == 0 || (errno != EAGAIN && errno != EINTR)) {
        close(fd);
      }
    }
  }
}

// Reference point, not a runtime: the floor of suite net's echo rows with io_uring instead of
// epoll, to tell which part of a server's cost is the TCP stack's and which is readiness
// polling's. bare (bench/peers/io/bare_echo.c) makes one epoll_wait per batch and one read()
// and one write() per message; this program makes no per-message system call at all: each
// connection always has one operation queued in the ring, a recv until it completes, then a
// send of what it received, then a recv again, and one io_uring_enter per turn of the loop
// submits every operation the turn queued and waits for at least one completion. No library
// beyond liburing, no buffering policy, no fairness.
//
//   uring_echo --port N [--mode echo]
//
// Listens on 127.0.0.1:N (backlog 4096), prints "READY N" once listening, and serves until it
// is killed or its standard input reaches end of file (run.py holds a pipe open and closes it;
// a thread blocked in read(2) watches it). The ring: 4096 submission entries, 16384 completion
// entries, single issuer with deferred task work where the kernel has them (6.1; older kernels
// get a plain ring). Accepted sockets get TCP_NODELAY; a connection is closed when its recv
// returns end of stream or an error, or its send fails. A send that writes less than it was
// given is finished by another send of the rest (never seen with one 64-byte message in flight
// per connection). Exits with status 1 and a message naming the call where the ring cannot be
// set up (a kernel without io_uring, or a sandbox that forbids it).
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define BUFFER_SIZE 4096

// What a completion is for: the low bits of its user data (connections are 64-byte aligned).
enum { op_accept = 1, op_recv = 2, op_send = 3, op_mask = 3 };

struct connection {
  int fd;
  unsigned pending;  // bytes of buf not yet sent back
  unsigned sent;     // ... of which already sent
  char buf[BUFFER_SIZE];
};

static struct io_uring ring;
static int listener;

static void die(const char* what, int error) {
  fprintf(stderr, "uring_echo: %s: %s\n", what, strerror(error));
  exit(1);
}

// A free submission entry; a full queue is submitted first to make room.
static struct io_uring_sqe* next_entry(void) {
  struct io_uring_sqe* entry = io_uring_get_sqe(&ring);
  while (entry == NULL) {
    int submitted = io_uring_submit(&ring);
    if (submitted < 0 && submitted != -EINTR && submitted != -EBUSY) {
      die("io_uring_submit", -submitted);
    }
    entry = io_uring_get_sqe(&ring);
  }
  return entry;
}

static void queue_accept(void) {
  struct io_uring_sqe* entry = next_entry();
  io_uring_prep_accept(entry, listener, NULL, NULL, SOCK_CLOEXEC);
  io_uring_sqe_set_data64(entry, op_accept);
}

static void queue_recv(struct connection* c) {
  struct io_uring_sqe* entry = next_entry();
  io_uring_prep_recv(entry, c->fd, c->buf, sizeof c->buf, 0);
  io_uring_sqe_set_data64(entry, (uint64_t)(uintptr_t)c | op_recv);
}

static void queue_send(struct connection* c) {
  struct io_uring_sqe* entry = next_entry();
  io_uring_prep_send(entry, c->fd, c->buf + c->sent, c->pending - c->sent, 0);
  io_uring_sqe_set_data64(entry, (uint64_t)(uintptr_t)c | op_send);
}

static void drop(struct connection* c) {
  close(c->fd);
  free(c);
}

static void* watch_stdin(void* unused) {
  (void)unused;
  char scratch[256];
  for (;;) {
    ssize_t got = read(STDIN_FILENO, scratch, sizeof scratch);
    if (got == 0 || (got < 0 && errno != EINTR)) {
      _exit(0);
    }
  }
  return NULL;
}

int main(int argc, char** argv) {
  int port = 0;
  for (int index = 1; index + 1 < argc; index += 2) {
    if (strcmp(argv[index], "--port") == 0) {
      port = atoi(argv[index + 1]);
    } else if (strcmp(argv[index], "--mode") == 0) {
      if (strcmp(argv[index + 1], "echo") != 0) {
        fprintf(stderr, "uring_echo: --mode must be echo, got %s\n", argv[index + 1]);
        return 2;
      }
    } else {
      fprintf(stderr, "uring_echo: unknown option %s\n", argv[index]);
      return 2;
    }
  }
  if (port <= 0 || port > 65535) {
    fprintf(stderr, "usage: uring_echo --port N [--mode echo]\n");
    return 2;
  }
  listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listener < 0) {
    die("socket", errno);
  }
  int one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(listener, (struct sockaddr*)&address, sizeof address) != 0) {
    die("bind", errno);
  }
  if (listen(listener, 4096) != 0) {
    die("listen", errno);
  }
  struct io_uring_params params;
  memset(&params, 0, sizeof params);
  params.flags = IORING_SETUP_CQSIZE | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
  params.cq_entries = 16384;
  int status = io_uring_queue_init_params(4096, &ring, &params);
  if (status == -EINVAL) {  // a kernel before 6.1: no single issuer or deferred task work
    memset(&params, 0, sizeof params);
    params.flags = IORING_SETUP_CQSIZE;
    params.cq_entries = 16384;
    status = io_uring_queue_init_params(4096, &ring, &params);
  }
  if (status < 0) {
    die("io_uring_queue_init_params", -status);
  }
  pthread_t watcher;
  status = pthread_create(&watcher, NULL, watch_stdin, NULL);
  if (status != 0) {
    die("pthread_create", status);
  }
  queue_accept();
  printf("READY %d\n", port);
  fflush(stdout);
  for (;;) {
    status = io_uring_submit_and_wait(&ring, 1);
    if (status < 0 && status != -EINTR && status != -EBUSY) {
      die("io_uring_submit_and_wait", -status);
    }
    struct io_uring_cqe* completion;
    unsigned head;
    unsigned seen = 0;
    io_uring_for_each_cqe(&ring, head, completion) {
      ++seen;
      uint64_t data = io_uring_cqe_get_data64(completion);
      int result = completion->res;
      struct connection* c = (struct connection*)(uintptr_t)(data & ~(uint64_t)op_mask);
      switch ((int)(data & op_mask)) {
        case op_accept:
          if (result >= 0) {
            setsockopt(result, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            struct connection* fresh = aligned_alloc(64, sizeof *fresh);
            if (fresh == NULL) {
              close(result);
            } else {
              fresh->fd = result;
              queue_recv(fresh);
            }
          } else if (result != -EINTR && result != -ECONNABORTED && result != -EMFILE &&
                     result != -ENFILE) {
            die("accept", -result);
          }
          queue_accept();
          break;
        case op_recv:
          if (result > 0) {
            c->pending = (unsigned)result;
            c->sent = 0;
            queue_send(c);
          } else {
            drop(c);
          }
          break;
        default:  // op_send
          if (result <= 0) {
            drop(c);
          } else if ((c->sent += (unsigned)result) < c->pending) {
            queue_send(c);
          } else {
            queue_recv(c);
          }
          break;
      }
    }
    io_uring_cq_advance(&ring, seen);
  }
}

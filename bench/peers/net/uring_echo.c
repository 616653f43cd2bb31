// Reference point, not a runtime: the floor of suite net's echo rows with io_uring instead of
// epoll, to tell which part of a server's cost is the TCP stack's and which is readiness
// polling's. bare (bench/peers/io/bare_echo.c) makes one epoll_wait per batch and one read()
// and one write() per message; this program makes no per-message system call at all: each
// connection always has one operation queued in the ring, a recv until it completes, then a
// send of what it received, then a recv again, and one io_uring_enter per turn of the loop
// submits every operation the turn queued and waits for at least one completion. No library
// beyond liburing, no buffering policy, no fairness.
//
//   uring_echo --port N [--mode echo|hello|static [--root DIR]] [--recv single|multishot]
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
//
// --mode hello and --mode static (with --root DIR) make it the HTTP floor of suite http on
// io_uring, by hand (bench/http/README.md, "The floor on io_uring"): bench_http_bare's fixed
// response and request count (bench/peers/http/http_floor.h), each recv's complete requests
// answered by one send of as many copies of the response; the same READY and stdin contract.
// Requests must have no body. Single recv only.
//
// --recv multishot (Linux 6.0; not used by run.py, for bench/net/README.md's comparison): each
// connection has one multishot recv armed for its whole life instead of a recv queued again
// after every message, receiving into a ring of 4096 provided buffers of 2 KiB that all
// connections share; each completion's bytes are copied behind what the connection still has to
// send and the buffer goes back to the ring at once. A send is queued when none is in flight.
// A connection whose unsent bytes would pass BUFFER_SIZE, or whose recv reports an error (the
// ring empty: ENOBUFS), is closed; its memory is freed once neither its recv nor a send is left
// in the ring.
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

#include "../http/http_floor.h"

#define BUFFER_SIZE 4096

// What a completion is for: the low bits of its user data (connections are 64-byte aligned).
enum { op_accept = 1, op_recv = 2, op_send = 3, op_mask = 3 };

struct connection {
  int fd;
  int matched;  // --mode hello|static: how much of "\r\n\r\n" the bytes so far end with
  char* out;    // what is sent: buf (echo), or the responses (hello|static, malloc'ed)
  unsigned out_capacity;
  unsigned pending;  // bytes of out not yet sent
  unsigned sent;     // ... of which already sent
  // Its recv is in the ring (armed, with --recv multishot), a send is, it was closed.
  unsigned char receiving, sending, closed;
  char buf[BUFFER_SIZE];
};

static struct io_uring ring;
static int listener;
static int multishot;  // --recv multishot
static int http_mode;  // --mode hello|static

// The provided buffers of --recv multishot (buffer group 1).
#define RING_BUFFERS 4096
#define RING_BUFFER_SIZE 2048
#define RING_GROUP 1
static struct io_uring_buf_ring* provided;
static char* provided_memory;

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
  c->receiving = 1;
  if (multishot) {
    io_uring_prep_recv_multishot(entry, c->fd, NULL, 0, 0);
    entry->flags |= IOSQE_BUFFER_SELECT;
    entry->buf_group = RING_GROUP;
  } else {
    io_uring_prep_recv(entry, c->fd, c->buf, sizeof c->buf, 0);
  }
  io_uring_sqe_set_data64(entry, (uint64_t)(uintptr_t)c | op_recv);
}

static void queue_send(struct connection* c) {
  struct io_uring_sqe* entry = next_entry();
  c->sending = 1;
  io_uring_prep_send(entry, c->fd, c->out + c->sent, c->pending - c->sent, 0);
  io_uring_sqe_set_data64(entry, (uint64_t)(uintptr_t)c | op_send);
}

// Closes the connection and frees it once nothing of it is left in the ring (a multishot recv
// still armed ends, with end of stream, at the shutdown).
static void retire(struct connection* c) {
  if (!c->closed) {
    c->closed = 1;
    shutdown(c->fd, SHUT_RDWR);
    close(c->fd);
  }
  if (!c->receiving && !c->sending) {
    if (c->out != c->buf) {
      free(c->out);
    }
    free(c);
  }
}

static void set_up_provided_buffers(void) {
  provided = aligned_alloc(4096, RING_BUFFERS * sizeof(struct io_uring_buf));
  provided_memory = malloc((size_t)RING_BUFFERS * RING_BUFFER_SIZE);
  if (provided == NULL || provided_memory == NULL) {
    die("malloc", ENOMEM);
  }
  io_uring_buf_ring_init(provided);
  struct io_uring_buf_reg registration = {
      .ring_addr = (unsigned long)provided, .ring_entries = RING_BUFFERS, .bgid = RING_GROUP};
  int status = io_uring_register_buf_ring(&ring, &registration, 0);
  if (status != 0) {
    die("io_uring_register_buf_ring (--recv multishot needs Linux 5.19)", -status);
  }
  for (int index = 0; index < RING_BUFFERS; ++index) {
    io_uring_buf_ring_add(provided, provided_memory + (size_t)index * RING_BUFFER_SIZE,
                          RING_BUFFER_SIZE, (unsigned short)index,
                          io_uring_buf_ring_mask(RING_BUFFERS), index);
  }
  io_uring_buf_ring_advance(provided, RING_BUFFERS);
}

// One completion of a connection's recv: the bytes go behind what is still to be sent, and a
// send of them is queued unless one is in flight.
static void received(struct connection* c, const struct io_uring_cqe* completion) {
  int result = completion->res;
  if ((completion->flags & IORING_CQE_F_MORE) == 0) {
    c->receiving = 0;
  }
  if (!multishot) {
    if (result <= 0) {
      retire(c);
      return;
    }
    if (!http_mode) {
      c->pending = (unsigned)result;  // into buf, queued only with nothing pending
      queue_send(c);
      return;
    }
    size_t requests = floor_count_requests(&c->matched, c->buf, (size_t)result);
    if (requests == 0) {
      queue_recv(c);
      return;
    }
    size_t size = requests * floor_response_size;
    if (size > c->out_capacity) {
      char* bigger = malloc(size * 2);
      if (bigger == NULL) {
        die("malloc", ENOMEM);
      }
      free(c->out);
      c->out = bigger;
      c->out_capacity = (unsigned)(size * 2);
    }
    for (size_t index = 0; index < requests; ++index) {
      memcpy(c->out + index * floor_response_size, floor_response, floor_response_size);
    }
    c->pending = (unsigned)size;
    queue_send(c);
    return;
  }
  if (result > 0 && (completion->flags & IORING_CQE_F_BUFFER) != 0) {
    unsigned id = completion->flags >> IORING_CQE_BUFFER_SHIFT;
    char* bytes = provided_memory + (size_t)id * RING_BUFFER_SIZE;
    int fits = !c->closed && c->pending + (unsigned)result <= BUFFER_SIZE;
    if (fits) {
      memcpy(c->buf + c->pending, bytes, (size_t)result);
      c->pending += (unsigned)result;
    }
    io_uring_buf_ring_add(provided, bytes, RING_BUFFER_SIZE, (unsigned short)id,
                          io_uring_buf_ring_mask(RING_BUFFERS), 0);
    io_uring_buf_ring_advance(provided, 1);
    if (!fits) {
      retire(c);
      return;
    }
    if (!c->sending) {
      queue_send(c);
    }
    if (!c->receiving) {
      queue_recv(c);  // the kernel ended the multishot (it may): armed again
    }
    return;
  }
  retire(c);  // end of stream, an error, or the end of a closed connection's recv
}

// One completion of a connection's send: the rest is sent, or (single recv) the next recv
// queued.
static void sent_some(struct connection* c, int result) {
  c->sending = 0;
  if (c->closed || result <= 0) {
    retire(c);
    return;
  }
  c->sent += (unsigned)result;
  if (c->sent < c->pending) {
    queue_send(c);
    return;
  }
  c->pending = c->sent = 0;
  if (!multishot) {
    queue_recv(c);
  }
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
  const char* root = NULL;
  for (int index = 1; index + 1 < argc; index += 2) {
    if (strcmp(argv[index], "--port") == 0) {
      port = atoi(argv[index + 1]);
    } else if (strcmp(argv[index], "--recv") == 0) {
      if (strcmp(argv[index + 1], "multishot") == 0) {
        multishot = 1;
      } else if (strcmp(argv[index + 1], "single") != 0) {
        fprintf(stderr, "uring_echo: --recv must be single or multishot, got %s\n",
                argv[index + 1]);
        return 2;
      }
    } else if (strcmp(argv[index], "--mode") == 0) {
      if (strcmp(argv[index + 1], "hello") == 0) {
        http_mode = 1;
      } else if (strcmp(argv[index + 1], "static") == 0) {
        http_mode = 2;
      } else if (strcmp(argv[index + 1], "echo") != 0) {
        fprintf(stderr, "uring_echo: --mode must be echo, hello or static, got %s\n",
                argv[index + 1]);
        return 2;
      }
    } else if (strcmp(argv[index], "--root") == 0) {
      root = argv[index + 1];
    } else {
      fprintf(stderr, "uring_echo: unknown option %s\n", argv[index]);
      return 2;
    }
  }
  if (port <= 0 || port > 65535 || (http_mode == 2 && root == NULL) || (http_mode && multishot)) {
    fprintf(stderr,
            "usage: uring_echo --port N [--mode echo|hello|static [--root DIR]] "
            "[--recv single|multishot] (static needs --root; multishot is for echo)\n");
    return 2;
  }
  if (http_mode) {
    floor_build_response(http_mode == 2, root, "uring_echo");
    floor_refresh_date();
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
  if (multishot) {
    set_up_provided_buffers();
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
    if (http_mode) {
      floor_refresh_date();
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
              fresh->matched = 0;
              fresh->out = http_mode ? NULL : fresh->buf;
              fresh->out_capacity = 0;
              fresh->pending = fresh->sent = 0;
              fresh->receiving = fresh->sending = fresh->closed = 0;
              queue_recv(fresh);
            }
          } else if (result != -EINTR && result != -ECONNABORTED && result != -EMFILE &&
                     result != -ENFILE) {
            die("accept", -result);
          }
          queue_accept();
          break;
        case op_recv:
          received(c, completion);
          break;
        default:  // op_send
          sent_some(c, result);
          break;
      }
    }
    io_uring_cq_advance(&ring, seen);
  }
}

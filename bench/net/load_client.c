// The net suite's one load client, used against every server (weft's and the peers'): C, epoll,
// non-blocking sockets, one thread. bench/run.py pins it to one core and the server to another,
// and gives it the server's PID so that it can read the server's CPU time at the exact edges of
// its measured window. It only ever connects to 127.0.0.1. Contract: bench/net/README.md.
//
//   load_client --port N --mode echo|ws|pipe [--connections C] [--size B] [--seconds S]
//               [--warmup W] [--stall T] [--name NAME] [--server-pid P] [--sink-port Q]
//
// echo: C connections (default 64), all established before anything is sent; each sends a
//   B-byte message (default 64) and waits for all of it to come back, byte for byte, before it
//   sends the next (one message in flight per connection: ping-pong).
// ws: the same over WebSocket (RFC 6455): each connection first does the opening handshake
//   (GET / with Upgrade: websocket; the answer must be 101 with the right Sec-WebSocket-Accept,
//   computed with OpenSSL's SHA-1), then sends every message as one masked binary frame and
//   reads the server's unmasked frames (a fragmented echo is reassembled) until the message is
//   complete; its payload must equal what was sent. A close, ping or text frame fails the run.
// pipe: see load_client_pipe.c (bytes streamed through a proxy to a sink the client holds).
// The handshake is in load_client_ws.c, the helpers every mode shares in load_client_common.c.
//
// Results (stdout), measured over S seconds after W seconds of warm-up (defaults 5 and 1):
//   RESULT NAME requests/s X        messages completed in the window / its length
//   RESULT NAME.p99 us Y            99th percentile of the round-trip time of the messages
//                                   completed in the window: from the first byte's send to the
//                                   last byte of the echo read (log-linear histogram, < 1.6%)
//   RESULT NAME.cpu us/request Z    with --server-pid: the server's utime + stime (all its
//                                   threads, /proc/P/stat) read when the window opens and when it
//                                   closes, the difference divided by the messages completed in
//                                   between, in microseconds
// NAME defaults to the mode's name. Every message carries its connection and sequence number in
// its first 16 bytes and a sequence-dependent last byte, so a stale, reordered, short or
// corrupted echo is caught. The client fails (exit code 1, "load_client: error: ..." on stderr)
// when a connection is refused, reset or closed early, the echo differs, or nothing progresses
// for T seconds (default 5). Every wait is bounded: it never runs much longer than W + S + T.

#define _GNU_SOURCE
#include "load_client.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

// ---- options ----------------------------------------------------------------------------------

static void usage(void) {
  fprintf(stderr,
          "usage: load_client --port N --mode echo|ws|pipe [--connections C] [--size BYTES]\n"
          "                   [--seconds S] [--warmup S] [--stall S] [--name NAME]\n"
          "                   [--server-pid PID] [--sink-port Q]\n");
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
  struct options options = {0, MODE_ECHO, -1, 0, 5.0, 1.0, 5.0, NULL, 0, 0};
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
      if (strcmp(value, "echo") == 0) {
        options.mode = MODE_ECHO;
      } else if (strcmp(value, "ws") == 0) {
        options.mode = MODE_WS;
      } else if (strcmp(value, "pipe") == 0) {
        options.mode = MODE_PIPE;
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
    } else if (strcmp(flag, "--name") == 0) {
      options.name = value;
    } else if (strcmp(flag, "--server-pid") == 0) {
      options.server_pid = (int)parse_number(value, flag);
    } else if (strcmp(flag, "--sink-port") == 0) {
      options.sink_port = (int)parse_number(value, flag);
    } else {
      usage();
    }
  }
  if (!mode_given || options.port <= 0 || options.port > 65535 || options.seconds <= 0) {
    usage();
  }
  if (options.name == NULL) {
    options.name = options.mode == MODE_ECHO ? "echo" : options.mode == MODE_WS ? "ws" : "pipe";
  }
  if (options.connections < 0) {
    options.connections = options.mode == MODE_PIPE ? 1 : 64;
  }
  if (options.size == 0) {
    options.size = options.mode == MODE_PIPE ? 65536 : 64;
  }
  if (options.connections < 1 || options.connections > 10000 ||
      (options.mode == MODE_PIPE && options.connections != 1)) {
    fail("--connections must be 1..10000 (exactly 1 for pipe)");
  }
  if (options.mode != MODE_PIPE && (options.size < 16 || options.size > (1u << 24))) {
    fail("--size must be 16 bytes .. 16 MiB in echo and ws modes");
  }
  if (options.mode == MODE_PIPE && (options.sink_port <= 0 || options.sink_port > 65535)) {
    fail("pipe mode needs --sink-port (the port the proxy forwards to)");
  }
  if (options.server_pid < 0) {
    fail("--server-pid must be a process id");
  }
  return options;
}

// ---- echo and ws: one message in flight per connection ----------------------------------------

struct connection {
  int fd;
  int index;
  int want_write;           // EPOLLOUT registered
  uint64_t sequence;        // of the message in flight
  uint64_t sent_at;         // ns, when its first byte was sent
  size_t sent;              // bytes of `wire` written so far
  size_t wire_size;         // what goes on the wire for one message (ws: the masked frame)
  unsigned char* payload;   // the message (size bytes)
  unsigned char* wire;      // the bytes to send (echo: the payload itself)
  unsigned char* received;  // what came back so far
  size_t received_size;
  size_t message_size;  // ws: payload bytes of the echo reassembled so far
  uint32_t mask_state;  // ws: xorshift state for the masking keys
};

struct run {
  const struct options* options;
  int epoll;
  size_t header;    // ws: frame header bytes the client sends (with the mask key)
  size_t capacity;  // of each connection's `received`
};

static size_t client_frame_header(size_t size) {
  return (size < 126 ? 2 : size < 65536 ? 4 : 10) + 4;
}

// Writes the next message's payload (and, for ws, its masked frame) for the connection.
static void stamp(const struct run* run, struct connection* connection) {
  size_t size = run->options->size;
  uint64_t words[2] = {(uint64_t)connection->index, connection->sequence};
  memcpy(connection->payload, words, sizeof words);
  // A byte that changes with the sequence at the end too, so a truncated-then-padded echo fails.
  connection->payload[size - 1] = (unsigned char)(connection->sequence * 31u + 7u);
  connection->sent = 0;
  connection->received_size = 0;
  connection->message_size = 0;
  if (run->options->mode != MODE_WS) {
    return;
  }
  unsigned char* frame = connection->wire;
  frame[0] = 0x82;  // FIN, binary
  size_t at = 2;
  if (size < 126) {
    frame[1] = (unsigned char)(0x80 | size);
  } else if (size < 65536) {
    frame[1] = 0x80 | 126;
    frame[2] = (unsigned char)(size >> 8);
    frame[3] = (unsigned char)size;
    at = 4;
  } else {
    frame[1] = 0x80 | 127;
    for (int byte = 0; byte < 8; ++byte) {
      frame[2 + byte] = (unsigned char)((uint64_t)size >> (56 - 8 * byte));
    }
    at = 10;
  }
  // A fresh masking key per frame (xorshift32: not secret, but never the same twice in a row).
  uint32_t state = connection->mask_state;
  state ^= state << 13;
  state ^= state >> 17;
  state ^= state << 5;
  connection->mask_state = state;
  unsigned char key[4];
  memcpy(key, &state, 4);
  memcpy(frame + at, key, 4);
  at += 4;
  for (size_t byte = 0; byte < size; ++byte) {
    frame[at + byte] = connection->payload[byte] ^ key[byte & 3];
  }
}

// Writes what is left of the message; registers for EPOLLOUT when the socket is full.
static void send_message(const struct run* run, struct connection* connection) {
  if (connection->sent == 0) {
    connection->sent_at = now_ns();
  }
  while (connection->sent < connection->wire_size) {
    ssize_t written = send(connection->fd, connection->wire + connection->sent,
                           connection->wire_size - connection->sent, MSG_NOSIGNAL);
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
        watch(run->epoll, connection->fd, EPOLLIN | EPOLLOUT, connection, EPOLL_CTL_MOD);
      }
      return;
    }
    fail("connection %d: send: %s", connection->index, written < 0 ? strerror(errno) : "0");
  }
  if (connection->want_write) {
    connection->want_write = 0;
    watch(run->epoll, connection->fd, EPOLLIN, connection, EPOLL_CTL_MOD);
  }
}

// ws: consumes the complete frames at the front of `received`; returns 1 once the message's
// last frame is in and its payload is checked.
static int parse_frames(const struct run* run, struct connection* connection) {
  size_t size = run->options->size;
  // `received` holds the payload reassembled so far (message_size bytes), then frames not yet
  // parsed.
  size_t at = connection->message_size;
  unsigned char* bytes = connection->received;
  for (;;) {
    size_t left = connection->received_size - at;
    if (left < 2) {
      break;
    }
    unsigned opcode = bytes[at] & 0x0f;
    int final = (bytes[at] & 0x80) != 0;
    if (bytes[at + 1] & 0x80) {
      fail("connection %d: the server sent a masked frame (RFC 6455 5.1 forbids it)",
           connection->index);
    }
    uint64_t length = bytes[at + 1] & 0x7f;
    size_t header = 2;
    if (length == 126) {
      header = 4;
      if (left < header) {
        break;
      }
      length = ((uint64_t)bytes[at + 2] << 8) | bytes[at + 3];
    } else if (length == 127) {
      header = 10;
      if (left < header) {
        break;
      }
      length = 0;
      for (int byte = 0; byte < 8; ++byte) {
        length = (length << 8) | bytes[at + 2 + byte];
      }
    }
    if (opcode == 0x8) {
      unsigned code = length >= 2 && left >= header + 2
                          ? ((unsigned)bytes[at + header] << 8) | bytes[at + header + 1]
                          : 0;
      fail("connection %d: the server sent a close frame (code %u)", connection->index, code);
    }
    if (opcode != 0x2 && opcode != 0x0 && opcode != 0xA) {
      fail("connection %d: the server sent a frame with opcode 0x%x; expected the binary echo",
           connection->index, opcode);
    }
    if (opcode != 0xA && connection->message_size + length > size) {
      fail("connection %d: the echo is longer than the %zu-byte message", connection->index, size);
    }
    if (left - header < length) {
      break;
    }
    if (opcode != 0xA) {  // an unsolicited pong is allowed and ignored (RFC 6455 5.5.3)
      // The reassembled payload is built in place over the frames already consumed.
      memmove(bytes + connection->message_size, bytes + at + header, (size_t)length);
      connection->message_size += (size_t)length;
    }
    at += header + (size_t)length;
    if (opcode != 0xA && final) {
      if (at != connection->received_size) {
        fail("connection %d: the server sent more than the echo", connection->index);
      }
      if (connection->message_size != size || memcmp(bytes, connection->payload, size) != 0) {
        fail("connection %d: message %llu: the echo differs from the message", connection->index,
             (unsigned long long)connection->sequence);
      }
      return 1;
    }
  }
  // Keep the reassembled payload at the front and the unparsed rest right after it.
  memmove(bytes + connection->message_size, bytes + at, connection->received_size - at);
  connection->received_size = connection->message_size + (connection->received_size - at);
  return 0;
}

// Reads what has arrived; returns 1 when the whole echo is in (and checked).
static int receive_echo(const struct run* run, struct connection* connection) {
  size_t size = run->options->size;
  int ws = run->options->mode == MODE_WS;
  for (;;) {
    // Room for one byte more than expected (echo): a server that sends extra bytes is caught.
    size_t room =
        ws ? run->capacity - connection->received_size : size + 1 - connection->received_size;
    if (room == 0) {
      fail("connection %d: the server sent more than the echo", connection->index);
    }
    ssize_t got = recv(connection->fd, connection->received + connection->received_size, room, 0);
    if (got > 0) {
      connection->received_size += (size_t)got;
      if (ws) {
        if (parse_frames(run, connection)) {
          return 1;
        }
        continue;
      }
      if (connection->received_size > size) {
        fail("connection %d: the server sent more bytes than were sent to it", connection->index);
      }
      if (connection->received_size < size) {
        continue;
      }
      if (connection->sent < connection->wire_size) {
        fail("connection %d: the server answered before the message was complete",
             connection->index);
      }
      if (memcmp(connection->payload, connection->received, size) != 0) {
        fail("connection %d: message %llu: the echo differs from the message", connection->index,
             (unsigned long long)connection->sequence);
      }
      return 1;
    }
    if (got == 0) {
      fail("connection %d: the server closed the connection in the middle of an echo",
           connection->index);
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

// ---- the measured run -------------------------------------------------------------------------

static void run_pingpong(const struct options* options) {
  struct run run = {options, epoll_create1(EPOLL_CLOEXEC), 0, 0};
  if (run.epoll < 0) {
    fail("epoll_create1: %s", strerror(errno));
  }
  int ws = options->mode == MODE_WS;
  int count = options->connections;
  size_t size = options->size;
  run.header = ws ? client_frame_header(size) : 0;
  // ws: the echo's frames (headers of at most 10 bytes each) plus slack for a fragmented one.
  run.capacity = ws ? 2 * size + 1024 : size + 1;
  size_t wire_size = ws ? run.header + size : size;
  size_t stride = size + (ws ? wire_size : 0) + run.capacity;
  struct connection* connections = calloc((size_t)count, sizeof *connections);
  unsigned char* buffers = malloc((size_t)count * stride);
  int* fds = malloc((size_t)count * sizeof *fds);
  struct histogram* latencies = calloc(1, sizeof *latencies);
  if (connections == NULL || buffers == NULL || fds == NULL || latencies == NULL) {
    fail("out of memory");
  }
  connect_all(options->port, fds, count, 10.0);
  for (int index = 0; index < count; ++index) {
    struct connection* connection = &connections[index];
    connection->fd = fds[index];
    connection->index = index;
    connection->payload = buffers + (size_t)index * stride;
    connection->wire = ws ? connection->payload + size : connection->payload;
    connection->received = connection->payload + size + (ws ? wire_size : 0);
    connection->wire_size = wire_size;
    connection->mask_state = 2463534242u + (uint32_t)index * 7919u;
    for (size_t byte = 0; byte < size; ++byte) {
      connection->payload[byte] = (unsigned char)(byte * 7 + (size_t)index);
    }
  }
  if (ws) {
    handshake_all(options, fds);
  }
  for (int index = 0; index < count; ++index) {
    watch(run.epoll, connections[index].fd, EPOLLIN, &connections[index], EPOLL_CTL_ADD);
  }

  uint64_t completed = 0;
  uint64_t completed_at_start = 0;
  double start = now();
  double measure_from = start + options->warmup;
  double measure_until = measure_from + options->seconds;
  double measured_start = 0;
  double cpu_at_start = 0;
  double last_progress = start;
  int measuring = 0;
  for (int index = 0; index < count; ++index) {
    stamp(&run, &connections[index]);
    send_message(&run, &connections[index]);
  }
  struct epoll_event events[512];
  for (;;) {
    double time = now();
    if (!measuring && time >= measure_from) {
      measuring = 1;
      measured_start = time;
      completed_at_start = completed;
      if (options->server_pid > 0) {
        cpu_at_start = server_cpu_seconds(options->server_pid);
      }
    } else if (measuring && time >= measure_until && completed != completed_at_start) {
      // The window never ends in the iteration that opened it, and an empty window is extended
      // until an echo completes (bounded by the stall check below).
      double cpu =
          options->server_pid > 0 ? server_cpu_seconds(options->server_pid) - cpu_at_start : 0;
      double elapsed = now() - measured_start;
      uint64_t requests = completed - completed_at_start;
      printf("RESULT %s requests/s %.3f\n", options->name, (double)requests / elapsed);
      printf("RESULT %s.p99 us %.3f\n", options->name,
             (double)histogram_percentile(latencies, 0.99) / 1000.0);
      if (options->server_pid > 0) {
        printf("RESULT %s.cpu us/request %.4f\n", options->name, cpu * 1e6 / (double)requests);
      }
      fprintf(stderr,
              "load_client: %d %s connections, %zu-byte messages, %llu in %.3f s; latency p50 "
              "%.1f us, p99 %.1f us, p99.9 %.1f us; server CPU %.3f s (%.0f%% of its core)\n",
              count, ws ? "WebSocket" : "TCP", size, (unsigned long long)requests, elapsed,
              (double)histogram_percentile(latencies, 0.5) / 1000.0,
              (double)histogram_percentile(latencies, 0.99) / 1000.0,
              (double)histogram_percentile(latencies, 0.999) / 1000.0, cpu, cpu * 100 / elapsed);
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
    int ready = epoll_wait(run.epoll, events, 512, timeout_ms);
    if (ready < 0) {
      if (errno == EINTR) {
        continue;
      }
      fail("epoll_wait: %s", strerror(errno));
    }
    for (int index = 0; index < ready; ++index) {
      struct connection* connection = events[index].data.ptr;
      if ((events[index].events & EPOLLOUT) && connection->sent < connection->wire_size) {
        send_message(&run, connection);
      }
      if (events[index].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
        if (receive_echo(&run, connection)) {
          if (measuring) {
            histogram_add(latencies, now_ns() - connection->sent_at);
          }
          ++completed;
          ++connection->sequence;
          stamp(&run, connection);
          send_message(&run, connection);
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
  close(run.epoll);
  free(latencies);
  free(fds);
  free(buffers);
  free(connections);
}

int main(int argc, char** argv) {
  struct options options = parse(argc, argv);
  signal(SIGPIPE, SIG_IGN);
  srand((unsigned)getpid());
  if (options.mode == MODE_PIPE) {
    run_pipe(&options);
  } else {
    run_pingpong(&options);
  }
  fflush(stdout);
  return 0;
}

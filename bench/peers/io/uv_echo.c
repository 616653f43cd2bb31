// Peer: a raw libuv TCP server, callbacks only (no coroutines) — the baseline weft's TCP layer is
// measured against. bench/run.py starts it pinned to one core and points bench/io/load_client
// (pinned to another) at it.
//
//   uv_echo --port N [--mode echo|sink]
//
// Listens on 127.0.0.1:N (backlog 511), prints "READY N" once listening, and serves until it is
// killed or its standard input reaches end of file (run.py holds a pipe open and closes it).
//
// echo: every connection reads into 64 KiB buffers (libuv's usual suggested size) and writes
//   back exactly what it read, in order. Reading goes on while a write is in flight (each read
//   gets its own buffer from a free list; a buffer returns to the list when its write
//   completes), as in libuv's own echo benchmarks; reading pauses only when more than 1 MiB
//   waits to be written, so a client that does not read cannot make it grow without bound.
// sink: every connection reads into one 64 KiB buffer and discards it, counting the bytes (the
//   total goes to stderr on exit).
// Both: TCP_NODELAY on accepted sockets; at end of stream the connection is closed (after the
// writes in flight); a reset connection is closed quietly.

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#define BUFFER_SIZE (64 * 1024)
#define HIGH_WATER (1024 * 1024)

struct buffer {
  struct buffer* next;
  char data[BUFFER_SIZE];
};

struct connection {
  uv_tcp_t tcp;
  int reading;
};

struct echo_write {
  uv_write_t request;
  struct buffer* buffer;
};

static uv_loop_t* loop;
static uv_tcp_t server;
static uv_poll_t stdin_watch;
static int sink_mode;
static struct buffer* free_buffers;
static uint64_t sunk_bytes;
static char sink_buffer[BUFFER_SIZE];

static void die(const char* what, int error) {
  fprintf(stderr, "uv_echo: %s: %s\n", what, uv_strerror(error));
  exit(1);
}

static struct buffer* take_buffer(void) {
  struct buffer* buffer = free_buffers;
  if (buffer != NULL) {
    free_buffers = buffer->next;
    return buffer;
  }
  buffer = malloc(sizeof *buffer);
  if (buffer == NULL) {
    fprintf(stderr, "uv_echo: out of memory\n");
    exit(1);
  }
  return buffer;
}

static void give_buffer(struct buffer* buffer) {
  buffer->next = free_buffers;
  free_buffers = buffer;
}

// The buffer header sits just before the data libuv reads into.
static struct buffer* buffer_of(char* data) {
  return (struct buffer*)(data - offsetof(struct buffer, data));
}

static void on_close(uv_handle_t* handle) { free(handle); }

static void close_connection(struct connection* connection) {
  if (!uv_is_closing((uv_handle_t*)&connection->tcp)) {
    uv_close((uv_handle_t*)&connection->tcp, on_close);
  }
}

static void echo_alloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf) {
  (void)handle;
  (void)suggested;
  struct buffer* buffer = take_buffer();
  *buf = uv_buf_init(buffer->data, BUFFER_SIZE);
}

static void echo_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);

static void echo_written(uv_write_t* request, int status) {
  struct echo_write* write = (struct echo_write*)request;
  struct connection* connection = (struct connection*)request->handle;
  give_buffer(write->buffer);
  free(write);
  if (status < 0) {
    close_connection(connection);  // reset by the peer, or closing
    return;
  }
  if (!connection->reading && !uv_is_closing((uv_handle_t*)&connection->tcp) &&
      uv_stream_get_write_queue_size((uv_stream_t*)&connection->tcp) < HIGH_WATER) {
    connection->reading = 1;
    uv_read_start((uv_stream_t*)&connection->tcp, echo_alloc, echo_read);
  }
}

static void echo_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  struct connection* connection = (struct connection*)stream;
  if (nread <= 0) {
    if (buf->base != NULL) {
      give_buffer(buffer_of(buf->base));
    }
    if (nread < 0) {  // UV_EOF or an error: close once the writes in flight are done
      close_connection(connection);
    }
    return;
  }
  struct echo_write* write = malloc(sizeof *write);
  if (write == NULL) {
    fprintf(stderr, "uv_echo: out of memory\n");
    exit(1);
  }
  write->buffer = buffer_of(buf->base);
  uv_buf_t out = uv_buf_init(buf->base, (unsigned int)nread);
  int error = uv_write(&write->request, stream, &out, 1, echo_written);
  if (error != 0) {
    give_buffer(write->buffer);
    free(write);
    close_connection(connection);
    return;
  }
  if (uv_stream_get_write_queue_size(stream) >= HIGH_WATER) {
    connection->reading = 0;
    uv_read_stop(stream);
  }
}

static void sink_alloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf) {
  (void)handle;
  (void)suggested;
  *buf = uv_buf_init(sink_buffer, sizeof sink_buffer);
}

static void sink_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  (void)buf;
  if (nread > 0) {
    sunk_bytes += (uint64_t)nread;
  } else if (nread < 0) {
    close_connection((struct connection*)stream);
  }
}

static void on_connection(uv_stream_t* listener, int status) {
  if (status < 0) {
    die("listen", status);
  }
  struct connection* connection = calloc(1, sizeof *connection);
  if (connection == NULL) {
    fprintf(stderr, "uv_echo: out of memory\n");
    exit(1);
  }
  uv_tcp_init(loop, &connection->tcp);
  if (uv_accept(listener, (uv_stream_t*)&connection->tcp) != 0) {
    uv_close((uv_handle_t*)&connection->tcp, on_close);
    return;
  }
  uv_tcp_nodelay(&connection->tcp, 1);
  connection->reading = 1;
  if (sink_mode) {
    uv_read_start((uv_stream_t*)&connection->tcp, sink_alloc, sink_read);
  } else {
    uv_read_start((uv_stream_t*)&connection->tcp, echo_alloc, echo_read);
  }
}

static void finish(void) {
  if (sink_mode) {
    fprintf(stderr, "uv_echo: sink read %llu bytes\n", (unsigned long long)sunk_bytes);
  }
  exit(0);
}

static void on_stdin(uv_poll_t* watch, int status, int events) {
  (void)watch;
  (void)events;
  char discard[256];
  if (status < 0 || read(0, discard, sizeof discard) <= 0) {
    finish();
  }
}

static void usage(void) {
  fprintf(stderr, "usage: uv_echo --port N [--mode echo|sink]\n");
  exit(2);
}

int main(int argc, char** argv) {
  int port = -1;
  for (int index = 1; index < argc; ++index) {
    if (strcmp(argv[index], "--port") == 0 && index + 1 < argc) {
      port = atoi(argv[++index]);
    } else if (strcmp(argv[index], "--mode") == 0 && index + 1 < argc) {
      const char* mode = argv[++index];
      if (strcmp(mode, "sink") == 0) {
        sink_mode = 1;
      } else if (strcmp(mode, "echo") != 0) {
        usage();
      }
    } else {
      usage();
    }
  }
  if (port < 0 || port > 65535) {
    usage();
  }
  loop = uv_default_loop();
  struct sockaddr_in address;
  uv_ip4_addr("127.0.0.1", port, &address);
  uv_tcp_init(loop, &server);
  int error = uv_tcp_bind(&server, (const struct sockaddr*)&address, 0);
  if (error == 0) {
    error = uv_listen((uv_stream_t*)&server, 511, on_connection);
  }
  if (error != 0) {
    die("listen on 127.0.0.1", error);
  }
  // Standard input: its end stops the server. Not a pipe or terminal (a file, /dev/null): there
  // is nothing to wait for, which counts as its end.
  if (uv_poll_init(loop, &stdin_watch, 0) != 0 ||
      uv_poll_start(&stdin_watch, UV_READABLE | UV_DISCONNECT, on_stdin) != 0) {
    finish();
  }
  struct sockaddr_storage bound;
  int length = sizeof bound;
  uv_tcp_getsockname(&server, (struct sockaddr*)&bound, &length);
  printf("READY %d\n", ntohs(((struct sockaddr_in*)&bound)->sin_port));
  fflush(stdout);
  uv_run(loop, UV_RUN_DEFAULT);
  finish();
  return 0;
}

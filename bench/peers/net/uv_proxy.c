// Peer: a raw libuv TCP proxy, callbacks only, for suite net's pipe_throughput (the row weft's
// pipe() is measured against). bench/run.py starts it pinned to one core; the load client, pinned
// to another, streams bytes through it into a sink the client holds.
//
//   uv_proxy --port N --mode pipe --target Q
//
// Listens on 127.0.0.1:N (backlog 511), prints "READY N" once listening, and serves until it is
// killed or its standard input reaches end of file. For every accepted connection it connects to
// 127.0.0.1:Q (TCP_NODELAY on both), then pipes both directions until both have ended:
//   * a read (into a 64 KiB buffer, libuv's usual size) is written on at once with uv_try_write;
//     what the socket does not take goes into one uv_write that keeps the buffer, and reading
//     from that side stops until it completes (one write in flight per direction: the kernel's
//     socket buffers are the only queue, so a slow reader pushes back on the writer);
//   * an end of stream is passed on with uv_shutdown once the write in flight is done;
//   * when both directions have ended, or on any error (reset, refused upstream), both
//     connections are closed.

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#define BUFFER_SIZE (64 * 1024)

struct buffer {
  struct buffer* next;
  char data[BUFFER_SIZE];
};

struct proxy;

// One connection of a proxy; data read from it goes to `other`.
struct side {
  uv_tcp_t tcp;
  struct proxy* proxy;
  struct side* other;
  int ended;    // its end of stream was read
  int writing;  // a uv_write of its data to `other` is in flight
};

struct proxy {
  struct side client;
  struct side upstream;
  uv_connect_t connect;
  uv_shutdown_t shutdowns[2];
  int directions_done;  // shutdowns completed (2: both directions ended)
  int closing;
  int open_handles;
};

struct proxy_write {
  uv_write_t request;
  struct buffer* buffer;
  struct side* from;
};

static uv_loop_t* loop;
static uv_tcp_t server;
static uv_poll_t stdin_watch;
static struct sockaddr_in target;
static struct buffer* free_buffers;

static void die(const char* what, int error) {
  fprintf(stderr, "uv_proxy: %s: %s\n", what, uv_strerror(error));
  exit(1);
}

static void* allocate(size_t size) {
  void* memory = malloc(size);
  if (memory == NULL) {
    fprintf(stderr, "uv_proxy: out of memory\n");
    exit(1);
  }
  return memory;
}

static struct buffer* take_buffer(void) {
  struct buffer* buffer = free_buffers;
  if (buffer != NULL) {
    free_buffers = buffer->next;
    return buffer;
  }
  return allocate(sizeof *buffer);
}

static void give_buffer(struct buffer* buffer) {
  buffer->next = free_buffers;
  free_buffers = buffer;
}

static struct buffer* buffer_of(char* data) {
  return (struct buffer*)(data - offsetof(struct buffer, data));
}

static void on_closed(uv_handle_t* handle) {
  struct proxy* proxy = ((struct side*)handle)->proxy;
  if (--proxy->open_handles == 0) {
    free(proxy);
  }
}

static void close_proxy(struct proxy* proxy) {
  if (proxy->closing) {
    return;
  }
  proxy->closing = 1;
  uv_close((uv_handle_t*)&proxy->client.tcp, on_closed);
  uv_close((uv_handle_t*)&proxy->upstream.tcp, on_closed);
}

static void on_shutdown(uv_shutdown_t* request, int status) {
  struct proxy* proxy = ((struct side*)request->handle)->proxy;
  if (status < 0 || ++proxy->directions_done == 2) {
    close_proxy(proxy);
  }
}

// The end read from `from` goes on to the other side once nothing of it is still in flight.
static void pass_end(struct side* from) {
  struct proxy* proxy = from->proxy;
  uv_shutdown_t* request = &proxy->shutdowns[from == &proxy->client ? 0 : 1];
  if (uv_shutdown(request, (uv_stream_t*)&from->other->tcp, on_shutdown) != 0) {
    close_proxy(proxy);
  }
}

static void on_alloc(uv_handle_t* handle, size_t suggested, uv_buf_t* buf) {
  (void)handle;
  (void)suggested;
  *buf = uv_buf_init(take_buffer()->data, BUFFER_SIZE);
}

static void on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf);

static void on_written(uv_write_t* request, int status) {
  struct proxy_write* write = (struct proxy_write*)request;
  struct side* from = write->from;
  give_buffer(write->buffer);
  free(write);
  from->writing = 0;
  if (from->proxy->closing) {
    return;
  }
  if (status < 0) {
    close_proxy(from->proxy);
  } else if (from->ended) {
    pass_end(from);
  } else {
    uv_read_start((uv_stream_t*)&from->tcp, on_alloc, on_read);
  }
}

static void on_read(uv_stream_t* stream, ssize_t nread, const uv_buf_t* buf) {
  struct side* from = (struct side*)stream;
  if (nread <= 0) {
    if (buf->base != NULL) {
      give_buffer(buffer_of(buf->base));
    }
    if (nread == UV_EOF) {
      from->ended = 1;
      uv_read_stop(stream);
      if (!from->writing) {
        pass_end(from);
      }
    } else if (nread < 0) {
      close_proxy(from->proxy);
    }
    return;
  }
  uv_stream_t* to = (uv_stream_t*)&from->other->tcp;
  uv_buf_t out = uv_buf_init(buf->base, (unsigned int)nread);
  int written = uv_try_write(to, &out, 1);
  if (written == nread) {
    give_buffer(buffer_of(buf->base));
    return;
  }
  if (written < 0 && written != UV_EAGAIN) {
    give_buffer(buffer_of(buf->base));
    close_proxy(from->proxy);
    return;
  }
  if (written < 0) {
    written = 0;
  }
  struct proxy_write* write = allocate(sizeof *write);
  write->buffer = buffer_of(buf->base);
  write->from = from;
  out = uv_buf_init(buf->base + written, (unsigned int)(nread - written));
  if (uv_write(&write->request, to, &out, 1, on_written) != 0) {
    give_buffer(write->buffer);
    free(write);
    close_proxy(from->proxy);
    return;
  }
  from->writing = 1;
  uv_read_stop(stream);  // until the socket has taken it: the kernel's buffers push back
}

static void on_upstream_connected(uv_connect_t* request, int status) {
  struct proxy* proxy = (struct proxy*)((char*)request - offsetof(struct proxy, connect));
  if (proxy->closing) {
    return;
  }
  if (status < 0) {
    fprintf(stderr, "uv_proxy: connect to the target: %s\n", uv_strerror(status));
    close_proxy(proxy);
    return;
  }
  uv_tcp_nodelay(&proxy->upstream.tcp, 1);
  uv_read_start((uv_stream_t*)&proxy->client.tcp, on_alloc, on_read);
  uv_read_start((uv_stream_t*)&proxy->upstream.tcp, on_alloc, on_read);
}

static void on_connection(uv_stream_t* listener, int status) {
  if (status < 0) {
    die("listen", status);
  }
  struct proxy* proxy = calloc(1, sizeof *proxy);
  if (proxy == NULL) {
    fprintf(stderr, "uv_proxy: out of memory\n");
    exit(1);
  }
  proxy->client.proxy = proxy->upstream.proxy = proxy;
  proxy->client.other = &proxy->upstream;
  proxy->upstream.other = &proxy->client;
  uv_tcp_init(loop, &proxy->client.tcp);
  uv_tcp_init(loop, &proxy->upstream.tcp);
  proxy->open_handles = 2;
  if (uv_accept(listener, (uv_stream_t*)&proxy->client.tcp) != 0) {
    close_proxy(proxy);
    return;
  }
  uv_tcp_nodelay(&proxy->client.tcp, 1);
  int error = uv_tcp_connect(&proxy->connect, &proxy->upstream.tcp, (const struct sockaddr*)&target,
                             on_upstream_connected);
  if (error != 0) {
    fprintf(stderr, "uv_proxy: connect to the target: %s\n", uv_strerror(error));
    close_proxy(proxy);
  }
}

static void on_stdin(uv_poll_t* watch, int status, int events) {
  (void)watch;
  (void)events;
  char discard[256];
  if (status < 0 || read(0, discard, sizeof discard) <= 0) {
    exit(0);
  }
}

static void usage(void) {
  fprintf(stderr, "usage: uv_proxy --port N --mode pipe --target Q\n");
  exit(2);
}

int main(int argc, char** argv) {
  int port = -1;
  int target_port = -1;
  for (int index = 1; index < argc; ++index) {
    if (strcmp(argv[index], "--port") == 0 && index + 1 < argc) {
      port = atoi(argv[++index]);
    } else if (strcmp(argv[index], "--target") == 0 && index + 1 < argc) {
      target_port = atoi(argv[++index]);
    } else if (strcmp(argv[index], "--mode") == 0 && index + 1 < argc) {
      if (strcmp(argv[++index], "pipe") != 0) {
        usage();
      }
    } else {
      usage();
    }
  }
  if (port < 0 || port > 65535 || target_port <= 0 || target_port > 65535) {
    usage();
  }
  loop = uv_default_loop();
  uv_ip4_addr("127.0.0.1", target_port, &target);
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
  // Standard input: its end stops the proxy (not a pipe or terminal: nothing to wait for).
  if (uv_poll_init(loop, &stdin_watch, 0) != 0 ||
      uv_poll_start(&stdin_watch, UV_READABLE | UV_DISCONNECT, on_stdin) != 0) {
    return 0;
  }
  struct sockaddr_storage bound;
  int length = sizeof bound;
  uv_tcp_getsockname(&server, (struct sockaddr*)&bound, &length);
  printf("READY %d\n", ntohs(((struct sockaddr_in*)&bound)->sin_port));
  fflush(stdout);
  uv_run(loop, UV_RUN_DEFAULT);
  return 0;
}

// The load client's WebSocket opening handshake (RFC 6455 section 4): see load_client.c.

#define _GNU_SOURCE
#include <errno.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "load_client.h"

static const char websocket_guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

// The Sec-WebSocket-Accept a server must answer for `key` (RFC 6455 4.2.2).
static void expected_accept(const char* key, char out[64]) {
  char joined[128];
  snprintf(joined, sizeof joined, "%s%s", key, websocket_guid);
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1((const unsigned char*)joined, strlen(joined), digest);
  EVP_EncodeBlock((unsigned char*)out, digest, SHA_DIGEST_LENGTH);
}

// The value of header `name` (case-insensitive) in an HTTP response head, trimmed; 0 if absent.
static int header_value(const char* head, const char* name, char* out, size_t out_size) {
  size_t name_length = strlen(name);
  const char* line = strstr(head, "\r\n");
  while (line != NULL && line[2] != '\r') {
    line += 2;
    if (strncasecmp(line, name, name_length) == 0 && line[name_length] == ':') {
      const char* value = line + name_length + 1;
      while (*value == ' ' || *value == '\t') {
        ++value;
      }
      const char* end = strstr(value, "\r\n");
      while (end > value && (end[-1] == ' ' || end[-1] == '\t')) {
        --end;
      }
      size_t length = (size_t)(end - value);
      if (length >= out_size) {
        length = out_size - 1;
      }
      memcpy(out, value, length);
      out[length] = '\0';
      return 1;
    }
    line = strstr(line, "\r\n");
  }
  return 0;
}

// Sends every connection's upgrade request, then reads and checks every answer (bounded).
void handshake_all(const struct options* options, const int* fds) {
  char keys[options->connections][32];
  for (int index = 0; index < options->connections; ++index) {
    unsigned char nonce[16];
    for (int byte = 0; byte < 16; ++byte) {
      nonce[byte] = (unsigned char)(rand() >> 7);
    }
    EVP_EncodeBlock((unsigned char*)keys[index], nonce, 16);
    char request[512];
    int length = snprintf(request, sizeof request,
                          "GET / HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\n"
                          "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                          "Sec-WebSocket-Version: 13\r\n\r\n",
                          options->port, keys[index]);
    if (send(fds[index], request, (size_t)length, MSG_NOSIGNAL) != length) {
      fail("connection %d: sending the WebSocket upgrade request failed", index);
    }
  }
  double deadline = now() + options->stall;
  for (int index = 0; index < options->connections; ++index) {
    char head[4096];
    size_t length = 0;
    for (;;) {
      ssize_t got = recv(fds[index], head + length, sizeof head - 1 - length, 0);
      if (got > 0) {
        length += (size_t)got;
        head[length] = '\0';
        char* end = strstr(head, "\r\n\r\n");
        if (end != NULL) {
          if (end + 4 != head + length) {
            fail("connection %d: the server sent data right after its handshake answer", index);
          }
          break;
        }
        if (length == sizeof head - 1) {
          fail("connection %d: the handshake answer is longer than 4 KiB", index);
        }
        continue;
      }
      if (got == 0) {
        fail("connection %d: the server closed the connection during the handshake", index);
      }
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        fail("connection %d: recv during the handshake: %s", index, strerror(errno));
      }
      double left = deadline - now();
      if (left <= 0) {
        fail("connection %d: no WebSocket handshake answer within %.1f s", index, options->stall);
      }
      struct pollfd readable = {.fd = fds[index], .events = POLLIN};
      poll(&readable, 1, (int)(left * 1000) + 1);
    }
    if (strncmp(head, "HTTP/1.1 101", 12) != 0) {
      fail("connection %d: the server answered the upgrade with \"%.*s\", expected 101", index,
           (int)(strcspn(head, "\r\n")), head);
    }
    char accept[128];
    char expected[64];
    expected_accept(keys[index], expected);
    if (!header_value(head, "Sec-WebSocket-Accept", accept, sizeof accept) ||
        strcmp(accept, expected) != 0) {
      fail("connection %d: Sec-WebSocket-Accept is missing or wrong (expected %s)", index,
           expected);
    }
  }
}

// What the two floors of suite http share (bench/peers/http/bare_http.c on epoll and
// bench/peers/net/uring_echo.c's --mode hello|static on io_uring): the fixed response of a mode,
// its Date value refreshed in place once a second, and the count of requests in what a read
// brought, by the ends of their headers. Header-only, for C programs with one translation unit.
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define FLOOR_STATIC_SIZE 4096

static const char* floor_response;
static size_t floor_response_size;
// Where the response's Date value (29 bytes, "Sun, 06 Nov 1994 08:49:37 GMT") starts, and the
// second it shows.
static char* floor_date_value;
static time_t floor_date_shown = -1;

// Counts the ends of request headers in [data, data + size), carrying a partial "\r\n\r\n" over
// from the previous read in *matched.
static size_t floor_count_requests(int* matched_so_far, const char* data, size_t size) {
  static const char terminator[4] = {'\r', '\n', '\r', '\n'};
  size_t found = 0;
  int matched = *matched_so_far;
  for (size_t index = 0; index < size; ++index) {
    char byte = data[index];
    if (byte == terminator[matched]) {
      if (++matched == 4) {
        ++found;
        matched = 0;
      }
    } else {
      matched = byte == '\r' ? 1 : 0;
    }
  }
  *matched_so_far = matched;
  return found;
}

// The fixed response of the mode: hello, or the 4 KiB body read from ROOT/4k.txt. `program`
// names the caller in its messages.
static void floor_build_response(int is_static, const char* root, const char* program) {
  static char text[512 + FLOOR_STATIC_SIZE];
  const char* body = "hello\n";
  size_t body_size = 6;
  static char file_body[FLOOR_STATIC_SIZE];
  if (is_static) {
    char path[4096];
    snprintf(path, sizeof path, "%s/4k.txt", root);
    int file = open(path, O_RDONLY | O_CLOEXEC);
    if (file < 0) {
      fprintf(stderr, "%s: cannot open %s: %s\n", program, path, strerror(errno));
      exit(1);
    }
    ssize_t got = read(file, file_body, sizeof file_body);
    char extra;
    if (got != FLOOR_STATIC_SIZE || read(file, &extra, 1) != 0) {
      fprintf(stderr, "%s: %s must hold exactly %d bytes\n", program, path, FLOOR_STATIC_SIZE);
      exit(1);
    }
    close(file);
    body = file_body;
    body_size = FLOOR_STATIC_SIZE;
  }
  int head = snprintf(text, sizeof text,
                      "HTTP/1.1 200 OK\r\nServer: bare\r\nDate: %29s\r\n"
                      "Content-Type: text/plain\r\nContent-Length: %zu\r\n\r\n",
                      "", body_size);
  floor_date_value = strstr(text, "Date: ") + 6;
  memcpy(text + head, body, body_size);
  floor_response = text;
  floor_response_size = (size_t)head + body_size;
}

// Writes the current second into the response's Date value when it has changed (once per
// wait: a read of the vDSO clock, no system call).
static void floor_refresh_date(void) {
  time_t now = time(NULL);
  if (now == floor_date_shown) {
    return;
  }
  struct tm parts;
  char value[32];
  gmtime_r(&now, &parts);
  if (strftime(value, sizeof value, "%a, %d %b %Y %H:%M:%S GMT", &parts) != 29) {
    fprintf(stderr, "the date is not 29 bytes\n");
    exit(1);
  }
  memcpy(floor_date_value, value, 29);
  floor_date_shown = now;
}

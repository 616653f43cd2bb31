// Helpers for the HTTP server tests: a server serving on its own thread, a raw-socket client
// that sends exact bytes and parses the responses with weft's response parser, and curl run as
// a child process with a bounded wait.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

#include "net/net_support.hpp"

namespace http_test {

using namespace net_test;
using weft::http::exchange;
using weft::http::status;

// WEFT_TEST_HIBERNATE=1 (the "hibernate:" pass of the server tests, tests/CMakeLists.txt):
// every connection hibernates between requests, however few there are
// (server_options::hibernate_above 0), so that the whole server suite also runs the hibernating
// path the default takes above 512.
inline weft::http::server_options local_http() {
  weft::http::server_options options;
  options.host = "127.0.0.1";
  options.port = 0;
  if (const char* hibernate = std::getenv("WEFT_TEST_HIBERNATE");
      hibernate != nullptr && hibernate[0] == '1') {
    options.hibernate_above = 0;
  }
  return options;
}

// An HTTP server on its own thread; the destructor stops it (short grace) and joins.
class running_http {
 public:
  template <class Handler>
  running_http(weft::http::server_options options, Handler h)
      : server_(std::move(options), std::move(h)) {
    server_.listen();
    thread_ = std::thread([this] {
      try {
        server_.serve();
      } catch (...) {
        error_ = std::current_exception();
      }
    });
  }
  ~running_http() {
    if (thread_.joinable()) {
      server_.stop(std::chrono::milliseconds(200));
      thread_.join();
    }
  }
  weft::http::server& server() { return server_; }
  std::uint16_t port() const { return server_.port(); }
  void stop(std::chrono::milliseconds grace = std::chrono::milliseconds(1000)) {
    server_.stop(grace);
  }
  void wait() {
    if (thread_.joinable()) {
      thread_.join();
    }
    if (error_) {
      std::rethrow_exception(error_);
    }
  }

 private:
  weft::http::server server_;
  std::thread thread_;
  std::exception_ptr error_;
};

// A blocking client on a raw socket.
class client {
 public:
  explicit client(std::uint16_t port) : fd_(connect_to(port)) {}
  ~client() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
  }
  client(const client&) = delete;
  client& operator=(const client&) = delete;
  int fd() const { return fd_; }
  void send(std::string_view bytes) { send_all(fd_, bytes); }

  // The next complete response (nullopt, with a test failure unless allow_close, when the
  // connection closed or the limit passed first).
  std::optional<weft::http::response> response(
      weft::http::method m = weft::http::method::get, bool allow_close = false,
      std::chrono::milliseconds limit = std::chrono::milliseconds(5000)) {
    weft::http::response_parser parser;
    parser.set_request_method(m);
    const auto deadline = std::chrono::steady_clock::now() + limit;
    bool ended = false;
    for (;;) {
      weft::http::parse_result r = ended ? parser.finish() : parser.parse(buffer_);
      if (r.event == weft::http::parse_event::body) {
        parser.message().body.append(r.body);  // a view into buffer_: before the erase
      }
      if (!ended) {
        buffer_.erase(0, r.consumed);
      }
      if (r.event == weft::http::parse_event::body) {
        continue;
      }
      if (r.event == weft::http::parse_event::headers_complete) {
        continue;
      }
      if (r.event == weft::http::parse_event::message_complete) {
        return parser.message();
      }
      if (r.event == weft::http::parse_event::error) {
        if (!(ended && allow_close)) {
          ADD_FAILURE() << "bad response: " << parser.error_reason();
        }
        return std::nullopt;
      }
      if (ended) {
        if (!allow_close) {
          ADD_FAILURE() << "the server closed before a complete response";
        }
        return std::nullopt;
      }
      if (!read_more(deadline)) {
        ended = true;
      }
    }
  }
  // Whether the server closes the connection (within limit) with nothing more sent.
  bool closes(std::chrono::milliseconds limit = std::chrono::milliseconds(5000)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (read_more(deadline)) {
    }
    return buffer_.empty() && std::chrono::steady_clock::now() < deadline;
  }
  // Everything until the server closes.
  std::string rest(std::chrono::milliseconds limit = std::chrono::milliseconds(5000)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (read_more(deadline)) {
    }
    return std::exchange(buffer_, {});
  }
  const std::string& buffered() const { return buffer_; }

 private:
  bool read_more(std::chrono::steady_clock::time_point deadline) {
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        return false;
      }
      pollfd wait{.fd = fd_, .events = POLLIN, .revents = 0};
      if (::poll(&wait, 1, static_cast<int>(left.count())) <= 0) {
        continue;
      }
      char chunk[65536];
      ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
      if (n < 0 && errno == EINTR) {
        continue;
      }
      if (n <= 0) {
        return false;
      }
      buffer_.append(chunk, static_cast<std::size_t>(n));
      return true;
    }
  }
  int fd_;
  std::string buffer_;
};

inline std::string body_of(const std::optional<weft::http::response>& r) {
  return r ? r->body : std::string("<no response>");
}

// Runs a shell command (bounded by timeout(1)) and returns its stdout and stderr.
inline std::string run_command(const std::string& command, int seconds = 20) {
  std::string line = "timeout " + std::to_string(seconds) + " " + command + " 2>&1";
  FILE* pipe = ::popen(line.c_str(), "r");
  if (pipe == nullptr) {
    ADD_FAILURE() << "popen failed: " << command;
    return {};
  }
  std::string out;
  char chunk[4096];
  std::size_t n = 0;
  while ((n = std::fread(chunk, 1, sizeof chunk, pipe)) > 0) {
    out.append(chunk, n);
  }
  ::pclose(pipe);
  return out;
}

inline std::string url(std::uint16_t port, std::string_view path) {
  return "http://127.0.0.1:" + std::to_string(port) + std::string(path);
}

// An upload of `total` bytes for http::client: `piece` given again and again (the last one cut
// to fit); `given` counts the bytes handed out so far.
inline weft::http::body_source repeated_piece(const std::string& piece, std::uint64_t total,
                                              std::uint64_t& given) {
  return [&piece, total, &given]() -> std::optional<std::string_view> {
    const std::uint64_t n = std::min<std::uint64_t>(piece.size(), total - given);
    given += n;
    return std::string_view(piece.data(), static_cast<std::size_t>(n));  // empty: the end
  };
}

}  // namespace http_test

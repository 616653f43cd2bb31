// Helpers for the net tests: a server serving on a thread of its own, and plain blocking
// sockets for clients (a client written without weft checks the server from outside).
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "weft/weft.hpp"

namespace net_test {

using namespace std::chrono_literals;

// WEFT_TEST_HIBERNATE=1 (the "hibernate:" pass, tests/CMakeLists.txt): callback-style
// connections hibernate between messages however few there are (hibernate_above 0), so that the
// net suite also runs the path the default takes above 512 connections.
inline weft::net::tcp_server_options local_options() {
  weft::net::tcp_server_options options;
  options.host = "127.0.0.1";
  options.port = 0;
  if (const char* hibernate = std::getenv("WEFT_TEST_HIBERNATE");
      hibernate != nullptr && hibernate[0] == '1') {
    options.hibernate_above = 0;
  }
  return options;
}

// A server serving on its own thread; the destructor stops it (gracefully, short grace) and
// joins, so a test ends with every worker's scheduler closed. wait() joins and rethrows what
// serve() threw.
class running_server {
 public:
  template <class Serve>
  running_server(weft::net::tcp_server_options options, Serve serve) : server_(std::move(options)) {
    server_.listen();
    thread_ = std::thread([this, serve = std::move(serve)]() mutable {
      try {
        serve(server_);
      } catch (...) {
        error_ = std::current_exception();
      }
    });
  }
  ~running_server() {
    if (thread_.joinable()) {
      server_.stop(200ms);
      thread_.join();
    }
  }
  weft::net::tcp_server& server() { return server_; }
  std::uint16_t port() const { return server_.port(); }
  void stop(std::chrono::milliseconds grace = 1000ms) { server_.stop(grace); }
  void wait() {
    if (thread_.joinable()) {
      thread_.join();
    }
    if (error_) {
      std::rethrow_exception(error_);
    }
  }

 private:
  weft::net::tcp_server server_;
  std::thread thread_;
  std::exception_ptr error_;
};

// receive_buffer > 0 shrinks the client's receive buffer (SO_RCVBUF, set before connecting so
// that the window is small from the start): a server then cannot push much at once.
inline int connect_to(std::uint16_t port, int receive_buffer = 0) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    ADD_FAILURE() << "socket: " << std::strerror(errno);
    return -1;
  }
  if (receive_buffer > 0) {
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    ADD_FAILURE() << "connect: " << std::strerror(errno);
    ::close(fd);
    return -1;
  }
  int on = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  return fd;
}

inline void send_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t wrote = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (wrote < 0 && errno == EINTR) {
      continue;
    }
    ASSERT_GT(wrote, 0) << "send: " << std::strerror(errno);
    bytes.remove_prefix(static_cast<std::size_t>(wrote));
  }
}

// Reads until `count` bytes came, the peer closed, or `limit` passed (then fails the test).
inline std::string read_bytes(int fd, std::size_t count,
                              std::chrono::milliseconds limit = std::chrono::milliseconds(5000)) {
  std::string got;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  char buffer[65536];
  while (got.size() < count) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      ADD_FAILURE() << "read_bytes: only " << got.size() << " of " << count
                    << " bytes within the limit";
      break;
    }
    pollfd wait{.fd = fd, .events = POLLIN, .revents = 0};
    if (::poll(&wait, 1, static_cast<int>(left.count())) <= 0) {
      continue;
    }
    ssize_t n = ::recv(fd, buffer, std::min(sizeof buffer, count - got.size()), 0);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n <= 0) {
      break;  // closed (or reset)
    }
    got.append(buffer, static_cast<std::size_t>(n));
  }
  return got;
}

// How a read to the end went: the bytes, and errno when it ended with an error (0: the FIN).
struct ending {
  std::uint64_t bytes = 0;
  int error = 0;
  bool timed_out = false;
};

// Reads until the peer's FIN or an error, `piece` bytes at a time at most (a slow reader), the
// bytes appended to `kept` when given.
inline ending read_until_end(int fd, std::chrono::milliseconds limit = 10000ms,
                             std::size_t piece = 65536, std::string* kept = nullptr) {
  ending result;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  char buffer[65536];
  piece = std::min(piece, sizeof buffer);
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      return result;
    }
    pollfd wait{.fd = fd, .events = POLLIN, .revents = 0};
    if (::poll(&wait, 1, static_cast<int>(left.count())) <= 0) {
      continue;
    }
    const ssize_t n = ::recv(fd, buffer, piece, 0);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    if (n < 0) {
      result.error = errno;
      return result;
    }
    if (n == 0) {
      return result;
    }
    result.bytes += static_cast<std::uint64_t>(n);
    if (kept != nullptr) {
      kept->append(buffer, static_cast<std::size_t>(n));
    }
  }
}

// Reads everything until the peer closes (or `limit` passes: fails the test).
inline std::string read_to_end(int fd,
                               std::chrono::milliseconds limit = std::chrono::milliseconds(5000)) {
  std::string got;
  if (read_until_end(fd, limit, 65536, &got).timed_out) {
    ADD_FAILURE() << "read_to_end: the peer did not close within the limit";
  }
  return got;
}

// Sends `total` bytes (or until a send fails); errno of the failure, 0 when all went.
inline int send_junk(int fd, std::uint64_t total) {
  const std::string piece(65536, 'j');
  while (total > 0) {
    const std::size_t size = static_cast<std::size_t>(std::min<std::uint64_t>(total, piece.size()));
    const ssize_t wrote = ::send(fd, piece.data(), size, MSG_NOSIGNAL);
    if (wrote < 0 && errno == EINTR) {
      continue;
    }
    if (wrote < 0) {
      return errno;
    }
    total -= static_cast<std::uint64_t>(wrote);
  }
  return 0;
}

// The socket's pending error (SO_ERROR, which reading clears): a reset after the peer's FIN shows
// here and in the next send, not in recv, which reports the FIN first.
inline int pending_error(int fd) {
  int error = 0;
  socklen_t size = sizeof error;
  ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size);
  return error;
}

inline bool is_reset(int error) { return error == ECONNRESET || error == EPIPE; }

// Polls `condition` (a read of the server's stats from this thread) until it holds or a generous
// limit passes. Not a sleep as synchronisation: each round re-checks the real state.
template <class Condition>
bool eventually(Condition condition, std::chrono::milliseconds limit = 5000ms) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) {
      return false;
    }
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// A blocking listening socket on a loopback port the kernel picks, for a raw peer on a thread
// of its own: its fd, and the port. receive_buffer > 0 sets SO_RCVBUF first (accepted sockets
// inherit it: a small window from the start). std::runtime_error naming `who` when it fails.
inline std::pair<int, std::uint16_t> loopback_listener(int backlog, const char* who,
                                                       int receive_buffer = 0) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (receive_buffer > 0) {
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::listen(fd, backlog) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    const std::string reason = std::strerror(errno);
    ::close(fd);
    throw std::runtime_error(std::string(who) + ": cannot listen: " + reason);
  }
  return {fd, ntohs(address.sin_port)};
}

// Shrinks a server-side socket's send buffer, so that little fits in the kernel.
inline void small_send_buffer(int fd, int bytes = 16384) {
  ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
}

// From a coroutine: connects to an echo server on 127.0.0.1:port, sends text, and returns whether
// the same text came back; closes gracefully either way.
inline bool echoes(std::uint16_t port, const weft::net::connection_options& options,
                   const std::string& text) {
  auto c = weft::net::connect("127.0.0.1", port, options, weft::timeout(std::chrono::seconds(10)));
  c->send(text);
  auto m = c->receive(weft::timeout(std::chrono::seconds(10)));
  c->close();
  c->wait_closed(weft::timeout(std::chrono::seconds(5)));
  return m && m->data == text;
}

inline std::string frame_of(std::string_view payload) {
  const auto length = static_cast<std::uint32_t>(payload.size());
  std::string out = {static_cast<char>(length >> 24), static_cast<char>(length >> 16),
                     static_cast<char>(length >> 8), static_cast<char>(length)};
  out.append(payload);
  return out;
}

// A thread-safe log that tests read.
class log_lines {
 public:
  std::function<void(std::string_view)> sink() {
    return [this](std::string_view line) {
      std::lock_guard<std::mutex> lock(mutex_);
      lines_.emplace_back(line);
    };
  }
  bool contains(std::string_view needle) const {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const std::string& line : lines_) {
      if (line.find(needle) != std::string::npos) {
        return true;
      }
    }
    return false;
  }
  // The number of lines that contain needle.
  std::size_t count(std::string_view needle) const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::size_t n = 0;
    for (const std::string& line : lines_) {
      n += line.find(needle) != std::string::npos ? 1 : 0;
    }
    return n;
  }
  std::string all() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::string out;
    for (const std::string& line : lines_) {
      out += line + "\n";
    }
    return out;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> lines_;
};

// A load-generating child for the scale tests, forked before the server starts. A child forked
// while other threads run (a server's worker) inherits every lock one of them held at that
// instant, and its first allocation can then wait forever: ASan's allocator did, about one run
// in three with another test beside it. So the child is forked while the test has one thread,
// and waits for the server's port on a pipe (send_port); it runs body(port), which must end
// the child (_exit), and exits at once if the port never comes (the parent failed first).
struct forked_client {
  pid_t pid = -1;
  int port_pipe = -1;  // the parent's write end, until send_port
};

template <class Body>
forked_client fork_client(Body&& body) {
  int port_pipe[2];
  if (::pipe2(port_pipe, O_CLOEXEC) != 0) {
    return {};
  }
  pid_t child = ::fork();
  if (child == 0) {
    ::close(port_pipe[1]);
    ::alarm(60);  // a wedged child must not hang the suite
    std::uint16_t port = 0;
    if (::read(port_pipe[0], &port, sizeof port) != static_cast<ssize_t>(sizeof port)) {
      ::_exit(3);
    }
    body(port);
    ::_exit(4);
  }
  ::close(port_pipe[0]);
  if (child < 0) {
    ::close(port_pipe[1]);
    return {};
  }
  return {child, port_pipe[1]};
}

inline void send_port(forked_client& client, std::uint16_t port) {
  static_cast<void>(::write(client.port_pipe, &port, sizeof port));
  ::close(client.port_pipe);
  client.port_pipe = -1;
}

}  // namespace net_test

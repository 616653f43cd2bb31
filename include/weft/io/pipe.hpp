// weft::pipe: a weft::stream over a unix-domain socket or any pipe-like file descriptor
// (uv_pipe_t), and weft::pipe::listener for unix-domain servers. (weft::net::pipe(a, b), in
// net/connection.hpp, is another thing: a function forwarding one server connection's messages
// to another, Workerman's pipe; the namespace and the call shape tell them apart.)
//
// Blocking: connect() and accept() suspend only the calling coroutine, take a weft::timeout and
// are cancellable. Threads, ownership and errors: as for weft::stream (see stream.hpp); errors
// name the socket path ("connect /tmp/app.sock: no such file or directory").
#pragma once

#include <string>

#include "weft/io/detail/handle_owner.hpp"
#include "weft/io/stream.hpp"
#include "weft/sched/timeout.hpp"

namespace weft {
namespace detail {
struct stream_access;
struct listener_state;
}  // namespace detail

class pipe : public weft::stream {
 public:
  class listener;
  // Options of listener::listen.
  struct listen_options {
    int backlog = 511;  // pending connections the kernel holds before refusing more
    // accept() when out of file descriptors: throw, or back off and retry (see stream.hpp).
    fd_exhaustion out_of_fds = fd_exhaustion::report;
  };

  pipe() noexcept = default;

  // Wraps an open file descriptor (one end of a pipe(2) or socketpair(2), a child process's
  // stdio, an inherited socket). The pipe takes ownership: closing it closes fd.
  static pipe open(int fd);

  // Connects to the unix-domain socket at path.
  static pipe connect(const std::string& path, const timeout& limit = timeout::never());

 private:
  friend struct detail::stream_access;
  explicit pipe(detail::stream_state* state) noexcept : weft::stream(state) {}
};

// Listens on a unix-domain socket path. The socket file is created by listen() and removed by
// close() (or the destructor); listen() fails with UV_EADDRINUSE if the path exists, and with
// UV_ENAMETOOLONG for a path that does not fit a socket address (107 bytes).
class pipe::listener {
 public:
  listener() noexcept = default;
  // Creates the socket file at path and listens (see above for the errors).
  static listener listen(const std::string& path, int backlog = 511);
  static listener listen(const std::string& path, const listen_options& options);

  // Assigning over a listener, or destroying it, closes it (as close()).
  listener(listener&& other) noexcept = default;
  listener& operator=(listener&& other) noexcept = default;  // assigning over a listener closes it
  listener(const listener&) = delete;
  listener& operator=(const listener&) = delete;
  ~listener() = default;

  // As tcp::listener::accept: one acceptor at a time; connections arriving meanwhile are kept,
  // also while the process is out of file descriptors (listen_options::out_of_fds).
  pipe accept(const timeout& limit = timeout::never());

  // The socket path; whether the listener is open (false once closed or moved from).
  const std::string& path() const noexcept { return path_; }
  bool is_open() const noexcept;  // false once closed or moved from
  // Stops listening and removes the socket file; an acceptor gets io_error UV_ECANCELED.
  void close() noexcept;

 private:
  detail::handle_owner<detail::listener_state> state_;
  std::string path_;
};

}  // namespace weft

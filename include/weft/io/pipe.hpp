// weft::pipe: a weft::stream over a unix-domain socket or any pipe-like file descriptor
// (uv_pipe_t), and weft::pipe::listener for unix-domain servers.
//
// Blocking: connect() and accept() suspend only the calling coroutine, take a weft::timeout and
// are cancellable. Threads, ownership and errors: as for weft::stream (see stream.hpp); errors
// name the socket path ("connect /tmp/app.sock: no such file or directory").
#pragma once

#include <string>

#include "weft/io/stream.hpp"
#include "weft/sched/timeout.hpp"

namespace weft {
namespace detail {
struct stream_access;
}

class pipe : public weft::stream {
 public:
  class listener;

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
// close() (or the destructor); listen() fails with UV_EADDRINUSE if the path exists.
class pipe::listener {
 public:
  listener() noexcept = default;
  static listener listen(const std::string& path, int backlog = 511);

  listener(listener&& other) noexcept;
  listener& operator=(listener&& other) noexcept;
  listener(const listener&) = delete;
  listener& operator=(const listener&) = delete;
  ~listener();

  // As tcp::listener::accept: one acceptor at a time; connections arriving meanwhile are kept.
  pipe accept(const timeout& limit = timeout::never());

  const std::string& path() const noexcept { return path_; }
  bool is_open() const noexcept;
  // Stops listening and removes the socket file; an acceptor gets io_error UV_ECANCELED.
  void close() noexcept;

 private:
  detail::stream_state* state_ = nullptr;
  std::string path_;
};

}  // namespace weft

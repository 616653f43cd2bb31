// The state block behind tcp::listener and pipe::listener: a listening socket this block owns,
// watched with a uv_poll_t (see stream_handle.hpp for who owns the block and when it is freed).
//
// Why not uv_listen: on EMFILE/ENFILE libuv's accept loop (uv__server_io) closes a reserved
// descriptor, accepts every queued connection and closes it at once (uv__emfile_trick), without
// telling the program; with no reserved descriptor left it calls the connection callback with
// the error in a loop that never returns until the callback stops the listener. So a process
// out of descriptors either loses every queued connection in silence or spins. Here the
// listener calls accept4 itself: out of descriptors, a connection simply stays in the kernel's
// backlog, accept() reports it (or backs off and retries, by option), and the next accept4
// after a descriptor is freed takes it.
//
// Polling: only while an acceptor waits and accept4 found nothing. The poll is level
// triggered; its callback stops it, so a listener nobody accepts from is not polled.
#pragma once

#include <uv.h>

#include <string>

#include "io/stream_handle.hpp"
#include "weft/io/stream.hpp"

namespace weft::detail {

struct listener_state final : handle_state {
  listener_state(std::string subject, int fd, fd_exhaustion out_of_fds)
      : handle_state(std::move(subject)), fd(fd), out_of_fds(out_of_fds) {}

  uv_handle_t* handle() noexcept override { return reinterpret_cast<uv_handle_t*>(&poll); }
  // Call right after uv_poll_init succeeded.
  void mark_initialized() noexcept { initialized(); }

  int fd;  // the listening socket; -1 once closed
  fd_exhaustion out_of_fds;
  std::string unlink_path;  // a unix socket file listen() created: removed on close
  uv_poll_t poll{};
  bool polling = false;
  bool readable = false;  // the poll fired since the acceptor started waiting
  int poll_error = 0;

 protected:
  ~listener_state() override;
  void close_handle(uv_close_cb on_closed) noexcept override;
};

// Listens on fd (a bound, non-blocking, close-on-exec stream socket, which the returned state
// owns from now on, and which is closed here if this throws). io_error "listen SUBJECT: ...".
handle_owner<listener_state> start_listening(int fd, int backlog, std::string subject,
                                             fd_exhaustion out_of_fds);

// Takes the next connection (a non-blocking, close-on-exec descriptor the caller owns), waiting
// for one if none is queued. One acceptor at a time (std::logic_error). Throws timeout_error,
// cancelled_error, io_error UV_ECANCELED once the listener is closed, io_error UV_EMFILE/
// UV_ENFILE/UV_ENOBUFS/UV_ENOMEM when out of resources under fd_exhaustion::report, and
// io_error for any other failure of accept4.
int accept_connection(listener_state& server, const timeout& limit);

}  // namespace weft::detail

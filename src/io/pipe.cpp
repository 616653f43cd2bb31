// weft::pipe: unix-domain sockets and wrapped descriptors over uv_pipe_t.
#include "weft/io/pipe.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <uv.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "io/c_string.hpp"
#include "io/listener_state.hpp"
#include "io/stream_state.hpp"

namespace weft {
namespace {

using connect_operation = detail::request_operation<uv_connect_t>;

detail::handle_owner<detail::stream_state> new_pipe_state(uv_loop_t& loop, std::string subject,
                                                          const char* operation) {
  detail::handle_owner<detail::stream_state> state(
      new detail::stream_state(detail::stream_kind::pipe, std::move(subject)));
  int status = uv_pipe_init(&loop, &state->uv.pipe, 0);
  if (status < 0) {
    detail::throw_uv_error(status, operation, state->subject());
  }
  state->mark_initialized();
  return state;
}

}  // namespace

pipe pipe::open(int fd) {
  uv_loop_t& loop = detail::current_uv_loop("weft::pipe::open");
  detail::ignore_sigpipe_once();
  auto state = new_pipe_state(loop, "fd " + std::to_string(fd), "open");
  int status = uv_pipe_open(&state->uv.pipe, fd);
  if (status < 0) {
    detail::throw_uv_error(status, "open", state->subject());
  }
  pipe opened(state.release());
  // A unix socket says where it is connected to; a plain pipe stays "fd N".
  try {
    std::string peer = opened.peer_address();
    if (!peer.empty()) {
      detail::stream_access::state_of(opened)->set_subject(peer);
    }
  } catch (const io_error&) {
  }
  return opened;
}

pipe pipe::connect(const std::string& path, const timeout& limit) {
  uv_loop_t& loop = detail::current_uv_loop("weft::pipe::connect");
  detail::refuse_nul(path, "connect", "socket path");
  detail::ignore_sigpipe_once();
  // As in tcp::connect: if the wait ends early, the state's deleter closes the handle, libuv
  // ends the connect request with UV_ECANCELED, and the abandoned request frees itself.
  auto state = new_pipe_state(loop, path, "connect");
  auto operation = std::make_unique<connect_operation>("connect", path);
  uv_pipe_connect(&operation->request, &state->uv.pipe, path.c_str(),
                  &connect_operation::on_done<uv_connect_t>);
  std::unique_ptr<detail::pending_operation> pending(std::move(operation));
  detail::await_operation(pending, limit);
  int status = static_cast<connect_operation&>(*pending).status;
  if (status < 0) {
    detail::throw_uv_error(status, "connect", path);
  }
  return pipe(state.release());
}

pipe::listener pipe::listener::listen(const std::string& path, int backlog) {
  listen_options options;
  options.backlog = backlog;
  return listen(path, options);
}

pipe::listener pipe::listener::listen(const std::string& path, const listen_options& options) {
  detail::current_uv_loop("weft::pipe::listener::listen");
  detail::refuse_nul(path, "listen", "socket path");
  detail::ignore_sigpipe_once();
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(address.sun_path)) {
    throw io_error(UV_ENAMETOOLONG, "listen", path,
                   path.empty() ? std::string("the socket path is empty")
                                : "the socket path is " + std::to_string(path.size()) +
                                      " bytes; a unix socket address holds at most " +
                                      std::to_string(sizeof(address.sun_path) - 1));
  }
  std::memcpy(address.sun_path, path.data(), path.size());
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    detail::throw_uv_error(uv_translate_sys_error(errno), "listen", path);
  }
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address)) != 0) {
    int error = errno;
    ::close(fd);
    detail::throw_uv_error(uv_translate_sys_error(error), "listen", path);
  }
  auto state = detail::start_listening(fd, options.backlog, path, options.out_of_fds);
  state->unlink_path = path;  // ours now: removed when the listener closes
  listener made;
  made.state_ = std::move(state);
  made.path_ = path;
  return made;
}

pipe pipe::listener::accept(const timeout& limit) {
  detail::listener_state& server = state_.get_or_throw("accept", "pipe::listener");
  uv_loop_t& loop = detail::current_uv_loop("weft::pipe::listener::accept");
  int fd = detail::accept_connection(server, limit);
  detail::handle_owner<detail::stream_state> client;
  try {
    client = new_pipe_state(loop, "connection on " + path_, "accept");
  } catch (...) {
    ::close(fd);
    throw;
  }
  int status = uv_pipe_open(&client->uv.pipe, fd);
  if (status < 0) {
    ::close(fd);
    detail::throw_uv_error(status, "accept", path_);
  }
  return pipe(client.release());
}

bool pipe::listener::is_open() const noexcept { return state_.is_open(); }

// Closing the state removes the socket file (listener_state::unlink_path).
void pipe::listener::close() noexcept { state_.close(); }

}  // namespace weft

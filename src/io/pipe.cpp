// weft::pipe: unix-domain sockets and wrapped descriptors over uv_pipe_t.
#include "weft/io/pipe.hpp"

#include <uv.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include "io/stream_state.hpp"

namespace weft {
namespace {

using connect_operation = detail::request_operation<uv_connect_t>;

detail::owned_state<detail::stream_state> new_pipe_state(uv_loop_t& loop, std::string subject,
                                                         const char* operation) {
  detail::owned_state<detail::stream_state> state(
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
  uv_loop_t& loop = detail::current_uv_loop("weft::pipe::listener::listen");
  detail::ignore_sigpipe_once();
  auto state = new_pipe_state(loop, path, "listen");
  int status = uv_pipe_bind(&state->uv.pipe, path.c_str());
  if (status < 0) {
    detail::throw_uv_error(status, "listen", path);
  }
  detail::listen_on(*state, backlog);
  listener made;
  made.state_ = state.release();
  made.path_ = path;
  return made;
}

pipe::listener::listener(listener&& other) noexcept
    : state_(std::exchange(other.state_, nullptr)), path_(std::move(other.path_)) {}

pipe::listener& pipe::listener::operator=(listener&& other) noexcept {
  if (this != &other) {
    if (state_ != nullptr) {
      state_->close_and_release_owner();
    }
    state_ = std::exchange(other.state_, nullptr);
    path_ = std::move(other.path_);
  }
  return *this;
}

pipe::listener::~listener() {
  if (state_ != nullptr) {
    state_->close_and_release_owner();
  }
}

pipe pipe::listener::accept(const timeout& limit) {
  if (state_ == nullptr) {
    throw std::logic_error("weft: accept on an empty pipe::listener (default-made or moved from)");
  }
  uv_loop_t& loop = detail::current_uv_loop("weft::pipe::listener::accept");
  auto client = new_pipe_state(loop, "connection on " + path_, "accept");
  detail::accept_from(*state_, *client, limit);
  return pipe(client.release());
}

bool pipe::listener::is_open() const noexcept { return state_ != nullptr && !state_->closing(); }

void pipe::listener::close() noexcept {
  // libuv unlinks the socket file when it closes a bound pipe handle.
  if (state_ != nullptr) {
    state_->close();
  }
}

}  // namespace weft

// The listening half shared by tcp::listener and pipe::listener: accept4 on a polled socket,
// with running out of descriptors reported or retried instead of connections dropped (see
// listener_state.hpp for why this is not uv_listen).
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <string>
#include <utility>

#include "io/listener_state.hpp"
#include "sched/deadline_wait.hpp"

namespace weft::detail {
namespace {

void on_readable(uv_poll_t* poll, int status, int) noexcept {
  auto& state = static_cast<listener_state&>(*static_cast<handle_state*>(poll->data));
  if (status < 0) {
    state.poll_error = status;
  }
  state.readable = true;
  // Level triggered: stop until an acceptor asks again, so a connection nobody takes does not
  // wake the loop on every turn.
  uv_poll_stop(poll);
  state.polling = false;
  state.wake_waiter();
}

// Errors of accept4 that mean "out of a resource", not "this listener is broken".
bool is_exhaustion(int error) noexcept {
  return error == EMFILE || error == ENFILE || error == ENOBUFS || error == ENOMEM;
}

std::string exhaustion_message(int error) {
  switch (error) {
    case EMFILE:
      return "too many open files (EMFILE); close descriptors or raise ulimit -n";
    case ENFILE:
      return "file table overflow (ENFILE): the system is out of file descriptors; close "
             "descriptors or raise fs.file-max";
    case ENOBUFS:
      return "no buffer space available (ENOBUFS): the kernel is out of socket memory";
    default:
      return "not enough memory (ENOMEM): the kernel could not allocate the connection";
  }
}

// Errors accept4 passes on from a connection that failed while queued (man 2 accept: treat
// them like EAGAIN and retry), or from a signal: the next queued connection may be fine.
bool is_retryable(int error) noexcept {
  switch (error) {
    case EINTR:
    case ECONNABORTED:
    case EPROTO:
    case ENETDOWN:
    case ENOPROTOOPT:
    case EHOSTDOWN:
    case ENONET:
    case EHOSTUNREACH:
    case EOPNOTSUPP:
    case ENETUNREACH:
    case EPERM:  // a firewall rule refused the connection
      return true;
    default:
      return false;
  }
}

// What ends an acceptor's wait: the listener closing, and (unless it is backing off) a queued
// connection. wait_readable and back_off share this one waiter type on purpose: a polymorphic
// type is checked by UBSan's vptr check the first time it is seen, and that check reads memory
// through a pipe, which fails while the process is out of descriptors (a false "invalid vptr"
// that stops the process). With one type, an ordinary accept that waits while descriptors are
// free makes the back-off's waiter already known (tests/io/robustness_test.cpp relies on it).
struct acceptor_wake {
  listener_state* server;
  bool on_connection;
  bool operator()() const noexcept {
    return (on_connection && server->readable) || server->closing();
  }
};

[[noreturn]] void throw_closed(listener_state& server) {
  throw io_error(UV_ECANCELED, "accept", server.subject(), "the listener is closed");
}

// Waits until the socket is readable (a connection is queued), the listener is closed, or the
// wait ends with timeout_error / cancelled_error.
void wait_readable(listener_state& server, const timeout& limit) {
  server.readable = false;
  if (!server.polling) {
    int status = uv_poll_start(&server.poll, UV_READABLE, &on_readable);
    if (status < 0) {
      throw_uv_error(status, "accept", server.subject());
    }
    server.polling = true;
  }
  single_waiter until_connection(server, "accept on", acceptor_wake{&server, true});
  wait_on_handle(server, until_connection, limit, "accept");
  if (int status = std::exchange(server.poll_error, 0); status < 0 && !server.closing()) {
    throw_uv_error(status, "accept", server.subject());
  }
}

// Out of descriptors under fd_exhaustion::retry: sleeps for delay (or less, if the listener is
// closed or the limit passes first; timeout_error / cancelled_error as any wait).
void back_off(listener_state& server, std::chrono::milliseconds delay, const timeout& limit) {
  scheduler_core& core = server.core();
  coroutine& self = core.waiter_or_throw("accept");
  single_waiter until_closed(server, "accept (out of file descriptors, retrying) on",
                             acceptor_wake{&server, false});
  deadline_wait retry(core, saturating_add(clock::now(), delay), self.background());
  wait_source* sources[] = {&until_closed, &retry};
  wait_with_limit(core, self, sources, limit, [&server] { return "accept " + server.subject(); });
}

}  // namespace

void close_and_release_owner(listener_state* state) noexcept { state->close_and_release_owner(); }

listener_state::~listener_state() {
  if (fd >= 0) {
    ::close(fd);  // never initialized: close_handle did not run
  }
  if (!unlink_path.empty()) {
    ::unlink(unlink_path.c_str());
  }
}

void listener_state::close_handle(uv_close_cb on_closed) noexcept {
  // uv_close on a poll handle removes the descriptor from epoll before it returns, so the
  // socket can be closed at once: an acceptor woken by close() finds closing() set and never
  // touches fd again.
  uv_close(handle(), on_closed);
  polling = false;
  ::close(std::exchange(fd, -1));
  if (!unlink_path.empty()) {
    ::unlink(unlink_path.c_str());
    unlink_path.clear();
  }
}

handle_owner<listener_state> start_listening(int fd, int backlog, std::string subject,
                                             fd_exhaustion out_of_fds) {
  handle_owner<listener_state> state;
  try {
    state.reset(new listener_state(std::move(subject), fd, out_of_fds));
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (::listen(fd, backlog) != 0) {
    throw_uv_error(uv_translate_sys_error(errno), "listen", state->subject());
  }
  int status = uv_poll_init(&current_uv_loop("listen"), &state->poll, fd);
  if (status < 0) {
    throw_uv_error(status, "listen", state->subject());
  }
  state->mark_initialized();
  return state;
}

int accept_connection(listener_state& server, const timeout& limit) {
  busy_guard guard(server, "listener", "an acceptor");
  // Out of descriptors with fd_exhaustion::retry: 1 ms, doubling up to this, so a freed
  // descriptor is used soon without the retries costing anything noticeable meanwhile.
  constexpr std::chrono::milliseconds longest_back_off{100};
  std::chrono::milliseconds delay{1};
  for (;;) {
    if (server.closing()) {
      throw_closed(server);
    }
    int connection = ::accept4(server.fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (connection >= 0) {
      return connection;
    }
    int error = errno;
    if (error == EAGAIN || error == EWOULDBLOCK) {
      wait_readable(server, limit);
    } else if (is_exhaustion(error)) {
      // The connection stays in the kernel's backlog either way: nothing is lost.
      if (server.out_of_fds == fd_exhaustion::report) {
        throw io_error(uv_translate_sys_error(error), "accept", server.subject(),
                       exhaustion_message(error));
      }
      back_off(server, delay, limit);
      delay = std::min(delay * 2, longest_back_off);
    } else if (!is_retryable(error)) {
      throw_uv_error(uv_translate_sys_error(error), "accept", server.subject());
    }
  }
}

}  // namespace weft::detail

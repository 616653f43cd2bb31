// weft::fs::watch over uv_fs_event (inotify on Linux).
//
// Lifetimes. The uv_fs_event_t and the event queue live in one heap watch_state, never in the
// movable weft::fs::watcher. The state is freed only when no user is left (the owning watcher,
// and every coroutine inside next(): its handle_wait is linked into the state) and the handle's
// close callback has run. A watcher closed while libuv still has its handle counts as an
// abandoned operation of the reactor, so run() waits for the close callback before it closes
// the loop.
#include <uv.h>

#include <deque>
#include <stdexcept>
#include <string>
#include <utility>

#include "io/c_string.hpp"
#include "io/file_handle_wait.hpp"
#include "reactor/uv_driver.hpp"
#include "sched/scheduler_core.hpp"
#include "weft/error.hpp"
#include "weft/io/fs.hpp"
#include "weft/reactor/detail/operation.hpp"

namespace weft {
namespace detail {

struct watch_state final : shared_handle_state {
  watch_state(scheduler_core& core, std::string watched, std::size_t queue_capacity)
      : shared_handle_state(core),
        path(std::move(watched)),
        capacity(queue_capacity),
        description("fs watch " + path) {}

  std::string path;
  std::size_t capacity;
  std::string description;
  uv_fs_event_t handle{};
  bool closed = false;  // the owner closed the watch
  std::deque<fs::watch_event> queue;
  // Events lost to a full queue and not yet reported. While non-zero, newer events are lost
  // too: they happened after the gap, and delivering them before the overflow report would
  // hide where the gap was.
  std::size_t dropped = 0;
  int error = 0;  // an error libuv reported on the watch, not yet reported to a caller
};

namespace {

void on_event(uv_fs_event_t* handle, const char* filename, int events, int status) {
  auto& state = state_of_handle<watch_state>(handle->data);
  if (state.closed) {
    return;
  }
  if (status < 0) {
    state.error = status;
  } else if (state.dropped > 0 || state.queue.size() >= state.capacity) {
    ++state.dropped;
  } else {
    state.queue.push_back({filename != nullptr ? filename : "", (events & UV_RENAME) != 0,
                           (events & UV_CHANGE) != 0});
  }
  state.waiters.notify_all();
}

}  // namespace
}  // namespace detail

namespace fs {

watch_overflow_error::watch_overflow_error(std::string path, std::size_t dropped,
                                           std::size_t capacity)
    : error("weft: fs watch " + path + ": " + std::to_string(dropped) +
            " events dropped because the watcher's queue (capacity " + std::to_string(capacity) +
            ") was full; rescan what you watch, and call next() more often or raise "
            "watch_options::queue_capacity"),
      dropped_(dropped) {}

watcher::watcher(watcher&& other) noexcept : state_(std::exchange(other.state_, nullptr)) {}

watcher& watcher::operator=(watcher&& other) noexcept {
  if (this != &other) {
    close();
    state_ = std::exchange(other.state_, nullptr);
  }
  return *this;
}

watcher::~watcher() { close(); }

void watcher::close() noexcept {
  if (state_ == nullptr) {
    return;
  }
  detail::watch_state& state = *std::exchange(state_, nullptr);
  state.closed = true;
  if (state.handle_open) {
    // Asynchronous: libuv still owns the handle until its close callback, which may free the
    // state.
    state.close_handle(reinterpret_cast<uv_handle_t*>(&state.handle));
  }
  state.release_owner();  // waiters in next() wake and report the close
}

std::size_t watcher::queued() const noexcept {
  return state_ == nullptr ? 0 : state_->queue.size();
}

const std::string& watcher::path() const noexcept {
  static const std::string none;
  return state_ == nullptr ? none : state_->path;
}

watch_event watcher::next(const timeout& limit) {
  if (state_ == nullptr) {
    throw std::logic_error(
        "weft::fs::watcher::next on a closed watcher (closed, moved from, or never started); "
        "start one with weft::fs::watch");
  }
  detail::watch_state& state = *state_;
  detail::state_user user(state);
  detail::wait_until(
      state.waiters,
      [&] { return !state.queue.empty() || state.dropped > 0 || state.error != 0 || state.closed; },
      limit, state.description, "weft::fs::watcher::next");
  if (!state.queue.empty()) {
    watch_event event = std::move(state.queue.front());
    state.queue.pop_front();
    return event;
  }
  if (state.dropped > 0) {
    throw watch_overflow_error(state.path, std::exchange(state.dropped, 0), state.capacity);
  }
  if (state.error != 0) {
    detail::throw_uv_error(std::exchange(state.error, 0), "watch", state.path);
  }
  throw error("weft: fs watch " + state.path +
              " was closed while a coroutine waited in next(); stop waiting before closing");
}

watcher watch(const std::string& path, const watch_options& options) {
  uv_loop_t& loop = detail::current_uv_loop("weft::fs::watch");
  detail::refuse_nul(path, "watch", "path");
  if (options.recursive) {
    // libuv accepts the flag on Linux and silently watches one level only: refuse instead.
    throw io_error(UV_ENOSYS, "watch", path,
                   "recursive watching is not supported on Linux; watch each directory");
  }
  if (options.queue_capacity == 0) {
    throw std::invalid_argument("weft::fs::watch: watch_options::queue_capacity must be > 0");
  }
  // From here on the owner's destructor closes whatever was initialised if anything throws.
  watcher owner(new detail::watch_state(*detail::current_core(), path, options.queue_capacity));
  detail::watch_state& state = *owner.state_;
  int status = uv_fs_event_init(&loop, &state.handle);
  if (status < 0) {
    detail::throw_uv_error(status, "watch", path);
  }
  state.handle_initialized(reinterpret_cast<uv_handle_t*>(&state.handle));
  status = uv_fs_event_start(&state.handle, &detail::on_event, path.c_str(), 0);
  if (status < 0) {
    detail::throw_uv_error(status, "watch", path);
  }
  return owner;
}

}  // namespace fs
}  // namespace weft

#include "loop/fd_source.hpp"

#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#include "weft/error.hpp"
#include "weft/reactor/fd.hpp"

namespace weft::loop::detail {
namespace {

// One epoll_wait returns at most this many fds; a full batch asks for another poll at once.
constexpr int poll_batch = 256;

constexpr std::uint32_t readable_events = EPOLLIN | EPOLLRDHUP;
constexpr std::uint32_t writable_events = EPOLLOUT;

std::string call_name(const char* operation) {
  return std::string("weft::loop::event_loop::") + operation;
}

[[noreturn]] void throw_errno(const char* operation, int fd, int code, const char* what) {
  throw weft::io_error(-code, call_name(operation), "fd " + std::to_string(fd),
                       std::string(what) + ": " + std::strerror(code));
}

}  // namespace

fd_source::~fd_source() {
  // No session is active (the loop refuses to be destroyed during one), so no helper waits on
  // any of these.
  for (int retired : retired_epolls_) {
    ::close(retired);
  }
  if (epoll_fd_ >= 0) {
    ::close(epoll_fd_);
  }
}

std::uint32_t fd_source::wanted(const entry& e) noexcept {
  return (e.ids[0] != watcher_id::none ? readable_events : 0) |
         (e.ids[1] != watcher_id::none ? writable_events : 0);
}

void fd_source::ensure_epoll(const char* operation) {
  if (epoll_fd_ >= 0) {
    return;
  }
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) {
    int code = errno;
    throw weft::io_error(
        -code, call_name(operation), "",
        std::string("cannot create the loop's epoll instance: ") + std::strerror(code));
  }
  events_.resize(poll_batch);
}

void fd_source::watch(int fd, fd_direction direction, watcher_id id, const char* operation) {
  if (fd < 0) {
    throw std::invalid_argument(call_name(operation) + " needs an open fd, got " +
                                std::to_string(fd));
  }
  ensure_epoll(operation);
  auto index = static_cast<std::size_t>(fd);
  if (index >= entries_.size()) {
    entries_.resize(std::max(index + 1, entries_.size() * 2));
  }
  entry& e = entries_[index];
  if (e.registered == 0) {
    // A new fd: check it now, so that a bad one fails the call that brought it.
    struct stat status {};
    if (::fstat(fd, &status) != 0) {
      int code = errno;
      if (code == EBADF) {
        throw std::invalid_argument(call_name(operation) + ": fd " + std::to_string(fd) +
                                    " is not open");
      }
      throw_errno(operation, fd, code, "cannot inspect it");
    }
    if (S_ISREG(status.st_mode) || S_ISDIR(status.st_mode)) {
      throw std::invalid_argument(
          call_name(operation) + ": fd " + std::to_string(fd) + " is a " +
          (S_ISDIR(status.st_mode) ? "directory" : "regular file") +
          ", which is always ready; read or write it directly (watch sockets, pipes, FIFOs, "
          "ttys, eventfds and the like)");
    }
    entry fresh;
    fresh.ids[static_cast<int>(direction)] = id;
    epoll_event event{};
    event.events = wanted(fresh);
    event.data.fd = fd;
    int result = ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event);
    if (result != 0 && errno == EEXIST) {
      // Still in the set from before: a registration the kernel kept because the file was
      // duplicated when its number was closed. Take it over.
      result = ::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &event);
    }
    if (result != 0) {
      int code = errno;
      if (code == EPERM) {
        throw std::invalid_argument(call_name(operation) + ": fd " + std::to_string(fd) +
                                    " does not support readiness notification (epoll refuses "
                                    "it); read or write it directly");
      }
      throw_errno(operation, fd, code, "cannot watch it");
    }
    fresh.registered = event.events;
    fresh.device = status.st_dev;
    fresh.inode = status.st_ino;
    e = fresh;
    ++watched_;
  } else {
    e.ids[static_cast<int>(direction)] = id;
    if (wanted(e) != e.registered && !e.dirty) {
      e.dirty = true;
      dirty_.push_back(fd);
    }
  }
  // It may be ready already: look at the next tick rather than wait for the helper's wake.
  poll_needed_ = true;
  if (listener_ != nullptr && !helper_.valid()) {
    spawn_helper();
  }
}

void fd_source::unwatch(int fd, fd_direction direction) noexcept {
  if (fd < 0 || static_cast<std::size_t>(fd) >= entries_.size()) {
    return;
  }
  entry& e = entries_[static_cast<std::size_t>(fd)];
  if (e.registered == 0) {
    return;
  }
  e.ids[static_cast<int>(direction)] = watcher_id::none;
  if (wanted(e) == 0) {
    // Out of the set now, so that the caller may close the fd right away. It fails harmlessly
    // when the fd was closed already (EBADF) or its number reused (ENOENT).
    ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    e = entry{};  // a queued dirty mark is skipped by poll()
    --watched_;
    return;
  }
  if (wanted(e) != e.registered && !e.dirty) {
    e.dirty = true;
    dirty_.push_back(fd);
  }
}

void fd_source::mark_dead(int fd, entry& e, int code) {
  dead_fd found;
  found.fd = fd;
  found.code = code;
  found.watchers[0] = e.ids[0];
  found.watchers[1] = e.ids[1];
  dead_.push_back(found);
}

const std::vector<ready_fd>& fd_source::poll() {
  ready_.clear();
  poll_needed_ = false;
  if (epoll_fd_ < 0) {
    return ready_;
  }
  for (int fd : dirty_) {
    entry& e = entries_[static_cast<std::size_t>(fd)];
    if (!e.dirty) {
      continue;  // unwatched meanwhile
    }
    e.dirty = false;
    std::uint32_t events = wanted(e);
    if (events == e.registered) {
      continue;  // changed and changed back: no syscall
    }
    epoll_event event{};
    event.events = events;
    event.data.fd = fd;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &event) != 0) {
      // EBADF: closed under its watchers; ENOENT: closed and the number reused by a file that
      // is not in the set.
      mark_dead(fd, e, errno);
      continue;
    }
    e.registered = events;
  }
  dirty_.clear();
  int count = ::epoll_wait(epoll_fd_, events_.data(), poll_batch, 0);
  if (count < 0) {
    poll_needed_ = true;  // EINTR: try again next tick
    return ready_;
  }
  if (count == poll_batch) {
    poll_needed_ = true;
  }
  bool stuck = false;
  for (int index = 0; index < count; ++index) {
    const epoll_event& event = events_[static_cast<std::size_t>(index)];
    int fd = event.data.fd;
    if (static_cast<std::size_t>(fd) >= entries_.size() ||
        entries_[static_cast<std::size_t>(fd)].registered == 0) {
      // A registration the kernel kept for a duplicated file whose number we let go of. When
      // the number no longer names that file, nothing can delete it (see the file comment).
      if (::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr) != 0) {
        stuck = true;
      }
      continue;
    }
    std::uint32_t flags = event.events;
    ready_.push_back(ready_fd{fd, (flags & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0,
                              (flags & (EPOLLOUT | EPOLLHUP | EPOLLERR)) != 0});
  }
  if (stuck) {
    rebuild();
  }
  return ready_;
}

void fd_source::rebuild() {
  int fresh = ::epoll_create1(EPOLL_CLOEXEC);
  if (fresh < 0) {
    return;  // out of descriptors: keep the old set (stale events wake the loop, harmlessly)
  }
  for (std::size_t index = 0; index < entries_.size(); ++index) {
    entry& e = entries_[index];
    if (e.registered == 0) {
      continue;
    }
    int fd = static_cast<int>(index);
    epoll_event event{};
    event.events = wanted(e);
    event.data.fd = fd;
    e.dirty = false;
    e.registered = event.events;
    if (::epoll_ctl(fresh, EPOLL_CTL_ADD, fd, &event) != 0) {
      mark_dead(fd, e, errno);  // closed under its watchers: reported, then unwatched
    }
  }
  dirty_.clear();
  retired_epolls_.push_back(epoll_fd_);
  epoll_fd_ = fresh;
  poll_needed_ = true;
  if (helper_.valid()) {
    retire_helper();  // it waits on the old instance
    spawn_helper();
  } else {
    close_retired_epolls();
  }
}

void fd_source::close_retired_epolls() noexcept {
  // A helper still alive may hold a weft registration of an old instance; closing an fd that a
  // driver polls is what this class exists to avoid.
  for (const weft::task<void>& retired : retired_) {
    if (!retired.done()) {
      return;
    }
  }
  for (int retired : retired_epolls_) {
    ::close(retired);
  }
  retired_epolls_.clear();
}

void fd_source::check_closed() {
  for (std::size_t index = 0; index < entries_.size(); ++index) {
    entry& e = entries_[index];
    if (e.registered == 0) {
      continue;
    }
    int fd = static_cast<int>(index);
    struct stat status {};
    if (::fstat(fd, &status) != 0) {
      mark_dead(fd, e, errno);
    } else if (status.st_dev != e.device || status.st_ino != e.inode) {
      mark_dead(fd, e, ESTALE);
    }
  }
}

void fd_source::start(readiness_listener& listener) {
  listener_ = &listener;
  poll_needed_ = true;  // what became ready while nobody dispatched
  if (watched_ > 0) {
    spawn_helper();
  }
}

void fd_source::settle() {
  if (listener_ == nullptr) {
    return;
  }
  if (watched_ == 0 && helper_.valid()) {
    // Waiting on an empty epoll set would keep the scheduler's reactor alive for nothing
    // (and hide a deadlock).
    retire_helper();
  } else if (watched_ > 0 && !helper_.valid()) {
    spawn_helper();
  }
}

void fd_source::stop() {
  listener_ = nullptr;
  retire_helper();
  // Wait until every helper has ended, so that no weft registration of the epoll fd outlives
  // the session (the loop may be destroyed, and the fd closed, right after run() returns).
  for (weft::task<void>& retired : retired_) {
    while (!retired.done()) {
      try {
        retired.await();
      } catch (...) {
        // The helper's own cancellation, or this coroutine's (the run is ending): either way,
        // keep waiting for the helper, which is cancelled and finishes at its next turn.
      }
    }
  }
  retired_.clear();
  close_retired_epolls();
}

void fd_source::spawn_helper() {
  helper_ = weft::spawn([this, epoll_fd = epoll_fd_] { helper_main(*this, epoll_fd); },
                        {.name = "weft::loop fd readiness", .background = true});
}

void fd_source::retire_helper() noexcept {
  if (!helper_.valid()) {
    return;
  }
  try {
    std::erase_if(retired_, [](const weft::task<void>& retired) { return retired.done(); });
    if (retired_.empty()) {
      close_retired_epolls();
    }
    helper_.cancel("the event loop no longer needs fd readiness");
    retired_.push_back(std::move(helper_));
  } catch (...) {
    // cancel() throws only from a foreign thread; the loop checked its thread already.
  }
  helper_ = weft::task<void>();
}

void fd_source::helper_main(fd_source& self, int epoll_fd) {
  try {
    // Registered for the helper's life: its waits then cost no syscall of the driver.
    weft::fd_registration keep(epoll_fd);
    for (;;) {
      weft::wait_readable(epoll_fd);
      self.poll_needed_ = true;
      if (self.listener_ != nullptr) {
        self.listener_->readiness_arrived();
      }
    }
  } catch (const weft::cancelled_error&) {
    throw;
  } catch (...) {
    if (self.listener_ != nullptr) {
      self.listener_->source_failed(std::current_exception());
    }
  }
}

}  // namespace weft::loop::detail

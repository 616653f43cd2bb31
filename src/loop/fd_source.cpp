#include "loop/fd_source.hpp"

#include <poll.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#include "weft/error.hpp"

namespace weft::loop::detail {
namespace {

using weft::detail::fd_subscription;

std::string call_name(const char* operation) {
  return std::string("weft::loop::event_loop::") + operation;
}

bool watching(const watcher_id (&ids)[2]) noexcept {
  return ids[0] != watcher_id::none || ids[1] != watcher_id::none;
}

}  // namespace

int fd_source::wanted(const watched_fd& e) noexcept {
  return (e.ids[0] != watcher_id::none ? fd_subscription::readable : 0) |
         (e.ids[1] != watcher_id::none ? fd_subscription::writable : 0);
}

int fd_source::fate(const watched_fd& e) noexcept {
  struct stat status {};
  if (::fstat(e.fd, &status) != 0) {
    return errno;
  }
  return status.st_dev != e.device || status.st_ino != e.inode ? ESTALE : 0;
}

void fd_source::watch(int fd, fd_direction direction, watcher_id id, const char* operation,
                      std::uint64_t tick) {
  if (fd < 0) {
    throw std::invalid_argument(call_name(operation) + " needs an open fd, got " +
                                std::to_string(fd));
  }
  auto index = static_cast<std::size_t>(fd);
  if (index >= entries_.size()) {
    entries_.resize(std::max(index + 1, entries_.size() * 2));
  }
  std::unique_ptr<watched_fd>& slot = entries_[index];
  if (slot == nullptr) {
    auto created = std::make_unique<watched_fd>();
    created->owner = this;
    created->fd = fd;
    created->ready = &fd_source::on_ready;
    // Every entry may be queued and dirty once at a time: room for all of them now, so that
    // neither ready() (inside the driver's poll) nor a noexcept unwatch ever allocates.
    std::size_t entries = ++entry_count_;
    dirty_.reserve(entries);
    reported_.reserve(entries);
    taking_.reserve(entries);
    probes_.reserve(entries);
    probing_.reserve(entries);
    slot = std::move(created);
  }
  watched_fd& e = *slot;
  const int side = static_cast<int>(direction);
  const int bit = side == 0 ? fd_subscription::readable : fd_subscription::writable;
  auto start_probe = [&] {
    e.probing |= bit;
    e.probe_tick = tick;
    if (!e.probe_queued) {
      e.probe_queued = true;
      probes_.push_back(fd);  // reserved: see above
    }
  };
  if (watching(e.ids)) {
    bool had = e.ids[side] != watcher_id::none;
    e.ids[side] = id;
    e.referenced[side] = true;
    if (core_ != nullptr) {
      if (had) {
        mark_dirty(e);  // a replacement: only the reference may change
      } else {
        start_probe();
      }
    }
    return;
  }
  // A new fd: check it now, so that a bad one fails the call that brought it.
  struct stat status {};
  if (::fstat(fd, &status) != 0) {
    int code = errno;
    if (code == EBADF) {
      throw std::invalid_argument(call_name(operation) + ": fd " + std::to_string(fd) +
                                  " is not open");
    }
    throw weft::io_error(-code, call_name(operation), "fd " + std::to_string(fd),
                         std::string("cannot inspect it: ") + std::strerror(code));
  }
  if (S_ISREG(status.st_mode) || S_ISDIR(status.st_mode)) {
    throw std::invalid_argument(
        call_name(operation) + ": fd " + std::to_string(fd) + " is a " +
        (S_ISDIR(status.st_mode) ? "directory" : "regular file") +
        ", which is always ready; read or write it directly (watch sockets, pipes, FIFOs, "
        "ttys, eventfds and the like)");
  }
  e.device = status.st_dev;
  e.inode = status.st_ino;
  e.ids[side] = id;
  e.referenced[side] = true;
  e.reported = 0;
  e.stopped = false;
  ++watched_;
  if (core_ == nullptr) {
    return;  // subscribed when the loop is next dispatched
  }
  int started = 0;
  try {
    // Registered with the driver now, so that a fd it refuses fails this call, but polling for
    // nothing until its probe (see the file comment).
    e.events = 0;
    e.fd_subscription::referenced = true;
    started = weft::detail::subscribe_fd(*core_, e);
  } catch (...) {
    e.ids[side] = watcher_id::none;
    e.referenced[side] = false;
    --watched_;
    throw;
  }
  if (started >= 0) {
    start_probe();
    return;
  }
  {
    e.ids[side] = watcher_id::none;
    e.referenced[side] = false;
    --watched_;
    std::string what = call_name(operation) + ": fd " + std::to_string(fd);
    if (started == -EBADF) {
      throw std::invalid_argument(what + " is not open");
    }
    if (started == -EPERM) {
      throw std::invalid_argument(what + " does not support readiness notification (the " +
                                  core_->driver().name() +
                                  " driver refuses it); read or write it directly");
    }
    throw weft::io_error(started, call_name(operation), "fd " + std::to_string(fd),
                         std::string("the ") + core_->driver().name() +
                             " driver cannot watch it: " + std::strerror(-started));
  }
}

void fd_source::unwatch(int fd, fd_direction direction) noexcept {
  if (fd < 0 || static_cast<std::size_t>(fd) >= entries_.size() ||
      entries_[static_cast<std::size_t>(fd)] == nullptr) {
    return;
  }
  watched_fd& e = *entries_[static_cast<std::size_t>(fd)];
  const int side = static_cast<int>(direction);
  if (e.ids[side] == watcher_id::none) {
    return;
  }
  e.ids[side] = watcher_id::none;
  e.referenced[side] = false;
  e.probing &= ~(side == 0 ? fd_subscription::readable : fd_subscription::writable);
  if (watching(e.ids)) {
    if (core_ != nullptr) {
      mark_dirty(e);  // polled for the other direction only from the next settle()
    }
    return;
  }
  forget(e);
  --watched_;
}

void fd_source::set_referenced(int fd, fd_direction direction, bool referenced) noexcept {
  if (fd < 0 || static_cast<std::size_t>(fd) >= entries_.size() ||
      entries_[static_cast<std::size_t>(fd)] == nullptr) {
    return;
  }
  watched_fd& e = *entries_[static_cast<std::size_t>(fd)];
  e.referenced[static_cast<int>(direction)] = referenced;
  if (core_ != nullptr && watching(e.ids)) {
    mark_dirty(e);
  }
}

void fd_source::mark_dirty(watched_fd& e) {
  if (!e.dirty) {
    e.dirty = true;
    dirty_.push_back(e.fd);  // reserved: see watch()
  }
}

void fd_source::forget(watched_fd& e) noexcept {
  // Out of the driver now, so that the caller may close the fd right away.
  if (core_ != nullptr && e.entry != nullptr) {
    weft::detail::unsubscribe_fd(*core_, e);
  }
  e.reported = 0;
  e.stopped = false;
  e.probing = 0;  // a queued probe entry is skipped
}

void fd_source::apply(watched_fd& e) {
  e.events = wanted(e) & ~e.probing;
  e.fd_subscription::referenced = (e.ids[0] != watcher_id::none && e.referenced[0]) ||
                                  (e.ids[1] != watcher_id::none && e.referenced[1]);
  int status = weft::detail::subscribe_fd(*core_, e);
  if (status < 0) {
    // EBADF: closed under its watchers (libevent's epoll_ctl, the uv driver's check); a refusal
    // of a file that is still the one first watched is reported with the driver's own code.
    int code = fate(e);
    mark_dead(e, code != 0 ? code : -status);
  }
}

void fd_source::mark_dead(watched_fd& e, int code) {
  dead_fd found;
  found.fd = e.fd;
  found.code = code;
  found.watchers[0] = e.ids[0];
  found.watchers[1] = e.ids[1];
  dead_.push_back(found);
}

void fd_source::on_ready(fd_subscription& subscription, int events) {
  auto& e = static_cast<watched_fd&>(subscription);
  fd_source& self = *e.owner;
  e.reported |= events & (fd_subscription::readable | fd_subscription::writable);
  if ((events & fd_subscription::stopped) != 0) {
    e.stopped = true;
  }
  if (!e.queued) {
    e.queued = true;
    self.reported_.push_back(e.fd);  // reserved: see watch()
  }
  if (self.listener_ != nullptr) {
    self.listener_->readiness_arrived();
  }
}

const std::vector<ready_fd>& fd_source::take_ready(std::uint64_t tick) {
  ready_.clear();
  taking_.clear();
  taking_.swap(reported_);  // what the driver reports from now on goes to the next tick
  for (int fd : taking_) {
    watched_fd& e = *entries_[static_cast<std::size_t>(fd)];
    e.queued = false;
    int directions = e.reported;
    e.reported = 0;
    if (!watching(e.ids) || directions == 0) {
      continue;  // unwatched since it was reported
    }
    if (e.stopped) {
      // The driver stopped polling it after an error condition: a closed fd (POLLNVAL, a change
      // refused), or a live one in error (POLLERR), which is polled again from the next settle.
      e.stopped = false;
      int code = fate(e);
      if (code != 0) {
        mark_dead(e, code);
        continue;
      }
      mark_dirty(e);
    }
    ready_.push_back(ready_fd{fd, (directions & fd_subscription::readable) != 0,
                              (directions & fd_subscription::writable) != 0});
  }
  if (!probes_.empty()) {
    probe(tick);
  }
  return ready_;
}

void fd_source::probe(std::uint64_t tick) {
  probing_.clear();
  probing_.swap(probes_);
  probe_set_.clear();
  for (int fd : probing_) {
    watched_fd& e = *entries_[static_cast<std::size_t>(fd)];
    if (e.probing == 0) {
      e.probe_queued = false;  // unwatched since
      continue;
    }
    if (e.probe_tick >= tick) {
      probes_.push_back(fd);  // registered during this tick: probed in the next
      continue;
    }
    e.probe_queued = false;
    pollfd asked{};
    asked.fd = fd;
    asked.events = static_cast<short>(((e.probing & fd_subscription::readable) != 0 ? POLLIN : 0) |
                                      ((e.probing & fd_subscription::writable) != 0 ? POLLOUT : 0));
    probe_set_.push_back(asked);
  }
  if (probe_set_.empty()) {
    return;
  }
  int found = ::poll(probe_set_.data(), probe_set_.size(), 0);
  if (found < 0) {
    found = 0;  // EINTR, ENOMEM: treated as "not ready", so the driver watches them
    for (pollfd& asked : probe_set_) {
      asked.revents = 0;
    }
  }
  for (const pollfd& asked : probe_set_) {
    watched_fd& e = *entries_[static_cast<std::size_t>(asked.fd)];
    int probed = e.probing;
    e.probing = 0;
    mark_dirty(e);  // what is still watched after this tick goes to the driver
    if ((asked.revents & POLLNVAL) != 0) {
      int code = fate(e);
      mark_dead(e, code != 0 ? code : EBADF);
      continue;
    }
    // An error or hang-up counts as ready both ways, as the driver reports it.
    bool readable = (asked.revents & (POLLIN | POLLHUP | POLLERR)) != 0 &&
                    (probed & fd_subscription::readable) != 0;
    bool writable = (asked.revents & (POLLOUT | POLLHUP | POLLERR)) != 0 &&
                    (probed & fd_subscription::writable) != 0;
    if (readable || writable) {
      ready_.push_back(ready_fd{asked.fd, readable, writable});
    }
  }
}

void fd_source::check_closed() {
  for (const std::unique_ptr<watched_fd>& slot : entries_) {
    if (slot == nullptr || !watching(slot->ids)) {
      continue;
    }
    if (int code = fate(*slot); code != 0) {
      mark_dead(*slot, code);
    }
  }
}

void fd_source::start(readiness_listener& listener) {
  listener_ = &listener;
  core_ = weft::detail::current_core();
  dirty_.clear();
  for (const std::unique_ptr<watched_fd>& slot : entries_) {
    if (slot == nullptr) {
      continue;
    }
    slot->dirty = false;
    if (watching(slot->ids)) {
      apply(*slot);
    }
  }
}

void fd_source::settle() {
  if (core_ == nullptr || dirty_.empty()) {
    return;
  }
  for (int fd : dirty_) {
    watched_fd& e = *entries_[static_cast<std::size_t>(fd)];
    if (!e.dirty) {
      continue;
    }
    e.dirty = false;
    if (watching(e.ids)) {
      apply(e);
    }
  }
  dirty_.clear();
}

void fd_source::stop() noexcept {
  if (core_ != nullptr) {
    for (const std::unique_ptr<watched_fd>& slot : entries_) {
      if (slot == nullptr) {
        continue;
      }
      if (slot->entry != nullptr) {
        weft::detail::unsubscribe_fd(*core_, *slot);
      }
      slot->reported = 0;
      slot->queued = false;
      slot->stopped = false;
      slot->dirty = false;
      slot->probing = 0;
      slot->probe_queued = false;
    }
  }
  reported_.clear();
  dirty_.clear();
  probes_.clear();
  core_ = nullptr;
  listener_ = nullptr;
}

}  // namespace weft::loop::detail

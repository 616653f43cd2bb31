#include "reactor/drivers/epoll_set.hpp"

#include <unistd.h>

#include <cerrno>

namespace weft::detail {

int epoll_set::open() noexcept {
  fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  return fd_ >= 0 ? 0 : -errno;
}

void epoll_set::close() noexcept {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
}

unsigned epoll_set::to_epoll(int events) noexcept {
  if (events == 0) {
    return EPOLLONESHOT;  // idle: see the header
  }
  return ((events & fd_watch::readable) != 0 ? unsigned{EPOLLIN} : 0U) |
         ((events & fd_watch::writable) != 0 ? unsigned{EPOLLOUT} : 0U);
}

int epoll_set::add(fd_watch& watch) noexcept {
  epoll_event interest{};
  interest.data.ptr = &watch;
  interest.events = to_epoll(watch.events);
  return ::epoll_ctl(fd_, EPOLL_CTL_ADD, watch.fd, &interest) == 0 ? 0 : -errno;
}

int epoll_set::modify(fd_watch& watch) noexcept {
  epoll_event interest{};
  interest.data.ptr = &watch;
  interest.events = to_epoll(watch.events);
  return ::epoll_ctl(fd_, EPOLL_CTL_MOD, watch.fd, &interest) == 0 ? 0 : -errno;
}

void epoll_set::remove(fd_watch& watch) noexcept {
  epoll_event unused{};
  ::epoll_ctl(fd_, EPOLL_CTL_DEL, watch.fd, &unused);  // EBADF after a close: gone already
  for (int index = next_; index < count_; ++index) {
    if (events_[static_cast<std::size_t>(index)].data.ptr == &watch) {
      events_[static_cast<std::size_t>(index)].data.ptr = nullptr;
    }
  }
}

}  // namespace weft::detail

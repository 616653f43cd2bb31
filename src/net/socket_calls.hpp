// recv(2) and send(2) for a connection's socket, without glibc's cancellation-point wrappers.
//
// glibc's recv() and send() are POSIX cancellation points: in a process with more than one
// thread (every weft process: libuv's thread pool, the server's workers) each call brackets the
// system call with __pthread_enable_asynccancel and __pthread_disable_asynccancel, two atomic
// read-modify-writes of the thread's cancellation state, about 60 instructions per request and
// response on the hot path (callgrind, bench_http_weft at 64 connections). weft never cancels a
// thread with pthread_cancel, and its sockets are non-blocking, so the system calls are made
// directly through syscall(2), which is not a cancellation point. Same results and errno as
// recv() and send().
#pragma once

#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

namespace weft::net::detail {

inline ssize_t socket_recv(int fd, void* buffer, std::size_t size, int flags) noexcept {
  return ::syscall(SYS_recvfrom, fd, buffer, size, flags, nullptr, nullptr);
}

inline ssize_t socket_send(int fd, const void* data, std::size_t size, int flags) noexcept {
  return ::syscall(SYS_sendto, fd, data, size, flags, nullptr, 0);
}

// The bytes written to a socket and not yet acknowledged by the peer (SIOCOUTQ); -1 when it
// cannot say. A stall timeout on a write takes a fall of it as progress: Linux autotunes a
// send buffer up to megabytes (tcp_wmem) and reports the socket writable only once a third of
// it is free, so a peer reading slowly but steadily can leave it unwritable for longer than
// the timeout while it takes every byte.
inline std::int64_t unacknowledged_bytes(int fd) noexcept {
  int bytes = 0;
  if (fd < 0 || ::ioctl(fd, SIOCOUTQ, &bytes) != 0) {
    return -1;
  }
  return bytes;
}

// Whether the peer acknowledged bytes since `before`, an unacknowledged_bytes() taken with
// nothing written to the socket since (only acknowledgements then make it fall).
inline bool acknowledged_since(int fd, std::int64_t before) noexcept {
  if (before <= 0) {
    return false;
  }
  const std::int64_t now = unacknowledged_bytes(fd);
  return now >= 0 && now < before;
}

}  // namespace weft::net::detail

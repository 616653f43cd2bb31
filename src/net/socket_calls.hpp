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

#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstddef>

namespace weft::net::detail {

inline ssize_t socket_recv(int fd, void* buffer, std::size_t size, int flags) noexcept {
  return ::syscall(SYS_recvfrom, fd, buffer, size, flags, nullptr, nullptr);
}

inline ssize_t socket_send(int fd, const void* data, std::size_t size, int flags) noexcept {
  return ::syscall(SYS_sendto, fd, data, size, flags, nullptr, 0);
}

}  // namespace weft::net::detail

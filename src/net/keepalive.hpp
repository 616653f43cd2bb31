// TCP keep-alive on a socket (net::tcp_keepalive, weft/net/keepalive.hpp): the check of its
// settings, shared by the options that carry one (net's, http's server and client), and the
// setsockopt calls.
#pragma once

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <string>

#include "weft/net/connection.hpp"

namespace weft::net::detail {

// What is wrong with the settings ("keepalive.idle must be ..."), or empty when they are valid
// (off, or within Linux's limits: TCP_MAX_KEEPIDLE and TCP_MAX_KEEPINTVL 32767 s,
// TCP_MAX_KEEPCNT 127).
inline std::string keepalive_problem(const tcp_keepalive& k) {
  const auto seconds = [](std::chrono::seconds value) { return std::to_string(value.count()); };
  if (k.idle.count() < 0 || k.idle.count() > 32767) {
    return "keepalive.idle must be 0 (off) to 32767 s, not " + seconds(k.idle) + " s";
  }
  if (k.idle.count() == 0) {
    return {};
  }
  if (k.interval.count() < 1 || k.interval.count() > 32767) {
    return "keepalive.interval must be 1 to 32767 s, not " + seconds(k.interval) + " s";
  }
  if (k.probes < 1 || k.probes > 127) {
    return "keepalive.probes must be 1 to 127, not " + std::to_string(k.probes);
  }
  return {};
}

// Turns the probes on for fd (valid settings with a non-zero idle). Best effort, as TCP_NODELAY:
// a socket that is not TCP refuses the options, and the connection works without them.
inline void apply_keepalive(int fd, const tcp_keepalive& k) noexcept {
  const int on = 1;
  const auto idle = static_cast<int>(k.idle.count());
  const auto interval = static_cast<int>(k.interval.count());
  const int probes = k.probes;
  if (::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on) != 0) {
    return;
  }
  static_cast<void>(::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle));
  static_cast<void>(::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval));
  static_cast<void>(::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof probes));
}

}  // namespace weft::net::detail

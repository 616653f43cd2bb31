// weft::dns: name resolution for coroutines (uv_getaddrinfo / uv_getnameinfo).
//
// The lookups run on libuv's thread pool (the system resolver blocks); the caller suspends
// meanwhile. Each takes an optional weft::timeout and is a cancellation point: a cancel or the
// timeout wakes the caller at once and abandons the request (uv_cancel stops it if no worker
// has started it; otherwise it completes in the background and its result is freed unseen).
// Failures are weft::io_error with the libuv code (UV_EAI_NONAME, ...), the call and the host:
// "getaddrinfo nosuch.invalid: unknown node or service".
//
// Thread: call from a coroutine on the scheduler's thread (std::logic_error elsewhere).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "weft/sched/timeout.hpp"

namespace weft::dns {

// One resolved address.
struct address {
  int family = 0;          // AF_INET or AF_INET6
  std::string ip;          // numeric form: "127.0.0.1", "::1"
  std::uint16_t port = 0;  // the port asked for, in host byte order

  friend bool operator==(const address&, const address&) = default;
};

// The addresses of host (a name or a numeric address), in the resolver's order of preference,
// each once. service is a port number ("8080") or a service name ("http"); empty gives port 0.
std::vector<address> resolve(const std::string& host, const std::string& service = "",
                             const timeout& limit = timeout::never());
std::vector<address> resolve(const std::string& host, std::uint16_t port,
                             const timeout& limit = timeout::never());

// The host name for a numeric IPv4 or IPv6 address ("127.0.0.1" -> "localhost"). io_error if
// ip is not numeric (invalid argument) or has no name (unknown node or service).
std::string reverse(const std::string& ip, const timeout& limit = timeout::never());

}  // namespace weft::dns

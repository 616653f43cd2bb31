// weft::net::tcp_keepalive: the kernel's keep-alive probes on a TCP socket, a setting shared by
// net::connection_options, net::tcp_server_options, http::server_options and
// http::client_options. A header of its own so that the HTTP client's options name it without
// the connection's whole header.
#pragma once

#include <chrono>

namespace weft::net {

// TCP keep-alive (SO_KEEPALIVE, with Linux's TCP_KEEPIDLE, TCP_KEEPINTVL and TCP_KEEPCNT): after
// `idle` with nothing received the kernel probes the peer every `interval`, and `probes` probes
// unanswered fail the connection (its next read reports ETIMEDOUT: close_reason::error, logged).
// It finds a peer that vanished without a FIN or a reset (a machine switched off, a NAT or a
// firewall that forgot the flow) on a connection its protocol keeps quiet, which otherwise
// stays open for ever, and keeps such boxes from forgetting a quiet flow. Zero idle: off (the
// default, as nginx's so_keepalive; Go turns it on for its servers and clients with 15 s, 15 s
// and 9). A protocol with pings of its own (websocket_options::ping_interval) checks the peer
// itself, not only its kernel. Idle and interval 1 to 32767 s, probes 1 to 127 (Linux's limits;
// std::invalid_argument otherwise).
struct tcp_keepalive {
  std::chrono::seconds idle{0};       // quiet before the first probe; zero: no keep-alive
  std::chrono::seconds interval{15};  // between probes
  int probes = 9;                     // unanswered probes that fail the connection
};

}  // namespace weft::net

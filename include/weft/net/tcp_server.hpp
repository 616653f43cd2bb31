// weft::net::tcp_server: a TCP server of N workers, each a thread with its own scheduler and its
// own SO_REUSEPORT listener (the kernel spreads new connections over them; nothing is shared on
// the hot path), serving every connection in a coroutine of its own.
//
// Two styles over one engine:
//   - coroutine style (primary): serve([](net::connection& c) { while (auto m = c.receive())
//     c.send(m->data); }) runs the handler in the connection's coroutine; when it returns the
//     connection closes gracefully (what it sent is flushed). An exception escaping it is
//     reported to on_error and closes the connection (close_reason::error).
//   - callback style (Workerman-like): serve(connection_events{.on_message = ...}); the
//     connection's coroutine runs on_connect, then on_message for each message, and on_close
//     when it is closed. Callbacks of one connection never run concurrently.
// Both may set the other callbacks (connection.hpp says when each runs).
//
// Threads: the server object is made and run on any thread. serve() blocks the calling thread
// until the server has stopped (from inside a weft coroutine it suspends that coroutine instead:
// the workers are threads of their own either way); a server serves once. stop(), port(),
// stats() and listening() are thread-safe and may be called at any time from any thread (a
// handler, a signal-watching thread, a test). Handlers and callbacks run on the workers'
// threads, concurrently across workers: what they share needs its own synchronisation.
//
// Stopping: stop(grace) (or SIGINT/SIGTERM with handle_signals) stops accepting on every worker,
// ends the connections that are idle (no message partly received: receive() returns nullopt,
// close_reason::server_stop) and lets the others finish their current message and reply within
// the grace period; a reply already queued is flushed (while the peer takes some of it every
// close_timeout). At the end of the grace period, or at a second stop()/signal, what remains is
// destroyed (handlers cancelled with weft::cancelled_error). serve() returns once every worker's
// connections are gone.
//
// Accept errors: running out of descriptors (EMFILE, ENFILE) or memory (ENOBUFS, ENOMEM) makes a
// worker back off (accept_retry_delay, doubling up to accept_retry_max_delay) and retry, counted
// in accept_retries and logged, never spinning or ending the worker.
//
// Errors: listen() (and serve(), which listens if needed) throw io_error naming the address
// (EADDRINUSE...) and std::invalid_argument for a bad option; serve() rethrows the first error
// that ended a worker (its own bugs; handler exceptions are per connection, see above).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "weft/context/stack.hpp"
#include "weft/net/connection.hpp"
#include "weft/net/protocol.hpp"

namespace weft::net {

// The settings of a tcp_server.
struct tcp_server_options {
  // A numeric IPv4 or IPv6 address to listen on ("0.0.0.0" or "" for all of IPv4, "::" for all
  // of IPv6), and the port (0: the kernel picks one; port() tells which).
  std::string host = "0.0.0.0";
  std::uint16_t port = 0;
  // Worker threads; 0 means one per core (std::thread::hardware_concurrency).
  unsigned workers = 1;
  // The driver of the workers' schedulers ("" for the default; see weft::run_options).
  std::string driver{};
  std::shared_ptr<const net::protocol> protocol{};  // null: raw bytes, each read one message
  // Pending connections the kernel holds per listener (it caps the number at
  // net.core.somaxconn, 4096 by default since Linux 5.4). A burst of connections larger than
  // the queue, arriving while the worker is busy, has its excess SYNs dropped and retried by the
  // clients a second later; 4096, as Go's net package takes somaxconn, lets a burst of a few
  // thousand wait for accept instead.
  int backlog = 4096;
  // Per worker; 0 for no limit. A connection accepted over it is closed at once and counted
  // (close_reason::max_connections).
  std::size_t max_connections = 0;
  std::size_t max_message_size = std::size_t{1} << 20;  // bytes; over it: close_reason::too_big
  // Bytes queued per connection before a send waits.
  std::size_t send_buffer_limit = std::size_t{1} << 20;
  // Zero switches a timeout off. idle: no bytes from the peer; handshake: from accept until the
  // first complete message and while the protocol says it is handshaking; message: from the
  // first byte of a message to its end (slowloris); close: a graceful close's flush taking
  // nothing (each stretch, not the whole flush); send: a send() waiting for room (then
  // close_reason::send_limit).
  std::chrono::milliseconds idle_timeout{0};
  std::chrono::milliseconds handshake_timeout{0};
  std::chrono::milliseconds message_timeout{0};
  std::chrono::milliseconds close_timeout{5000};
  std::chrono::milliseconds send_timeout{30000};
  // connection_options::linger_time: the longest a graceful close reads and drops what a peer
  // still sends after the FIN (close_timeout without a byte also ends it); zero: no lingering.
  std::chrono::milliseconds linger_time{30000};
  // The grace period of a stop by signal.
  std::chrono::milliseconds stop_timeout{10000};
  // Backoff after accept runs out of descriptors or memory: the first delay, doubling up to the
  // max.
  std::chrono::milliseconds accept_retry_delay{10};
  std::chrono::milliseconds accept_retry_max_delay{1000};
  bool no_delay = true;       // TCP_NODELAY on every connection
  tcp_keepalive keepalive{};  // TCP keep-alive probes on every connection (keepalive.hpp; off)
  // connection_options::half_close on every connection: the peer's FIN ends only the input. In
  // the callback style on_end then runs, and the connection stays open until the application
  // closes it (or shuts its own direction: shutdown_write()); without on_end it closes as
  // without half_close. A handler's return closes it as always.
  bool half_close = false;
  // TLS on every connection (tls.hpp; a tls_context::server): each completes its handshake
  // before on_connect and the handler, within tls_handshake_timeout (and handshake_timeout when
  // that is on). Null: plaintext.
  std::shared_ptr<const tls_context> tls{};
  std::chrono::milliseconds tls_handshake_timeout{10000};
  // Behind a proxy or load balancer (HAProxy's send-proxy / send-proxy-v2, nginx's
  // proxy_protocol, AWS NLB, Envoy): every connection starts with a PROXY protocol header,
  // version 1 (text) or 2 (binary), which names the client the proxy accepted. It is read
  // before TLS and the protocol: connection::peer_address() is then the client's address and
  // proxy_address() the proxy's. A connection whose first bytes are not a valid header, or
  // that sends none within proxy_protocol_timeout (0: no limit), is closed and logged
  // (protocol_error, handshake_timeout) and never reaches on_connect or the handler. Only for
  // a port that proxies alone can reach: a client that connects directly can name any address.
  bool proxy_protocol = false;
  std::chrono::milliseconds proxy_protocol_timeout{10000};
  // With proxy_protocol: the proxies, as addresses or CIDR blocks ("10.0.0.0/8", "127.0.0.1",
  // "2001:db8::/32"; an IPv4 block also takes IPv4-mapped peers of a dual-stack listener). Only a
  // connection from one of them must start with, and may name a client in, a PROXY header;
  // any other is served as a direct client (its own address, proxy_address() empty, and a
  // PROXY header it sends is only bytes for the protocol), as HAProxy's `expect-proxy layer4 if
  // { src ... }` and nginx's set_real_ip_from trust only their own proxies. Empty: every
  // connection must send one. An entry that is no address or block is std::invalid_argument
  // naming it, and so is the list without proxy_protocol.
  std::vector<std::string> proxy_protocol_from{};
  // Callback style: between messages a connection's read loop waits in its own coroutine while
  // its worker has at most this many connections, and above it the connection hibernates
  // (connection::hibernate: no coroutine and no stack until its next bytes, its peer's close or
  // one of its timeouts). A waiting coroutine costs nothing while the stacks of a few hundred
  // stay in the CPU's cache, less than a new coroutine per message; with more, each message
  // would miss on its own stack (weft::http's hibernate_above and bench/http/README.md have the
  // measurements). 0: always hibernate. The coroutine style decides for itself (hibernate()).
  std::size_t hibernate_above = 512;
  // The workers' run_options::reactor_poll_interval: how often a busy worker polls for I/O
  // between coroutines. Longer than the scheduler's default (250 us) because a worker wakes
  // many connections per poll, and a poll before they have all run reports their sockets
  // again: at 1000 connections 250 us cost 2.4 epoll_ctl per request, 2 ms none. The
  // scheduler also holds a due poll back until the connections the last one woke have run
  // (for at most four intervals), which took the epoll reports per request at 1000
  // connections from 3.7 to 1.0 (bench_net_weft echo). Timers on a busy worker fire within
  // about this much of their deadline, four times as much while thousands of connections
  // are being served in one batch.
  std::chrono::microseconds reactor_poll_interval{2000};
  // The workers' run_options::stacks: each connection's coroutine runs on one of these stacks
  // while it is served (a hibernating one holds none). With stacks.max_stacks set, a worker
  // holding that many accepts a connection past it and closes it at once (counted as
  // close_reason::error, logged "could not start a connection's coroutine"), as it does when
  // the kernel refuses the memory: the connections it serves go on.
  stack_options stacks{};
  // SIGINT and SIGTERM stop the server gracefully (stop_timeout), a second one forces it. They
  // are caught from before the first worker's on_worker_start: a line announcing the server
  // from the last worker's on_worker_start can be answered with Ctrl-C at once.
  bool handle_signals = false;
  // Per-worker resources (a pg::pool, a cache: things that belong to one scheduler). Both run
  // on the worker's thread, in its main coroutine, so they may suspend: on_worker_start before
  // the worker accepts its first connection, on_worker_stop after its last connection has
  // ended and before its scheduler finishes (close what on_worker_start made there; it runs
  // after a failed on_worker_start too, so it must cope with a partial start). An exception
  // from either ends that worker, stops the others at once, and serve() rethrows it.
  std::function<void(unsigned worker)> on_worker_start{};
  std::function<void(unsigned worker)> on_worker_stop{};
  // Receives one line per notable event: connections closed for a limit, a timeout, a protocol
  // error or an error; accept failures. Null (the default): quiet, the stats still count them.
  // Called on the workers' threads. net::log_to_stderr is a ready one.
  std::function<void(std::string_view line)> log{};
};

// A ready tcp_server_options::log: writes the line to stderr.
void log_to_stderr(std::string_view line);

// One worker's counters (stats()).
struct worker_stats {
  std::uint64_t connections = 0;                           // open now
  std::uint64_t accepted = 0;                              // max_connections rejects included
  std::array<std::uint64_t, close_reason_count> closed{};  // by close_reason
  std::uint64_t bytes_in = 0;                              // read from sockets
  std::uint64_t bytes_out = 0;                             // written to sockets
  std::uint64_t messages_in = 0;                           // handed to handlers
  std::uint64_t messages_out = 0;                          // accepted sends
  std::uint64_t send_buffer_high = 0;                      // the most any one connection queued
  std::uint64_t accept_retries = 0;  // accepts retried after EMFILE/ENFILE/ENOBUFS/ENOMEM
  std::uint64_t sends_refused = 0;   // sends refused at the limit
  // How many connections closed for reason.
  std::uint64_t closed_by(close_reason reason) const noexcept {
    return closed[static_cast<std::size_t>(reason)];
  }
};

// The server's counters: each worker's, and their sums.
struct server_stats {
  std::vector<worker_stats> workers;  // one per worker
  worker_stats total;                 // sums; send_buffer_high is the maximum
};

namespace detail {
struct server_state;
}

class tcp_server {
 public:
  // A server with these options; nothing listens until listen() or serve().
  explicit tcp_server(tcp_server_options options = {});
  // Closes the listening sockets. Destroy a server only once serve() has returned (or if it
  // never ran).
  ~tcp_server();
  tcp_server(const tcp_server&) = delete;
  tcp_server& operator=(const tcp_server&) = delete;

  // Binds and listens on every worker's socket now (serve() does it if not done).
  void listen();
  bool listening() const noexcept;  // whether listen() succeeded
  // The bound port (0 before listen()).
  std::uint16_t port() const noexcept;

  // Coroutine style; events may add the other callbacks (on_message is ignored).
  void serve(std::function<void(connection&)> handler, connection_events events = {});
  // Callback style: on_message is required (std::invalid_argument without it).
  void serve(connection_events events);

  // Graceful stop within grace (see the file comment); a second call forces. Any thread, any
  // time (before serve() starts, serve() then returns at once).
  void stop(std::chrono::milliseconds grace = std::chrono::milliseconds(10000)) noexcept;

  // A new TLS context (a tls_context::server) for the connections every worker accepts from
  // now on; those already open keep theirs. A renewed certificate without a restart, as
  // nginx's reload: make the new context first (tls_context::server fails with tls_error and
  // the running one stays). Sessions of the old context do not resume with the new one (its
  // ticket keys are its own), so clients make one full handshake again. std::invalid_argument
  // for a null or a client's context, and std::logic_error on a server made without tls (a
  // port does not change protocol under its clients). Any thread, any time.
  void set_tls(std::shared_ptr<const tls_context> context);
  // The context new connections get now: options().tls, or set_tls's last. Any thread.
  std::shared_ptr<const tls_context> tls() const;

  // stats(): the counters now (thread-safe); options(): what it was made with.
  server_stats stats() const;
  const tcp_server_options& options() const noexcept;

 private:
  std::unique_ptr<detail::server_state> state_;
};

}  // namespace weft::net

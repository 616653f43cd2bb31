// weft::net::connection: one TCP connection of the server framework (or one made by
// net::connect), with a bounded send buffer, the connection's protocol framer, limits and
// timeouts, counters and a user context.
//
// Threads: a connection belongs to the scheduler (worker thread) it was made on. Every member
// is for that thread only, from coroutines (or callbacks the connection itself runs, which run
// in coroutines): receive() and send() may suspend, the others never do. The connection is
// shared (std::shared_ptr, handle()); its socket is closed once it is closed and no coroutine
// is left inside it, and a connection object outliving its socket answers every call as closed.
//
// Receiving: one coroutine at a time calls receive() (the handler's, or the callback style's read
// loop); a second concurrent receive is a std::logic_error. receive() returns the next message of
// the protocol, or std::nullopt once the connection's input has ended for any reason: the peer
// closed, a limit or timeout cut it, a protocol error, close()/destroy(), the server stopping;
// closed_by() then says which. It honours the server's idle, handshake and message timeouts
// (tcp_server.hpp) and its own limit argument (timeout_error, cancelled_error from a token, the
// connection stays open).
//
// Sending and backpressure: a send encodes the payload with the protocol and writes what the
// socket takes now; the rest waits in the send buffer and is written as the socket drains,
// writability being watched only while something is queued. A send is accepted while fewer
// than send_buffer_limit() bytes are queued (so the buffer peaks at the limit plus one message),
// and the send that reaches the limit fires on_buffer_full; on_buffer_drain follows when the
// buffer is empty again, so the two alternate. At the limit:
//   - send() (coroutine style, Go/Tokio-like) waits for room; when the peer takes nothing for
//     the send timeout it closes the connection (close_reason::send_limit) and throws
//     weft::timeout_error. A closed connection makes it throw connection_closed_error. "Takes
//     nothing" means neither a write to the socket nor an acknowledgement of bytes already in
//     its kernel buffer (SIOCOUTQ falling): a slow reader behind a buffer of megabytes may leave
//     the socket unwritable for longer than the timeout while it takes every byte, and is
//     kept. The same rule bounds wait_sent() and a closing flush (close_timeout).
//   - try_send() (callback style, Workerman-like) never waits: it returns false, counts the
//     refusal and reports a send_refused_error to on_error. Nothing accepted is dropped: what a
//     send accepted is written before a graceful close completes, or its loss is reported by the
//     close reason (destroy(), a reset by the peer, the close timeout).
// Bytes the framer itself sends (handshake answers, pongs) are never refused, but once they fill
// the buffer to the limit receive() takes no more of the peer's input until they drain below it
// (a peer flooding pings and reading nothing stops at its own socket buffers, TCP's
// backpressure), under the same send timeout rule.
//
// Receiving in place: a protocol parsed by its caller (weft::http's server) reads the connection's
// own input buffer through input(), consume_input() and read_input() instead of receive(), so a
// message costs no copy. Only on a connection without a protocol (std::logic_error otherwise).
//
// Sending a file: send_file() queues a range of a file behind what is already queued; the flusher
// writes it with sendfile(2) when the queue reaches it. The fd is dup'ed (the caller may close its
// own at once); the range counts against nothing in memory (the send-buffer limit is about bytes
// held in memory), and a file that turns out shorter than the range, or a file error, closes the
// connection at once (close_reason::error, reported to on_error and logged): a peer never gets a
// silently truncated body. sendfile(2) has no MSG_NOSIGNAL, so the first send_file on a thread
// blocks SIGPIPE on that thread (pthread_sigmask), and the SIGPIPE an EPIPE raises is consumed
// there: a peer that resets never ends the process.
//
// Closing: close() stops receiving and sending, writes what is queued (destroying the connection
// once the peer takes nothing for the close timeout: a slow reader still gets a large reply
// whole), shuts the socket down for writing and closes it; it never suspends. destroy()
// drops the queue and closes at once. The first close wins; its reason is closed_by().
#pragma once

#include <any>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "weft/error.hpp"
#include "weft/net/keepalive.hpp"
#include "weft/net/protocol.hpp"
#include "weft/net/tls.hpp"
#include "weft/reactor/fd.hpp"
#include "weft/sched/task.hpp"
#include "weft/sched/timeout.hpp"
#include "weft/sync/event.hpp"

namespace weft {
class scheduler;
namespace detail {
class coroutine;
}
}  // namespace weft

namespace weft::net {

// Why a connection closed (stats count closes by reason; the log names it).
enum class close_reason : std::uint8_t {
  peer,               // the peer closed or reset the connection, or the protocol ended it
  local,              // the application: close(), destroy(), or the handler returned
  idle_timeout,       // no bytes from the peer for idle_timeout
  handshake_timeout,  // no first message (or protocol handshake) within handshake_timeout
  message_timeout,    // a message started but did not end within message_timeout (slowloris)
  too_big,            // a message over max_message_size
  protocol_error,     // bytes that break the protocol
  send_limit,         // the peer did not read: a send waited past the send timeout
  close_timeout,      // a graceful close's flush: the peer took nothing for close_timeout
  max_connections,    // accepted over max_connections and closed at once
  server_stop,        // the server stopped (gracefully, or destroyed at its deadline)
  error,              // a socket error or an exception from the handler
  ping_timeout,       // nothing came back from a keep-alive ping (a WebSocket ping_interval)
};
inline constexpr std::size_t close_reason_count = 13;  // the number of close_reason values
// "peer", "idle timeout", ... (static strings).
const char* to_string(close_reason reason) noexcept;

// What a peer said as it closed, in a protocol with a closing message (connection::peer_close).
struct close_message {
  std::uint16_t code = 0;  // 0: the message had no code (WebSocket's 1005, no status received)
  std::string reason;      // UTF-8, at most 123 bytes for WebSocket
};

// A send on a closed connection (send(); try_send() returns false instead).
class connection_closed_error : public error {
 public:
  using error::error;
};
// What on_error receives when try_send() or send_raw() refuses a send at the limit.
class send_refused_error : public error {
 public:
  using error::error;
};

// What one connection received and sent (connection::counters()).
struct connection_counters {
  std::uint64_t bytes_in = 0;        // read from the socket
  std::uint64_t bytes_out = 0;       // written to the socket
  std::uint64_t messages_in = 0;     // handed to the user
  std::uint64_t messages_out = 0;    // accepted sends
  std::uint64_t sends_refused = 0;   // try_send/send_raw refused at the limit
  std::size_t send_buffer_high = 0;  // the most bytes ever queued at once
};

class connection;

// The callbacks of a connection. The server's set (tcp_server::serve) applies to all its
// connections; a connection's own set (connection::events()) runs after the server's for
// on_close, on_error, on_buffer_full and on_buffer_drain (on_connect and on_message are the
// server's only). They run on the connection's thread, inside a coroutine, and may call every
// member of the connection (close() included); an exception escaping one is reported to
// on_error (escaping on_error or on_close: to the server's log).
struct connection_events {
  // When the connection is accepted, before any message.
  std::function<void(connection&)> on_connect{};
  std::function<void(connection&, message&)> on_message{};  // callback style only
  // Callback style only, with half_close: the peer ended its direction (Node's 'end' with
  // allowHalfOpen). The connection stays open for sending until it is closed: answer, then
  // close() or shutdown_write(). Without it, the input's end closes the connection gracefully.
  std::function<void(connection&)> on_end{};
  std::function<void(connection&, close_reason)> on_close{};  // once closed, with the reason
  // An exception from a callback or the handler, a refused send.
  std::function<void(connection&, const std::exception&)> on_error{};
  std::function<void(connection&)> on_buffer_full{};  // the send buffer reached its limit
  // The send buffer drained below its limit again.
  std::function<void(connection&)> on_buffer_drain{};
};

// The settings of one connection (tcp_server_options carries the same for its connections).
// A zero duration switches that timeout off.
struct connection_options {
  std::shared_ptr<const net::protocol> protocol{};      // null: raw bytes, each read is one message
  std::size_t max_message_size = std::size_t{1} << 20;  // in bytes; over it: close_reason::too_big
  std::size_t send_buffer_limit = std::size_t{1} << 20;  // bytes queued at most before a send waits
  std::chrono::milliseconds idle_timeout{0};             // no bytes from the peer this long
  std::chrono::milliseconds handshake_timeout{0};  // accept to first message, and while handshaking
  std::chrono::milliseconds message_timeout{0};    // first byte of a message to its end
  std::chrono::milliseconds close_timeout{5000};   // a closing flush's stretch with no progress
  std::chrono::milliseconds send_timeout{30000};   // a send waiting for room
  // TLS only: from the connection's start to the end of its TLS handshake (a peer that starts
  // one and stalls is cut here even where handshake_timeout is off; weft::http sets its
  // header_timeout). close_reason::handshake_timeout.
  std::chrono::milliseconds tls_handshake_timeout{10000};
  bool no_delay = true;       // TCP_NODELAY
  tcp_keepalive keepalive{};  // TCP keep-alive probes (off)
  // Half-closed connections (TCP's FIN one way at a time, as Tokio's copy_bidirectional and Go's
  // CloseWrite use them): the peer's FIN ends the input only (receive() returns nullopt,
  // read_input() false), and the connection stays open for sending until the application
  // closes it or shuts its own direction (shutdown_write()). Off: the peer's FIN closes the
  // connection gracefully (what is queued is flushed), as a server that answers requests wants.
  bool half_close = false;
  // TLS (tls.hpp): a server's context on a server's connections (tcp_server_options::tls sets
  // it), a client's for net::connect. Null: plaintext.
  std::shared_ptr<const tls_context> tls{};
  // The longest a graceful close lingers, reading and dropping what the peer still sends after
  // the FIN (close(), close_lingering()); nginx's lingering_time. Zero: no lingering (the socket
  // closes after one read of what arrived, and a peer still sending gets a reset). Zero here, so
  // that a net::connect client that closes in the middle of a server's stream (a WebSocket
  // feed it leaves) lets go at once, as Go's and Tokio's do; a server's connections get
  // tcp_server_options::linger_time, 30 s.
  std::chrono::milliseconds linger_time{0};
};

namespace detail {
struct worker_state;
struct connection_access;
struct hibernation;
class tls_session;
struct ring_output;
}  // namespace detail

class alignas(64) connection : public std::enable_shared_from_this<connection> {
 public:
  ~connection();
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  // --- receiving (one coroutine at a time) ---
  // The next message; nullopt once the input has ended (the peer closed, or the connection is
  // closing). timeout_error once limit passes (the connection stays open), even while the peer
  // keeps sending what is no message (pings, empty fragments).
  std::optional<message> receive(const timeout& limit = timeout::never());
  // The same into a message the caller keeps (true: a message; false: the input has ended),
  // reusing its string's capacity: a loop over one message allocates nothing per message.
  bool receive(message& into, const timeout& limit = timeout::never());
  // Stops reading from the socket (the kernel's buffer fills and TCP slows the peer down) until
  // resume_recv(); a receive() meanwhile waits. Idempotent.
  void pause_recv() noexcept;
  void resume_recv() noexcept;
  bool recv_paused() const noexcept { return paused_; }  // whether pause_recv() is in effect

  // --- receiving in place (no protocol; see the file comment) ---
  // The bytes received and not yet consumed, in the connection's buffer. The view stays valid
  // until the next read_input(), receive() or close (consume_input() moves nothing).
  std::string_view input() const noexcept {
    return std::string_view(in_.get() + in_begin_, in_end_ - in_begin_);
  }
  // Drops the first `bytes` of input(); more than input().size() is std::out_of_range.
  void consume_input(std::size_t bytes);
  // Reads at least one more byte onto input(), waiting as receive() does (the options' timeouts,
  // pause_recv, limit: timeout_error or cancelled_error, the connection stays open). False once
  // the input has ended: the peer closed (the connection then closes gracefully, reason peer),
  // the connection closed, or the server is stopping while nothing is buffered and the caller is
  // between messages (mid_message false; reason server_stop). One reader at a time, as receive().
  bool read_input(const timeout& limit = timeout::never(), bool mid_message = false);
  // Hands the connection to another protocol mid-stream (an HTTP request that upgrades to
  // WebSocket): from the next receive() on, p's framer reads the input, starting with `replay`
  // (bytes already taken off the input that the new protocol must see first: the upgrade
  // request's head, which the WebSocket framer answers with its 101) and then what input()
  // still holds. Only on an open connection without a protocol and with no coroutine inside
  // receive()/read_input() (std::logic_error naming the connection otherwise); a null p is
  // std::invalid_argument. The connection's limits and timeouts stay as they were.
  void switch_protocol(std::shared_ptr<const net::protocol> p, std::string_view replay = {});
  // The server is stopping gracefully: a protocol that can tell its peer that this is the last
  // reply (HTTP's Connection: close) should.
  bool stopping() const noexcept { return stopping_; }

  // --- idling without a coroutine (the server's handler only) ---
  // Lets the handler's coroutine end while the connection waits for its next input: once the
  // handler returns after hibernate(), the server keeps the connection open with no coroutine (and
  // no stack) of its own, and calls the handler again, in a new coroutine, when bytes arrive,
  // the peer closes, limit (or one of the options' timeouts) passes, or the connection starts
  // closing (close(), the server's stop). A thousand idle keep-alive connections then hold a
  // thousand small objects, not a thousand stacks, and a busy server's requests run on the few
  // stacks it reuses, warm in the cache. The handler called again starts as at first, except:
  // its first read (read_input() or receive()) reads at once, without waiting, and ends at
  // limit's deadline at the latest (timeout_error, the connection stays open, as for a read's
  // own limit); carried() returns `carry` (what the handler keeps across calls: weft::http keeps
  // its count of requests served). The hibernation takes effect only when the handler returns
  // normally; one that throws after hibernate() is ended as usual. Only on a connection of
  // tcp_server::serve(handler), with nothing in input(), receiving not paused and no coroutine
  // receiving (std::logic_error naming the connection otherwise); limit may carry no cancel
  // token (std::invalid_argument: nothing would be waiting for it). On a connection that is
  // closing or whose server is stopping it does nothing: the handler's return ends the
  // connection as usual.
  void hibernate(const timeout& limit = timeout::never(), std::uint64_t carry = 0);
  // The carry of the last hibernate() (0 before any).
  std::uint64_t carried() const noexcept { return carried_; }

  // --- sending ---
  // Waits for room (while the peer keeps taking bytes within each send timeout of the options,
  // and up to limit), see the file comment.
  void send(std::string_view payload, message_kind kind = message_kind::binary);
  void send(std::string_view payload, message_kind kind, const timeout& limit);
  // Never waits: false when closed or at the limit (reported to on_error).
  bool try_send(std::string_view payload, message_kind kind = message_kind::binary);
  // Bytes as they are, not encoded by the protocol, in order with the other sends; never waits
  // and honours the limit like try_send (unlike framer_link::send_raw, the protocol's own
  // answers, which bypass it).
  bool send_raw(std::string_view bytes);
  // Bytes queued in memory (file ranges of send_file are not counted: see queued_files()); on a
  // TLS connection, plaintext not yet encrypted and records not yet written.
  std::size_t queued() const noexcept {
    return out_.size() - out_head_ + tls_queued_ + ring_queued_;
  }
  // Queues [offset, offset + length) of the file fd behind what is queued (see the file
  // comment); never waits. std::invalid_argument for a bad fd or a range past the end of a
  // regular file, connection_closed_error when closed, io_error when dup(2) fails. A zero
  // length queues nothing.
  void send_file(int fd, std::uint64_t offset, std::uint64_t length);
  // send_file() for an fd the caller hands over: the connection owns fd from the call on (it is
  // closed once its range is written, when the connection drops its queue, and by this call
  // itself when it throws or the length is zero), and neither dup(2) nor fstat(2) is spent on
  // it. The range is not checked up front: a file shorter than it closes the connection as for
  // send_file. connection_closed_error when closed; std::invalid_argument for a negative fd.
  void adopt_file(int fd, std::uint64_t offset, std::uint64_t length);
  // File ranges queued by send_file and not yet fully written.
  std::size_t queued_files() const noexcept { return files_.size(); }
  // Suspends until everything queued (bytes, TLS records, file ranges, and what is queued
  // meanwhile) has been written to the socket: true then, at once when nothing is queued; false
  // once the connection has dropped queued bytes, during the wait or before it (a write error,
  // a reset, destroy(), the close timeout: the connection is closed). A graceful close in between
  // still writes the queue, and the wait goes on with it. The send timeout of the options bounds
  // each stretch in which the socket takes nothing: past it the peer is not reading, and the
  // connection closes as for a waiting send() (send_limit, timeout_error). limit bounds the whole
  // wait (timeout_error or cancelled_error; the connection stays open). weft::http waits so for
  // a file's range: its access line then has the bytes that left, and the keep-alive idle time
  // starts after them.
  bool wait_sent(const timeout& limit = timeout::never());
  // The most bytes queued in memory before a send waits (try_send refuses).
  std::size_t send_buffer_limit() const noexcept { return options_.send_buffer_limit; }
  // Zero is std::invalid_argument.
  void set_send_buffer_limit(std::size_t bytes);
  // The largest message accepted, in bytes (zero is std::invalid_argument for the setter).
  std::size_t max_message_size() const noexcept { return options_.max_message_size; }
  void set_max_message_size(std::size_t bytes);
  // connection_options::half_close for this connection from now on (a tunnel that a protocol
  // switch started on a server's connection, say).
  bool half_close() const noexcept { return options_.half_close; }
  void set_half_close(bool on) noexcept { options_.half_close = on; }

  // --- closing ---
  // close(): graceful, flushes what was sent first; destroy(): at once, dropping what is queued.
  // After the flush close() sends the FIN and reads what the peer sent meanwhile, so that
  // close(2) finds nothing unread: Linux answers unread bytes with a reset, which throws away
  // what the kernel still holds for the peer (a large reply to a slow reader) and, on some
  // peers' stacks, what they received and have not read. When the peer is still sending (bytes
  // keep coming after the FIN), the connection lingers, as nginx's lingering_close: it reads and
  // drops the peer's bytes until the peer ends its direction, sends nothing for close_timeout,
  // or linger_time passes (connection_options: 30 s on a server's connections, off on
  // net::connect's), and only then closes the socket. A server's stop ends a lingering close
  // once the peer has acknowledged every byte sent to it.
  void close() noexcept;
  void destroy() noexcept;
  // close() for a protocol that knows its peer may still be sending (an HTTP request body left
  // unread, an answer given before the whole request came): the connection lingers after its
  // FIN as above even when nothing has arrived yet when the socket is looked at.
  void close_lingering() noexcept;
  // close() after the protocol's own closing message, where it has one: WebSocket's close frame
  // with code and reason (websocket::normal_closure, going_away...; the reason is cut to the 123
  // bytes a control frame holds). The close then completes the closing handshake (RFC 6455
  // 7.1): after the frame it reads on, dropping the peer's messages, until the peer's close
  // frame (peer_close() then holds its code and reason), its end of the stream, close_timeout
  // without a byte, or linger_time (close_timeout where linger_time is 0), so that the peer's
  // answer meets no reset. A client (connect_websocket) also leaves the end of the TCP
  // connection to the server (RFC 6455 7.1.1), close_timeout at most. wait_closed() waits for
  // all of it; destroy() cuts it short. A code the protocol may not send, or a reason that is
  // not UTF-8, is std::invalid_argument and nothing is closed; on a connection without such a
  // protocol, or one already closing, it is close().
  void close(std::uint16_t code, std::string_view reason = {});
  // Destroys the connection (reason peer) when its socket says the peer is gone: reset, or its
  // direction ended (a FIN, even one behind bytes not read yet; with half_close a FIN alone is
  // not gone). A poll(2) of the socket, nothing read. True when it destroyed it; false when the
  // peer is there, or the connection is not open. For a handler busy with something else than
  // this connection (an upstream, a long wait), which would otherwise hear of the peer's leaving
  // only at its next send or receive: weft::http::hangup_watch calls it on a timer.
  bool close_if_peer_gone() noexcept;
  // Ends this side's direction only: what is queued is written, then the FIN (shutdown(2)
  // SHUT_WR; close_notify first on TLS), while receiving goes on until the peer's own end, which
  // then closes the connection (reason peer). Sends after it are refused as on a closed
  // connection. Once the input has ended too (half_close), it is close(). Never suspends;
  // nothing when not open.
  void shutdown_write() noexcept;
  // Whether this side's direction was shut down (shutdown_write()).
  bool write_shut() const noexcept { return write_shut_; }
  // Whether the peer ended its direction (its FIN, or TLS close_notify) and everything it sent
  // was received; with half_close the connection may still be open for sending.
  bool input_ended() const noexcept { return peer_ended_ && buffered() == 0; }
  // Suspends until the socket is closed (a graceful close has flushed or given up; see
  // closed_by()). Returns at once once closed; timeout_error past limit. Closes nothing itself.
  void wait_closed(const timeout& limit = timeout::never());
  // Open: not closing or closed (sends are accepted).
  bool is_open() const noexcept { return state_ == state::open; }
  // Why it closed, once it has begun closing.
  std::optional<close_reason> closed_by() const noexcept;
  // The peer's closing message once it came (a WebSocket close frame: what a browser's
  // CloseEvent gives as code and reason); null before, and for a connection that ended without
  // one (the transport closed first: WebSocket's 1006, abnormal closure) or whose protocol has
  // none.
  const close_message* peer_close() const noexcept { return peer_close_.get(); }

  // --- identity, context, counters ---
  std::uint64_t id() const noexcept { return id_; }  // unique in the process
  // The index of the worker (0..workers-1) the connection belongs to; 0 for net::connect's.
  unsigned worker() const noexcept { return worker_index_; }
  // The connections open on that worker now, this one included (0 for net::connect's).
  std::size_t worker_connections() const noexcept;
  // "127.0.0.1:5000", "[::1]:5000"; "" when unknown.
  const std::string& peer_address() const noexcept { return peer_address_; }
  // With tcp_server_options::proxy_protocol: the address of the proxy that sent the PROXY
  // header (the socket's peer), while peer_address() is the client the header named (or the
  // proxy's too, for a header without addresses: v1 UNKNOWN, v2 LOCAL). "" otherwise.
  const std::string& proxy_address() const noexcept { return proxy_address_; }
  std::string local_address() const;
  // Anything the application wants to keep with the connection.
  std::any& context() noexcept { return context_; }
  // Bytes and messages in and out.
  const connection_counters& counters() const noexcept { return counters_; }
  // This connection's own callbacks (see connection_events).
  connection_events& events();
  // A shared handle (the connection may be kept past the handler or callback).
  std::shared_ptr<connection> handle() { return shared_from_this(); }
  // The socket's fd while it is open (-1 after), for socket options.
  int native_handle() const noexcept { return fd_; }

  // --- TLS (tls.hpp) ---
  // Whether the connection speaks TLS.
  bool secure() const noexcept { return options_.tls != nullptr; }
  // Once the handshake is done (all three are "" on a plain connection): the version
  // ("TLSv1.3"),
  std::string tls_version() const;
  // the cipher suite ("TLS_AES_256_GCM_SHA384"),
  std::string tls_cipher() const;
  // and the ALPN protocol agreed ("" for none).
  std::string alpn_protocol() const;
  // Whether the handshake resumed an earlier session (a ticket: no certificate was exchanged;
  // tls_client_options::resume_sessions); false on a plain connection.
  bool tls_resumed() const noexcept;
  // The host name the client sent in SNI (tls_server_options::more_certificates chose the
  // certificate by it), or the one a client connection sent; "" for none.
  std::string tls_server_name() const;
  // The subject of the certificate the peer presented and that was verified, as RFC 2253
  // writes it ("CN=client.example,O=Example"); "" when the peer presented none (a client of a
  // server without client_ca_file) or on a plain connection.
  std::string peer_certificate() const;

 private:
  friend struct detail::connection_access;
  friend struct detail::ring_output;
  enum class state : std::uint8_t { open, closing, closed, released };

  struct private_tag {};

 public:
  // Made by the server and by net::connect only (the tag is private).
  connection(private_tag, int fd, const connection_options& options, std::uint64_t id,
             unsigned worker_index, detail::worker_state* worker, std::string peer_address);

 private:
  class link final : public framer_link {
   public:
    explicit link(connection& owner) noexcept : owner_(owner) {}
    void send_raw(std::string_view bytes) override;
    void finish() override;
    std::size_t max_message_size() const noexcept override;
    void peer_closed(std::uint16_t code, std::string_view reason) override;

   private:
    connection& owner_;
  };

  // receive
  bool fill(const timeout& limit);
  bool wait_input(const timeout& limit, bool by_ring);
  void ring_read(const timeout& limit);
  void make_input_room();
  bool took_input(std::ptrdiff_t got, std::size_t room, int error_number);
  bool pull_input(const timeout& limit, bool partial);
  struct reader_guard;
  void wait_resumed(const timeout& limit);
  bool read_once();
  // TLS: read_once's way through the session, the send path's encrypting flush, the handshake
  // (server: before the handler; client: in connect), the records the session wrote while
  // reading, the close_notify of a graceful close.
  [[gnu::cold]] bool read_once_tls();
  [[gnu::cold]] bool flush_tls() noexcept;
  bool encrypt_file_piece() noexcept;
  bool establish_tls(const timeout& limit);
  // The PROXY protocol header (tcp_server_options::proxy_protocol), before TLS and the protocol:
  // true once read (peer_address_ is the client it names); false when the connection closed
  // instead (an invalid header, none within `within`, a stop), logged.
  bool read_proxy_header(std::chrono::milliseconds within);
  void start_tls_client(std::string_view host);
  void send_tls_output();
  void tls_failed(bool graceful = true) noexcept;
  void tls_goodbye() noexcept;
  void sync_tls_queued() noexcept;
  void protocol_failed(const protocol_error& failure, bool too_big);
  void end_input(close_reason reason);
  // send
  void enqueue(std::string_view payload, message_kind kind, bool encode);
  bool refuse(const char* operation);
  bool flush_now() noexcept;
  std::ptrdiff_t send_some(const char* data, std::size_t size) noexcept;
  bool flush_file() noexcept;
  void drop_files() noexcept;
  void drop_output() noexcept;
  void file_failed(int error_number, const char* operation) noexcept;
  void queue_file(int fd, std::uint64_t offset, std::uint64_t length);
  bool pending() const noexcept { return queued() > 0 || !files_.empty() || ring_busy_; }
  std::uint64_t unsent() const noexcept;  // queued() and the file ranges' bytes left
  bool input_ended(bool mid_message);
  void after_write() noexcept;
  void start_flusher();
  // start_flusher() where no ring send is in flight (its completion goes on with the queue).
  void continue_flushing();
  // The ring's side of flush_now(): true when it took the queue (or a send is in flight).
  bool flush_to_ring() noexcept;
  void ring_sent(int result) noexcept;
  // Raises the connection's and the worker's send_buffer_high to now_queued.
  void note_queued(std::size_t now_queued) noexcept;
  bool room_stretch(const timeout& limit);
  bool wait_answers_drained();
  void run_flusher();
  void write_failed(int error_number) noexcept;
  // close
  void begin_close(close_reason reason, bool graceful) noexcept;
  void shut_down_and_release() noexcept;
  // Reads and drops what the peer sent, up to 64 KiB: -1 once its direction ended (or the
  // socket failed), 1 when bytes came and no end, 0 when nothing was waiting.
  int drop_input() noexcept;
  // The protocol's closing handshake is under way and the peer's closing message has not come
  // (framer::awaits_peer_close), and no protocol error ended the conversation.
  bool close_reply_due() const noexcept {
    return framer_ != nullptr && !framer_failed_ && framer_->awaits_peer_close();
  }
  // The protocol has the peer end the transport first (framer::peer_closes_first) and its end
  // has not come: this side's FIN waits.
  bool fin_held() const noexcept {
    return framer_ != nullptr && !framer_failed_ && !peer_ended_ && framer_->peer_closes_first();
  }
  // While close_reply_due(): reads what the peer sent, up to 16 reads, into the input buffer and
  // through the framer, which drops its messages and takes its closing message (peer_close()).
  // -1 once its direction ended or the socket or the framer failed, 1 when bytes came, 0 when
  // nothing was waiting.
  int read_close_reply() noexcept;
  // What a graceful close does with the peer's bytes after its last write: read_close_reply()
  // while the reply is due, drop_input() otherwise; 1 (bytes came) turns 0 when they were the
  // reply, after which a protocol with a closing handshake expects nothing.
  int read_closing_input() noexcept;
  // framer_'s ping schedule, read when a framer is made (and the input clock started for it).
  void take_ping_schedule() noexcept;
  // A keep-alive ping, queued past the send-buffer limit as the protocol's own bytes and flushed.
  void send_ping();
  // The flusher's lingering close (close()): reads until the peer ends or a limit, then closes.
  void linger();
  // A graceful close's last step: the socket is released once no coroutine waits on it.
  void finish_close() noexcept;
  // Sends are accepted: open, and this side's direction not shut down.
  bool sendable() const noexcept { return state_ == state::open && !write_shut_; }
  // Why a send was refused as on a closed connection: "the connection is closed (REASON)" or
  // that shutdown_write() ended its direction.
  std::string not_sendable_reason() const;
  // shutdown_write()'s FIN, once the queue is written.
  void send_fin() noexcept;
  void try_release() noexcept;
  void interrupt_reader() noexcept;
  void interrupt_flusher() noexcept;
  void report(const std::exception& failure) noexcept;
  void fire_full() noexcept;
  void fire_drain() noexcept;
  void log(std::string_view line) const noexcept;
  // hibernate
  bool enter_hibernation(std::shared_ptr<connection>& self);
  std::shared_ptr<connection> leave_hibernation() noexcept;
  void hibernation_ready() noexcept;
  void drop_hibernation() noexcept;
  struct first_read_scope;
  void release_idle_input() noexcept;
  [[gnu::cold, gnu::noinline]] void log_partial_drop() const;
  [[gnu::cold, gnu::noinline]] void input_timed_out(close_reason which);
  [[gnu::cold, gnu::noinline]] void read_failed(int error_number);
  // The earliest deadline of the options' timeouts for a wait for input now (max: none), and
  // the reason it closes with.
  std::chrono::steady_clock::time_point timeouts_deadline(
      close_reason* which = nullptr) const noexcept;
  std::size_t buffered() const noexcept { return in_end_ - in_begin_; }

  // The members in two groups. First what serving a message touches (the socket, the buffers,
  // the state, the hibernation, the counters, the options): at a thousand connections every line
  // of a connection is cold when its next request comes, and these 5-6 lines are what it then
  // costs (callgrind, /hello at 1000 connections, a 1 MiB last level: 10.5 -> 8.2 read misses
  // per request). The class is aligned to a cache line so that they stay 5-6. Then the rest,
  // touched when a connection starts, waits for room or a resume, closes, or is asked for its
  // details.
  int fd_;
  unsigned worker_index_;
  detail::worker_state* worker_;  // null for net::connect's connections
  scheduler* scheduler_;
  std::unique_ptr<framer> framer_;
  weft::detail::coroutine* reader_ = nullptr;
  // The worker's coroutine serving this connection (the server's).
  weft::detail::coroutine* serving_ = nullptr;

  // Input: bytes received and not yet consumed are [in_begin_, in_end_) of in_.
  std::unique_ptr<char[]> in_;
  std::size_t in_capacity_ = 0;
  std::size_t in_begin_ = 0;
  std::size_t in_end_ = 0;

  state state_ = state::open;
  close_reason reason_ = close_reason::local;
  bool peer_ended_ = false;        // read() returned 0
  bool finished_ = false;          // the protocol ended the conversation
  bool framer_failed_ = false;     // a protocol error: no closing handshake is waited for
  bool ping_outstanding_ = false;  // a keep-alive ping went out and nothing came since
  bool write_shut_ = false;        // shutdown_write(): no more sends; the FIN follows the queue
  bool paused_ = false;
  bool full_ = false;            // on_buffer_full fired, on_buffer_drain not yet
  bool read_first_ = true;       // the last read filled its buffer: try reading before waiting
  bool reader_active_ = false;   // a coroutine is inside receive()
  bool reader_waiting_ = false;  // ... suspended on the fd or on resume_
  bool reader_interrupt_ = false;
  bool flusher_running_ = false;
  // A server's connection whose serving coroutine ended while the flusher still flushed or
  // lingered: no one waits for the release, so try_release() takes it off its worker's list.
  bool release_unlinks_ = false;
  bool flusher_waiting_ = false;
  bool flusher_interrupt_ = false;
  bool first_message_ = false;  // one message was handed to the user
  bool stopping_ = false;       // the server is stopping
  bool stop_read_done_ = false;
  bool in_callbacks_ = false;
  // hibernate(): requested by the handler; the deadline its first read after the hibernation
  // honours.
  bool hibernate_requested_ = false;
  bool hibernate_cap_ = false;  // the next read's waits end at hibernate_until_ at the latest
  bool hibernate_cap_active_ = false;  // ... and this is that read
  std::uint64_t carried_ = 0;
  std::chrono::steady_clock::time_point hibernate_until_;
  // Made at the first hibernation, kept for the next.
  std::unique_ptr<detail::hibernation> hibernation_;
  const connection_events* server_events_ = nullptr;

  // Output: bytes queued are [out_head_, size) of out_.
  std::string out_;
  std::size_t out_head_ = 0;
  // TLS: the session (null: plaintext), and its records not yet written (queued() counts them).
  std::unique_ptr<detail::tls_session> tls_;
  std::size_t tls_queued_ = 0;
  // File ranges of send_file, in order; each goes out once out_ has been written up to `at`.
  struct queued_file {
    int fd;
    std::uint64_t offset;
    std::uint64_t left;
    std::size_t at;
  };
  std::vector<queued_file> files_;
  bool output_dropped_ = false;   // drop_output() dropped something queued
  bool fin_sent_ = false;         // shutdown_write()'s FIN went
  bool linger_asked_ = false;     // close_lingering()
  bool lingering_ = false;        // the flusher reads and drops the peer's bytes (linger())
  std::size_t sent_waiters_ = 0;  // coroutines in wait_sent(): woken at every write
  // Sends through the driver's ring (src/net/ring_output.hpp): null on a driver without one.
  std::unique_ptr<detail::ring_output> ring_out_;
  bool ring_busy_ = false;       // a send of ring_out_ is in flight
  bool ring_reading_ = false;    // the reader's recv is in the ring (ring_read)
  std::size_t ring_queued_ = 0;  // its bytes not yet sent (queued() counts them), 0 once dropped

  std::chrono::steady_clock::time_point started_at_;
  std::chrono::steady_clock::time_point last_input_at_;
  std::chrono::steady_clock::time_point partial_since_;
  std::chrono::steady_clock::time_point close_deadline_;
  connection_counters counters_;
  connection_options options_;

  // --- the rest ---
  std::uint64_t id_;
  std::chrono::steady_clock::time_point linger_end_;  // linger_time from the FIN
  // The framer's keep-alive pings (framer::pings; zero interval: none) and when the last went out.
  std::chrono::milliseconds ping_interval_{0};
  std::chrono::milliseconds ping_timeout_{0};
  std::chrono::steady_clock::time_point ping_sent_at_;
  std::string peer_address_;
  std::string proxy_address_;  // tcp_server_options::proxy_protocol's proxy
  fd_registration registration_;
  link link_{*this};
  task<void> flusher_;
  event room_;      // set when a send may find room (or the connection closed)
  event resumed_;   // set while not paused (or closed)
  event released_;  // set once the socket is closed
  std::any context_;
  std::unique_ptr<connection_events> own_events_;
  std::unique_ptr<close_message> peer_close_;  // made when the peer's closing message comes
  // The worker's list of its connections.
  connection* prev_ = nullptr;
  connection* next_ = nullptr;
};

// Connects to host:port (a numeric IPv4 or IPv6 address, or a name resolved through
// getaddrinfo on libuv's pool, each of its addresses tried in turn until one answers) from a
// coroutine and returns the connection, on the caller's scheduler. io_error naming the (last)
// address when it fails; timeout_error past limit, which bounds the whole.
std::shared_ptr<connection> connect(const std::string& host, std::uint16_t port,
                                    const connection_options& options = {},
                                    const timeout& limit = timeout::never());

// Forwards a's messages to b (b.try_send of each, in order) until a's input ends, then closes b
// gracefully (what it queued is flushed); when a's peer only half-closed (a's half_close option:
// a is still open), b.shutdown_write() passes the FIN on instead, and the other direction's
// pipe(b, a) goes on until b's peer ends too, so that a client that sends its request and
// shuts down its writing still gets the whole answer. Backpressure: b's on_buffer_full pauses a's
// reading, on_buffer_drain resumes it, so b's buffer stays within its limit plus one message and
// a's peer is slowed by TCP. b closing ends the pipe too (a is closed). Runs in the calling
// coroutine (a proxy runs pipe(a, b) and pipe(b, a) in two coroutines); it is a's only reader
// meanwhile. Returns the bytes forwarded. (Not weft::pipe of io/pipe.hpp, the unix-domain socket
// stream: this is Workerman's pipe, a forwarding between two connections, and keeps its name.)
std::uint64_t pipe(connection& a, connection& b);

}  // namespace weft::net

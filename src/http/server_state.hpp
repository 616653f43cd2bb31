// The internals of weft::http::server: the server's shared state (options, handler, counters,
// each worker's spare request spaces) and one connection's state, which the coroutine serving
// the connection keeps on its stack until the connection ends or hibernates between requests (the
// flags of the current request, the exchange, the request space it borrowed).
#pragma once

#include <poll.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "net/spare_list.hpp"
#include "weft/http/parser.hpp"
#include "weft/http/server.hpp"
#include "weft/net/tcp_server.hpp"
#include "weft/reactor/timer.hpp"

namespace weft::http::detail {

// A statistic written by its worker's thread only and read by any (as net's counters: a
// relaxed load and store, no locked instruction on the hot path).
class stat_counter {
 public:
  void add(std::uint64_t amount) noexcept {
    value_.store(value_.load(std::memory_order_relaxed) + amount, std::memory_order_relaxed);
  }
  std::uint64_t get() const noexcept { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> value_{0};
};

struct worker_counters {
  stat_counter requests;
  std::array<stat_counter, 5> responses;
};

// What a request is parsed into and answered from: the parser with its message, the batched
// responses, the route's parameters. Lent to a connection while it is serving requests and given
// back to its worker's spares when it hibernates between them (see connection_state), so that a
// thousand keep-alive connections parse into the few spaces the last requests used, warm in the
// cache, and their storage is grown once, not once per connection.
struct request_space {
  explicit request_space(const parser_limits& limits) : parser(limits) {}
  request_parser parser;
  std::string out;  // responses batched for one write
  std::vector<std::pair<std::string_view, std::string>> params;
  // The router's scratch: a route's raw captures while it matches (router::dispatch).
  std::vector<std::pair<std::string_view, std::string_view>> captured;
};

// One worker's spare request spaces (its thread only), most recently given back last.
class request_spaces {
 public:
  std::unique_ptr<request_space> take(const parser_limits& limits);
  // Keeps a space of ordinary size (within the list's bound); frees the rest.
  void give(std::unique_ptr<request_space> space) noexcept;

 private:
  net::detail::spare_list<std::unique_ptr<request_space>> spare_;
};

// One worker's hangup_watches (its thread only): a list, and one timer that sweeps it every
// tick (the shortest period asked while it runs) and stops once it finds the list empty. A
// watch's own period is kept by its due time, so that a watch costs a link and an unlink.
class hangup_sweeper {
 public:
  void add(hangup_watch& watch);
  void remove(hangup_watch& watch) noexcept;

 private:
  void sweep() noexcept;
  // Looks at one watch's client: unlinks it when the connection closed meanwhile or the client
  // is gone, and then destroys the connection and cancels the watch's coroutine.
  void look(hangup_watch& watch) noexcept;

  hangup_watch* first_ = nullptr;
  std::optional<weft::timer> timer_;  // made on the worker's thread, in its run, at first use
  std::chrono::steady_clock::duration tick_{};
  // A sweep's due watches and their sockets, polled together (kept for the next sweep).
  std::vector<hangup_watch*> due_;
  std::vector<pollfd> sockets_;
};

// A server's TLS context with the 400 a plaintext request to the HTTPS port gets (as nginx and
// Go answer it), unless it has a reply of its own (server.cpp).
std::shared_ptr<const net::tls_context> with_http_reply(
    const std::shared_ptr<const net::tls_context>& tls);

struct server_state {
  server_options options;
  handler serve_request;
  net::tcp_server tcp;
  unsigned workers;
  std::unique_ptr<worker_counters[]> counters;
  std::unique_ptr<request_spaces[]> spaces;    // per worker
  std::unique_ptr<hangup_sweeper[]> sweepers;  // per worker

  server_state(server_options o, handler h);
};

// How the current response's body goes out.
enum class stream_mode : std::uint8_t {
  none,     // no streamed body (respond() or nothing yet)
  chunked,  // Transfer-Encoding: chunked
  length,   // Content-Length: stream_expected bytes
  close,    // HTTP/1.0 without a length: delimited by closing the connection
};

struct connection_state {
  connection_state(server_state& server, net::connection& c);
  ~connection_state();
  connection_state(const connection_state&) = delete;
  connection_state& operator=(const connection_state&) = delete;
  // Serves the connection's requests until it ends. Exceptions: cancelled_error (the server
  // forced its stop) goes on to the server; the others are handled here.
  void run();

  // --- used by the exchange ---
  // Whether the response being made may leave the connection open.
  bool keep_alive_now() const noexcept;
  // Writes what is batched (may wait for room; throws when the connection is gone).
  void flush();
  // Counts a response of that status and writes an access line.
  void note_response(status s, std::uint64_t body_bytes);
  // Counts a streamed response's status; its access line waits for the body's end
  // (end_stream_log), when the bytes it carried are known.
  void note_stream_response(status s);
  // Counts a response whose body goes out after its head (a file); log_sent writes its access
  // line once the body's bytes reached the socket, or the connection ended first.
  void note_response_head(status s);
  // The access line of such a response: body_bytes written, "aborted" when not all of them.
  void log_sent(status s, std::uint64_t body_bytes, bool aborted) noexcept;
  // Runs queue() (which hands a body of `length` bytes, at `start` in the connection's output,
  // to the connection), waits until the socket took all of it, and writes the access line with
  // the body bytes that went out: all of them, or, when the connection ended first, as many as
  // were written (nginx's $body_bytes_sent), marked aborted. On TLS the count is of record
  // bytes, a fraction of a percent over the body's own for a transfer cut short.
  template <class Queue>
  void log_once_sent(status s, std::uint64_t start, std::uint64_t length, Queue&& queue);
  // note_response's path for a body past logged_at_queue_limit (see its definition).
  [[gnu::noinline]] void log_large_response(status s, std::uint64_t body_bytes);
  // The access line of the streamed response (once): the bytes written, and "aborted" when the
  // body did not end as its framing says. Called by body_writer::finish, by the paths that abort
  // the stream, and by the destructor for a stream the server's forced stop cut.
  void end_stream_log(bool aborted) noexcept;
  // note_response's access line (options.log), out of line: 3 KiB of code that only a logging
  // server runs, kept out of the hot text.
  [[gnu::noinline]] void log_response(status s, std::uint64_t body_bytes, bool aborted = false);
  // Sends 100 Continue if the client waits for it and it was not sent.
  void send_continue();
  // Whether the request asks for 100 Continue. The parser noted whether any Expect field came
  // while it indexed the head, so a request without one (nearly all) costs no field lookup.
  bool awaits_continue() const noexcept {
    return parser.has_expect() && parser.message().expects_continue();
  }
  // The next body piece (nullopt at the end). Throws body_error.
  std::optional<std::string_view> next_body_piece();
  // Answers a failure of the request (framing, limits, timeouts) when nothing was answered yet,
  // or aborts the connection otherwise; the connection ends after it.
  void fail_request(status s, std::string_view reason);
  void check_not_responded(const char* operation) const;
  void log(std::string_view line) const noexcept;

  server_state& server;
  worker_counters& counters;
  net::connection& conn;
  std::unique_ptr<request_space> space;  // lent by the worker's request_spaces
  request_parser& parser;
  exchange ex{*this};
  std::string& out;  // responses batched for one write

  // The current request.
  bool head_request = false;
  bool keep_alive = true;  // the client allows it and the server wants it
  bool responded = false;  // a response (or its head) was made
  // message_complete was seen (true before the first request: no body is pending)
  bool body_done = true;
  // The current request failed on a timeout (408): its client gets no lingering close.
  bool timed_out = false;
  // discard_body() is reading what the handler left of the body, bounded by discard_end (the
  // whole discard) and discard_gap (between bytes; 0: none); discard_stopped: it gave up on a
  // bound.
  bool discarding = false;
  bool discard_stopped = false;
  std::chrono::milliseconds discard_gap{0};
  std::chrono::steady_clock::time_point discard_end{};
  bool continue_sent = false;
  bool failed = false;     // the connection ends after this request
  bool body_read = false;  // read_body() filled request().body
  bool upgraded = false;   // exchange::upgrade() handed the connection to another protocol
  bool hung_up = false;    // a hangup_watch found the client gone and cancelled
  std::uint64_t requests_served = 0;  // on this connection, across hibernations
  // With an access_log: when the current request's head was complete (zero before serve_one, for
  // the answers to requests that never got there).
  std::chrono::steady_clock::time_point request_started{};
  // Between requests the connection hibernates (net::connection::hibernate) instead of waiting in
  // its coroutine; not right after the handler was called (its first read is the one a hibernation
  // asked for), so that a connection is served at least once per call.
  bool may_hibernate = false;
  bool hibernating = false;  // run() returned to hibernate the connection
  std::vector<std::pair<std::string_view, std::string>>& params;
  std::vector<std::pair<std::string_view, std::string_view>>& captured;

  // The streamed body of the current response.
  stream_mode stream = stream_mode::none;
  bool stream_finished = false;
  bool stream_logged = false;  // end_stream_log wrote its access line
  status stream_status = status::ok;
  std::uint64_t stream_expected = 0;
  std::uint64_t stream_written = 0;

 private:
  bool read_head();
  // read_head's answer when the rest of a head did not come within header_timeout: out of line,
  // as the string it builds gave read_head (on the stack at every wait between requests) a
  // bigger frame.
  [[gnu::cold, gnu::noinline]] void head_timed_out();
  // Answers a head that failed (malformed, too large, too slow) as the new request it is, and
  // ends the connection.
  [[gnu::cold, gnu::noinline]] void head_failed(status s, std::string_view reason);
  // The state of a new request, before it is served or its failed head answered.
  void begin_request() noexcept;
  void serve_one();
  // An Expect field with an expectation other than 100-continue: answered 417 in place of
  // the handler (true). False when every expectation can be met.
  [[gnu::cold, gnu::noinline]] bool refuse_expectation();
  void after_handler();
  // The end of a request whose client a hangup_watch found gone: logged, and the
  // connection (destroyed already) serves nothing more.
  [[gnu::cold, gnu::noinline]] void abandoned() noexcept;
  // after_handler's end of a streamed response the handler left open (out of line: the usual
  // whole response does not pay for its frame). False: the connection ends.
  [[gnu::noinline]] bool finish_stream();
  // Logs `what`; answers `answer` with `body` unless a response was made (then aborts a streamed
  // body left unfinished).
  void handler_failed(std::string_view what, http::status answer = status::internal_server_error,
                      std::string_view body = "Internal Server Error\n");
  bool discard_body();
  timeout discard_wait() const;
  bool wait_bytes(const timeout& limit, bool mid_message);
};

template <class Queue>
void connection_state::log_once_sent(status s, std::uint64_t start, std::uint64_t length,
                                     Queue&& queue) {
  const auto written = [&] {
    const std::uint64_t out = conn.counters().bytes_out;
    return std::min(length, out > start ? out - start : 0);
  };
  bool complete = false;
  try {
    queue();
    complete = conn.wait_sent();
  } catch (...) {
    log_sent(s, written(), true);
    throw;
  }
  log_sent(s, complete ? length : written(), !complete);
}

// The head of a response written by the server itself (the fast path of respond(status, body)
// and the error answers): status line, Server, Date, Content-Type, `wire_fields` (field lines
// serialised and checked by the caller, each ending in CRLF), Content-Length, Connection. An
// empty server_name writes no Server; date false writes no Date (the caller's fields carry it).
// check_type: content_type comes from a handler and is refused (std::invalid_argument, nothing
// appended) when it has a control character; the server's own types are constants. A head this
// thread keeps whole is appended without assembling it (or checking its type again).
void append_simple_head(std::string& out, status s, std::string_view server_name,
                        std::string_view content_type, std::size_t length, bool keep_alive,
                        int version_minor, std::string_view wire_fields = {}, bool date = true,
                        bool check_type = false);

}  // namespace weft::http::detail

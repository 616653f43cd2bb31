// The inside of weft::http::client: an origin's pool, and one call (a request with its
// redirect hops and its one stale-connection retry). client.cpp owns the client's state;
// client_exchange.cpp runs the exchanges.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "http/client_connection.hpp"
#include "http/client_proxy.hpp"
#include "http/client_url.hpp"
#include "http/compression.hpp"
#include "weft/http/client.hpp"
#include "weft/pool/pool.hpp"
#include "weft/sched/timeout.hpp"

namespace weft::http::detail {

// The pool of one host:port (of one scheme), of a forward proxy, or of tunnels through one.
struct client_origin {
  std::string host;  // the origin's (of a proxy's own pool: the proxy's)
  std::uint16_t port;
  weft::pool<client_connection> connections;
  std::shared_ptr<const net::tls_context> tls;  // https: the client's context; null: http
  const client_proxy* proxy = nullptr;          // the forward proxy (the client's); null: direct
  bool tunnel = false;                          // through proxy: CONNECT host:port first
};

// One call of client::request / request_streaming, from start to its final response.
struct client_call {
  client_call(client& owner_, http::request request_, client_url url_)
      : owner(owner_), request(std::move(request_)), url(std::move(url_)) {}

  client& owner;
  http::request request;
  client_url url;
  // Buffered: the final response goes here. Streaming: on_head and on_body get it.
  response* result = nullptr;
  const std::function<void(const response&)>* on_head = nullptr;
  const std::function<void(std::string_view)>* on_body = nullptr;
  // upgrade(): a 101 hands the connection over into here (and its head goes to result or
  // on_head); null: a 101 is an unexpected_response.
  std::unique_ptr<upgraded_connection>* upgrade_into = nullptr;
  // A streamed request body (request.body empty); null once a redirect dropped the body.
  const body_source* source = nullptr;

  std::chrono::steady_clock::time_point started{};
  timeout limit;  // request_timeout from started

  void run();

 private:
  // expectation_failed: a 417 to an Expect: 100-continue whose body was not sent.
  enum class outcome : std::uint8_t { complete, stale, redirect, expectation_failed };
  outcome attempt(client_origin& origin, bool fresh, const std::string& wire);
  // Checks and frames a streamed body's request (run(), once).
  void prepare_source();
  // Writes the source's pieces and the body's end on connection (attempt(), after the head),
  // from where the last call stopped: false when it stopped again because the server answered
  // (with watch: client_connection::answered(), looked at after every answer_check_every
  // bytes).
  bool send_source(client_connection& connection, bool watch);
  // Whether this hop's body waits for 100 Continue (client_options::expect_continue_timeout).
  bool expects_continue() const noexcept;
  // Whether a failed exchange may be sent again on a fresh connection.
  bool resendable() const noexcept {
    return is_idempotent(request.method) && (source == nullptr || !source_taken_);
  }
  // Why it was not sent again (fresh: it was, on a new connection), for the error of a
  // kept-alive connection the server closed.
  std::string not_resent_reason(bool fresh) const;
  [[noreturn]] void timed_out(const std::string& phase) const;
  // The limit of one wait: `limit`, capped at io_timeout from now when that is set.
  timeout wait_limit() const;
  std::string describe() const;  // "GET http://host/path"

  // The call asked for gzip itself (client_options::decompress), and the decoder of the
  // current response's body when it came gzipped.
  bool ask_gzip_ = false;
  std::unique_ptr<gunzip_stream> gunzip_;
  std::string pending_;        // a piece of the body, decoded
  std::string location_;       // the Location of the redirect being followed
  bool follow_ = false;        // the current response is a redirect to follow (its body is drained)
  bool source_taken_ = false;  // a piece of the streamed body was asked for
  std::uint64_t source_sent_ = 0;               // the streamed body's bytes written
  std::optional<std::uint64_t> source_length_;  // its Content-Length; none: chunked
  status result_status_ = status::ok;           // the status of the last final response
  bool proxy_authorized_ = false;  // Proxy-Authorization is the http proxy's, set by run()
};

}  // namespace weft::http::detail

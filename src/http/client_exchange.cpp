// The exchanges of weft::http::client (client_call.hpp): connecting a pooled connection,
// sending a request, reading its response through the parser, the one retry after a stale
// kept-alive connection, and following redirects.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

#include "http/chars.hpp"
#include "http/client_call.hpp"
#include "http/upgrade_offer.hpp"
#include "weft/error.hpp"

namespace weft::http::detail {

namespace {

using steady = std::chrono::steady_clock;

// While a body is written, the connection is looked at for an early answer after this many
// bytes (one peek per 64 KiB: nothing next to the writes).
constexpr std::size_t answer_check_every = 64 * 1024;

long long milliseconds_between(steady::time_point from, steady::time_point to) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(to - from).count();
}

// The path of a request target, without its query.
std::string_view path_of(std::string_view target) noexcept {
  return target.substr(0, target.find('?'));
}

bool is_redirect(status s) noexcept {
  const std::uint16_t code = code_of(s);
  return code == 301 || code == 302 || code == 303 || code == 307 || code == 308;
}

// Whether following a redirect of that status sends the request, body included, again: 303
// turns any method but HEAD into GET, and 301 and 302 turn POST into GET (RFC 9110 15.4.2-15.4.4
// allow it, and every browser does it).
bool redirect_keeps_body(status s, method m) noexcept {
  const std::uint16_t code = code_of(s);
  return !((code == 303 && m != method::head) ||
           ((code == 301 || code == 302) && m == method::post));
}

// The errors of a write or read that say a kept-alive connection was closed by the server.
bool says_closed(const io_error& failure) noexcept {
  const int code = -failure.uv_code();
  return code == EPIPE || code == ECONNRESET;
}

// The connection goes back to its pool, or is closed, when the lease is done with.
struct lease_guard {
  lease<client_connection>& held;
  bool keep = false;
  ~lease_guard() {
    if (!held.valid()) {
      return;
    }
    if (keep) {
      held->mark_idle();
      held.release();
    } else {
      held.discard();  // mid-exchange (an error, a timeout, a cancel) or not reusable
    }
  }
};

}  // namespace

std::string client_call::describe() const {
  return std::string(method_name(request.method)) + " " + url.text;
}

void client_call::timed_out(const std::string& phase) const {
  const client_options& options = owner.options_;
  // Which limit it was: the call's whole when its deadline has passed, else the wait's own.
  const bool whole = limit.bounded() && steady::now() >= limit.deadline();
  throw timeout_error("http " + describe() + ": timed out " + phase + " after " +
                      std::to_string(milliseconds_between(started, steady::now())) + " ms (" +
                      (whole || options.io_timeout.count() == 0
                           ? "request_timeout " + std::to_string(options.request_timeout.count())
                           : "io_timeout " + std::to_string(options.io_timeout.count())) +
                      " ms)");
}

timeout client_call::wait_limit() const {
  const std::chrono::milliseconds each = owner.options_.io_timeout;
  return each.count() > 0 ? limit.capped(each) : limit;
}

void client_call::run() {
  const client_options& options = owner.options_;
  started = steady::now();
  limit = timeout(options.request_timeout);
  const bool caller_host = request.headers.contains("Host");
  // The caller's own Cookie field goes on the first hop (and same-origin redirects); the jar's
  // cookies go wherever the caller sent none.
  bool caller_cookie = request.headers.contains("Cookie");
  if (!options.user_agent.empty() && !request.headers.contains("User-Agent")) {
    request.headers.add("User-Agent", options.user_agent);
  }
  if (source != nullptr) {
    prepare_source();
  }
  ask_gzip_ = options.decompress && !request.headers.contains("Accept-Encoding");
  if (ask_gzip_) {
    request.headers.add("Accept-Encoding", "gzip");
  }
  std::set<std::pair<method, std::string>> visited;
  int hops = 0;
  std::string wire;
  for (;;) {
    // Through an http proxy the target is the absolute URL (RFC 9112 3.2.2) and the proxy's
    // credentials go with it; through a proxy's tunnel (https, an upgrade, which a proxy would
    // not relay: RFC 6455 4.1, and everything through SOCKS), or direct, neither (the
    // credentials of an earlier hop's proxy taken out again).
    const client_proxy* via = owner.proxies_ != nullptr ? owner.proxies_->for_url(url) : nullptr;
    const bool tunnel = via != nullptr && (url.secure || upgrade_into != nullptr || via->socks);
    const bool absolute_form = via != nullptr && !tunnel;
    request.target = absolute_form ? "http://" + url.authority + url.target : url.target;
    if (absolute_form && !via->authorization.empty()) {
      request.headers.set("Proxy-Authorization", via->authorization);
      proxy_authorized_ = true;
    } else if (proxy_authorized_) {
      request.headers.remove("Proxy-Authorization");
      proxy_authorized_ = false;
    }
    if (!caller_host || hops > 0) {
      request.headers.set("Host", url.authority);
    }
    if (options.cookies != nullptr && !caller_cookie) {
      const std::string jar =
          options.cookies->cookie_header(url.host, path_of(url.target), url.secure);
      if (jar.empty()) {
        request.headers.remove("Cookie");
      } else {
        request.headers.set("Cookie", jar);
      }
    }
    wire.clear();
    // std::invalid_argument for a request that cannot be framed.
    if (source != nullptr) {
      serialize_head(request, wire);
    } else {
      serialize(request, wire);
    }
    if (options.max_redirects > 0) {
      visited.emplace(request.method, url.text);
    }
    client_origin& origin = owner.origin_for(url, via, tunnel);
    outcome done = attempt(origin, false, wire);
    if (done == outcome::stale) {
      ++owner.counters_.retries;
      done = attempt(origin, true, wire);
    }
    if (done == outcome::complete) {
      ++owner.counters_.responses;
      return;
    }
    if (done == outcome::expectation_failed) {
      // RFC 9110 10.1.1: the same request again, without the expectation (its body, never
      // sent, still whole); not a redirect hop.
      request.headers.remove("Expect");
      continue;
    }
    // A redirect to follow.
    if (hops == options.max_redirects) {
      throw error(error_kind::too_many_redirects, url.text,
                  "a redirect to " + location_ + " after " + std::to_string(hops) +
                      " redirects (client_options::max_redirects is " +
                      std::to_string(options.max_redirects) + ")");
    }
    client_url next = parse_client_url(resolve_location(url, location_));
    if (!redirect_keeps_body(result_status_, request.method)) {
      request.method = method::get;
      source = nullptr;
      request.body.clear();
      request.trailers.clear();
      request.headers.remove("Content-Length");
      request.headers.remove("Content-Type");
      request.headers.remove("Transfer-Encoding");
    }
    if (next.origin != url.origin) {
      request.headers.remove("Authorization");
      request.headers.remove("Proxy-Authorization");
      request.headers.remove("Cookie");
      caller_cookie = false;
    }
    if (visited.contains({request.method, next.text})) {
      throw error(error_kind::redirect_loop, url.text,
                  "redirected back to " + next.text + ", already requested with " +
                      std::string(method_name(request.method)));
    }
    url = std::move(next);
    ++hops;
    ++owner.counters_.redirects;
  }
}

client_call::outcome client_call::attempt(client_origin& origin, bool fresh,
                                          const std::string& wire) {
  const client_options& options = owner.options_;
  client_stats& counters = owner.counters_;
  lease<client_connection> held;
  try {
    held = origin.connections.acquire(wait_limit());
  } catch (const timeout_error&) {
    timed_out("waiting for a free connection to " + url.origin + " (all " +
              std::to_string(options.max_connections_per_host) + " in use)");
  }
  lease_guard guard{held};
  client_connection& connection = *held;
  bool reused = connection.connected();
  // The pool's check (reusable()) asked the kernel whether the server closed it or sent
  // something unasked; a request that must not be sent twice is then only exposed to a close
  // racing its own write.
  if (reused && fresh) {
    connection.close();
    ++counters.connections_closed;
    reused = false;
  }
  if (!reused) {
    const timeout connect_limit = limit.capped(options.connect_timeout);
    try {
      connection.connect(origin.host, origin.port, connect_limit, origin.tls.get(),
                         options.keepalive, origin.proxy, origin.tunnel, url.text);
    } catch (const timeout_error&) {
      const bool by_connect = !limit.bounded() || connect_limit.deadline() < limit.deadline();
      throw connect_timeout_error(
          "http " + describe() + ": timed out connecting to " + url.origin + " after " +
          std::to_string(milliseconds_between(started, steady::now())) + " ms (" +
          (by_connect ? "connect_timeout " + std::to_string(options.connect_timeout.count())
                      : "request_timeout " + std::to_string(options.request_timeout.count())) +
          " ms)");
    }
    ++counters.connections_opened;
  } else {
    ++counters.connections_reused;
  }
  ++counters.requests;
  // What a failed send or read names (no string is built per request for it).
  const std::string& subject = url.text;
  auto stale_or_throw = [&](const io_error& failure, const char* when) -> outcome {
    if (reused && says_closed(failure)) {
      if (resendable() && !fresh) {
        return outcome::stale;
      }
      throw io_error(failure.uv_code(), failure.operation(), subject,
                     std::string(std::strerror(-failure.uv_code())) + ": the server closed the " +
                         "kept-alive connection " + when + "; " + not_resent_reason(fresh));
    }
    throw;
  };

  // With Expect: 100-continue the head goes alone, and the body (a buffered one: the rest of
  // wire) waits for the server's 100 Continue or for expect_continue_timeout.
  bool body_waits = expects_continue();
  // The first write: the head alone when the body waits, else the head with the body, or with
  // its first answer_check_every bytes when it is larger (the rest is sent by send_body, which
  // looks for an early answer as it goes).
  std::size_t head_end = wire.size();
  if (source == nullptr && (body_waits || wire.size() > answer_check_every)) {
    head_end = wire.find("\r\n\r\n") + 4;
  }
  const std::size_t first_end =
      body_waits ? head_end : std::min(wire.size(), head_end + answer_check_every);
  try {
    connection.write_all(std::string_view(wire).substr(0, first_end), limit, subject,
                         options.io_timeout);
  } catch (const io_error& failure) {
    return stale_or_throw(failure, "before the request was sent");
  } catch (const timeout_error&) {
    timed_out("sending the request");
  }
  // A server may answer before it has read the whole body (a 413, a 401) and stop reading: its
  // answer, when one comes, is the call's response, as Go's client gives it; the write's
  // failure is the error only when no response head comes.
  std::exception_ptr body_cut;
  const auto throw_cut = [&] {
    try {
      std::rethrow_exception(body_cut);
    } catch (const io_error& failure) {
      stale_or_throw(failure, "while the body was sent");
      throw;  // the server took part of the request: never sent again
    }
  };
  // The server may also answer while it still reads (RFC 9112 9.5): the body's writing stops
  // when it has, until its answer's head tells whether it wants the rest (see headers_complete).
  bool body_stopped = false;
  std::size_t body_at = first_end;  // a buffered body: written up to here
  // watch: pause again when something more comes (not once a final head said to go on: the
  // rest of its answer is what comes). At least one piece goes per call.
  const auto send_body = [&](bool watch) {
    body_waits = false;
    body_stopped = false;
    try {
      if (source != nullptr) {
        body_stopped = !send_source(connection, watch);
      } else {
        for (bool first = true; body_at < wire.size(); first = false) {
          if (watch && !first && connection.answered(limit, subject)) {
            body_stopped = true;
            break;
          }
          const std::size_t piece = std::min(answer_check_every, wire.size() - body_at);
          try {
            connection.write_all(std::string_view(wire).substr(body_at, piece), limit, subject,
                                 options.io_timeout);
          } catch (const timeout_error&) {
            timed_out("sending the body");
          }
          body_at += piece;
        }
      }
    } catch (const io_error& failure) {
      if (!says_closed(failure)) {
        throw;
      }
      body_cut = std::current_exception();
    }
  };
  const steady::time_point continue_deadline =
      steady::now() + owner.options_.expect_continue_timeout;
  bool body_withheld = false;  // the final answer came before the body was sent
  if (!body_waits) {
    send_body(true);
  }

  response_parser& parser = connection.parser();
  parser.set_request_method(request.method);
  bool got_bytes = false;  // a byte of the response arrived
  bool final_head = false;
  bool interim = false;             // the response being read is a 1xx
  bool expectation_failed = false;  // a 417 to the Expect of a body not sent
  follow_ = false;
  bool need_read = connection.input().empty();
  bool ended = false;  // the server ended the stream
  for (;;) {
    parse_result step;
    if (need_read && !ended) {
      std::size_t got = 0;
      // Waiting for 100 Continue: the wait ends at continue_deadline, when that comes first.
      // (Only then is a wait's own limit made here: every other read reads the clock once, in
      // fill's stall, and only when it has to wait.)
      timeout wait;
      bool continue_binds = false;
      if (body_waits) {
        wait = wait_limit();
        continue_binds = !wait.bounded() || continue_deadline < wait.deadline();
        if (continue_binds) {
          wait = wait.capped(continue_deadline - steady::now());
        }
      }
      try {
        // Each wait is io_timeout at most, but one through which the server kept acknowledging
        // the request (still reading a large body) is followed by another.
        got = continue_binds ? connection.fill(wait, subject)
                             : connection.fill(limit, subject, options.io_timeout);
      } catch (const io_error& failure) {
        if (body_cut && !final_head) {
          throw_cut();
        }
        if (!got_bytes) {
          return stale_or_throw(failure, "before answering");
        }
        throw;
      } catch (const timeout_error&) {
        if (continue_binds) {
          send_body(true);  // no 100 Continue in time: the server may not know the expectation
          continue;
        }
        timed_out(final_head ? "reading the body" : "waiting for the response head");
      }
      if (got == 0) {
        ended = true;
        if (body_cut && !final_head) {
          throw_cut();
        }
        if (!got_bytes) {
          if (reused && resendable() && !fresh) {
            return outcome::stale;
          }
          throw io_error(-ECONNRESET, "read", subject,
                         std::string("the server closed the connection without answering") +
                             (reused ? "; " + not_resent_reason(fresh) : std::string()));
        }
      } else {
        got_bytes = true;
      }
    }
    if (ended && connection.input().empty()) {
      step = parser.finish();
      if (step.event == parse_event::need_more) {
        throw error(error_kind::malformed_response, url.text,
                    "the connection closed before the response was complete");
      }
    } else {
      step = parser.parse(connection.input());
      connection.consume(step.consumed);
    }
    need_read = false;
    switch (step.event) {
      case parse_event::need_more:
        if (step.consumed == 0) {
          if (ended) {
            step = parser.finish();
            if (step.event != parse_event::message_complete) {
              throw error(error_kind::malformed_response, url.text,
                          parser.failed() ? parser.error_reason()
                                          : "the connection closed inside the response");
            }
            goto complete;
          }
          need_read = true;
        }
        continue;
      case parse_event::headers_complete: {
        const response& head = parser.message();
        if (head.status == status::switching_protocols) {
          if (upgrade_into == nullptr) {
            throw error(error_kind::unexpected_response, url.text,
                        "101 Switching Protocols: this client does not switch protocols here "
                        "(client::upgrade() does)");
          }
          // RFC 9110 7.8: the server switches to a protocol the client offered, and names it.
          const auto offered = request.headers.get("Upgrade");
          const auto chosen = head.headers.get("Upgrade");
          if (!chosen || !upgrade_offered(request.headers, *chosen)) {
            throw error(error_kind::malformed_response, url.text,
                        "101 Switching Protocols to " +
                            (chosen ? "'" + std::string(*chosen) + "'" : std::string("nothing")) +
                            ", not to a protocol the request's Upgrade field offered ('" +
                            std::string(offered ? *offered : "") + "')");
          }
          result_status_ = head.status;
          if (options.cookies != nullptr) {
            options.cookies->store(url.host, path_of(url.target), url.secure, head.headers);
          }
          if (on_head != nullptr) {
            (*on_head)(head);
          } else if (result != nullptr) {
            *result = std::move(parser.message());
          }
          // The bytes behind the head, still in the input, are the new protocol's first; the
          // connection (its parser with it) leaves the pool slot, which the guard then frees.
          upgrade_into->reset(new upgraded_connection(std::move(connection), url.text));
          ++counters.upgrades;
          return outcome::complete;
        }
        interim = is_informational(head.status);
        if (interim) {
          if ((head.status == status::continue_ && body_waits) || body_stopped) {
            send_body(true);
          }
          continue;
        }
        final_head = true;
        // An answer before the whole body: one that is not a success, or that closes the
        // connection, does not want the rest (a 401, a 413), which is never sent; a success
        // that keeps the connection (a server that answers as it reads) gets it now.
        if (body_stopped && code_of(head.status) < 300 && parser.keep_alive()) {
          send_body(false);
        }
        if (body_waits) {
          body_waits = false;  // answered without the body: it is never sent
          body_withheld = true;
          if (head.status == status::expectation_failed) {
            expectation_failed = true;  // read to its end, then sent again without Expect
            continue;
          }
        }
        result_status_ = head.status;
        if (options.cookies != nullptr) {
          options.cookies->store(url.host, path_of(url.target), url.secure, head.headers);
        }
        // A redirect that would send a streamed body again is the answer (client.hpp).
        if (options.max_redirects > 0 && is_redirect(head.status) &&
            (source == nullptr || !source_taken_ ||
             !redirect_keeps_body(head.status, request.method))) {
          const auto location = head.headers.get("Location");
          if (!location || location->empty()) {
            throw error(
                error_kind::unexpected_response, url.text,
                std::to_string(code_of(head.status)) + " redirect without a Location field");
          }
          location_ = std::string(*location);
          follow_ = true;
          continue;
        }
        gunzip_.reset();
        if (ask_gzip_ && request.method != method::head && !forbids_content(head.status) &&
            head.headers.count("Content-Encoding") == 1) {
          const std::string_view coding = *head.headers.get("Content-Encoding");
          if (detail::iequals(coding, "gzip") || detail::iequals(coding, "x-gzip")) {
            gunzip_ = std::make_unique<gunzip_stream>(options.limits.max_body_size);
            response& decoded = parser.message();
            decoded.headers.remove("Content-Encoding");
            decoded.headers.remove("Content-Length");
          }
        }
        if (on_head != nullptr) {
          (*on_head)(head);
        }
        continue;
      }
      case parse_event::body:
        if (follow_ || expectation_failed) {
          continue;  // a redirect's or a 417's body: read to its end, not kept
        }
        if (gunzip_ != nullptr) {
          // Decoded into pending_ first, so that what on_body throws stays the caller's.
          pending_.clear();
          try {
            gunzip_->feed(step.body, [&](std::string_view decoded) { pending_.append(decoded); });
          } catch (const gunzip_error& failure) {
            throw error(failure.too_large() ? error_kind::response_too_large
                                            : error_kind::malformed_response,
                        url.text, failure.what());
          }
          if (!pending_.empty()) {
            if (on_body != nullptr) {
              (*on_body)(pending_);
            } else {
              parser.message().body.append(pending_);
            }
          }
          continue;
        }
        if (on_body != nullptr) {
          (*on_body)(step.body);
        } else {
          parser.message().body.append(step.body);
        }
        continue;
      case parse_event::message_complete:
        if (interim) {
          interim = false;
          continue;
        }
        goto complete;
      case parse_event::error:
        throw error(code_of(parser.error_status()) == 413 || code_of(parser.error_status()) == 431
                        ? error_kind::response_too_large
                        : error_kind::malformed_response,
                    url.text, parser.error_reason());
    }
  }
complete:
  if (gunzip_ != nullptr && !follow_ && !expectation_failed) {
    try {
      gunzip_->finish();
    } catch (const gunzip_error& failure) {
      throw error(error_kind::malformed_response, url.text, failure.what());
    }
  }
  connection.count_exchange();
  // A withheld body may still be awaited by the server: the connection cannot carry another.
  guard.keep = !body_cut && !body_withheld && !body_stopped && !ended && parser.keep_alive() &&
               request.keep_alive() && connection.input().empty();
  if (expectation_failed) {
    return outcome::expectation_failed;
  }
  if (follow_) {
    return outcome::redirect;
  }
  if (result != nullptr) {
    *result = std::move(parser.message());
  }
  return outcome::complete;
}

std::string client_call::not_resent_reason(bool fresh) const {
  if (!is_idempotent(request.method)) {
    return std::string(method_name(request.method)) +
           " is not idempotent, so it was not sent again";
  }
  if (fresh) {
    return "the retry on a fresh connection failed too";
  }
  return "its body was streamed from a body_source, so it was not sent again";
}

bool client_call::expects_continue() const noexcept {
  return owner.options_.expect_continue_timeout.count() > 0 && request.version_minor >= 1 &&
         (source != nullptr || !request.body.empty()) && request.expects_continue();
}

void client_call::prepare_source() {
  const std::string what = "weft::http::client " + describe();
  if (!request.body.empty()) {
    throw std::invalid_argument(what + ": the request has a body of " +
                                std::to_string(request.body.size()) +
                                " bytes and a body_source; give it one or the other");
  }
  if (const auto declared = request.headers.get("Content-Length")) {
    source_length_ = detail::decimal_value(*declared);
    if (!source_length_ || request.headers.count("Content-Length") != 1) {
      throw std::invalid_argument(what + ": Content-Length '" + std::string(*declared) +
                                  "' is not one decimal number");
    }
    return;  // serialize_head refuses it beside Transfer-Encoding
  }
  if (request.version_minor == 0) {
    throw std::invalid_argument(what +
                                ": an HTTP/1.0 request has no chunked coding; a streamed body "
                                "needs a Content-Length field");
  }
  if (!request.headers.contains("Transfer-Encoding")) {
    request.headers.add("Transfer-Encoding", "chunked");
  }
}

bool client_call::send_source(client_connection& connection, bool watch) {
  source_taken_ = true;
  const auto write = [&](std::string_view bytes) {
    try {
      connection.write_all(bytes, limit, url.text, owner.options_.io_timeout);
    } catch (const timeout_error&) {
      timed_out("sending the body");
    }
  };
  const auto mismatch = [&](const std::string& how) {
    return std::length_error("weft::http::client " + describe() + ": the body_source " + how +
                             " the request's Content-Length of " + std::to_string(*source_length_) +
                             " bytes");
  };
  std::string frame;            // a chunk's size line, data and CRLF, written at once
  std::uint64_t unchecked = 0;  // written since the last look for an answer
  for (;;) {
    if (watch && unchecked >= answer_check_every) {
      unchecked = 0;
      if (connection.answered(limit, url.text)) {
        return false;  // the next call goes on with the next piece
      }
    }
    const std::optional<std::string_view> piece = (*source)();
    if (!piece || piece->empty()) {
      break;  // the end (an empty piece too: a read that returned 0)
    }
    source_sent_ += piece->size();
    unchecked += piece->size();
    if (!source_length_) {
      frame.clear();
      append_chunk(frame, *piece);
      write(frame);
    } else if (source_sent_ > *source_length_) {
      throw mismatch("gave more than");
    } else {
      write(*piece);
    }
  }
  if (!source_length_) {
    frame.clear();
    append_last_chunk(frame, request.trailers);
    write(frame);
  } else if (source_sent_ < *source_length_) {
    throw mismatch("ended after " + std::to_string(source_sent_) + " bytes, short of");
  }
  return true;
}

}  // namespace weft::http::detail

// weft::http::request_parser and weft::http::response_parser: incremental HTTP/1.1 parsers
// (RFC 9112), strict where leniency lets two parsers disagree about where a message ends
// (request smuggling).
//
// Usage: keep the bytes received and not yet consumed in a buffer; call parse(buffer); drop
// result.consumed bytes from its front; act on result.event; call parse again with what is
// left (and, after need_more, with more bytes appended). A parser never keeps a pointer into
// the input between calls, but bytes it did not consume must be given again, unchanged, at the
// start of the next call's input. Events of one message, in order:
//   headers_complete  message() has the start line and the header fields; consumed is the
//                     size of the header section (with any empty lines before the request
//                     line). body_expected() says whether body events may follow;
//                     message().expects_continue() whether the client waits for 100 Continue.
//   body (0..n)       result.body is the next piece (a view into the input); the parser does
//                     not copy it: append it to message().body or stream it on.
//   message_complete  the body and the trailers (message().trailers) are complete; the next
//                     call starts the next message of the connection (pipelining), reusing
//                     message()'s storage, so take what you need of it first.
// A call may consume bytes and still return need_more (a chunk-size line, a skipped empty
// line). A call returns message_complete with consumed 0 right after headers_complete when
// there is no body.
//
// Errors: parse_event::error, with error_status() the status to answer and error_reason() a
// sentence naming what was wrong. The parser stays failed (every call returns the error again)
// until reset(): HTTP/1.1 framing cannot resynchronise, so the server answers and closes the
// connection. For the response parser the status classifies the fault the same way (the client
// reports it rather than answering it).
//
// What is rejected (request parser), with its status:
//   400  a bare LF (without CR) anywhere in the start line, a field line or a chunk line, or a
//        CR not followed by LF. RFC 9112 2.2 lets a recipient accept a bare LF as a line end;
//        weft does not, because a front end that does not would see a different message (the
//        desync behind request smuggling); clients all send CRLF.
//        A request line that is not exactly METHOD SP target SP HTTP/d.d CRLF (extra or
//        missing spaces, a tab, a malformed version), a target with a byte outside visible
//        ASCII or a malformed percent escape, a target form that does not fit the method.
//        A field line starting with whitespace (obs-fold, RFC 9112 5.2), whitespace between a
//        field name and its colon (5.1), a field name with a non-token character, a value with
//        a control character other than HTAB.
//        Content-Length that is not 1*DIGIT, Content-Length more than once (even with equal
//        values: RFC 9110 8.6 lets a recipient merge identical values, but a front end that
//        takes the first of two differing ones and a back end that takes the last desync;
//        rejecting every repeat needs no argument about which repeats are harmless, and no
//        client sends one), both Content-Length and Transfer-Encoding (6.1), Transfer-Encoding
//        whose last coding is not chunked or that applies chunked twice (6.3), Transfer-Encoding
//        in an HTTP/1.0 request (6.1: its framing is faulty), a chunk size that is not hex, is
//        negative, overflows 64 bits or is not followed by CRLF (or valid extensions), chunk
//        data not followed by CRLF, an HTTP/1.1 request without exactly one Host (3.2).
//   413  Content-Length, or the chunks so far, larger than max_body_size.
//   414  a target longer than max_target_size.
//   431  a header section longer than max_header_size or with more than max_header_fields
//        fields; the same for the trailer section.
//   501  a method other than those of http::method, a transfer coding other than chunked
//        (gzip, chunked: weft decodes none of them).
//   505  an HTTP major version other than 1.
// Empty lines (CRLF) before a request line are skipped (RFC 9112 2.2); HTTP/1.2-1.9 are
// accepted and treated as HTTP/1.1 (RFC 9110 2.5); a target with a fragment ('#') is refused.
//
// Why weft's own parser and not Debian's libhttp-parser 2.9.4 (the maintained Debian parser
// issue 21 asked to consider first): bench/http/parser_bench.cpp parses the same requests with
// both, reusing one parser per connection, on the 2-core EPYC machine CI runs on (CPU time,
// median of 5): wrk's "GET /hello" with 5 fields 105 ns against 207 ns, a 12-field browser
// request 204 against 517, a POST with a Content-Length body 88 against 218, a chunked upload
// with a trailer 117 against 184; the memmem floor that only finds the end of the headers
// takes 36 ns on the first. And `bench_http_parser --probe` shows http-parser accepting 9 of the
// 19 smuggling cases weft refuses (obs-fold, bare LF line ends, whitespace before the colon,
// an unknown coding before chunked, chunked in HTTP/1.0, extra spaces in the request line,
// missing or doubled Host), each of which would need a second pass over its output; upstream
// has archived it in favour of llhttp, which Debian 12 ships only as Node.js sources.
// How it is fast: the end of a section is found with memchr (resumable, so a request arriving
// a byte at a time costs linear time), then one pass parses it with SSE2 scans for the end of
// the target and of each value, and the section is copied into the message in one block that
// the field index points into: no allocation per field, none at all once a connection's
// message has grown to its requests' size.
//
// Threads: a parser and its message belong to one connection and are used by one thread at a
// time. Nothing blocks. Fuzzed by tests/http/fuzz/parser_fuzz.cpp (`make test-fuzz`; its opening
// comment says how to run it for an hour).
#pragma once

#include <cstddef>
#include <string_view>

#include "weft/http/detail/parser_core.hpp"
#include "weft/http/message.hpp"

namespace weft::http {

// The incremental request parser (see above): a server's side.
class request_parser : public detail::parser_core {
 public:
  // Limits: the sizes past which it rejects (see parser_limits).
  explicit request_parser(const parser_limits& limits = {}) : parser_core(limits) {}

  // Parses what it can of input (see above for the events and the bytes consumed).
  parse_result parse(std::string_view input);
  // The peer closed its side: need_more with nothing pending (no partial request), else an
  // error (a request cut short: 400).
  parse_result finish() { return finish_input(); }
  // Forgets the current message and any error: the next byte starts a new request.
  void reset() noexcept;

  // The message being parsed (its storage is reused by the next one).
  request& message() noexcept { return message_; }
  const request& message() const noexcept { return message_; }
  // After headers_complete: whether body events may follow (Content-Length > 0 or chunked).
  bool body_expected() const noexcept;
  // After headers_complete: whether the connection may carry another request after this one
  // (RFC 9112 9.3).
  bool keep_alive() const noexcept { return keep_alive_of(message_.version_minor); }
  // After headers_complete: whether the head has an Expect field (RFC 9110 10.1.1).
  bool has_expect() const noexcept { return expect_; }

 private:
  parse_result parse_head(std::string_view input);
  parse_result finish_head(std::string_view section, std::size_t skipped);
  bool parse_request_line(std::string_view section, std::size_t& line_end);
  request message_;
};

// The incremental response parser (see above): a client's side.
class response_parser : public detail::parser_core {
 public:
  // Limits: the sizes past which it rejects (see parser_limits).
  explicit response_parser(const parser_limits& limits = {}) : parser_core(limits) {}

  // The method of the request the next response answers: a response to HEAD has no body,
  // and a 2xx response to CONNECT starts a tunnel (no body). GET unless told; keep it set
  // for each response when pipelining.
  void set_request_method(method m) noexcept { request_method_ = m; }

  // Parses what it can of input (see above for the events and the bytes consumed).
  parse_result parse(std::string_view input);
  // The server closed the connection: message_complete for a body delimited by the close,
  // need_more with nothing pending, else an error (a response cut short).
  parse_result finish() { return finish_input(); }
  // Forgets the current message and any error: the next byte starts a new response.
  void reset() noexcept;

  // The message being parsed (its storage is reused by the next one).
  response& message() noexcept { return message_; }
  const response& message() const noexcept { return message_; }
  // After headers_complete: whether body events may follow.
  bool body_expected() const noexcept;
  // Whether the connection may carry another request after this response.
  bool keep_alive() const noexcept {
    return body_ != body_kind::until_close && keep_alive_of(message_.version_minor);
  }

 private:
  parse_result parse_head(std::string_view input);
  bool parse_status_line(std::string_view section, std::size_t& line_end);
  response message_;
  method request_method_ = method::get;
};

}  // namespace weft::http

// weft::http::request and weft::http::response: HTTP/1.1 messages, their request targets
// (path and query, percent-decoded), and their serialisation onto the wire.
//
// Contract:
//   - Plain value types: each owns its strings, fields and body; not synchronised (one thread
//     at a time); nothing here blocks or does I/O. The parsers (parser.hpp) fill them; the
//     server and the client (built on the net layer) read and write them.
//   - Target accessors (raw_path, path, path_segments, raw_query, query) split and decode
//     request.target on every call, so they always describe the current target. A target
//     with a malformed percent escape ("%4", "%zz") makes the decoding accessors throw
//     std::invalid_argument naming it; the request parser never produces one (it answers 400).
//   - path() decodes every escape, %2F included, like most frameworks; where a decoded '/'
//     must not pass for a separator (the static-file root check), use path_segments(), which
//     splits on the '/' that were on the wire and decodes each segment alone, so "a%2Fb" is
//     one segment "a/b" and "a/b" two.
//   - Serialisation (serialize(), serialize_head()) appends to a caller's std::string and
//     throws std::invalid_argument for a message that cannot be framed honestly: a
//     Content-Length that differs from the body, a Transfer-Encoding other than chunked, a body
//     or Content-Length on a status that forbids content, trailers without chunked framing, an
//     HTTP/1.1 request without Host or with a Host value that is not a host[:port] (the
//     request parser answers such a request 400). Nothing is dropped silently.
//   - The Date field is cached per second per thread (http_date()), so serialising a response
//     costs no time formatting.
#pragma once

#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "weft/http/headers.hpp"
#include "weft/http/status.hpp"

namespace weft::http {

// The methods of RFC 9110 section 9 and PATCH (RFC 5789). The request parser answers 501 Not
// Implemented to any other token (see parser.hpp).
enum class method : std::uint8_t { get, head, post, put, delete_, connect, options, trace, patch };

// "GET", "DELETE", ...: static storage.
std::string_view method_name(method m) noexcept;
// The method of that exact (case-sensitive, RFC 9110 9.1) name, if it is one of the above.
std::optional<method> parse_method(std::string_view name) noexcept;
// Whether a request with this method may be sent again without changing the outcome (RFC 9110
// 9.2.2: GET, HEAD, PUT, DELETE, OPTIONS, TRACE): what a client or a proxy may retry.
constexpr bool is_idempotent(method m) noexcept {
  return m == method::get || m == method::head || m == method::put || m == method::delete_ ||
         m == method::options || m == method::trace;
}

// Decodes %XX escapes (and, when plus_is_space, '+' as a space: the form encoding of query
// strings). A '%' not followed by two hex digits throws std::invalid_argument naming the input.
std::string percent_decode(std::string_view text, bool plus_is_space = false);
// The pairs of an application/x-www-form-urlencoded text: a query string, or the body of a
// form posted without files ("a=1&b=x+y&c" -> {"a", "1"}, {"b", "x y"}, {"c", ""}), in order,
// empty elements skipped, '+' a space and %XX decoded; std::invalid_argument naming the input
// for a malformed escape.
std::vector<std::pair<std::string, std::string>> parse_urlencoded(std::string_view text);
// Escapes every byte but the unreserved ones of RFC 3986 (ALPHA DIGIT - . _ ~), and keeps '/'
// when keep_slash (for a path).
std::string percent_encode(std::string_view text, bool keep_slash = false);

// An HTTP/1.1 request: what the request parser fills and a client sends.
struct request {
  http::method method = http::method::get;  // GET unless set
  // As on the wire: origin-form "/a/b?x=1", absolute-form "http://h/a", authority-form
  // "host:443" (CONNECT), asterisk-form "*" (OPTIONS).
  std::string target = "/";
  // HTTP/1.<version_minor>: 0 or 1 (a received 1.2-1.9 is kept as sent and treated as 1.1).
  int version_minor = 1;
  weft::http::headers headers;  // the header fields, in order
  std::string body;             // the whole body (a parser appends body events here only if you do)
  // Trailer fields of a chunked body; kept apart from headers so that nothing a sender puts
  // in a trailer can pose as a header (RFC 9110 6.5.1).
  weft::http::headers trailers;

  // The host the request is for (RFC 9112 3.2.2, as Go's Request.Host): the authority of an
  // absolute-form target ("http://h:8080/a" -> "h:8080"; the Host field is then ignored, as the
  // RFC asks), the target itself in authority-form (CONNECT "h:443"), otherwise the Host
  // field's value; "" when there is none (an HTTP/1.0 request without Host). The request
  // parser refuses (400) a Host value or an absolute-form authority that is not a host[:port].
  std::string_view host() const noexcept;
  // The path part of the target as received, still percent-encoded: "/a%20b" for
  // "/a%20b?x=1" and for "http://h/a%20b?x=1"; "*" for asterisk-form; "" for authority-form.
  std::string_view raw_path() const noexcept;
  // raw_path() percent-decoded ('+' stays '+').
  std::string path() const;
  // raw_path() split on '/', each segment decoded alone: "/a%2Fb/c/" -> {"a/b", "c", ""}.
  std::vector<std::string> path_segments() const;
  // What follows the first '?', without it; "" when there is none.
  std::string_view raw_query() const noexcept;
  // The query as name/value pairs in order, form-decoded ('+' is a space): "a=1&b&a=x+y" ->
  // {a,1} {b,""} {a,"x y"}; empty elements ("a=1&&b=2") are skipped.
  std::vector<std::pair<std::string, std::string>> query() const;
  // The value of the first query parameter of that (decoded, case-sensitive) name.
  std::optional<std::string> query(std::string_view name) const;

  // Whether the connection stays open after this request (RFC 9112 9.3): HTTP/1.1 unless
  // "Connection: close"; HTTP/1.0 only with "Connection: keep-alive".
  bool keep_alive() const noexcept;
  // Whether the client waits for "100 Continue" before sending the body: 100-continue is a member
  // of an Expect field (any case).
  bool expects_continue() const noexcept;
};

// An HTTP/1.1 response: what a server sends and the response parser fills.
struct response {
  http::status status = http::status::ok;  // 200 unless set
  // Empty: the standard phrase of the status (reason_phrase()).
  std::string reason;
  int version_minor = 1;         // HTTP/1.<version_minor>: 0 or 1
  weft::http::headers headers;   // the header fields, in order
  std::string body;              // the whole body
  weft::http::headers trailers;  // trailer fields of a chunked body (see request::trailers)

  // As request::keep_alive(), for a received response (the client's view).
  bool keep_alive() const noexcept;
};

// What the server knows of the request a response answers.
struct response_context {
  // The request's HTTP/1.<minor>: a 1.0 client gets "Connection: keep-alive" when the
  // connection stays open, and may not be sent a chunked response.
  int request_version_minor = 1;
  // A HEAD request: the head is written as for GET (Content-Length of the body), the body not.
  bool head_request = false;
  // Whether the server wants the connection kept open after this response; false writes
  // "Connection: close".
  bool keep_alive = true;
};

// Appends the whole response: the status line (always HTTP/1.1), the fields in order, then
// those the serialiser adds when absent (Date; Content-Length unless chunked or the status
// forbids content; Connection as the context says), the body (as one chunk, the last chunk
// and the trailers when the fields say Transfer-Encoding: chunked). Returns whether the
// connection may stay open: context.keep_alive, unless the fields already say
// "Connection: close". Throws std::invalid_argument as the contract above says.
bool serialize(const response& r, std::string& out, const response_context& context = {});
// Appends only the head, for a body streamed after it with append_chunk()/append_last_chunk()
// (when the fields say Transfer-Encoding: chunked) or raw (when they give Content-Length).
// The framing rules are serialize()'s, but r.body is ignored: without either field, the head
// gets "Content-Length: <r.body.size()>".
bool serialize_head(const response& r, std::string& out, const response_context& context = {});

// Appends the request line "METHOD target HTTP/1.<minor>", the fields, Content-Length when
// absent and there is a body (or the method is POST, PUT or PATCH), and the body (chunked
// with trailers when the fields say so). Throws std::invalid_argument for an HTTP/1.1 request
// without Host, a Host value with a byte no host[:port] holds (space, '@', '/', a control), a
// target with a space or a control character, or a framing conflict.
void serialize(const request& r, std::string& out);
// Appends only the request's head, for a body streamed after it (raw when the fields give
// Content-Length, with append_chunk()/append_last_chunk() when they say chunked). The rules are
// serialize()'s, but r.body is ignored: without either field, and with a body or a POST, PUT or
// PATCH, the head gets "Content-Length: <r.body.size()>".
void serialize_head(const request& r, std::string& out);

// One chunk of a chunked body ("<hex size>\r\n<data>\r\n"); nothing for empty data (an empty
// chunk would end the body).
void append_chunk(std::string& out, std::string_view data);
// The last chunk "0\r\n", the trailer fields, and the final CRLF.
void append_last_chunk(std::string& out, const headers& trailers = {});

// The IMF-fixdate of RFC 9110 5.6.7 ("Sun, 06 Nov 1994 08:49:37 GMT") for a time.
std::string format_http_date(std::time_t t);
// The current time as an IMF-fixdate, formatted at most once per second per thread; the view
// stays valid until this thread's next call.
std::string_view http_date();

}  // namespace weft::http

// weft::http::router: dispatches requests to handlers by method and path pattern.
//
// Patterns are paths of '/'-separated segments matched against the request's path as received
// (before percent-decoding, so an encoded '/' never passes for a separator):
//   "/users"            a literal segment matches the same segment (compared decoded);
//   "/users/:id"        ":name" matches any one non-empty segment, exchange::param("id");
//   "/static/*rest"     "*name", only as the last segment, matches the rest of the path (zero
//                       or more segments, "a/b/c"), exchange::param("rest").
// A trailing '/' is significant ("/a/" and "/a" are different paths). Routes are tried in the
// order they were added; the first whose method and pattern match serves the request.
// dispatch() answers 404 when no pattern matches the path, and 405 with an Allow field naming the
// methods of the routes whose pattern matches when none has the request's method. HEAD is served
// by a GET route when no HEAD route matches (the server sends the head only). An OPTIONS request
// that no route takes is answered 200 with no content and an Allow field: the methods of the
// routes that match its path, or for "OPTIONS *" (the server as a whole, RFC 9110 9.3.7) of
// every route; HEAD with GET, and OPTIONS, are always in it. A path with a "." or ".." segment
// (as dots or percent-encoded) is answered 400 before any route is tried: clients resolve them
// before sending (RFC 3986 5.2.4), and matched as sent "/files/../admin" would reach the
// route for /files/* with a path that leaves it.
//
// Contract: add() and its shorthands throw std::invalid_argument naming the pattern for a
// malformed one (not starting with '/', an empty or duplicate parameter name, '*' not last).
// A router is built before serving and then only read: dispatch() is const and safe from every
// worker at once. Nothing blocks but the handlers.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "weft/http/message.hpp"
#include "weft/http/server.hpp"
#include "weft/http/static_files.hpp"

namespace weft::http {

class router {
 public:
  router() = default;

  // Adds a route: requests with method m whose path matches pattern (see the file comment) go
  // to h. Returns *this, so that routes chain.
  router& add(method m, std::string_view pattern, handler h);
  // add(method::get, pattern, h); a GET route also serves HEAD.
  router& get(std::string_view pattern, handler h) {
    return add(method::get, pattern, std::move(h));
  }
  // add(method::post, pattern, h).
  router& post(std::string_view pattern, handler h) {
    return add(method::post, pattern, std::move(h));
  }
  // add(method::put, pattern, h).
  router& put(std::string_view pattern, handler h) {
    return add(method::put, pattern, std::move(h));
  }
  // add(method::patch, pattern, h).
  router& patch(std::string_view pattern, handler h) {
    return add(method::patch, pattern, std::move(h));
  }
  // add(method::delete_, pattern, h) (the trailing '_': delete is a C++ keyword).
  router& delete_(std::string_view pattern, handler h) {
    return add(method::delete_, pattern, std::move(h));
  }
  // Every method.
  router& any(std::string_view pattern, handler h);
  // Serves the files under options.root at prefix ("/static"): GET (and so HEAD) of
  // prefix + "/<path>" through http::static_files (ETag, Last-Modified, conditional requests,
  // byte ranges and multipart/byteranges, sendfile, precompressed .gz siblings; never outside
  // the root: see static_files.hpp), and prefix
  // itself redirected to prefix + "/". An empty prefix serves the root at "/". The root is
  // opened now: std::invalid_argument or io_error naming it when it cannot be.
  router& files(std::string_view prefix, static_options options);

  // Runs the matching route's handler (path parameters set on ex), or answers 404 / 405.
  void dispatch(exchange& ex) const;

  // How many routes were added.
  std::size_t size() const noexcept { return routes_.size(); }

 private:
  struct segment {
    enum class kind : unsigned char { literal, param, rest } type;
    std::string text;  // the literal (decoded), or the parameter's name
  };
  struct route {
    bool any_method;
    method m;
    std::string pattern;
    std::vector<segment> segments;
    handler h;
    // Every segment literal and no '%' in the pattern: a path without '%' matches exactly when
    // it equals the pattern, so dispatch compares the two strings and walks no segments.
    bool literal = false;
  };
  // Whether path matches r; captures (name, raw value) into params when it does. escaped: the
  // path holds a '%' (dispatch looks once for all routes).
  static bool match(const route& r, std::string_view path, bool escaped,
                    std::vector<std::pair<std::string_view, std::string_view>>& params);
  static void run(const route& r, exchange& ex,
                  const std::vector<std::pair<std::string_view, std::string_view>>& captured);
  // dispatch() once a route's path matched and its method did not: a later route may still
  // take the request, else the GET route for a HEAD, else 405 with Allow. Out of line, so that
  // the usual request does not pay for its frame.
  [[gnu::cold, gnu::noinline]] void dispatch_by_method(exchange& ex, std::string_view path,
                                                       bool escaped) const;
  // "OPTIONS *": 200 with the Allow of every route.
  [[gnu::cold, gnu::noinline]] void answer_server_options(exchange& ex) const;
  std::vector<route> routes_;
};

}  // namespace weft::http

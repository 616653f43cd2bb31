// router: patterns are parsed once into segments; dispatch walks the request's raw path against
// each route in order, with no allocation for a route without parameters.
#include "weft/http/router.hpp"

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <utility>

#include "http/chars.hpp"
#include "http/dot_segments.hpp"
#include "http/server_state.hpp"

namespace weft::http {

namespace {

// The next segment of path from pos (just past a '/'); pos moves past it and its '/', to
// path.size() + 1 once the path is used up.
std::string_view next_segment(std::string_view path, std::size_t& pos) {
  const std::size_t end = path.find('/', pos);
  std::string_view seg = path.substr(pos, end == std::string_view::npos ? path.npos : end - pos);
  pos = end == std::string_view::npos ? path.size() + 1 : end + 1;
  return seg;
}

}  // namespace

router& router::add(method m, std::string_view pattern, handler h) {
  route r{false, m, std::string(pattern), {}, std::move(h)};
  if (!r.h) {
    throw std::invalid_argument("weft::http::router::add: the handler of '" + r.pattern +
                                "' is empty");
  }
  if (pattern.empty() || pattern.front() != '/') {
    throw std::invalid_argument("weft::http::router::add: the pattern '" + r.pattern +
                                "' does not start with '/'");
  }
  std::size_t pos = 1;
  while (pos <= pattern.size()) {
    std::string_view seg = next_segment(pattern, pos);
    segment s{segment::kind::literal, {}};
    if (!seg.empty() && (seg.front() == ':' || seg.front() == '*')) {
      s.type = seg.front() == ':' ? segment::kind::param : segment::kind::rest;
      s.text = std::string(seg.substr(1));
      if (s.text.empty()) {
        throw std::invalid_argument("weft::http::router::add: the pattern '" + r.pattern +
                                    "' has a parameter without a name");
      }
      for (const segment& earlier : r.segments) {
        if (earlier.type != segment::kind::literal && earlier.text == s.text) {
          throw std::invalid_argument("weft::http::router::add: the pattern '" + r.pattern +
                                      "' names the parameter '" + s.text + "' twice");
        }
      }
      if (s.type == segment::kind::rest && pos <= pattern.size()) {
        throw std::invalid_argument("weft::http::router::add: in the pattern '" + r.pattern +
                                    "', '*" + s.text + "' is not the last segment");
      }
    } else {
      s.text = percent_decode(seg);
    }
    r.segments.push_back(std::move(s));
  }
  r.literal = pattern.find('%') == std::string_view::npos &&
              std::all_of(r.segments.begin(), r.segments.end(),
                          [](const segment& s) { return s.type == segment::kind::literal; });
  routes_.push_back(std::move(r));
  return *this;
}

router& router::any(std::string_view pattern, handler h) {
  add(method::get, pattern, std::move(h));
  routes_.back().any_method = true;
  return *this;
}

router& router::files(std::string_view prefix, static_options options) {
  if (!prefix.empty() && (prefix.front() != '/' || prefix.back() == '/')) {
    throw std::invalid_argument("weft::http::router::files: prefix \"" + std::string(prefix) +
                                "\" must be empty or start with '/' and not end with one");
  }
  // One resolver for every worker: resolve() is const and keeps no per-request state.
  auto resolver = std::make_shared<const static_files>(std::move(options));
  handler serve = [resolver, skip = prefix.size()](exchange& ex) {
    // The path after the prefix, still percent-encoded: the resolver splits it itself, so an
    // encoded '/' never becomes a separator.
    resolver->serve(ex, ex.request().raw_path().substr(skip));
  };
  if (!prefix.empty()) {
    get(prefix, serve);  // redirected to prefix + "/" by the resolver
  }
  return get(std::string(prefix) + "/*path", std::move(serve));
}

[[gnu::hot]] bool router::match(
    const route& r, std::string_view path, bool escaped,
    std::vector<std::pair<std::string_view, std::string_view>>& params) {
  params.clear();
  if (r.literal && !escaped) {
    // Without escapes on either side, segment by segment equal is the same as equal (compared
    // inline: memcmp's call cost more than the compare of a short path).
    return path.size() == r.pattern.size() &&
           detail::equal_short_bytes(path.data(), r.pattern.data(), path.size());
  }
  if (path.empty() || path.front() != '/') {
    return false;  // "*" (OPTIONS) and authority-form targets match no pattern
  }
  std::size_t pos = 1;
  for (const segment& s : r.segments) {
    if (s.type == segment::kind::rest) {
      if (pos > path.size()) {
        return false;
      }
      params.emplace_back(s.text, path.substr(pos));
      return true;
    }
    if (pos > path.size()) {
      return false;
    }
    std::string_view seg = next_segment(path, pos);
    if (s.type == segment::kind::param) {
      if (seg.empty()) {
        return false;
      }
      params.emplace_back(s.text, seg);
    } else if (seg != s.text) {
      if (seg.find('%') == std::string_view::npos || percent_decode(seg) != s.text) {
        return false;
      }
    }
  }
  return pos == path.size() + 1;
}

// Sets the path parameters r captured (decoded) on ex and calls r's handler.
[[gnu::hot]] void router::run(
    const route& r, exchange& ex,
    const std::vector<std::pair<std::string_view, std::string_view>>& captured) {
  detail::connection_state& state = ex.state_;
  for (const auto& [name, raw] : captured) {
    state.params.emplace_back(name, percent_decode(raw));
  }
  r.h(ex);
}

[[gnu::hot]] void router::dispatch(exchange& ex) const {
  const request& req = ex.request();
  const std::string_view path = req.raw_path();
  if (detail::has_dot_segment(path)) {
    // Matched as it is, "/files/../admin" would reach the route for /files/* with a path that
    // leaves it; resolved, it would be another request than the one sent. Go's ServeMux
    // redirects, nginx resolves: refusing says plainly what was wrong (no client a person uses
    // sends one).
    ex.respond(status::bad_request, std::string(detail::dot_segment_refusal));
    return;
  }
  const bool escaped = path.find('%') != std::string_view::npos;
  // The connection's scratch, grown once: a vector made here was a malloc and a free for every
  // request to a route with a parameter.
  std::vector<std::pair<std::string_view, std::string_view>>& captured = ex.state_.captured;
  for (const route& r : routes_) {
    if (!match(r, path, escaped, captured)) {
      continue;
    }
    if (r.any_method || r.m == req.method) {
      run(r, ex, captured);
      return;
    }
    dispatch_by_method(ex, path, escaped);
    return;
  }
  if (req.method == method::options && path == "*") {
    answer_server_options(ex);
    return;
  }
  ex.respond(status::not_found, "Not Found\n");
}

namespace {

// The Allow field of a 405 or an OPTIONS answer: allowed, then HEAD when GET is in it, then
// OPTIONS (which the router answers for every path).
std::string allow_field(std::vector<method> allowed) {
  for (method implied : {method::head, method::options}) {
    const bool has_get = std::find(allowed.begin(), allowed.end(), method::get) != allowed.end();
    if ((implied == method::options || has_get) &&
        std::find(allowed.begin(), allowed.end(), implied) == allowed.end()) {
      allowed.push_back(implied);
    }
  }
  std::string allow;
  for (method m : allowed) {
    if (!allow.empty()) {
      allow += ", ";
    }
    allow += method_name(m);
  }
  return allow;
}

// 200 with Allow and no content (RFC 9110 9.3.7: Content-Length: 0).
void answer_options(exchange& ex, std::string allow) {
  response r;
  r.status = status::ok;
  r.headers.add("Allow", std::move(allow));
  ex.respond(std::move(r));
}

}  // namespace

void router::answer_server_options(exchange& ex) const {
  std::vector<method> allowed;
  for (const route& r : routes_) {
    if (r.any_method) {
      // A route of every method: every method a request line can name for a path.
      allowed = {method::get,     method::head,    method::post,  method::put,
                 method::delete_, method::options, method::trace, method::patch};
      break;
    }
    if (std::find(allowed.begin(), allowed.end(), r.m) == allowed.end()) {
      allowed.push_back(r.m);
    }
  }
  answer_options(ex, allow_field(std::move(allowed)));
}

void router::dispatch_by_method(exchange& ex, std::string_view path, bool escaped) const {
  const request& req = ex.request();
  std::vector<std::pair<std::string_view, std::string_view>>& captured = ex.state_.captured;
  const route* fallback = nullptr;  // a GET route for a HEAD request
  std::vector<std::pair<std::string_view, std::string_view>> fallback_captured;
  std::vector<method> allowed;
  for (const route& r : routes_) {
    if (!match(r, path, escaped, captured)) {
      continue;
    }
    if (r.any_method || r.m == req.method) {
      run(r, ex, captured);
      return;
    }
    if (req.method == method::head && r.m == method::get && fallback == nullptr) {
      fallback = &r;
      fallback_captured = captured;
    }
    if (std::find(allowed.begin(), allowed.end(), r.m) == allowed.end()) {
      allowed.push_back(r.m);
    }
  }
  if (fallback != nullptr) {
    run(*fallback, ex, fallback_captured);
    return;
  }
  // dispatch calls this only once some route's path matched: never a 404 here. An OPTIONS
  // that no route takes is answered with what the path allows.
  if (req.method == method::options) {
    answer_options(ex, allow_field(std::move(allowed)));
    return;
  }
  response r;
  r.status = status::method_not_allowed;
  r.headers.add("Allow", allow_field(std::move(allowed)));
  r.headers.add("Content-Type", "text/plain; charset=utf-8");
  r.body = "Method Not Allowed\n";
  ex.respond(std::move(r));
}

}  // namespace weft::http

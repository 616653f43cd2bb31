// Helpers of the http parser tests: feed a parser the way a connection does (a buffer of
// unconsumed bytes, new bytes appended at chosen split points) and collect what it produced.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "weft/http/parser.hpp"

namespace weft_http_test {

template <typename Message>
struct parsed {
  std::vector<Message> messages;        // complete messages, bodies collected
  std::vector<bool> continue_expected;  // expects_continue() at each headers_complete
  std::vector<bool> keep_alive;         // the parser's keep_alive() at each headers_complete
  std::optional<weft::http::status> error;
  std::string reason;
  std::string leftover;      // bytes not consumed when the input ran out
  std::string partial_body;  // body pieces of a message not complete at the input's end or error
};

// Feeds `input` to the parser in pieces that end at each of `splits` (offsets, ascending), then
// the rest. Every piece is appended to the connection's buffer before parsing resumes.
template <typename Parser>
auto feed(Parser& parser, std::string_view input, const std::vector<std::size_t>& splits = {}) {
  using message_type = std::decay_t<decltype(parser.message())>;
  parsed<message_type> out;
  std::string buffer;
  std::string body;
  std::size_t given = 0;
  std::vector<std::size_t> ends = splits;
  ends.push_back(input.size());
  for (std::size_t end : ends) {
    end = std::min(end, input.size());
    if (end < given) continue;
    buffer.append(input.substr(given, end - given));
    given = end;
    while (true) {
      weft::http::parse_result r = parser.parse(buffer);
      if (r.consumed > buffer.size()) {
        out.error = weft::http::status::internal_server_error;
        out.reason = "the parser consumed more than it was given";
        return out;
      }
      if (r.event == weft::http::parse_event::body) body.append(r.body);
      buffer.erase(0, r.consumed);
      if (r.event == weft::http::parse_event::error) {
        out.error = parser.error_status();
        out.reason = parser.error_reason();
        out.partial_body = body;
        return out;
      }
      if (r.event == weft::http::parse_event::headers_complete) {
        if constexpr (requires { parser.message().expects_continue(); }) {
          out.continue_expected.push_back(parser.message().expects_continue());
        }
        out.keep_alive.push_back(parser.keep_alive());
      }
      if (r.event == weft::http::parse_event::message_complete) {
        out.messages.push_back(parser.message());
        out.messages.back().body = body;
        body.clear();
      }
      if (r.event == weft::http::parse_event::need_more) break;
    }
  }
  out.leftover = buffer;
  out.partial_body = body;
  return out;
}

inline auto parse_requests(std::string_view input, const std::vector<std::size_t>& splits = {},
                           const weft::http::parser_limits& limits = {}) {
  weft::http::request_parser parser(limits);
  return feed(parser, input, splits);
}

// The status a request is rejected with (nullopt when accepted whole).
inline std::optional<weft::http::status> rejection(std::string_view input,
                                                   const weft::http::parser_limits& limits = {}) {
  return parse_requests(input, {}, limits).error;
}

}  // namespace weft_http_test

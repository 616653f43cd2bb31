// libFuzzer target over weft::http's request and response parsers (include/weft/http/parser.hpp).
//
// Input layout: byte 0 chooses the parser and its settings (bit 0: response parser; bits 1-2:
// the method the response answers, GET/HEAD/CONNECT/POST; bit 3: small limits, so that every
// limit is reachable in short inputs), bytes 1-2 seed the split points, the rest is the wire.
//
// Each input is parsed twice: whole, and cut into pieces at pseudo-random points (1-40 bytes
// apart) the way a connection delivers them. Invariants (a violation aborts):
//   - every call gets an exact-size heap copy of the unconsumed bytes, so a read past the end
//     is a heap-buffer-overflow under ASan;
//   - consumed <= the input size; a body piece lies inside the consumed bytes;
//   - both runs produce the same messages (start line, fields, body, trailers) and the same
//     error status: a parser that decides differently depending on where reads end is a
//     desync waiting to happen;
//   - every accepted request re-serialises (http::serialize must not refuse it) to bytes that
//     parse to the same request (the serialiser may add "Content-Length: 0", as documented);
//     every accepted response the serialiser can frame parses back to the same status, fields
//     (the serialiser's additions after them) and body.
//
// Build and run (clang 14; `make test-fuzz` does the short run of `make test`):
//   cmake -S tests/http/fuzz -B build/fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++
//   cmake --build build/fuzz
//   mkdir -p build/fuzz/corpus
//   build/fuzz/http_parser_fuzz -dict=tests/http/fuzz/http.dict -max_total_time=3600 \
//       -print_final_stats=1 build/fuzz/corpus tests/http/fuzz/corpus
// An hour-long run: as above (-max_total_time=3600); add -jobs=N -workers=N for N cores. New
// inputs go to the first directory (build/fuzz/corpus), never to the committed seeds; a crash
// is written as crash-<sha1> in the working directory, to be replayed with
// `build/fuzz/http_parser_fuzz crash-<sha1>` and added to tests/http as a unit test.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "weft/http/message.hpp"
#include "weft/http/parser.hpp"

namespace http = weft::http;

namespace {

[[noreturn]] void violated(const char* what) {
  std::fprintf(stderr, "http_parser_fuzz: invariant violated: %s\n", what);
  std::abort();
}

void check(bool ok, const char* what) {
  if (!ok) violated(what);
}

template <typename Message>
struct outcome {
  std::vector<Message> messages;
  std::optional<http::status> error;
};

bool same_request(const http::request& a, const http::request& b) {
  return a.method == b.method && a.target == b.target && a.version_minor == b.version_minor &&
         a.headers == b.headers && a.body == b.body && a.trailers == b.trailers;
}

bool same_response(const http::response& a, const http::response& b) {
  return a.status == b.status && a.reason == b.reason && a.version_minor == b.version_minor &&
         a.headers == b.headers && a.body == b.body && a.trailers == b.trailers;
}

// Feeds `wire` in pieces ending at `cuts` (ascending), as a connection does.
template <typename Parser>
auto run(Parser& parser, std::string_view wire, const std::vector<std::size_t>& cuts) {
  using message_type = std::decay_t<decltype(parser.message())>;
  outcome<message_type> out;
  std::string pending;
  std::string body;
  std::size_t given = 0;
  std::size_t guard = 4 * wire.size() + 64;
  auto drain = [&]() -> bool {
    while (true) {
      check(guard-- > 0, "parse() makes no progress");
      std::size_t size = pending.size();
      std::unique_ptr<char[]> exact(new char[size == 0 ? 1 : size]);
      std::memcpy(exact.get(), pending.data(), size);
      http::parse_result r = parser.parse(std::string_view(exact.get(), size));
      check(r.consumed <= size, "consumed more than the input");
      if (r.event == http::parse_event::body) {
        check(r.body.data() >= exact.get() &&
                  r.body.data() + r.body.size() <= exact.get() + r.consumed,
              "a body piece outside the consumed input");
        check(!r.body.empty(), "an empty body piece");
        body.append(r.body);
      }
      pending.erase(0, r.consumed);
      switch (r.event) {
        case http::parse_event::error:
          check(parser.error_status() != http::status::ok, "an error without a status");
          check(!parser.error_reason().empty(), "an error without a reason");
          out.error = parser.error_status();
          return false;
        case http::parse_event::message_complete:
          out.messages.push_back(parser.message());
          out.messages.back().body = body;
          body.clear();
          break;
        case http::parse_event::need_more:
          return true;
        default:
          break;
      }
    }
  };
  for (std::size_t cut : cuts) {
    pending.append(wire.substr(given, cut - given));
    given = cut;
    if (!drain()) return out;
  }
  pending.append(wire.substr(given));
  if (!drain()) return out;
  http::parse_result end = parser.finish();
  if (end.event == http::parse_event::message_complete) {
    out.messages.push_back(parser.message());
    out.messages.back().body = body;
  } else if (end.event == http::parse_event::error) {
    out.error = parser.error_status();
  }
  return out;
}

http::parser_limits limits_for(bool small) {
  http::parser_limits limits;
  if (small) {
    limits.max_target_size = 48;
    limits.max_header_size = 400;
    limits.max_header_fields = 6;
    limits.max_body_size = 300;
    limits.max_chunk_line_size = 40;
    limits.max_chunk_overhead = 64;
  }
  return limits;
}

// The parser refuses malformed escapes, so decoding an accepted target never throws; and the
// segments, joined with '/', re-encode to a path that decodes like path().
void decode_target(const http::request& m) {
  try {
    std::string path = m.path();
    std::vector<std::string> segments = m.path_segments();
    std::string joined;
    for (const std::string& segment : segments) joined += "/" + segment;
    check(segments.empty() || joined == path, "path_segments() disagrees with path()");
    auto pairs = m.query();
    for (const auto& [name, value] : pairs) {
      check(m.query(name).has_value(), "a query parameter that query(name) does not find");
    }
    // The request's host (the Host field, or the target's authority) is a host[:port]: the
    // parser refuses any other (RFC 9112 3.2).
    for (char c : m.host()) {
      const bool host_byte =
          (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') ||
          std::string_view("-._~!$&'()*+,;=:[]%").find(c) != std::string_view::npos;
      check(host_byte, "an accepted request's host() holds a byte no host[:port] holds");
    }
    static_cast<void>(m.keep_alive());
    static_cast<void>(m.expects_continue());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "decoding an accepted target threw: %s\n", e.what());
    violated("an accepted target does not decode");
  }
}

void round_trip_request(const http::request& m, const http::parser_limits& limits) {
  decode_target(m);
  std::string wire;
  try {
    http::serialize(m, wire);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "serialize refused an accepted request: %s\n", e.what());
    violated("an accepted request does not re-serialise");
  }
  http::parser_limits roomy = limits;
  roomy.max_header_size += 64;  // room for the Content-Length the serialiser may add
  roomy.max_header_fields += 1;
  roomy.max_chunk_line_size = std::max<std::size_t>(roomy.max_chunk_line_size, 24);
  http::request_parser again(roomy);
  auto out = run(again, wire, {});
  check(!out.error, "a re-serialised request is refused");
  check(out.messages.size() == 1, "a re-serialised request is not one message");
  http::request expected = m;
  const http::request& got = out.messages[0];
  if (got.headers.size() == m.headers.size() + 1) {
    // serialize() documents adding Content-Length when the fields frame no body.
    check(!m.headers.contains("Content-Length") && !m.headers.contains("Transfer-Encoding"),
          "serialize added a field to a request that had its framing");
    expected.headers.add("Content-Length", std::to_string(m.body.size()));
  }
  check(same_request(expected, got), "a re-serialised request parses differently");
}

void round_trip_response(const http::response& m, http::method answered,
                         const http::parser_limits& limits) {
  if (answered == http::method::head || answered == http::method::connect) return;
  std::string wire;
  try {
    http::serialize(m, wire);
  } catch (const std::invalid_argument&) {
    return;  // a response the serialiser refuses to frame (documented cases)
  }
  http::parser_limits roomy = limits;
  roomy.max_header_size += 160;  // Date, Content-Length
  roomy.max_header_fields += 2;
  roomy.max_chunk_line_size = std::max<std::size_t>(roomy.max_chunk_line_size, 24);
  http::response_parser again(roomy);
  again.set_request_method(answered);
  auto out = run(again, wire, {});
  check(!out.error, "a re-serialised response is refused");
  check(!out.messages.empty(), "a re-serialised response is not a message");
  const http::response& got = out.messages[0];
  check(got.status == m.status, "a re-serialised response has another status");
  check(m.reason.empty() || got.reason == m.reason, "a re-serialised response has another reason");
  check(got.headers.size() >= m.headers.size(), "a re-serialised response lost fields");
  for (std::size_t i = 0; i < m.headers.size(); ++i) {
    check(got.headers[i].name == m.headers[i].name && got.headers[i].value == m.headers[i].value,
          "a re-serialised response has other fields");
  }
  check(got.body == m.body, "a re-serialised response has another body");
  check(got.trailers == m.trailers, "a re-serialised response has other trailers");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 3) return 0;
  const bool response = (data[0] & 1) != 0;
  static constexpr http::method answers[] = {http::method::get, http::method::head,
                                             http::method::connect, http::method::post};
  const http::method answered = answers[(data[0] >> 1) & 3];
  const http::parser_limits limits = limits_for((data[0] & 8) != 0);
  std::uint32_t state = (static_cast<std::uint32_t>(data[1]) << 8 | data[2]) * 2654435761u + 1;
  std::string_view wire(reinterpret_cast<const char*>(data + 3), size - 3);

  std::vector<std::size_t> cuts;
  for (std::size_t at = 0;;) {
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    at += 1 + state % 40;
    if (at >= wire.size()) break;
    cuts.push_back(at);
  }

  if (!response) {
    http::request_parser whole_parser(limits);
    http::request_parser split_parser(limits);
    auto whole = run(whole_parser, wire, {});
    auto split = run(split_parser, wire, cuts);
    check(whole.error == split.error, "whole and split input end with different errors");
    check(whole.messages.size() == split.messages.size(),
          "whole and split input give different message counts");
    for (std::size_t i = 0; i < whole.messages.size(); ++i) {
      check(same_request(whole.messages[i], split.messages[i]),
            "whole and split input give different requests");
      round_trip_request(whole.messages[i], limits);
    }
  } else {
    http::response_parser whole_parser(limits);
    http::response_parser split_parser(limits);
    whole_parser.set_request_method(answered);
    split_parser.set_request_method(answered);
    auto whole = run(whole_parser, wire, {});
    auto split = run(split_parser, wire, cuts);
    check(whole.error == split.error, "whole and split input end with different errors");
    check(whole.messages.size() == split.messages.size(),
          "whole and split input give different message counts");
    for (std::size_t i = 0; i < whole.messages.size(); ++i) {
      check(same_response(whole.messages[i], split.messages[i]),
            "whole and split input give different responses");
      round_trip_response(whole.messages[i], answered, limits);
    }
  }
  return 0;
}

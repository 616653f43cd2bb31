// bench_http_parser: nanoseconds per request for weft's HTTP/1.1 request parser against
// Debian's libhttp-parser 2.9.4 (the parser issue 21 asks to consider first), with the floor a
// bare server pays beside them: finding the end of the header section with memmem.
//
// What each does per iteration, on one request already in memory (a keep-alive connection's
// next request; parser state is reused, as a server reuses it per connection):
//   weft          request_parser::parse until message_complete: method, target, version and
//                 every field in message(), the framing checked, the body handed out as views.
//   http_parser   http_parser_execute over the request with callbacks that record the URL, each
//                 field name and value (string_views into the input, fewer copies than weft
//                 makes) and the body pieces: the same result, minus weft's owned copy.
//   find_end      memmem for "\r\n\r\n" and nothing else (the bare floor of issue 21).
// Requests: hello (wrk's GET /hello with 5 fields, 140 bytes), browser (a Chromium page load,
// 12 fields, 560 bytes), post (Content-Length body), chunked (two chunks and a trailer).
//
// `bench_http_parser --probe` prints, for each request smuggling case of issue 21, whether
// http-parser 2.9.4 accepts it and what weft answers: the gaps weft would have to fill if it
// used http-parser.
// Run: build/release/bench/bench_http_parser --benchmark_repetitions=5
//      --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <http_parser.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "weft/http/parser.hpp"

namespace {

const std::string hello =
    "GET /hello HTTP/1.1\r\n"
    "Host: 127.0.0.1:8080\r\n"
    "User-Agent: wrk/4.1.0\r\n"
    "Accept: */*\r\n"
    "Accept-Encoding: gzip, deflate, br\r\n"
    "Connection: keep-alive\r\n"
    "\r\n";

const std::string browser =
    "GET /static/app.js?v=20261124 HTTP/1.1\r\n"
    "Host: localhost:8080\r\n"
    "Connection: keep-alive\r\n"
    "sec-ch-ua: \"Chromium\";v=\"119\", \"Not?A_Brand\";v=\"24\"\r\n"
    "sec-ch-ua-mobile: ?0\r\n"
    "User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/119.0.0.0 Safari/537.36\r\n"
    "sec-ch-ua-platform: \"Linux\"\r\n"
    "Accept: */*\r\n"
    "Sec-Fetch-Site: same-origin\r\n"
    "Sec-Fetch-Mode: no-cors\r\n"
    "Sec-Fetch-Dest: script\r\n"
    "Referer: http://localhost:8080/\r\n"
    "Accept-Encoding: gzip, deflate, br\r\n"
    "Accept-Language: en-US,en;q=0.9\r\n"
    "\r\n";

const std::string post =
    "POST /api/items HTTP/1.1\r\n"
    "Host: 127.0.0.1:8080\r\n"
    "User-Agent: curl/7.88.1\r\n"
    "Content-Type: application/json\r\n"
    "Content-Length: 27\r\n"
    "\r\n"
    "{\"name\":\"weft\",\"count\":42}\n";

const std::string chunked =
    "POST /upload HTTP/1.1\r\n"
    "Host: 127.0.0.1:8080\r\n"
    "Transfer-Encoding: chunked\r\n"
    "\r\n"
    "10\r\n0123456789abcdef\r\n"
    "5;x=y\r\nhello\r\n"
    "0\r\nX-Sum: 21\r\n\r\n";

const std::string& request_named(int which) {
  switch (which) {
    case 0:
      return hello;
    case 1:
      return browser;
    case 2:
      return post;
    default:
      return chunked;
  }
}

void name_request(benchmark::State& state) {
  static const char* names[] = {"hello", "browser", "post", "chunked"};
  state.SetLabel(names[state.range(0)]);
}

void weft_parser(benchmark::State& state) {
  const std::string& request = request_named(static_cast<int>(state.range(0)));
  weft::http::request_parser parser;
  std::size_t body = 0;
  for (auto _ : state) {
    std::string_view input = request;
    while (true) {
      weft::http::parse_result r = parser.parse(input);
      input.remove_prefix(r.consumed);
      if (r.event == weft::http::parse_event::body) body += r.body.size();
      if (r.event == weft::http::parse_event::message_complete) break;
      if (r.event == weft::http::parse_event::error ||
          r.event == weft::http::parse_event::need_more) {
        state.SkipWithError("weft refused the request");
        return;
      }
    }
    benchmark::DoNotOptimize(parser.message().headers.size());
  }
  benchmark::DoNotOptimize(body);
  name_request(state);
}

// What the http-parser callbacks record: views into the input, like a zero-copy user would.
struct recorded {
  std::string_view url;
  std::string_view names[64];
  std::string_view values[64];
  int fields = 0;
  bool in_value = false;
  std::size_t body = 0;
  bool complete = false;
};

int on_url(http_parser* p, const char* at, std::size_t n) {
  static_cast<recorded*>(p->data)->url = std::string_view(at, n);
  return 0;
}
int on_header_field(http_parser* p, const char* at, std::size_t n) {
  auto* r = static_cast<recorded*>(p->data);
  if (r->fields < 64) r->names[r->fields] = std::string_view(at, n);
  r->in_value = false;
  return 0;
}
int on_header_value(http_parser* p, const char* at, std::size_t n) {
  auto* r = static_cast<recorded*>(p->data);
  if (r->fields < 64) r->values[r->fields] = std::string_view(at, n);
  ++r->fields;
  return 0;
}
int on_body(http_parser* p, const char*, std::size_t n) {
  static_cast<recorded*>(p->data)->body += n;
  return 0;
}
int on_message_begin(http_parser* p) {
  auto* r = static_cast<recorded*>(p->data);
  r->fields = 0;
  r->complete = false;
  return 0;
}
int on_message_complete(http_parser* p) {
  static_cast<recorded*>(p->data)->complete = true;
  return 0;
}

http_parser_settings settings() {
  http_parser_settings s;
  http_parser_settings_init(&s);
  s.on_message_begin = on_message_begin;
  s.on_url = on_url;
  s.on_header_field = on_header_field;
  s.on_header_value = on_header_value;
  s.on_body = on_body;
  s.on_message_complete = on_message_complete;
  return s;
}

void http_parser_library(benchmark::State& state) {
  const std::string& request = request_named(static_cast<int>(state.range(0)));
  http_parser_settings s = settings();
  http_parser parser;
  http_parser_init(&parser, HTTP_REQUEST);
  recorded r;
  parser.data = &r;
  for (auto _ : state) {
    std::size_t n = http_parser_execute(&parser, &s, request.data(), request.size());
    if (n != request.size() || !r.complete) {
      state.SkipWithError(http_errno_description(HTTP_PARSER_ERRNO(&parser)));
      return;
    }
    benchmark::DoNotOptimize(r.fields);
  }
  name_request(state);
}

void find_end(benchmark::State& state) {
  const std::string& request = request_named(static_cast<int>(state.range(0)));
  for (auto _ : state) {
    const void* end = memmem(request.data(), request.size(), "\r\n\r\n", 4);
    benchmark::DoNotOptimize(end);
  }
  name_request(state);
}

BENCHMARK(weft_parser)->DenseRange(0, 3);
BENCHMARK(http_parser_library)->DenseRange(0, 3);
BENCHMARK(find_end)->DenseRange(0, 3);

// --- the probe: which smuggling cases would pass http-parser ---

struct probe_case {
  const char* name;
  std::string request;
};

bool http_parser_accepts(const std::string& request, std::string& detail) {
  http_parser_settings s = settings();
  http_parser parser;
  http_parser_init(&parser, HTTP_REQUEST);
  recorded r;
  parser.data = &r;
  std::size_t n = http_parser_execute(&parser, &s, request.data(), request.size());
  if (HTTP_PARSER_ERRNO(&parser) != HPE_OK) {
    detail = http_errno_name(HTTP_PARSER_ERRNO(&parser));
    return false;
  }
  detail = "parsed " + std::to_string(n) + " of " + std::to_string(request.size()) + " bytes" +
           (r.complete ? ", message complete" : ", waiting for more");
  return true;
}

int probe() {
  const std::string head = "POST / HTTP/1.1\r\nHost: a\r\n";
  std::vector<probe_case> cases = {
      {"Content-Length with Transfer-Encoding",
       head + "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
      {"duplicate equal Content-Length",
       head + "Content-Length: 3\r\nContent-Length: 3\r\n\r\nabc"},
      {"differing Content-Length", head + "Content-Length: 3\r\nContent-Length: 5\r\n\r\nabc"},
      {"obs-fold", head + "X-A: b\r\n c\r\nContent-Length: 0\r\n\r\n"},
      {"bare LF line ends", "GET / HTTP/1.1\nHost: a\n\n"},
      {"bare LF after a field", head + "X-A: b\nContent-Length: 0\r\n\r\n"},
      {"chunk size overflow",
       head + "Transfer-Encoding: chunked\r\n\r\n10000000000000001\r\nx\r\n"},
      {"chunk size not hex", head + "Transfer-Encoding: chunked\r\n\r\nxyz\r\nabc\r\n0\r\n\r\n"},
      {"chunk data without CRLF", head + "Transfer-Encoding: chunked\r\n\r\n3\r\nabcX0\r\n\r\n"},
      {"chunk line with bare LF", head + "Transfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n"},
      {"whitespace before colon", head + "Content-Length : 0\r\n\r\n"},
      {"invalid character in field name", head + "X(A): 1\r\nContent-Length: 0\r\n\r\n"},
      {"control character in value", head + "X-A: a\x01"
                                            "b\r\nContent-Length: 0\r\n\r\n"},
      {"Transfer-Encoding not ending in chunked",
       head + "Transfer-Encoding: chunked, gzip\r\n\r\n"},
      {"unknown transfer coding", head + "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"},
      {"HTTP/1.0 with chunked", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
      {"request line with extra spaces", "GET  /  HTTP/1.1\r\nHost: a\r\n\r\n"},
      {"HTTP/1.1 without Host", "GET / HTTP/1.1\r\n\r\n"},
      {"two Host fields", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"},
  };
  std::printf("%-42s %-44s %s\n", "case", "http-parser 2.9.4", "weft");
  int gaps = 0;
  for (const probe_case& c : cases) {
    std::string detail;
    bool accepted = http_parser_accepts(c.request, detail);
    weft::http::request_parser parser;
    std::string_view input = c.request;
    std::string weft_says = "accepted";
    while (true) {
      weft::http::parse_result r = parser.parse(input);
      input.remove_prefix(r.consumed);
      if (r.event == weft::http::parse_event::error) {
        weft_says = std::to_string(weft::http::code_of(parser.error_status()));
        break;
      }
      if (r.event == weft::http::parse_event::need_more) break;
    }
    if (accepted) ++gaps;
    std::printf("%-42s %-44s %s\n", c.name,
                (accepted ? "ACCEPTS (" + detail + ")" : "rejects " + detail).c_str(),
                weft_says.c_str());
  }
  std::printf("http-parser accepts %d of %zu cases\n", gaps, cases.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--probe") == 0) return probe();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

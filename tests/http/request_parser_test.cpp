// weft-test: driver-independent
// The request parser on valid input of every shape: simple, pipelined, split at every byte,
// bodies by Content-Length and chunked (extensions, trailers), 100-continue, HTTP/1.0
// keep-alive, target forms.
#include <gtest/gtest.h>

#include <string>

#include "http/parse_support.hpp"
#include "weft/http/parser.hpp"

namespace http = weft::http;
using weft_http_test::feed;
using weft_http_test::parse_requests;

namespace {

constexpr std::string_view typical =
    "GET /hello?name=weft HTTP/1.1\r\n"
    "Host: localhost:8080\r\n"
    "User-Agent: curl/7.88.1\r\n"
    "Accept: */*\r\n"
    "Accept-Encoding: gzip, deflate\r\n"
    "X-Multi: one\r\n"
    "x-multi:  two  \r\n"
    "\r\n";

constexpr std::string_view chunked_post =
    "POST /upload HTTP/1.1\r\n"
    "Host: h\r\n"
    "Transfer-Encoding: chunked\r\n"
    "Trailer: X-Checksum\r\n"
    "\r\n"
    "5;name=value;flag\r\n"
    "hello\r\n"
    "7 ; q=\"quoted \\\" ;\"\r\n"
    ", world\r\n"
    "000\r\n"
    "X-Checksum: abc123\r\n"
    "X-Other: 1\r\n"
    "\r\n";

}  // namespace

TEST(HttpRequestParser, TypicalGetGivesMethodTargetVersionAndFieldsInOrder) {
  auto out = parse_requests(typical);
  ASSERT_FALSE(out.error) << out.reason;
  ASSERT_EQ(out.messages.size(), 1u);
  const http::request& r = out.messages[0];
  EXPECT_EQ(r.method, http::method::get);
  EXPECT_EQ(r.target, "/hello?name=weft");
  EXPECT_EQ(r.version_minor, 1);
  ASSERT_EQ(r.headers.size(), 6u);
  EXPECT_EQ(r.headers[0].name, "Host");
  EXPECT_EQ(r.headers[0].value, "localhost:8080");
  EXPECT_EQ(r.headers[5].name, "x-multi");
  EXPECT_EQ(r.headers[5].value, "two");  // OWS trimmed on both sides
  EXPECT_EQ(r.headers.get("user-agent"), "curl/7.88.1");
  EXPECT_EQ(r.headers.get_all("X-MULTI"), (std::vector<std::string_view>{"one", "two"}));
  EXPECT_TRUE(r.body.empty());
  EXPECT_EQ(r.path(), "/hello");
  EXPECT_EQ(r.query("name"), "weft");
  EXPECT_TRUE(out.keep_alive[0]);
  EXPECT_TRUE(out.leftover.empty());
}

TEST(HttpRequestParser, HeadersCompleteReportsTheSectionSizeAndThenCompletesWithoutBody) {
  http::request_parser parser;
  http::parse_result r = parser.parse(typical);
  ASSERT_EQ(r.event, http::parse_event::headers_complete);
  EXPECT_EQ(r.consumed, typical.size());
  EXPECT_FALSE(parser.body_expected());
  r = parser.parse({});
  EXPECT_EQ(r.event, http::parse_event::message_complete);
  EXPECT_EQ(r.consumed, 0u);
  r = parser.parse({});
  EXPECT_EQ(r.event, http::parse_event::need_more);
}

TEST(HttpRequestParser, IncompleteHeadersConsumeNothingUntilTheEmptyLine) {
  http::request_parser parser;
  std::string partial(typical.substr(0, typical.size() - 1));
  http::parse_result r = parser.parse(partial);
  EXPECT_EQ(r.event, http::parse_event::need_more);
  EXPECT_EQ(r.consumed, 0u);
  r = parser.parse(typical);
  EXPECT_EQ(r.event, http::parse_event::headers_complete);
  EXPECT_EQ(r.consumed, typical.size());
}

TEST(HttpRequestParser, PipelinedRequestsInOneBufferComeOutInOrder) {
  std::string input;
  input += "GET /1 HTTP/1.1\r\nHost: a\r\n\r\n";
  input += "POST /2 HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\nabc";
  input += "PUT /3 HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nxy\r\n0\r\n\r\n";
  input += "DELETE /4 HTTP/1.1\r\nHost: a\r\n\r\n";
  auto out = parse_requests(input);
  ASSERT_FALSE(out.error) << out.reason;
  ASSERT_EQ(out.messages.size(), 4u);
  EXPECT_EQ(out.messages[0].target, "/1");
  EXPECT_EQ(out.messages[1].method, http::method::post);
  EXPECT_EQ(out.messages[1].body, "abc");
  EXPECT_EQ(out.messages[2].method, http::method::put);
  EXPECT_EQ(out.messages[2].body, "xy");
  EXPECT_EQ(out.messages[3].method, http::method::delete_);
  EXPECT_EQ(out.messages[3].target, "/4");
  EXPECT_TRUE(out.leftover.empty());
}

TEST(HttpRequestParser, EverySplitPointGivesTheSameMessages) {
  std::string input;
  input += typical;
  input += chunked_post;
  input += "POST /len HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n0123456789";
  auto whole = parse_requests(input);
  ASSERT_FALSE(whole.error) << whole.reason;
  ASSERT_EQ(whole.messages.size(), 3u);
  for (std::size_t split = 0; split <= input.size(); ++split) {
    auto out = parse_requests(input, {split});
    ASSERT_FALSE(out.error) << "split at " << split << ": " << out.reason;
    ASSERT_EQ(out.messages.size(), 3u) << "split at " << split;
    for (std::size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(out.messages[i].target, whole.messages[i].target) << split;
      EXPECT_EQ(out.messages[i].headers, whole.messages[i].headers) << split;
      EXPECT_EQ(out.messages[i].body, whole.messages[i].body) << split;
      EXPECT_EQ(out.messages[i].trailers, whole.messages[i].trailers) << split;
    }
  }
}

TEST(HttpRequestParser, OneByteAtATimeGivesTheSameMessages) {
  std::string input = std::string(typical) + std::string(chunked_post);
  std::vector<std::size_t> every;
  for (std::size_t i = 1; i < input.size(); ++i) every.push_back(i);
  auto out = parse_requests(input, every);
  ASSERT_FALSE(out.error) << out.reason;
  ASSERT_EQ(out.messages.size(), 2u);
  EXPECT_EQ(out.messages[1].body, "hello, world");
  EXPECT_EQ(out.messages[1].trailers.get("X-Checksum"), "abc123");
}

TEST(HttpRequestParser, ChunkedBodyWithExtensionsAndTrailers) {
  auto out = parse_requests(chunked_post);
  ASSERT_FALSE(out.error) << out.reason;
  ASSERT_EQ(out.messages.size(), 1u);
  const http::request& r = out.messages[0];
  EXPECT_EQ(r.body, "hello, world");
  ASSERT_EQ(r.trailers.size(), 2u);
  EXPECT_EQ(r.trailers.get("x-checksum"), "abc123");
  EXPECT_EQ(r.trailers.get("X-Other"), "1");
  // Trailers never pose as headers.
  EXPECT_FALSE(r.headers.contains("X-Checksum"));
}

TEST(HttpRequestParser, BodyPiecesPointIntoTheInputAndAddUpToContentLength) {
  http::request_parser parser;
  std::string input = "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 6\r\n\r\nabcdef";
  http::parse_result r = parser.parse(std::string_view(input).substr(0, input.size() - 4));
  ASSERT_EQ(r.event, http::parse_event::headers_complete);
  EXPECT_TRUE(parser.body_expected());
  std::string_view rest = std::string_view(input).substr(r.consumed);
  r = parser.parse(rest.substr(0, 2));
  ASSERT_EQ(r.event, http::parse_event::body);
  EXPECT_EQ(r.body, "ab");
  EXPECT_EQ(r.body.data(), rest.data());  // no copy
  r = parser.parse(rest.substr(2));
  ASSERT_EQ(r.event, http::parse_event::body);
  EXPECT_EQ(r.body, "cdef");
  EXPECT_EQ(r.consumed, 4u);
  r = parser.parse({});
  EXPECT_EQ(r.event, http::parse_event::message_complete);
}

TEST(HttpRequestParser, ExpectContinueIsVisibleAtHeadersComplete) {
  auto out = parse_requests(
      "PUT /f HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\nContent-Length: 2\r\n\r\nok");
  ASSERT_FALSE(out.error) << out.reason;
  ASSERT_EQ(out.continue_expected.size(), 1u);
  EXPECT_TRUE(out.continue_expected[0]);
  EXPECT_EQ(out.messages[0].body, "ok");
  auto plain = parse_requests("GET / HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_FALSE(plain.continue_expected[0]);
}

TEST(HttpRequestParser, KeepAliveFollowsVersionAndConnection) {
  auto http10 = parse_requests("GET / HTTP/1.0\r\n\r\n");
  ASSERT_FALSE(http10.error) << http10.reason;
  EXPECT_FALSE(http10.keep_alive[0]);
  EXPECT_EQ(http10.messages[0].version_minor, 0);
  auto http10_keep = parse_requests("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
  EXPECT_TRUE(http10_keep.keep_alive[0]);
  EXPECT_TRUE(http10_keep.messages[0].keep_alive());
  auto http11_close = parse_requests("GET / HTTP/1.1\r\nHost: a\r\nConnection: te, close\r\n\r\n");
  EXPECT_FALSE(http11_close.keep_alive[0]);
  EXPECT_FALSE(http11_close.messages[0].keep_alive());
  // HTTP/1.0 keep-alive requests pipelined on one connection.
  auto two = parse_requests(
      "GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
      "GET /b HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  ASSERT_EQ(two.messages.size(), 2u);
  EXPECT_EQ(two.messages[1].target, "/b");
}

TEST(HttpRequestParser, EmptyLinesBeforeTheRequestLineAreSkipped) {
  auto out = parse_requests("\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n");
  ASSERT_FALSE(out.error) << out.reason;
  EXPECT_EQ(out.messages.size(), 1u);
}

TEST(HttpRequestParser, EveryMethodAndTargetForm) {
  for (std::string_view m : {"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "TRACE", "PATCH"}) {
    auto out = parse_requests(std::string(m) + " /x HTTP/1.1\r\nHost: a\r\n\r\n");
    ASSERT_FALSE(out.error) << m << ": " << out.reason;
    EXPECT_EQ(http::method_name(out.messages[0].method), m);
  }
  auto connect = parse_requests("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com\r\n\r\n");
  ASSERT_FALSE(connect.error) << connect.reason;
  EXPECT_EQ(connect.messages[0].target, "example.com:443");
  EXPECT_EQ(connect.messages[0].raw_path(), "");
  auto star = parse_requests("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n");
  ASSERT_FALSE(star.error) << star.reason;
  EXPECT_EQ(star.messages[0].raw_path(), "*");
  auto absolute = parse_requests("GET http://a.example/p%20q?x=1 HTTP/1.1\r\nHost: a\r\n\r\n");
  ASSERT_FALSE(absolute.error) << absolute.reason;
  EXPECT_EQ(absolute.messages[0].path(), "/p q");
  EXPECT_EQ(absolute.messages[0].query("x"), "1");
  // The request's host: the absolute-form target's authority, not the Host field (RFC 9112
  // 3.2.2); CONNECT's target; otherwise the Host field.
  EXPECT_EQ(absolute.messages[0].host(), "a.example");
  EXPECT_EQ(connect.messages[0].host(), "example.com:443");
  EXPECT_EQ(star.messages[0].host(), "a");
  auto plain = parse_requests("GET /x HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n");
  ASSERT_FALSE(plain.error) << plain.reason;
  EXPECT_EQ(plain.messages[0].host(), "[::1]:8080");
  auto old = parse_requests("GET /x HTTP/1.0\r\n\r\n");
  ASSERT_FALSE(old.error) << old.reason;
  EXPECT_EQ(old.messages[0].host(), "");
}

TEST(HttpRequestParser, ValuesKeepTabsObsTextAndEmptiness) {
  auto out = parse_requests(
      "GET / HTTP/1.1\r\nHost: a\r\nX-Tab: a\tb\r\nX-Utf8: caf\xc3\xa9\r\nX-Empty:\r\n\r\n");
  ASSERT_FALSE(out.error) << out.reason;
  const http::request& r = out.messages[0];
  EXPECT_EQ(r.headers.get("X-Tab"), "a\tb");
  EXPECT_EQ(r.headers.get("X-Utf8"), "caf\xc3\xa9");
  EXPECT_EQ(r.headers.get("X-Empty"), "");
}

TEST(HttpRequestParser, MessageStorageIsReusedAcrossRequests) {
  http::request_parser parser;
  std::string input =
      "GET /first HTTP/1.1\r\nHost: a\r\nX-A: 1\r\n\r\nGET /second HTTP/1.1\r\nHost: b\r\n\r\n";
  auto out = feed(parser, input);
  ASSERT_EQ(out.messages.size(), 2u);
  EXPECT_EQ(out.messages[1].headers.size(), 1u);  // nothing of the first left over
  EXPECT_EQ(out.messages[1].headers.get("Host"), "b");
}

TEST(HttpRequestParser, FinishSaysWhetherARequestWasCutShort) {
  http::request_parser idle;
  EXPECT_EQ(idle.finish().event, http::parse_event::need_more);
  http::request_parser partial;
  EXPECT_EQ(partial.parse("GET / HT").event, http::parse_event::need_more);
  EXPECT_EQ(partial.finish().event, http::parse_event::error);
  EXPECT_EQ(partial.error_status(), http::status::bad_request);
  http::request_parser body;
  http::parse_result r = body.parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nab");
  ASSERT_EQ(r.event, http::parse_event::headers_complete);
  EXPECT_EQ(body.finish().event, http::parse_event::error);
  EXPECT_NE(body.error_reason().find("body"), std::string::npos);
}

TEST(HttpRequestParser, ResetClearsAnError) {
  http::request_parser parser;
  EXPECT_EQ(parser.parse("GET / HTTP/1.1\nHost: a\r\n\r\n").event, http::parse_event::error);
  EXPECT_EQ(parser.parse("GET / HTTP/1.1\r\nHost: a\r\n\r\n").event, http::parse_event::error);
  parser.reset();
  EXPECT_EQ(parser.parse("GET / HTTP/1.1\r\nHost: a\r\n\r\n").event,
            http::parse_event::headers_complete);
}

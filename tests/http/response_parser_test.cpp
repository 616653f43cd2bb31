// weft-test: driver-independent
// The response parser (the client's side): status lines, bodies framed by Content-Length,
// chunked or the connection's end, responses without content, and what it refuses.
#include <gtest/gtest.h>

#include <string>

#include "http/parse_support.hpp"
#include "weft/http/parser.hpp"

namespace http = weft::http;
using weft_http_test::feed;

namespace {

auto parse_responses(std::string_view input, http::method answered = http::method::get,
                     const std::vector<std::size_t>& splits = {}) {
  http::response_parser parser;
  parser.set_request_method(answered);
  auto out = feed(parser, input, splits);
  if (!out.error) {
    http::parse_result end = parser.finish();
    if (end.event == http::parse_event::message_complete) {
      out.messages.push_back(parser.message());
      out.messages.back().body = out.partial_body;  // the close ended the body
    } else if (end.event == http::parse_event::error) {
      out.error = parser.error_status();
      out.reason = parser.error_reason();
    }
  }
  return out;
}

}  // namespace

TEST(HttpResponseParser, AResponsesHostFieldIsNotCheckedAsAHost) {
  // Host is a request's field (RFC 9112 3.2); in a response it means nothing, and the client
  // does not refuse a response over it.
  auto out = parse_responses("HTTP/1.1 200 OK\r\nHost: a b@c\r\nContent-Length: 2\r\n\r\nok");
  ASSERT_FALSE(out.error) << out.reason;
  ASSERT_EQ(out.messages.size(), 1u);
  EXPECT_EQ(out.messages[0].body, "ok");
}

TEST(HttpResponseParser, StatusLineFieldsAndContentLengthBody) {
  auto out = parse_responses(
      "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 9\r\n\r\nnot here!");
  ASSERT_FALSE(out.error) << out.reason;
  ASSERT_EQ(out.messages.size(), 1u);
  const http::response& r = out.messages[0];
  EXPECT_EQ(r.status, http::status::not_found);
  EXPECT_EQ(r.reason, "Not Found");
  EXPECT_EQ(r.version_minor, 1);
  EXPECT_EQ(r.headers.get("content-type"), "text/plain");
  EXPECT_EQ(r.body, "not here!");
  EXPECT_TRUE(out.keep_alive[0]);
}

TEST(HttpResponseParser, ChunkedBodyWithTrailersAtEverySplit) {
  std::string input =
      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nweft\r\n1;a=b\r\n!\r\n0\r\n"
      "Server-Timing: db;dur=53\r\n\r\n";
  for (std::size_t split = 0; split <= input.size(); ++split) {
    auto out = parse_responses(input, http::method::get, {split});
    ASSERT_FALSE(out.error) << split << ": " << out.reason;
    ASSERT_EQ(out.messages.size(), 1u) << split;
    EXPECT_EQ(out.messages[0].body, "weft!") << split;
    EXPECT_EQ(out.messages[0].trailers.get("Server-Timing"), "db;dur=53") << split;
  }
}

TEST(HttpResponseParser, BodyUntilCloseEndsAtFinish) {
  http::response_parser parser;
  http::parse_result r = parser.parse("HTTP/1.0 200 OK\r\nServer: old\r\n\r\nsome ");
  ASSERT_EQ(r.event, http::parse_event::headers_complete);
  EXPECT_TRUE(parser.body_expected());
  EXPECT_FALSE(parser.keep_alive());
  r = parser.parse("some ");
  ASSERT_EQ(r.event, http::parse_event::body);
  EXPECT_EQ(r.body, "some ");
  EXPECT_EQ(parser.parse({}).event, http::parse_event::need_more);
  EXPECT_EQ(parser.finish().event, http::parse_event::message_complete);
}

TEST(HttpResponseParser, TransferEncodingNotEndingInChunkedReadsUntilClose) {
  auto out = parse_responses("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nbinary");
  ASSERT_FALSE(out.error) << out.reason;
  ASSERT_EQ(out.messages.size(), 1u);
  EXPECT_EQ(out.messages[0].body, "binary");
}

TEST(HttpResponseParser, ResponsesWithoutContent) {
  // HEAD: Content-Length describes what GET would have sent; no body follows.
  auto head = parse_responses(
      "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: "
      "1000\r\n\r\n",
      http::method::head);
  ASSERT_FALSE(head.error) << head.reason;
  EXPECT_EQ(head.messages.size(), 2u);
  auto no_content = parse_responses(
      "HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n"
      "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
  ASSERT_FALSE(no_content.error) << no_content.reason;
  ASSERT_EQ(no_content.messages.size(), 4u);
  EXPECT_EQ(no_content.messages[2].status, http::status::continue_);
  EXPECT_EQ(no_content.messages[3].body, "ok");
  auto tunnel =
      parse_responses("HTTP/1.1 200 Connection Established\r\n\r\n", http::method::connect);
  ASSERT_FALSE(tunnel.error) << tunnel.reason;
  EXPECT_TRUE(tunnel.messages[0].body.empty());
}

TEST(HttpResponseParser, MissingReasonPhraseIsAccepted) {
  auto out = parse_responses("HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n");
  ASSERT_FALSE(out.error) << out.reason;
  EXPECT_EQ(out.messages[0].reason, "");
  auto empty = parse_responses("HTTP/1.1 200 \r\nContent-Length: 0\r\n\r\n");
  ASSERT_FALSE(empty.error) << empty.reason;
}

TEST(HttpResponseParser, RefusesWhatCannotBeFramedSafely) {
  struct bad {
    std::string input;
    http::status status;
  };
  std::vector<bad> cases = {
      {"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
       http::status::bad_request},
      {"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
       http::status::bad_request},
      {"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", http::status::bad_request},
      {"HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n", http::status::bad_request},
      {"HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n", http::status::bad_request},
      {"HTTP/2.0 200 OK\r\n\r\n", http::status::http_version_not_supported},
      {"HTTP/1.1 20 OK\r\n\r\n", http::status::bad_request},
      {"HTTP/1.1 2000 OK\r\n\r\n", http::status::bad_request},
      {"HTTP/1.1 099 OK\r\n\r\n", http::status::bad_request},
      {"HTTP/1.1  200 OK\r\n\r\n", http::status::bad_request},
      {"HTTP/1.1 200 O\x01K\r\n\r\n", http::status::bad_request},
      {"ICY 200 OK\r\n\r\n", http::status::bad_request},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", http::status::bad_request},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: br, chunked\r\n\r\n", http::status::not_implemented},
  };
  // A server framing one-byte chunks with KiB-long extensions (max_chunk_overhead).
  std::string padded = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 20; ++i) padded += "1;x=" + std::string(990, 'e') + "\r\na\r\n";
  cases.push_back({padded + "0\r\n\r\n", http::status::bad_request});
  for (const bad& c : cases) {
    auto out = parse_responses(c.input);
    ASSERT_TRUE(out.error) << "accepted: " << c.input;
    EXPECT_EQ(*out.error, c.status) << c.input << ": " << out.reason;
  }
}

TEST(HttpResponseParser, ResponseCutShortIsAnError) {
  auto out = parse_responses("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc");
  ASSERT_TRUE(out.error);
  EXPECT_NE(out.reason.find("before the body was complete"), std::string::npos) << out.reason;
  auto head = parse_responses("HTTP/1.1 200 OK\r\nContent-Le");
  ASSERT_TRUE(head.error);
  EXPECT_NE(head.reason.find("inside a header section"), std::string::npos) << head.reason;
}

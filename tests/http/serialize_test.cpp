// weft-test: driver-independent
// Serialising responses (status line, Date, Content-Length or chunked, Connection, HEAD) and
// requests, and what the serialiser refuses; every output is read back by the parsers.
#include <gtest/gtest.h>

#include <ctime>
#include <stdexcept>
#include <string>

#include "http/parse_support.hpp"
#include "weft/http/message.hpp"
#include "weft/http/parser.hpp"

namespace http = weft::http;
using weft_http_test::feed;

namespace {

http::response read_response(const std::string& wire, http::method answered = http::method::get) {
  http::response_parser parser;
  parser.set_request_method(answered);
  auto out = feed(parser, wire);
  EXPECT_FALSE(out.error) << out.reason << "\n" << wire;
  EXPECT_EQ(out.messages.size(), 1u) << wire;
  EXPECT_TRUE(out.leftover.empty()) << wire;
  return out.messages.empty() ? http::response{} : out.messages[0];
}

}  // namespace

TEST(HttpSerialize, ResponseGetsStatusLineDateAndContentLength) {
  http::response r;
  r.headers.add("Content-Type", "text/plain");
  r.body = "hello\n";
  std::string wire;
  EXPECT_TRUE(http::serialize(r, wire));
  EXPECT_EQ(wire.rfind("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nDate: ", 0), 0u) << wire;
  EXPECT_NE(wire.find("\r\nContent-Length: 6\r\n\r\nhello\n"), std::string::npos) << wire;
  EXPECT_EQ(wire.find("Connection"), std::string::npos) << wire;
  http::response back = read_response(wire);
  EXPECT_EQ(back.status, http::status::ok);
  EXPECT_EQ(back.body, "hello\n");
  EXPECT_EQ(back.headers.get("Content-Length"), "6");
}

TEST(HttpSerialize, DateIsAnImfFixdateOfNow) {
  std::string_view date = http::http_date();
  ASSERT_EQ(date.size(), 29u) << date;
  EXPECT_EQ(date.substr(25), " GMT");
  EXPECT_EQ(http::format_http_date(784111777), "Sun, 06 Nov 1994 08:49:37 GMT");
  // The cached value is the current second's (or the next, if the second turned meanwhile).
  std::time_t now = std::time(nullptr);
  std::string expected_now = http::format_http_date(now);
  std::string expected_next = http::format_http_date(now + 1);
  std::string got(http::http_date());
  EXPECT_TRUE(got == expected_now || got == expected_next) << got << " vs " << expected_now;
  http::response r;
  r.headers.add("Date", "Sun, 06 Nov 1994 08:49:37 GMT");
  std::string wire;
  http::serialize(r, wire);
  EXPECT_EQ(read_response(wire).headers.count("Date"), 1u);  // the given one, not a second
}

TEST(HttpSerialize, ChunkedResponseWithTrailers) {
  http::response r;
  r.headers.add("Transfer-Encoding", "chunked");
  r.body = "streamed";
  r.trailers.add("X-Checksum", "42");
  std::string wire;
  http::serialize(r, wire);
  EXPECT_NE(wire.find("\r\n\r\n8\r\nstreamed\r\n0\r\nX-Checksum: 42\r\n\r\n"), std::string::npos)
      << wire;
  EXPECT_EQ(wire.find("Content-Length"), std::string::npos);
  http::response back = read_response(wire);
  EXPECT_EQ(back.body, "streamed");
  EXPECT_EQ(back.trailers.get("X-Checksum"), "42");
}

TEST(HttpSerialize, StreamedChunkedBodyAfterTheHead) {
  http::response r;
  r.headers.add("Transfer-Encoding", "chunked");
  std::string wire;
  http::serialize_head(r, wire);
  http::append_chunk(wire, "first ");
  http::append_chunk(wire, "");  // nothing: an empty chunk would end the body
  http::append_chunk(wire, std::string(300, 'x'));
  http::append_last_chunk(wire, http::headers{{"X-Done", "yes"}});
  http::response back = read_response(wire);
  EXPECT_EQ(back.body, "first " + std::string(300, 'x'));
  EXPECT_EQ(back.trailers.get("X-Done"), "yes");
}

TEST(HttpSerialize, ConnectionFollowsTheContext) {
  http::response r;
  std::string close_wire;
  EXPECT_FALSE(http::serialize(r, close_wire, {.keep_alive = false}));
  EXPECT_NE(close_wire.find("Connection: close\r\n"), std::string::npos);
  EXPECT_FALSE(read_response(close_wire).keep_alive());
  // An HTTP/1.0 client kept alive is told so.
  std::string old_wire;
  EXPECT_TRUE(http::serialize(r, old_wire, {.request_version_minor = 0}));
  EXPECT_NE(old_wire.find("Connection: keep-alive\r\n"), std::string::npos);
  // A handler's own "Connection: close" wins, and is not written twice.
  http::response closing;
  closing.headers.add("Connection", "close");
  std::string own;
  EXPECT_FALSE(http::serialize(closing, own));
  EXPECT_EQ(read_response(own).headers.count("Connection"), 1u);
}

TEST(HttpSerialize, HeadResponseHasTheLengthButNoBody) {
  http::response r;
  r.body = "0123456789";
  std::string wire;
  http::serialize(r, wire, {.head_request = true});
  EXPECT_NE(wire.find("Content-Length: 10\r\n\r\n"), std::string::npos);
  EXPECT_EQ(wire.find("0123456789"), std::string::npos);
  http::response back = read_response(wire, http::method::head);
  EXPECT_TRUE(back.body.empty());
}

TEST(HttpSerialize, StatusesWithoutContentGetNoLength) {
  for (http::status s : {http::status::no_content, http::status::not_modified,
                         http::status::continue_, http::status::switching_protocols}) {
    http::response r;
    r.status = s;
    std::string wire;
    http::serialize(r, wire);
    EXPECT_EQ(wire.find("Content-Length"), std::string::npos) << wire;
  }
  http::response with_body;
  with_body.status = http::status::no_content;
  with_body.body = "x";
  std::string wire;
  EXPECT_THROW(http::serialize(with_body, wire), std::invalid_argument);
  http::response with_length;
  with_length.status = http::status::no_content;
  with_length.headers.add("Content-Length", "0");
  EXPECT_THROW(http::serialize(with_length, wire), std::invalid_argument);
}

TEST(HttpSerialize, CustomReasonAndUnlistedStatus) {
  http::response r;
  r.status = static_cast<http::status>(299);
  r.reason = "Fine Enough";
  std::string wire;
  http::serialize(r, wire);
  EXPECT_EQ(wire.rfind("HTTP/1.1 299 Fine Enough\r\n", 0), 0u);
  EXPECT_EQ(http::reason_phrase(static_cast<http::status>(299)), "Success");
  EXPECT_EQ(http::reason_phrase(http::status::content_too_large), "Content Too Large");
  EXPECT_EQ(http::reason_phrase(static_cast<http::status>(999)), "Unknown");
  r.reason = "Bad\r\nInjected: yes";
  EXPECT_THROW(http::serialize(r, wire), std::invalid_argument);
}

TEST(HttpSerialize, RefusesFramingItCannotHonour) {
  std::string wire;
  http::response wrong_length;
  wrong_length.headers.add("Content-Length", "3");
  wrong_length.body = "four";
  EXPECT_THROW(http::serialize(wrong_length, wire), std::invalid_argument);
  http::response gzip;
  gzip.headers.add("Transfer-Encoding", "gzip, chunked");
  EXPECT_THROW(http::serialize(gzip, wire), std::invalid_argument);
  http::response both;
  both.headers.add("Transfer-Encoding", "chunked");
  both.headers.add("Content-Length", "0");
  EXPECT_THROW(http::serialize(both, wire), std::invalid_argument);
  http::response trailers_without_chunked;
  trailers_without_chunked.trailers.add("X", "1");
  EXPECT_THROW(http::serialize(trailers_without_chunked, wire), std::invalid_argument);
  http::response chunked_to_http10;
  chunked_to_http10.headers.add("Transfer-Encoding", "chunked");
  EXPECT_THROW(http::serialize(chunked_to_http10, wire, {.request_version_minor = 0}),
               std::invalid_argument);
}

TEST(HttpSerialize, RequestRoundTripsThroughTheParser) {
  http::request r;
  r.method = http::method::post;
  r.target = "/api/items?x=1";
  r.headers.add("Host", "example.com");
  r.headers.add("Content-Type", "application/json");
  r.body = "{\"a\":1}";
  std::string wire;
  http::serialize(r, wire);
  EXPECT_EQ(
      wire,
      "POST /api/items?x=1 HTTP/1.1\r\nHost: example.com\r\nContent-Type: application/json\r\n"
      "Content-Length: 7\r\n\r\n{\"a\":1}");
  http::request_parser parser;
  auto out = feed(parser, wire);
  ASSERT_FALSE(out.error) << out.reason;
  ASSERT_EQ(out.messages.size(), 1u);
  EXPECT_EQ(out.messages[0].body, r.body);
  EXPECT_EQ(out.messages[0].target, r.target);
}

TEST(HttpSerialize, RequestHeadForABodyStreamedAfterIt) {
  http::request sized;
  sized.method = http::method::put;
  sized.headers.add("Host", "h");
  sized.headers.add("Content-Length", "1000");  // the body comes later: no mismatch with ""
  std::string wire;
  http::serialize_head(sized, wire);
  EXPECT_EQ(wire, "PUT / HTTP/1.1\r\nHost: h\r\nContent-Length: 1000\r\n\r\n");
  http::request chunked;
  chunked.method = http::method::post;
  chunked.headers.add("Host", "h");
  chunked.headers.add("Transfer-Encoding", "chunked");
  chunked.body = "ignored";
  chunked.trailers.add("X-Sum", "1");  // for append_last_chunk, after the streamed chunks
  wire.clear();
  http::serialize_head(chunked, wire);
  EXPECT_EQ(wire, "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n");
  // The rules stay serialize()'s.
  http::request both = sized;
  both.headers.add("Transfer-Encoding", "chunked");
  wire.clear();
  EXPECT_THROW(http::serialize_head(both, wire), std::invalid_argument);
  http::request no_host;
  EXPECT_THROW(http::serialize_head(no_host, wire), std::invalid_argument);
}

TEST(HttpSerialize, RequestBodiesAndTheirLength) {
  http::request get;
  get.headers.add("Host", "h");
  std::string wire;
  http::serialize(get, wire);
  EXPECT_EQ(wire, "GET / HTTP/1.1\r\nHost: h\r\n\r\n");  // no length on a GET without body
  http::request empty_post;
  empty_post.method = http::method::post;
  empty_post.headers.add("Host", "h");
  wire.clear();
  http::serialize(empty_post, wire);
  EXPECT_NE(wire.find("Content-Length: 0\r\n"), std::string::npos);
  http::request chunked;
  chunked.method = http::method::put;
  chunked.headers.add("Host", "h");
  chunked.headers.add("Transfer-Encoding", "chunked");
  chunked.body = "abc";
  chunked.trailers.add("X-T", "1");
  wire.clear();
  http::serialize(chunked, wire);
  http::request_parser parser;
  auto out = feed(parser, wire);
  ASSERT_EQ(out.messages.size(), 1u) << out.reason;
  EXPECT_EQ(out.messages[0].body, "abc");
  EXPECT_EQ(out.messages[0].trailers.get("X-T"), "1");
}

TEST(HttpSerialize, RequestRefusals) {
  std::string wire;
  http::request no_host;
  EXPECT_THROW(http::serialize(no_host, wire), std::invalid_argument);
  http::request old;
  old.version_minor = 0;
  EXPECT_NO_THROW(http::serialize(old, wire));  // HTTP/1.0 needs no Host
  http::request spaced;
  spaced.headers.add("Host", "h");
  spaced.target = "/a b";
  EXPECT_THROW(http::serialize(spaced, wire), std::invalid_argument);
  http::request empty_target;
  empty_target.headers.add("Host", "h");
  empty_target.target.clear();
  EXPECT_THROW(http::serialize(empty_target, wire), std::invalid_argument);
  http::request old_chunked;
  old_chunked.version_minor = 0;
  old_chunked.headers.add("Transfer-Encoding", "chunked");
  EXPECT_THROW(http::serialize(old_chunked, wire), std::invalid_argument);
  for (const char* host : {"a b", "user@h", "h/x", "h\\x"}) {
    http::request bad_host;
    bad_host.headers.add("Host", host);
    wire.clear();
    EXPECT_THROW(http::serialize(bad_host, wire), std::invalid_argument) << host;
    EXPECT_TRUE(wire.empty()) << "nothing is written for a refused request";
  }
  http::request v6_host;
  v6_host.headers.add("Host", "[::1]:8080");
  EXPECT_NO_THROW(http::serialize(v6_host, wire));
}

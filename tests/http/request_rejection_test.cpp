// weft-test: driver-independent
// Every request the parser must refuse (RFC 9112, request smuggling, limits), with the status
// to answer, and a reason that names the fault.
#include <gtest/gtest.h>

#include <string>

#include "http/parse_support.hpp"
#include "weft/http/parser.hpp"

namespace http = weft::http;
using weft_http_test::parse_requests;
using weft_http_test::rejection;

namespace {

// The request is refused with `expected`, at whatever split it arrives, and the reason
// mentions `reason_part`. A head that arrives whole is parsed in one scan and, when that refuses
// it, again the way a head arriving in pieces is: the reason is the same word for word.
void expect_rejected(std::string_view input, http::status expected, std::string_view reason_part,
                     const http::parser_limits& limits = {}) {
  auto out = parse_requests(input, {}, limits);
  ASSERT_TRUE(out.error) << "accepted: " << input;
  EXPECT_EQ(*out.error, expected) << input << "\n" << out.reason;
  EXPECT_NE(out.reason.find(reason_part), std::string::npos)
      << "reason '" << out.reason << "' does not mention '" << reason_part << "'";
  for (std::size_t split = 1; split < input.size(); split += 7) {
    auto piecewise = parse_requests(input, {split}, limits);
    ASSERT_TRUE(piecewise.error) << "accepted when split at " << split << ": " << input;
    EXPECT_EQ(*piecewise.error, expected) << "split at " << split;
    EXPECT_EQ(piecewise.reason, out.reason) << "split at " << split;
  }
}

const std::string get = "GET / HTTP/1.1\r\nHost: a\r\n";

}  // namespace

// --- framing: request smuggling (RFC 9112 6) ---

TEST(HttpRequestRejection, ContentLengthWithTransferEncoding) {
  expect_rejected(
      "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
      "0\r\n\r\n",
      http::status::bad_request, "both Content-Length and Transfer-Encoding");
  expect_rejected(
      "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n",
      http::status::bad_request, "both Content-Length and Transfer-Encoding");
}

TEST(HttpRequestRejection, DuplicateContentLengthEvenWhenEqual) {
  expect_rejected("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
                  http::status::bad_request, "more than once");
  expect_rejected("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\ncontent-length: 5\r\n\r\n",
                  http::status::bad_request, "more than once");
}

TEST(HttpRequestRejection, ContentLengthThatIsNotOneDecimalNumber) {
  for (std::string_view value : {"3, 3", "+3", "-1", "0x10", "3 3", "1e3", "abc", ""}) {
    expect_rejected(
        "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: " + std::string(value) + "\r\n\r\n",
        http::status::bad_request, "Content-Length");
  }
}

TEST(HttpRequestRejection, TransferEncodingWhoseLastCodingIsNotChunked) {
  expect_rejected("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
                  http::status::bad_request, "does not end with chunked");
  expect_rejected("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n",
                  http::status::bad_request, "does not end with chunked");
  // Split over two fields, the order is the fields' order.
  expect_rejected(
      "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: "
      "identity\r\n\r\n",
      http::status::bad_request, "does not end with chunked");
  expect_rejected("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
                  http::status::bad_request, "more than once");
  expect_rejected("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked;x=1\r\n\r\n",
                  http::status::bad_request, "no parameters");
  expect_rejected("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: \"chunked\"\r\n\r\n",
                  http::status::bad_request, "invalid coding");
}

TEST(HttpRequestRejection, UnknownTransferCodingIsNotImplemented) {
  expect_rejected("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
                  http::status::not_implemented, "'gzip' is not implemented");
  expect_rejected("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: x-custom, chunked\r\n\r\n",
                  http::status::not_implemented, "not implemented");
}

TEST(HttpRequestRejection, Http10WithTransferEncoding) {
  expect_rejected("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                  http::status::bad_request, "HTTP/1.0");
}

TEST(HttpRequestRejection, ObsFold) {
  expect_rejected(get + "X-A: one\r\n two\r\n\r\n", http::status::bad_request, "obs-fold");
  expect_rejected(get + "X-A: one\r\n\ttwo\r\n\r\n", http::status::bad_request, "obs-fold");
  // A fold right after the request line is as bad.
  expect_rejected("GET / HTTP/1.1\r\n Host: a\r\n\r\n", http::status::bad_request, "obs-fold");
}

TEST(HttpRequestRejection, BareLineFeedAnywhereInTheHead) {
  expect_rejected("GET / HTTP/1.1\nHost: a\r\n\r\n", http::status::bad_request, "bare LF");
  expect_rejected("GET / HTTP/1.1\r\nHost: a\n\r\n", http::status::bad_request, "bare LF");
  expect_rejected("GET / HTTP/1.1\r\nHost: a\r\n\n", http::status::bad_request, "bare LF");
  expect_rejected("\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", http::status::bad_request, "bare LF");
  expect_rejected(get + "X-A: b\nX-Smuggled: c\r\n\r\n", http::status::bad_request, "bare LF");
}

TEST(HttpRequestRejection, CarriageReturnWithoutLineFeed) {
  expect_rejected(get + "X-A: b\rX-B: c\r\n\r\n", http::status::bad_request, "CR not followed");
  expect_rejected(get + "\rX-B: c\r\n\r\n", http::status::bad_request, "CR not followed");
  expect_rejected("GET / HTTP/1.1\rHost: a\r\n\r\n", http::status::bad_request, "version");
}

TEST(HttpRequestRejection, WhitespaceBeforeTheColon) {
  expect_rejected(get + "Content-Length : 5\r\n\r\nhello", http::status::bad_request,
                  "whitespace between the field name");
  expect_rejected(get + "X-A\t: 5\r\n\r\n", http::status::bad_request, "whitespace");
}

TEST(HttpRequestRejection, AFieldRefusedAfterTheFramingFieldsIsRefusedForItself) {
  // Whole, the head's one scan notes Host, Content-Length and Transfer-Encoding before it meets
  // the bad line; the second, canonical parse must not count them twice (it would refuse a
  // duplicate Content-Length instead).
  expect_rejected(
      "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n"
      "X-Bad : v\r\n\r\n",
      http::status::bad_request, "whitespace between the field name");
}

TEST(HttpRequestRejection, InvalidCharactersInFieldNames) {
  expect_rejected(get + "X(A): 1\r\n\r\n", http::status::bad_request, "token");
  expect_rejected(get + "X\"A: 1\r\n\r\n", http::status::bad_request, "token");
  expect_rejected(get + ": no name\r\n\r\n", http::status::bad_request, "no name");
  expect_rejected(get + "X-A\x01: 1\r\n\r\n", http::status::bad_request, "token");
  expect_rejected(get + "caf\xc3\xa9: 1\r\n\r\n", http::status::bad_request, "token");
  expect_rejected(get + "NoColon\r\n\r\n", http::status::bad_request, "token");
}

TEST(HttpRequestRejection, ControlCharactersInFieldValues) {
  for (char c : {'\x00', '\x01', '\x08', '\x0b', '\x0c', '\x1f', '\x7f'}) {
    std::string input = get + "X-A: a" + std::string(1, c) + "b\r\n\r\n";
    expect_rejected(input, http::status::bad_request, "control character");
  }
}

TEST(HttpRequestRejection, HostMissingOrRepeatedInHttp11) {
  expect_rejected("GET / HTTP/1.1\r\nX-A: 1\r\n\r\n", http::status::bad_request, "Host");
  expect_rejected("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", http::status::bad_request,
                  "Host appears more than once");
  expect_rejected("GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n", http::status::bad_request,
                  "Host appears more than once");
}

// RFC 9112 3.2: "A server MUST respond with a 400 ... to any HTTP/1.1 request message that ...
// contains ... a Host header field with an invalid field value". A handler that builds a link or
// picks a virtual host from Host never sees userinfo, a path or a space there.
TEST(HttpRequestRejection, HostValueThatIsNotAHostPort) {
  expect_rejected("GET / HTTP/1.1\r\nHost: a b\r\n\r\n", http::status::bad_request,
                  "the Host field 'a b' is not a host[:port] (RFC 9112 3.2): 0x20 at offset 1");
  expect_rejected("GET / HTTP/1.1\r\nHost: user@evil.example\r\n\r\n", http::status::bad_request,
                  "0x40 '@' at offset 4");
  expect_rejected("GET / HTTP/1.1\r\nHost: a/../b\r\n\r\n", http::status::bad_request,
                  "0x2F '/' at offset 1");
  expect_rejected("GET / HTTP/1.0\r\nHost: a?b\r\n\r\n", http::status::bad_request,
                  "0x3F '?' at offset 1");
  expect_rejected("GET / HTTP/1.1\r\nHost: a\\b\r\n\r\n", http::status::bad_request, "0x5C");
  expect_rejected("GET / HTTP/1.1\r\nHost: \xC3\xA9.example\r\n\r\n", http::status::bad_request,
                  "0xC3 at offset 0");
  // An absolute-form target's authority is the request's host and is held to the same rule.
  expect_rejected("GET http://user@evil.example/ HTTP/1.1\r\nHost: a\r\n\r\n",
                  http::status::bad_request,
                  "the authority 'user@evil.example' of the absolute-form target is not a "
                  "host[:port] (RFC 9112 3.2.2): 0x40 '@' at offset 4");
  expect_rejected("GET http:///x HTTP/1.1\r\nHost: a\r\n\r\n", http::status::bad_request,
                  "the authority '' of the absolute-form target is not a host[:port] (RFC 9112 "
                  "3.2.2): it is empty");
  // What a host[:port] holds is accepted, an empty value included (RFC 9112 3.2: a target URI
  // without an authority).
  for (std::string_view host : {"example.com", "example.com:8080", "[::1]:443", "[fe80::1%25eth0]",
                                "127.0.0.1", "xn--bcher-kva.example", "a_b-c~d", ""}) {
    auto out = parse_requests("GET / HTTP/1.1\r\nHost: " + std::string(host) + "\r\n\r\n");
    EXPECT_FALSE(out.error) << "Host: " << host << ": " << out.reason;
  }
  // Each pipelined request's Host is checked on its own: good after good, and a bad one after
  // a good one is refused once the good one was delivered.
  std::string two = "GET / HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: b\r\n\r\n";
  auto both = parse_requests(two);
  EXPECT_FALSE(both.error) << both.reason;
  EXPECT_EQ(both.messages.size(), 2u);
  auto second_bad =
      parse_requests("GET / HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: a b\r\n\r\n");
  ASSERT_TRUE(second_bad.error);
  EXPECT_EQ(*second_bad.error, http::status::bad_request);
  EXPECT_EQ(second_bad.messages.size(), 1u);
}

// --- chunked bodies (RFC 9112 7.1) ---

namespace {
std::string chunked(std::string_view body) {
  return "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n" + std::string(body);
}
}  // namespace

TEST(HttpRequestRejection, ChunkSizeNotHexadecimal) {
  expect_rejected(chunked("xyz\r\nabc\r\n0\r\n\r\n"), http::status::bad_request, "hexadecimal");
  expect_rejected(chunked("-1\r\na\r\n0\r\n\r\n"), http::status::bad_request, "hexadecimal");
  expect_rejected(chunked("0x5\r\nhello\r\n0\r\n\r\n"), http::status::bad_request,
                  "other than hex digits");
  expect_rejected(chunked("\r\nabc\r\n0\r\n\r\n"), http::status::bad_request, "hexadecimal");
  expect_rejected(chunked(" 5\r\nhello\r\n0\r\n\r\n"), http::status::bad_request, "hexadecimal");
  expect_rejected(chunked("+5\r\nhello\r\n0\r\n\r\n"), http::status::bad_request, "hexadecimal");
}

TEST(HttpRequestRejection, ChunkSizeOverflow) {
  expect_rejected(chunked("10000000000000000\r\na\r\n"), http::status::bad_request, "overflows");
  expect_rejected(chunked("ffffffffffffffffff\r\na\r\n"), http::status::bad_request, "overflows");
  // Fits in 64 bits but not in the limit.
  expect_rejected(chunked("ffffffffffffffff\r\na\r\n"), http::status::content_too_large,
                  "larger than the limit");
}

TEST(HttpRequestRejection, ChunkLinesWithoutCrlf) {
  expect_rejected(chunked("5\nhello\r\n0\r\n\r\n"), http::status::bad_request, "bare LF");
  expect_rejected(chunked("5\r\nhelloX\r\n0\r\n\r\n"), http::status::bad_request,
                  "not followed by CRLF");
  expect_rejected(chunked("5\r\nhello\n0\r\n\r\n"), http::status::bad_request,
                  "not followed by CRLF");
  expect_rejected(chunked("5\r\nhello\r\n0\n\r\n"), http::status::bad_request, "bare LF");
  expect_rejected(chunked("5\r\nhello\r\n0\r\n\n"), http::status::bad_request, "bare LF");
  expect_rejected(chunked("5\r\nhello\r\n0\r\nX-T: 1\n\r\n"), http::status::bad_request, "bare LF");
}

TEST(HttpRequestRejection, MalformedChunkExtensions) {
  expect_rejected(chunked("5;\r\nhello\r\n0\r\n\r\n"), http::status::bad_request, "without a name");
  expect_rejected(chunked("5;a=\r\nhello\r\n0\r\n\r\n"), http::status::bad_request, "empty value");
  expect_rejected(chunked("5;a=\"open\r\nhello\r\n0\r\n\r\n"), http::status::bad_request, "quoted");
  expect_rejected(chunked("5 \r\nhello\r\n0\r\n\r\n"), http::status::bad_request,
                  "other than hex digits");
  expect_rejected(chunked("5;a=b \r\nhello\r\n0\r\n\r\n"), http::status::bad_request,
                  "other than hex digits");
  expect_rejected(chunked("5;a\x01\r\nhello\r\n0\r\n\r\n"), http::status::bad_request,
                  "other than hex digits");
}

TEST(HttpRequestRejection, MalformedTrailers) {
  expect_rejected(chunked("0\r\nX-T : 1\r\n\r\n"), http::status::bad_request, "whitespace");
  expect_rejected(chunked("0\r\nX-T: 1\r\n folded\r\n\r\n"), http::status::bad_request, "obs-fold");
  expect_rejected(chunked("0\r\nX-T: a\x01\r\n\r\n"), http::status::bad_request,
                  "control character");
}

// --- the request line (RFC 9112 3) ---

TEST(HttpRequestRejection, RequestLineWithExtraOrMissingSpaces) {
  expect_rejected("GET  / HTTP/1.1\r\nHost: a\r\n\r\n", http::status::bad_request,
                  "more than one space");
  expect_rejected("GET /  HTTP/1.1\r\nHost: a\r\n\r\n", http::status::bad_request, "version");
  expect_rejected("GET / HTTP/1.1 \r\nHost: a\r\n\r\n", http::status::bad_request,
                  "after its version");
  expect_rejected(" GET / HTTP/1.1\r\nHost: a\r\n\r\n", http::status::bad_request, "method");
  expect_rejected("GET\t/ HTTP/1.1\r\nHost: a\r\n\r\n", http::status::bad_request, "single space");
  expect_rejected("GET /\tHTTP/1.1\r\nHost: a\r\n\r\n", http::status::bad_request, "byte");
  expect_rejected("GET /a b HTTP/1.1\r\nHost: a\r\n\r\n", http::status::bad_request, "version");
  expect_rejected("GET /\r\n\r\n", http::status::bad_request, "no HTTP version");
}

TEST(HttpRequestRejection, MalformedVersion) {
  for (std::string_view v : {"HTTP/1", "HTTP/1.", "HTTP/11", "http/1.1", "HTTP/1.1.1", "HTTP/a.b",
                             "HTTP 1.1", "HTTP/1.10"}) {
    auto out = parse_requests("GET / " + std::string(v) + "\r\nHost: a\r\n\r\n");
    ASSERT_TRUE(out.error) << v;
    EXPECT_EQ(*out.error, http::status::bad_request) << v << ": " << out.reason;
  }
}

TEST(HttpRequestRejection, UnsupportedMajorVersion) {
  expect_rejected("GET / HTTP/2.0\r\nHost: a\r\n\r\n", http::status::http_version_not_supported,
                  "HTTP/2.0 is not supported");
  expect_rejected("GET / HTTP/0.9\r\nHost: a\r\n\r\n", http::status::http_version_not_supported,
                  "not supported");
}

TEST(HttpRequestRejection, UnknownOrLowercaseMethodIsNotImplemented) {
  expect_rejected("BREW / HTTP/1.1\r\nHost: a\r\n\r\n", http::status::not_implemented, "BREW");
  expect_rejected("get / HTTP/1.1\r\nHost: a\r\n\r\n", http::status::not_implemented, "get");
}

TEST(HttpRequestRejection, InvalidTargets) {
  expect_rejected("GET /a\x7f HTTP/1.1\r\nHost: a\r\n\r\n", http::status::bad_request, "byte");
  expect_rejected("GET /caf\xc3\xa9 HTTP/1.1\r\nHost: a\r\n\r\n", http::status::bad_request,
                  "byte");
  expect_rejected("GET /a%2 HTTP/1.1\r\nHost: a\r\n\r\n", http::status::bad_request,
                  "percent escape");
  expect_rejected("GET /a%zz HTTP/1.1\r\nHost: a\r\n\r\n", http::status::bad_request,
                  "percent escape");
  expect_rejected("GET a/b HTTP/1.1\r\nHost: a\r\n\r\n", http::status::bad_request,
                  "neither a path");
  expect_rejected("GET * HTTP/1.1\r\nHost: a\r\n\r\n", http::status::bad_request, "OPTIONS");
  expect_rejected("CONNECT /x HTTP/1.1\r\nHost: a\r\n\r\n", http::status::bad_request,
                  "authority-form");
  expect_rejected("CONNECT user@h:443 HTTP/1.1\r\nHost: h\r\n\r\n", http::status::bad_request,
                  "authority-form");
  expect_rejected("CONNECT a^b:443 HTTP/1.1\r\nHost: h\r\n\r\n", http::status::bad_request,
                  "authority-form");
  expect_rejected("CONNECT h HTTP/1.1\r\nHost: h\r\n\r\n", http::status::bad_request,
                  "authority-form");
  expect_rejected("GET /a#frag HTTP/1.1\r\nHost: a\r\n\r\n", http::status::bad_request, "fragment");
}

// --- limits ---

TEST(HttpRequestRejection, TargetLongerThanTheLimitIsUriTooLong) {
  http::parser_limits limits;
  limits.max_target_size = 100;
  std::string long_target = "/" + std::string(100, 'a');
  expect_rejected("GET " + long_target + " HTTP/1.1\r\nHost: a\r\n\r\n", http::status::uri_too_long,
                  "longer than 100", limits);
  // Refused before the line ends: a client cannot make the server buffer without bound.
  auto early = parse_requests("GET /" + std::string(300, 'a'), {}, limits);
  ASSERT_TRUE(early.error);
  EXPECT_EQ(*early.error, http::status::uri_too_long);
  // Exactly at the limit is fine.
  EXPECT_FALSE(rejection("GET /" + std::string(99, 'a') + " HTTP/1.1\r\nHost: a\r\n\r\n", limits));
}

TEST(HttpRequestRejection, HeaderSectionLargerThanTheLimit) {
  http::parser_limits limits;
  limits.max_header_size = 256;
  expect_rejected(get + "X-Big: " + std::string(300, 'b') + "\r\n\r\n",
                  http::status::request_header_fields_too_large, "larger than 256", limits);
  // Also while the section is incomplete.
  auto early = parse_requests(get + "X-Big: " + std::string(300, 'b'), {}, limits);
  ASSERT_TRUE(early.error);
  EXPECT_EQ(*early.error, http::status::request_header_fields_too_large);
}

TEST(HttpRequestRejection, TooManyHeaderFields) {
  http::parser_limits limits;
  limits.max_header_fields = 10;
  std::string input = "GET / HTTP/1.1\r\nHost: a\r\n";
  for (int i = 0; i < 9; ++i) input += "X-" + std::to_string(i) + ": v\r\n";
  EXPECT_FALSE(rejection(input + "\r\n", limits));  // 10 fields
  expect_rejected(input + "X-Last: v\r\n\r\n", http::status::request_header_fields_too_large,
                  "more than 10", limits);
}

TEST(HttpRequestRejection, BodyLargerThanTheLimit) {
  http::parser_limits limits;
  limits.max_body_size = 10;
  expect_rejected("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\n",
                  http::status::content_too_large, "larger than the limit 10", limits);
  expect_rejected("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999999\r\n\r\n",
                  http::status::content_too_large, "larger than the limit", limits);
  expect_rejected(chunked("6\r\nabcdef\r\n5\r\nghijk\r\n0\r\n\r\n"),
                  http::status::content_too_large, "larger than the limit 10", limits);
  EXPECT_FALSE(rejection(chunked("6\r\nabcdef\r\n4\r\nghij\r\n0\r\n\r\n"), limits));
}

TEST(HttpRequestRejection, ChunkLineLongerThanTheLimit) {
  http::parser_limits limits;
  limits.max_chunk_line_size = 32;
  expect_rejected(chunked("5;" + std::string(40, 'e') + "\r\nhello\r\n0\r\n\r\n"),
                  http::status::bad_request, "longer than 32", limits);
}

// One-byte chunks with long extensions would have a server read a KiB per byte of body, a GiB
// for max_body_size's MiB: the framing past what the chunks carry is bounded, and the body is
// refused a few dozen chunks in (Go's CVE-2023-39326, Node's CVE-2024-22019).
TEST(HttpRequestRejection, ChunkFramingFarBeyondItsDataIsRefused) {
  const std::string extension = ";x=" + std::string(990, 'e');
  std::string body;
  for (int i = 0; i < 20; ++i) body += "1" + extension + "\r\na\r\n";
  expect_rejected(chunked(body + "0\r\n\r\n"), http::status::bad_request,
                  "exceeds the data it carries by more than 16384 bytes (max_chunk_overhead)");
  // Refused at the chunk that crossed the bound: 16 of the 20 bytes of body were passed on.
  auto out = parse_requests(chunked(body + "0\r\n\r\n"));
  EXPECT_EQ(out.partial_body, std::string(16, 'a'));

  // Framing that stays within 16 bytes a chunk, however many chunks: 20,000 one-byte chunks.
  std::string tiny;
  for (int i = 0; i < 20000; ++i) tiny += "1\r\nb\r\n";
  auto many = parse_requests(chunked(tiny + "0\r\n\r\n"));
  ASSERT_FALSE(many.error) << many.reason;
  ASSERT_EQ(many.messages.size(), 1U);
  EXPECT_EQ(many.messages[0].body, std::string(20000, 'b'));

  // Extensions beside chunks larger than them cost nothing: 100 chunks of 1 KiB, each with the
  // same 993-byte extension.
  std::string large;
  for (int i = 0; i < 100; ++i)
    large += "400" + extension + "\r\n" + std::string(1024, 'c') + "\r\n";
  auto carried = parse_requests(chunked(large + "0\r\n\r\n"));
  ASSERT_FALSE(carried.error) << carried.reason;
  ASSERT_EQ(carried.messages.size(), 1U);
  EXPECT_EQ(carried.messages[0].body.size(), 102400U);

  // The bound is a limit of its own: at 100 bytes, a one-byte chunk with a 68-byte extension
  // leaves 57 over its allowance and a second one is refused; a message that follows one
  // such chunk starts from nothing.
  http::parser_limits limits;
  limits.max_chunk_overhead = 100;
  const std::string one = "1;" + std::string(68, 'n') + "\r\nz\r\n";
  EXPECT_FALSE(rejection(chunked(one + "0\r\n\r\n"), limits));
  EXPECT_FALSE(rejection(chunked(one + "0\r\n\r\n") + chunked(one + "0\r\n\r\n"), limits));
  expect_rejected(chunked(one + one + "0\r\n\r\n"), http::status::bad_request,
                  "by more than 100 bytes", limits);
}

TEST(HttpRequestRejection, TooManyTrailerFields) {
  http::parser_limits limits;
  limits.max_header_fields = 3;
  expect_rejected(chunked("0\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n"),
                  http::status::request_header_fields_too_large, "more than 3", limits);
}

TEST(HttpRequestRejection, NothingAfterAnErrorIsParsed) {
  // The smuggled second request after a refused first one never comes out.
  auto out = parse_requests(
      "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
      "0\r\n\r\nGET /admin HTTP/1.1\r\nHost: a\r\n\r\n");
  ASSERT_TRUE(out.error);
  EXPECT_TRUE(out.messages.empty());
}

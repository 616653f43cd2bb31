// weft-test: driver-independent
// Request targets: path and query split, percent-decoding, query parameters, and %2F kept
// apart from '/' for the static-file root check.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "weft/http/message.hpp"

namespace http = weft::http;

namespace {
http::request with_target(std::string target) {
  http::request r;
  r.target = std::move(target);
  return r;
}
}  // namespace

TEST(HttpTarget, PathAndQuerySplitAtTheFirstQuestionMark) {
  http::request r = with_target("/a/b?x=1&y=2?z");
  EXPECT_EQ(r.raw_path(), "/a/b");
  EXPECT_EQ(r.raw_query(), "x=1&y=2?z");
  EXPECT_EQ(with_target("/plain").raw_query(), "");
  EXPECT_EQ(with_target("/empty?").raw_query(), "");
}

TEST(HttpTarget, PathIsPercentDecodedButPlusStaysPlus) {
  EXPECT_EQ(with_target("/caf%C3%A9/a%20b+c").path(), "/caf\xc3\xa9/a b+c");
  EXPECT_EQ(with_target("/%25").path(), "/%");
}

TEST(HttpTarget, EncodedSlashStaysInsideItsSegment) {
  http::request encoded = with_target("/files/..%2Fetc%2Fpasswd");
  http::request plain = with_target("/files/../etc/passwd");
  // path() decodes everything, so both look alike there...
  EXPECT_EQ(encoded.path(), plain.path());
  // ...but the segments keep them apart.
  EXPECT_EQ(encoded.path_segments(), (std::vector<std::string>{"files", "../etc/passwd"}));
  EXPECT_EQ(plain.path_segments(), (std::vector<std::string>{"files", "..", "etc", "passwd"}));
  EXPECT_EQ(with_target("/a%2fb/").path_segments(), (std::vector<std::string>{"a/b", ""}));
  EXPECT_EQ(with_target("/").path_segments(), (std::vector<std::string>{""}));
  EXPECT_EQ(with_target("/%2E%2E/x").path_segments(), (std::vector<std::string>{"..", "x"}));
}

TEST(HttpTarget, QueryPairsInOrderFormDecoded) {
  http::request r = with_target("/s?q=a+b%26c&empty=&flag&q=second&&%3D=%3D");
  auto pairs = r.query();
  ASSERT_EQ(pairs.size(), 5u);
  EXPECT_EQ(pairs[0], (std::pair<std::string, std::string>{"q", "a b&c"}));
  EXPECT_EQ(pairs[1], (std::pair<std::string, std::string>{"empty", ""}));
  EXPECT_EQ(pairs[2], (std::pair<std::string, std::string>{"flag", ""}));
  EXPECT_EQ(pairs[3], (std::pair<std::string, std::string>{"q", "second"}));
  EXPECT_EQ(pairs[4], (std::pair<std::string, std::string>{"=", "="}));
  EXPECT_EQ(r.query("q"), "a b&c");  // the first
  EXPECT_EQ(r.query("flag"), "");
  EXPECT_FALSE(r.query("absent"));
  EXPECT_FALSE(r.query("Q"));  // names are case-sensitive
}

TEST(HttpTarget, AbsoluteFormGivesItsPathAndQuery) {
  EXPECT_EQ(with_target("http://example.com:8080/x/y?z=1").raw_path(), "/x/y");
  EXPECT_EQ(with_target("http://example.com:8080/x/y?z=1").query("z"), "1");
  EXPECT_EQ(with_target("http://example.com").raw_path(), "/");
  EXPECT_EQ(with_target("http://example.com?a=b").raw_path(), "/");
  EXPECT_EQ(with_target("http://example.com?a=b").query("a"), "b");
  EXPECT_EQ(with_target("http://example.com:8080/x/y?z=1").host(), "example.com:8080");
  EXPECT_EQ(with_target("http://example.com?a=b").host(), "example.com");
  EXPECT_EQ(with_target("http://example.com").host(), "example.com");
}

TEST(HttpTarget, MalformedEscapesThrowNamingTheText) {
  EXPECT_THROW(with_target("/a%2").path(), std::invalid_argument);
  EXPECT_THROW(with_target("/a%g0").path_segments(), std::invalid_argument);
  try {
    with_target("/x?bad=%zz").query();
    FAIL() << "a malformed escape was decoded";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("%zz"), std::string::npos) << e.what();
  }
}

TEST(HttpTarget, PercentEncodeRoundTrips) {
  std::string raw = "a b/c?d&e=f%g\xc3\xa9~";
  EXPECT_EQ(http::percent_encode(raw), "a%20b%2Fc%3Fd%26e%3Df%25g%C3%A9~");
  EXPECT_EQ(http::percent_encode(raw, true), "a%20b/c%3Fd%26e%3Df%25g%C3%A9~");
  EXPECT_EQ(http::percent_decode(http::percent_encode(raw)), raw);
}

TEST(HttpTarget, MethodNamesRoundTripAndAreCaseSensitive) {
  for (auto m : {http::method::get, http::method::head, http::method::post, http::method::put,
                 http::method::delete_, http::method::connect, http::method::options,
                 http::method::trace, http::method::patch}) {
    EXPECT_EQ(http::parse_method(http::method_name(m)), m);
  }
  EXPECT_FALSE(http::parse_method("get"));
  EXPECT_FALSE(http::parse_method("PROPFIND"));
}

TEST(HttpTarget, KeepAliveAndExpectOfABuiltRequest) {
  http::request r;
  EXPECT_TRUE(r.keep_alive());
  r.headers.add("Connection", "close");
  EXPECT_FALSE(r.keep_alive());
  http::request old;
  old.version_minor = 0;
  EXPECT_FALSE(old.keep_alive());
  old.headers.add("Connection", "keep-alive");
  EXPECT_TRUE(old.keep_alive());
  EXPECT_FALSE(old.expects_continue());
  old.headers.add("Expect", "100-continue");
  EXPECT_TRUE(old.expects_continue());
}

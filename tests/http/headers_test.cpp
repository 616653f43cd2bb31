// weft-test: driver-independent
// weft::http::headers: order, duplicates, case-insensitive lookup, and what add() refuses.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "weft/http/headers.hpp"

namespace http = weft::http;

TEST(HttpHeaders, KeepInsertionOrderAndDuplicates) {
  http::headers h;
  h.add("Set-Cookie", "a=1");
  h.add("Content-Type", "text/html");
  h.add("set-cookie", "b=2");
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[0].name, "Set-Cookie");
  EXPECT_EQ(h[1].name, "Content-Type");
  EXPECT_EQ(h[2].name, "set-cookie");  // the name as given is kept
  EXPECT_EQ(h.count("SET-COOKIE"), 2u);
  EXPECT_EQ(h.get_all("Set-Cookie"), (std::vector<std::string_view>{"a=1", "b=2"}));
  std::vector<std::string> seen;
  for (http::headers::field f : h) seen.push_back(std::string(f.name) + "=" + std::string(f.value));
  EXPECT_EQ(seen, (std::vector<std::string>{"Set-Cookie=a=1", "Content-Type=text/html",
                                            "set-cookie=b=2"}));
}

TEST(HttpHeaders, LookupIgnoresCaseAndGivesTheFirst) {
  http::headers h{{"Host", "a"}, {"X-Id", "1"}, {"x-id", "2"}};
  EXPECT_EQ(h.get("host"), "a");
  EXPECT_EQ(h.get("X-ID"), "1");
  EXPECT_TRUE(h.contains("HOST"));
  EXPECT_FALSE(h.contains("Hos"));
  EXPECT_FALSE(h.get("Content-Length"));
  EXPECT_EQ(h.count("missing"), 0u);
}

TEST(HttpHeaders, SetReplacesEveryOccurrenceInPlaceOfTheFirst) {
  http::headers h{{"A", "1"}, {"B", "x"}, {"a", "2"}, {"C", "y"}};
  h.set("a", "3");
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[0].name, "a");
  EXPECT_EQ(h[0].value, "3");
  EXPECT_EQ(h[1].name, "B");
  EXPECT_EQ(h[2].name, "C");
  h.set("D", "new");
  EXPECT_EQ(h[3].name, "D");
}

TEST(HttpHeaders, RemoveSaysHowManyWentAndClearEmpties) {
  http::headers h{{"A", "1"}, {"B", "x"}, {"a", "2"}};
  EXPECT_EQ(h.remove("A"), 2u);
  EXPECT_EQ(h.size(), 1u);
  EXPECT_EQ(h.get("B"), "x");
  EXPECT_EQ(h.remove("nothing"), 0u);
  h.clear();
  EXPECT_TRUE(h.empty());
}

TEST(HttpHeaders, ValuesAreTrimmedOfSurroundingWhitespace) {
  http::headers h;
  h.add("A", " \t v a l \t ");
  EXPECT_EQ(h.get("A"), "v a l");
}

TEST(HttpHeaders, HasTokenReadsListsAcrossFieldsAndIgnoresParameters) {
  http::headers h{{"Connection", "keep-alive, Upgrade"},
                  {"Transfer-Encoding", "gzip"},
                  {"transfer-encoding", "Chunked;x=1"}};
  EXPECT_TRUE(h.has_token("connection", "upgrade"));
  EXPECT_TRUE(h.has_token("Connection", "KEEP-ALIVE"));
  EXPECT_FALSE(h.has_token("Connection", "close"));
  EXPECT_TRUE(h.has_token("Transfer-Encoding", "chunked"));
  EXPECT_FALSE(h.has_token("Transfer-Encoding", "chunk"));
}

TEST(HttpHeaders, AddRefusesNamesThatAreNotTokensAndValuesWithControls) {
  http::headers h;
  EXPECT_THROW(h.add("", "v"), std::invalid_argument);
  EXPECT_THROW(h.add("Bad Name", "v"), std::invalid_argument);
  EXPECT_THROW(h.add("Bad:Name", "v"), std::invalid_argument);
  try {
    h.add("X-Injected", "a\r\nSet-Cookie: evil=1");
    FAIL() << "a CRLF in a value was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("X-Injected"), std::string::npos) << e.what();
  }
  EXPECT_THROW(h.add("X", std::string("a\0b", 3)), std::invalid_argument);
  EXPECT_THROW(h.set("X", "\x7f"), std::invalid_argument);
  EXPECT_TRUE(h.empty());              // nothing half-added
  h.add("X-Utf8", "caf\xc3\xa9\tok");  // obs-text and HTAB are allowed
  EXPECT_EQ(h.get("x-utf8"), "caf\xc3\xa9\tok");
}

TEST(HttpHeaders, EqualityIsExactAndOrdered) {
  http::headers a{{"A", "1"}, {"B", "2"}};
  http::headers b{{"A", "1"}, {"B", "2"}};
  http::headers reordered{{"B", "2"}, {"A", "1"}};
  EXPECT_EQ(a, b);
  EXPECT_FALSE(a == reordered);
}

TEST(HttpHeaders, SettingAFieldOverAndOverKeepsOrderAndTheLatestValue) {
  http::headers h{{"Keep", "me"}};
  for (int i = 0; i < 100000; ++i) h.set("X-Counter", std::to_string(i));
  ASSERT_EQ(h.size(), 2u);
  EXPECT_EQ(h.get("Keep"), "me");
  EXPECT_EQ(h.get("x-counter"), "99999");
  h.remove("Keep");
  EXPECT_EQ(h.get("X-Counter"), "99999");
  EXPECT_EQ(h.size(), 1u);
  h.add("After", "1");
  EXPECT_EQ(h[1].name, "After");
}

TEST(HttpHeaders, AFieldCopiedFromAnotherListKeepsItsNameValueAndLookup) {
  http::headers from{{"Content-Type", "text/plain"}, {"X-Trace", "  abc  "}, {"x-trace", "def"}};
  http::headers to;
  to.reserve(4, 64);
  to.add(from, 2);
  to.add(from, 0);
  to.add("Via", "1.1 weft");
  to.add(from, 1);
  ASSERT_EQ(to.size(), 4u);
  EXPECT_EQ(to[0].name, "x-trace");
  EXPECT_EQ(to[1].value, "text/plain");
  EXPECT_EQ(to[3].value, "abc");  // trimmed when it went into `from`
  EXPECT_EQ(to.get_all("X-TRACE"), (std::vector<std::string_view>{"def", "abc"}));
  EXPECT_EQ(to.get("content-type"), "text/plain");
  to.set("X-Trace", "one");  // the copies are ordinary fields: set, remove
  EXPECT_EQ(to.count("x-trace"), 1u);
  EXPECT_EQ(to.remove("Via"), 1u);
  // From itself, many times over: storage_ grows under the copy.
  for (int i = 0; i < 1000; ++i) to.add(to, 0);
  ASSERT_EQ(to.size(), 1002u);  // X-Trace (set in place of the first), Content-Type, copies
  EXPECT_EQ(to[1].name, "Content-Type");
  EXPECT_EQ(to[1001].name, "X-Trace");
  EXPECT_EQ(to[1001].value, "one");
  EXPECT_EQ(to.count("x-trace"), 1001u);
  EXPECT_THROW(to.add(from, 3), std::out_of_range);
  http::headers empty;
  EXPECT_THROW(to.add(empty, 0), std::out_of_range);
  EXPECT_EQ(from.size(), 3u);  // the source is left as it was
  EXPECT_EQ(from[1].value, "abc");
}

// weft-test: driver-independent
// http::cookies / cookie read a request's Cookie fields as leniently as clients write them;
// format_set_cookie / add_cookie write Set-Cookie as strictly as RFC 6265 4.1 and the browsers'
// rules ask, refusing with a message what a browser would drop or misread.
#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <string>

#include "weft/http/cookies.hpp"

namespace {

namespace http = weft::http;
using namespace std::chrono_literals;

TEST(HttpCookies, EveryCookieFieldIsReadInOrder) {
  http::headers fields;
  fields.add("Cookie", "session=abc123; theme=dark");
  fields.add("Cookie", " lang = en ;quoted=\"v 1\";;flag; =nameless; empty=; last=x=y");
  const auto all = http::cookies(fields);
  const std::pair<std::string_view, std::string_view> expected[] = {
      {"session", "abc123"}, {"theme", "dark"}, {"lang", "en"},
      {"quoted", "v 1"},     {"empty", ""},     {"last", "x=y"}};
  ASSERT_EQ(all.size(), std::size(expected));
  for (std::size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i], expected[i]) << i;
  }
  EXPECT_EQ(http::cookie(fields, "theme"), "dark");
  EXPECT_EQ(http::cookie(fields, "Theme"), std::nullopt) << "names are case-sensitive";
  EXPECT_EQ(http::cookie(fields, "flag"), std::nullopt) << "a pair without '=' is skipped";
  EXPECT_TRUE(http::cookies(http::headers{}).empty());
}

TEST(HttpCookies, SetCookieCarriesEveryAttributeGiven) {
  EXPECT_EQ(http::format_set_cookie({.name = "id", .value = "42"}), "id=42");
  EXPECT_EQ(http::format_set_cookie({.name = "id",
                                     .value = "42",
                                     .path = "/app",
                                     .domain = "example.com",
                                     .max_age = 3600s,
                                     .expires = 784111777,
                                     .secure = true,
                                     .http_only = true,
                                     .same_site = http::same_site::none,
                                     .partitioned = true}),
            "id=42; Path=/app; Domain=example.com; Expires=Sun, 06 Nov 1994 08:49:37 GMT; "
            "Max-Age=3600; Secure; HttpOnly; SameSite=None; Partitioned");
  EXPECT_EQ(http::format_set_cookie(
                {.name = "gone", .max_age = 0s, .same_site = http::same_site::strict}),
            "gone=; Max-Age=0; SameSite=Strict");
  EXPECT_EQ(http::format_set_cookie(
                {.name = "q", .value = "\"quoted\"", .same_site = http::same_site::lax}),
            "q=\"quoted\"; SameSite=Lax");
  http::response r;
  http::add_cookie(r, {.name = "a", .value = "1"});
  http::add_cookie(r, {.name = "b", .value = "2"});
  EXPECT_EQ(r.headers.count("Set-Cookie"), 2u) << "one field per cookie";
}

TEST(HttpCookies, WhatABrowserWouldDropIsRefusedNamingIt) {
  const std::pair<http::set_cookie, const char*> cases[] = {
      {{.name = ""}, "the name is empty"},
      {{.name = "a b", .value = "1"}, "the name is not a token: ' ' (0x20) at byte 1"},
      {{.name = "a", .value = "x;y"}, "';' (0x3b) at byte 1"},
      {{.name = "a", .value = "two words"}, "' ' (0x20) at byte 3"},
      {{.name = "a", .value = "caf\xc3\xa9"}, "(0xc3) at byte 3"},
      {{.name = "a", .value = "\""}, "'\"' (0x22) at byte 0"},
      {{.name = "a", .value = "\"in\"side\""}, "'\"' (0x22) at byte 2"},
      {{.name = "a", .path = "/x;Domain=evil"}, "the path holds a control byte or ';'"},
      {{.name = "a", .path = "/x\r\nSet-Cookie: b"}, "the path holds a control byte"},
      {{.name = "a", .domain = "evil.com; Secure"}, "is not a host name"},
      {{.name = "a", .domain = "a..b"}, "is not a host name"},
      {{.name = "a", .max_age = -1s}, "Max-Age is negative"},
      {{.name = "a", .same_site = http::same_site::none}, "SameSite=None needs Secure"},
      {{.name = "a", .partitioned = true}, "Partitioned needs Secure"},
  };
  for (const auto& [c, expected] : cases) {
    try {
      http::format_set_cookie(c);
      ADD_FAILURE() << "accepted: " << expected;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("cookie '" + c.name + "'"), std::string::npos)
          << e.what();
    }
  }
  // A leading dot in Domain is allowed (browsers ignore it).
  EXPECT_EQ(http::format_set_cookie({.name = "a", .domain = ".example.com"}),
            "a=; Domain=.example.com");
}

}  // namespace

// weft-test: driver-independent
// http::cookie_jar as RFC 6265 5.3 and 5.4 describe a user agent's store: host-only and domain
// cookies, default and explicit paths, every cookie-date form, Max-Age over Expires, deletion,
// Secure, replacement, the order of the Cookie field, and the bounds.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "weft/http/cookies.hpp"

namespace {

namespace http = weft::http;

// The Set-Cookie fields of a response.
http::headers set(std::initializer_list<std::string_view> lines) {
  http::headers fields;
  for (std::string_view line : lines) fields.add("Set-Cookie", line);
  return fields;
}

TEST(HttpCookieJar, HostOnlyAndDomainCookiesGoWhereTheyMatch) {
  http::cookie_jar jar;
  jar.store("www.example.com", "/", false,
            set({"host=1", "wide=2; Domain=.Example.COM", "other=3; Domain=other.com",
                 "tld=4; Domain=com", "sub=5; Domain=api.example.com"}));
  EXPECT_EQ(jar.size(), 2u) << "another site's, a bare top-level domain's, and a subdomain the "
                               "host is not under are dropped";
  EXPECT_EQ(jar.cookie_header("www.example.com", "/", false), "host=1; wide=2");
  EXPECT_EQ(jar.cookie_header("api.example.com", "/", false), "wide=2");
  EXPECT_EQ(jar.cookie_header("example.com", "/", false), "wide=2");
  EXPECT_EQ(jar.cookie_header("badexample.com", "/", false), "");
  EXPECT_EQ(jar.cookie_header("WWW.EXAMPLE.COM", "/x", false), "host=1; wide=2");
  // An IP address matches its own cookies only, and "localhost" may name itself.
  jar.store("127.0.0.1", "/", false, set({"ip=1; Domain=0.0.1", "own=2; Domain=127.0.0.1"}));
  EXPECT_EQ(jar.cookie_header("127.0.0.1", "/", false), "own=2");
  jar.store("localhost", "/", false, set({"local=1; Domain=localhost"}));
  EXPECT_EQ(jar.cookie_header("localhost", "/", false), "local=1");
}

TEST(HttpCookieJar, PathsDefaultToTheRequestsDirectoryAndMatchBySegment) {
  http::cookie_jar jar;
  jar.store("h", "/docs/guide/page.html", false,
            set({"dir=1", "docs=2; Path=/docs", "root=3; Path=/", "relative=4; Path=x"}));
  EXPECT_EQ(jar.cookie_header("h", "/docs/guide/other", false), "dir=1; relative=4; docs=2; root=3")
      << "longer paths first, then the older";
  EXPECT_EQ(jar.cookie_header("h", "/docs", false), "docs=2; root=3");
  EXPECT_EQ(jar.cookie_header("h", "/docs/", false), "docs=2; root=3");
  EXPECT_EQ(jar.cookie_header("h", "/documents", false), "root=3");
  EXPECT_EQ(jar.cookie_header("h", "/doc", false), "root=3");
}

TEST(HttpCookieJar, EveryDateFormAndMaxAgeDecideTheLife) {
  http::cookie_jar jar;
  jar.store(
      "h", "/", false,
      set({"imf=1; Expires=Sun, 06 Nov 2094 08:49:37 GMT",
           "netscape=2; expires=Wed, 09-Jun-2100 10:18:14 GMT",
           "asctime=3; Expires=Sun Nov  6 08:49:37 2094",
           "twodigit=4; Expires=Saturday, 06-Nov-60 08:49:37 GMT",
           "past=5; Expires=Thu, 01 Jan 1970 00:00:00 GMT", "garbled=6; Expires=not a date at all",
           "aged=7; Max-Age=60", "zero=8; Max-Age=0",
           "over=9; Expires=Thu, 01 Jan 1970 00:00:00 GMT; Max-Age=60",
           "under=10; Max-Age=-1; Expires=Sun, 06 Nov 2094 08:49:37 GMT", "nan=11; Max-Age=soon"}));
  EXPECT_EQ(jar.cookie_header("h", "/", false),
            "imf=1; netscape=2; asctime=3; twodigit=4; garbled=6; aged=7; over=9; nan=11");
  // Deleting: the same name, domain and path with a past date or Max-Age=0.
  jar.store("h", "/", false,
            set({"imf=; Max-Age=0", "netscape=; Expires=Mon, 01-Jan-1990 0:0:0 GMT"}));
  EXPECT_EQ(jar.cookie_header("h", "/", false),
            "asctime=3; twodigit=4; garbled=6; aged=7; over=9; nan=11");
}

TEST(HttpCookieJar, SecureCookiesNeedHttpsAndAReplacementKeepsItsPlace) {
  http::cookie_jar jar;
  jar.store("h", "/", false, set({"plain=1", "locked=2; Secure"}));
  EXPECT_EQ(jar.size(), 1u) << "a Secure cookie from plain http is dropped";
  jar.store("h", "/", true, set({"locked=2; Secure", "later=3"}));
  EXPECT_EQ(jar.cookie_header("h", "/", false), "plain=1; later=3");
  EXPECT_EQ(jar.cookie_header("h", "/", true), "plain=1; locked=2; later=3");
  jar.store("h", "/", false, set({"locked=stolen", "plain=one"}));
  EXPECT_EQ(jar.cookie_header("h", "/", true), "plain=one; locked=2; later=3")
      << "plain http replaces neither a Secure cookie nor its place in the order";
  jar.clear();
  EXPECT_EQ(jar.size(), 0u);
}

TEST(HttpCookieJar, BoundsDropTheLeastRecentlyUsed) {
  http::cookie_jar jar({.max_cookies = 5, .max_per_domain = 3, .max_cookie_size = 16});
  jar.store("a", "/", false, set({"one=1", "two=2", "three=3"}));
  EXPECT_EQ(jar.cookie_header("a", "/", false), "one=1; two=2; three=3");
  jar.store("a", "/", false, set({"two=22"}));  // used: now the most recent
  jar.store("a", "/", false, set({"four=4"}));
  EXPECT_EQ(jar.cookie_header("a", "/", false), "two=22; three=3; four=4");
  jar.store("b", "/", false, set({"x=1", "y=2", "z=3"}));
  EXPECT_EQ(jar.size(), 5u) << "past max_cookies the least recently used of all goes";
  EXPECT_EQ(jar.cookie_header("a", "/", false), "three=3; four=4");
  jar.store("c", "/", false, set({"toolong=0123456789", "empty=", "=nameless", "novalue"}));
  EXPECT_EQ(jar.cookie_header("c", "/", false), "empty=");
}

// One jar shared by clients on several threads (client_options::cookies allows it): stores,
// lookups, bounds and clears at once, under TSan in make tsan. Each thread's own cookie is
// there whenever it looks, and the bound holds throughout.
TEST(HttpCookieJar, ThreadsShareOneJar) {
  http::cookie_jar jar({.max_cookies = 40, .max_per_domain = 8, .max_cookie_size = 64});
  constexpr int threads = 4;
  constexpr int rounds = 2000;
  std::atomic<int> missing{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&jar, &missing, t] {
      const std::string host = "h" + std::to_string(t) + ".example.com";
      for (int i = 0; i < rounds; ++i) {
        jar.store(host, "/", false,
                  set({"mine=" + std::to_string(i), "n" + std::to_string(i % 20) + "=x",
                       "shared=" + std::to_string(t) + "; Domain=example.com"}));
        const std::string header = jar.cookie_header(host, "/", false);
        if (header.find("mine=" + std::to_string(i)) == std::string::npos) ++missing;
        if (jar.size() > 40) ++missing;
      }
    });
  }
  for (std::thread& w : workers) w.join();
  EXPECT_EQ(missing.load(), 0);
  EXPECT_LE(jar.size(), 40u);
}

}  // namespace

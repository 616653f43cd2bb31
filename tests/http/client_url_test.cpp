// weft-test: driver-independent
// weft::http::client's URL parsing (src/http/client_url.hpp): parse_client_url reuses the
// scheme and authority of the last URL it parsed whole, and must give what a whole parse gives
// for every URL that follows, whether it shares that prefix, shares it only in part, or shares
// it and then breaks the grammar.
#include "http/client_url.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "weft/http/client.hpp"

namespace {

using weft::http::error_kind;
using weft::http::detail::client_url;
using weft::http::detail::parse_client_url;
using weft::http::detail::parse_whole_client_url;

struct outcome {
  std::optional<client_url> url;
  std::optional<error_kind> failure;
};

template <class Parse>
outcome run(Parse parse, const std::string& text) {
  outcome o;
  try {
    o.url = parse(text);
  } catch (const weft::http::error& e) {
    o.failure = e.kind();
  }
  return o;
}

TEST(HttpClientUrl, ReusedAuthoritiesParseAsAWholeParseDoes) {
  // Each after the one before it: the same authority with other targets, the authority as a
  // prefix of another (a longer port, a longer host), another case, another scheme, and URLs
  // that share the prefix and are bad after it.
  const std::vector<std::string> urls = {
      "http://Example.com:8080/a?x=1",
      "http://Example.com:8080/b",
      "http://Example.com:8080",
      "http://Example.com:8080?q",
      "http://Example.com:8080/a b",          // a space in the target
      "http://Example.com:8080/caf\xc3\xa9",  // percent-encoded
      "http://Example.com:80801/",            // the port grows past 65535
      "http://Example.com:8080/after-error",
      "http://Example.com:80/",         // a shorter port: not the prefix
      "http://Example.com:8080@evil/",  // credentials after the same bytes
      "http://Example.com:8080#frag",
      "http://example.com:8080/lower",
      "HTTP://Example.com:8080/upper-scheme",
      "https://Example.com:8080/tls",
      "http://Example.com:8080.evil/",  // the prefix, then more host
      "http://[::1]:9000/v6",
      "http://[::1]:9000/v6/again",
      "http://[::1]:9000]/",
      "http://host/",
      "http://hostile/",
  };
  for (const std::string& text : urls) {
    const outcome whole = run([](const std::string& u) { return parse_whole_client_url(u); }, text);
    for (int round = 0; round < 2; ++round) {
      const outcome reused = run([](const std::string& u) { return parse_client_url(u); }, text);
      ASSERT_EQ(reused.failure, whole.failure) << text << " (round " << round << ")";
      if (!whole.url) {
        continue;
      }
      const client_url& a = *reused.url;
      const client_url& b = *whole.url;
      EXPECT_EQ(a.text, b.text) << text;
      EXPECT_EQ(a.host, b.host) << text;
      EXPECT_EQ(a.port, b.port) << text;
      EXPECT_EQ(a.secure, b.secure) << text;
      EXPECT_EQ(a.authority, b.authority) << text;
      EXPECT_EQ(a.target, b.target) << text;
      EXPECT_EQ(a.origin, b.origin) << text;
    }
  }
  // What a reuse gives, spelled out: the host lower-cased, the target at least "/".
  parse_client_url("http://Example.com:8080/first");
  const client_url second = parse_client_url("http://Example.com:8080?q=1");
  EXPECT_EQ(second.host, "example.com");
  EXPECT_EQ(second.port, 8080);
  EXPECT_EQ(second.authority, "example.com:8080");
  EXPECT_EQ(second.origin, "example.com:8080");
  EXPECT_EQ(second.target, "/?q=1");
  EXPECT_EQ(second.text, "http://Example.com:8080?q=1");
  EXPECT_THROW(parse_client_url("http://Example.com:8080/a\nb"), weft::http::error);
}

}  // namespace

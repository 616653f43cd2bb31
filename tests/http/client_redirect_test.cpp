// weft::http::client: following redirects (opt-in), with RFC 9110's method rules, the hop
// limit, loop detection and the refusal to change scheme.
#include <string>

#include "http/client_support.hpp"

namespace {

using namespace std::chrono_literals;
using http_client_test::ok;
using http_client_test::received;
using http_client_test::script_server;
using weft_test::run_clean;

std::string redirect(int code, std::string_view location) {
  return "HTTP/1.1 " + std::to_string(code) + " Moved\r\nLocation: " + std::string(location) +
         "\r\nContent-Length: 5\r\n\r\nmoved";
}

TEST(HttpClientRedirect, NotFollowedByDefault) {
  run_clean([] {
    script_server server(
        [](weft::tcp::stream& s, const received&) { s.write_all(redirect(302, "/elsewhere")); });
    weft::http::client web;
    weft::http::response r = web.get(server.url("/"));
    EXPECT_EQ(r.status, weft::http::status::found);
    EXPECT_EQ(r.headers.get("Location"), "/elsewhere");
    EXPECT_EQ(r.body, "moved");
    web.close();
    server.close();
  });
}

TEST(HttpClientRedirect, ChainIsFollowedOnTheKeptConnection) {
  run_clean([] {
    script_server server([](weft::tcp::stream& s, const received& r) {
      if (r.target == "/a") {
        s.write_all(redirect(301, "/dir/b?q=1"));
      } else if (r.target == "/dir/b?q=1") {
        s.write_all(redirect(307, "../c"));  // relative, with a dot segment
      } else {
        s.write_all(ok("at " + r.target));
      }
    });
    weft::http::client web({.max_redirects = 5});
    weft::http::response r = web.get(server.url("/a"));
    EXPECT_EQ(r.body, "at /c");
    EXPECT_EQ(web.stats().redirects, 2u);
    EXPECT_EQ(web.stats().requests, 3u);
    EXPECT_EQ(web.stats().connections_opened, 1u);
    web.close();
    server.close();
  });
}

TEST(HttpClientRedirect, SeeOtherTurnsPostIntoGetWithoutBody) {
  run_clean([] {
    script_server server([](weft::tcp::stream& s, const received& r) {
      if (r.method == "POST") {
        s.write_all(redirect(303, "/result"));
      } else {
        s.write_all(ok(r.method + " " + r.target + " [" + r.body + "]"));
      }
    });
    weft::http::client web({.max_redirects = 3});
    weft::http::response r =
        web.post(server.url("/form"), "a=1", "application/x-www-form-urlencoded");
    EXPECT_EQ(r.body, "GET /result []");
    ASSERT_EQ(server.requests().size(), 2u);
    EXPECT_EQ(server.requests()[1].field("Content-Length"), "");
    EXPECT_EQ(server.requests()[1].field("Content-Type"), "");
    web.close();
    server.close();
  });
}

TEST(HttpClientRedirect, TemporaryRedirectKeepsMethodAndBody) {
  run_clean([] {
    script_server server([](weft::tcp::stream& s, const received& r) {
      if (r.target == "/old") {
        s.write_all(redirect(307, "/new"));
      } else {
        s.write_all(ok(r.method + " [" + r.body + "]"));
      }
    });
    weft::http::client web({.max_redirects = 3});
    EXPECT_EQ(web.post(server.url("/old"), "payload").body, "POST [payload]");
    web.close();
    server.close();
  });
}

TEST(HttpClientRedirect, MoreHopsThanTheLimitIsAnError) {
  run_clean([] {
    script_server server([](weft::tcp::stream& s, const received& r) {
      const int n = std::stoi(r.target.substr(1));
      s.write_all(redirect(302, "/" + std::to_string(n + 1)));
    });
    weft::http::client web({.max_redirects = 2});
    try {
      web.get(server.url("/0"));
      ADD_FAILURE() << "no error";
    } catch (const weft::http::error& failure) {
      EXPECT_EQ(failure.kind(), weft::http::error_kind::too_many_redirects);
      EXPECT_EQ(failure.url(), server.url("/2"));
    }
    EXPECT_EQ(server.requests().size(), 3u);
    web.close();
    server.close();
  });
}

TEST(HttpClientRedirect, LoopIsDetected) {
  run_clean([] {
    script_server server([](weft::tcp::stream& s, const received& r) {
      s.write_all(redirect(302, r.target == "/a" ? "/b" : "/a"));
    });
    weft::http::client web({.max_redirects = 10});
    try {
      web.get(server.url("/a"));
      ADD_FAILURE() << "no error";
    } catch (const weft::http::error& failure) {
      EXPECT_EQ(failure.kind(), weft::http::error_kind::redirect_loop) << failure.what();
    }
    EXPECT_EQ(server.requests().size(), 2u);
    web.close();
    server.close();
  });
}

TEST(HttpClientRedirect, NeverToASchemeItDoesNotSpeak) {
  run_clean([] {
    script_server server([](weft::tcp::stream& s, const received&) {
      s.write_all(redirect(301, "ftp://files.example/"));
    });
    weft::http::client web({.max_redirects = 3});
    try {
      web.get(server.url("/"));
      ADD_FAILURE() << "no error";
    } catch (const weft::http::error& failure) {
      EXPECT_EQ(failure.kind(), weft::http::error_kind::unsupported_scheme) << failure.what();
    }
    web.close();
    server.close();
  });
}

TEST(HttpClientRedirect, AnotherOriginDropsCredentials) {
  run_clean([] {
    script_server target([](weft::tcp::stream& s, const received& r) {
      s.write_all(ok("auth=[" + r.field("Authorization") + "] host=" + r.field("Host")));
    });
    script_server origin([&](weft::tcp::stream& s, const received&) {
      s.write_all(redirect(302, target.url("/landing")));
    });
    weft::http::client web({.max_redirects = 3});
    weft::http::response r = web.get(origin.url("/"), {{"Authorization", "Bearer secret"}});
    EXPECT_EQ(r.body, "auth=[] host=127.0.0.1:" + std::to_string(target.port()));
    EXPECT_EQ(origin.requests()[0].field("Authorization"), "Bearer secret");
    web.close();
    origin.close();
    target.close();
  });
}

TEST(HttpClientRedirect, RedirectWithoutLocationIsAnError) {
  run_clean([] {
    script_server server([](weft::tcp::stream& s, const received&) {
      s.write_all("HTTP/1.1 302 Found\r\nContent-Length: 0\r\n\r\n");
    });
    weft::http::client web({.max_redirects = 3});
    try {
      web.get(server.url("/"));
      ADD_FAILURE() << "no error";
    } catch (const weft::http::error& failure) {
      EXPECT_EQ(failure.kind(), weft::http::error_kind::unexpected_response);
    }
    web.close();
    server.close();
  });
}

}  // namespace

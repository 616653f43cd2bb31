// weft::http::client with a body_source: request bodies streamed piece by piece, in either
// framing, the misuses refused by name, a source giving the wrong length or failing, what a
// redirect does with a body that cannot be sent again, and the stale-connection rule.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "http/client_support.hpp"
#include "http/server_support.hpp"

namespace {

using namespace std::chrono_literals;
using http_client_test::ok;
using http_client_test::received;
using http_client_test::script_server;
using weft_test::run_clean;

// A source giving `pieces` in turn, then the end; counts the calls.
struct pieces_source {
  std::vector<std::string> pieces;
  std::size_t next = 0;
  int calls = 0;
  std::optional<std::string_view> operator()() {
    ++calls;
    if (next == pieces.size()) {
      return std::nullopt;
    }
    return std::string_view(pieces[next++]);
  }
};

weft::http::request put_request(std::string_view content_length = {}) {
  weft::http::request r;
  r.method = weft::http::method::put;
  if (!content_length.empty()) {
    r.headers.add("Content-Length", content_length);
  }
  return r;
}

TEST(HttpClientUpload, AStreamedBodyGoesWithItsContentLength) {
  run_clean([] {
    script_server server([](weft::tcp::stream& s, const received& r) { s.write_all(ok(r.body)); });
    weft::http::client web;
    pieces_source source{{"abc", "defg"}};
    const weft::http::body_source body = std::ref(source);
    const weft::http::response r = web.request(put_request("7"), server.url("/up"), body);
    EXPECT_EQ(r.body, "abcdefg");
    EXPECT_EQ(source.calls, 3);  // two pieces, then the end
    ASSERT_EQ(server.requests().size(), 1u);
    EXPECT_EQ(server.requests()[0].method, "PUT");
    EXPECT_EQ(server.requests()[0].field("Content-Length"), "7");
    EXPECT_EQ(server.requests()[0].field("Transfer-Encoding"), "");
    EXPECT_EQ(web.stats().idle_connections, 1u);  // kept: the exchange ended in step
    web.close();
    server.close();
  });
}

TEST(HttpClientUpload, WithoutAContentLengthTheBodyIsChunkedWithItsTrailers) {
  run_clean([] {
    script_server server([](weft::tcp::stream& s, const received&) { s.write_all(ok("got")); });
    weft::http::client web;
    pieces_source source{{"abc", std::string(297, 'x')}};
    weft::http::request r = put_request();
    // (script_server reads a chunked body up to "0\r\n\r\n": this trailer line ends so.)
    r.trailers.add("X-Sum", "300");
    std::string head_kind;
    std::string answer;
    web.request_streaming(
        r, server.url("/c"), std::ref(source),
        [&](const weft::http::response& head) { head_kind = std::to_string(code_of(head.status)); },
        [&](std::string_view piece) { answer += piece; });
    EXPECT_EQ(head_kind, "200");
    EXPECT_EQ(answer, "got");
    ASSERT_EQ(server.requests().size(), 1u);
    EXPECT_EQ(server.requests()[0].field("Transfer-Encoding"), "chunked");
    EXPECT_EQ(server.requests()[0].field("Content-Length"), "");
    EXPECT_EQ(server.requests()[0].body,
              "3\r\nabc\r\n129\r\n" + std::string(297, 'x') + "\r\n0\r\nX-Sum: 300\r\n\r\n");
    web.close();
    server.close();
  });
}

TEST(HttpClientUpload, AnEmptyPieceEndsTheBodyAsAFileReadAtItsEndDoes) {
  run_clean([] {
    script_server server([](weft::tcp::stream& s, const received& r) { s.write_all(ok(r.body)); });
    weft::http::client web;
    pieces_source source{{"abc", "", "never sent"}};
    EXPECT_EQ(web.request(put_request(), server.url("/e"), std::ref(source)).body,
              "3\r\nabc\r\n0\r\n\r\n");
    EXPECT_EQ(source.calls, 2);
    web.close();
    server.close();
  });
}

TEST(HttpClientUpload, ASourceOffItsContentLengthIsALengthErrorAndNothingWhole) {
  run_clean([] {
    script_server server([](weft::tcp::stream& s, const received& r) { s.write_all(ok(r.body)); });
    weft::http::client web;
    pieces_source more{{"abc", "def"}};
    try {
      web.request(put_request("5"), server.url("/more"), std::ref(more));
      ADD_FAILURE() << "a source giving 6 bytes of 5 was accepted";
    } catch (const std::length_error& failure) {
      EXPECT_NE(std::string(failure.what())
                    .find("gave more than the request's Content-Length of "
                          "5 bytes"),
                std::string::npos)
          << failure.what();
    }
    pieces_source fewer{{"abc"}};
    try {
      web.request(put_request("5"), server.url("/fewer"), std::ref(fewer));
      ADD_FAILURE() << "a source giving 3 bytes of 5 was accepted";
    } catch (const std::length_error& failure) {
      EXPECT_NE(std::string(failure.what())
                    .find("ended after 3 bytes, short of the request's "
                          "Content-Length of 5 bytes"),
                std::string::npos)
          << failure.what();
    }
    // Both connections were discarded: the server never read a whole request on them.
    EXPECT_EQ(web.stats().connections_closed, 2u);
    EXPECT_EQ(web.get(server.url("/after")).status, weft::http::status::ok);
    ASSERT_EQ(server.requests().size(), 1u);
    EXPECT_EQ(server.requests()[0].target, "/after");
    web.close();
    server.close();
  });
}

TEST(HttpClientUpload, ASourceThatThrowsEndsTheCallAndThePoolStaysSound) {
  run_clean([] {
    script_server server([](weft::tcp::stream& s, const received& r) { s.write_all(ok(r.body)); });
    weft::http::client web;
    int calls = 0;
    const weft::http::body_source failing = [&]() -> std::optional<std::string_view> {
      if (++calls == 1) {
        return std::string_view("first");
      }
      throw std::runtime_error("the file went away");
    };
    EXPECT_THROW(web.request(put_request(), server.url("/x"), failing), std::runtime_error);
    EXPECT_EQ(web.stats().active_connections, 0u);
    EXPECT_EQ(web.stats().idle_connections, 0u);
    EXPECT_EQ(web.stats().connections_closed, 1u);
    EXPECT_EQ(web.get(server.url("/next")).body, "");
    EXPECT_EQ(web.stats().connections_opened, 2u);
    web.close();
    server.close();
  });
}

TEST(HttpClientUpload, MisusesAreRefusedByName) {
  run_clean([] {
    script_server server([](weft::tcp::stream& s, const received& r) { s.write_all(ok(r.body)); });
    weft::http::client web;
    pieces_source source{{"x"}};
    weft::http::request both = put_request();
    both.body = "inline";
    try {
      web.request(both, server.url("/both"), std::ref(source));
      ADD_FAILURE() << "a body and a source were accepted";
    } catch (const std::invalid_argument& failure) {
      EXPECT_NE(std::string(failure.what()).find("has a body of 6 bytes and a body_source"),
                std::string::npos)
          << failure.what();
    }
    weft::http::request old = put_request();
    old.version_minor = 0;
    try {
      web.request(old, server.url("/old"), std::ref(source));
      ADD_FAILURE() << "HTTP/1.0 without a Content-Length was accepted";
    } catch (const std::invalid_argument& failure) {
      EXPECT_NE(std::string(failure.what()).find("needs a Content-Length"), std::string::npos)
          << failure.what();
    }
    try {
      web.request(put_request("12x"), server.url("/bad"), std::ref(source));
      ADD_FAILURE() << "Content-Length 12x was accepted";
    } catch (const std::invalid_argument& failure) {
      EXPECT_NE(std::string(failure.what()).find("'12x' is not one decimal number"),
                std::string::npos)
          << failure.what();
    }
    EXPECT_EQ(source.calls, 0);
    EXPECT_TRUE(server.requests().empty());
    web.close();
    server.close();
  });
}

TEST(HttpClientUpload, ARedirectThatWouldSendTheBodyAgainIsTheAnswer) {
  run_clean([] {
    script_server server([](weft::tcp::stream& s, const received& r) {
      if (r.target == "/keep") {
        s.write_all(
            "HTTP/1.1 307 Temporary Redirect\r\nLocation: /kept\r\nContent-Length: 0\r\n\r\n");
      } else if (r.target == "/see") {
        s.write_all("HTTP/1.1 303 See Other\r\nLocation: /seen\r\nContent-Length: 0\r\n\r\n");
      } else {
        s.write_all(ok(r.method + " " + r.target + " " + r.body));
      }
    });
    weft::http::client web({.max_redirects = 3});
    pieces_source once{{"data"}};
    weft::http::request post;
    post.method = weft::http::method::post;
    // 307 keeps the method and the body, which the source cannot give again: returned as is.
    const weft::http::response kept = web.request(post, server.url("/keep"), std::ref(once));
    EXPECT_EQ(kept.status, weft::http::status::temporary_redirect);
    EXPECT_EQ(kept.headers.get("Location"), "/kept");
    // 303 turns it into a GET without a body: followed.
    pieces_source again{{"data"}};
    const weft::http::response seen = web.request(post, server.url("/see"), std::ref(again));
    EXPECT_EQ(seen.body, "GET /seen ");
    ASSERT_EQ(server.requests().size(), 3u);
    EXPECT_EQ(server.requests()[0].body, "4\r\ndata\r\n0\r\n\r\n");
    EXPECT_EQ(server.requests()[2].field("Transfer-Encoding"), "");
    EXPECT_EQ(web.stats().redirects, 1u);
    web.close();
    server.close();
  });
}

TEST(HttpClientUpload, AReusedConnectionTheServerClosedIsNotUsedForAStreamedBody) {
  run_clean([] {
    // The first answer keeps the connection open, then the server closes it unasked.
    weft::event closed;
    script_server server([&](weft::tcp::stream& s, const received& r) {
      s.write_all(ok(r.target));
      if (r.target == "/first") {
        s.close();
        closed.set();
      }
    });
    weft::http::client web;
    EXPECT_EQ(web.get(server.url("/first")).body, "/first");
    closed.wait(weft::timeout(5s));
    // A PUT may be sent twice, but its streamed body cannot: the connection is checked before
    // the body is taken from the source, and a fresh one carries it.
    pieces_source source{{"payload"}};
    EXPECT_EQ(web.request(put_request(), server.url("/put"), std::ref(source)).body, "/put");
    EXPECT_EQ(source.calls, 2);
    EXPECT_EQ(web.stats().retries, 0u);
    EXPECT_EQ(web.stats().connections_opened, 2u);
    web.close();
    server.close();
  });
}

TEST(HttpClientUpload, AServerThatAnswersBeforeTheBodyEndsGivesItsAnswer) {
  // Two early answers from weft's server while the client still writes: its own 413 for a
  // Content-Length past limits.max_body_size (answered at the head, the connection closing),
  // and a handler's 401 given without reading the body. The client sees each answer as it
  // writes (RFC 9112 9.5), stops sending the body, and the answer is the call's response; the
  // connection, its request cut short, is not kept.
  constexpr std::uint64_t total = 32u << 20;
  weft::http::server_options roomy = http_test::local_http();
  roomy.limits.max_body_size = total;
  const auto refuse = [](http_test::exchange& ex) {
    ex.respond(weft::http::status::unauthorized, "who are you\n");
  };
  http_test::running_http limited(http_test::local_http(), refuse);
  http_test::running_http handler(roomy, refuse);
  run_clean([&] {
    weft::http::client web;
    const std::string piece(64 << 10, 'u');
    for (const auto& [port, expected] :
         {std::pair{limited.port(), "Content-Length 33554432 is larger than the limit 1048576"},
          std::pair{handler.port(), "who are you"}}) {
      std::uint64_t given = 0;
      const weft::http::body_source source = http_test::repeated_piece(piece, total, given);
      const std::string url = http_test::url(port, "/up");
      const weft::http::response r = web.request(put_request(std::to_string(total)), url, source);
      EXPECT_EQ(code_of(r.status), port == limited.port() ? 413 : 401);
      EXPECT_NE(r.body.find(expected), std::string::npos) << r.body;
      EXPECT_LT(given, total);                      // the writes stopped when the server did
      EXPECT_EQ(web.stats().idle_connections, 0u);  // a request cut short is not reused
    }
    EXPECT_EQ(web.stats().connections_opened, 2u);
    web.close();
  });
}

TEST(HttpClientUpload, AServerThatAnswersAsItReadsGetsTheWholeBody) {
  // A 200 whose head comes before the server reads the body, on a connection it keeps: the
  // client pauses its writing to read the head, then sends the rest, streamed or buffered.
  constexpr std::uint64_t total = 4u << 20;
  weft::http::server_options roomy = http_test::local_http();
  roomy.limits.max_body_size = total;
  http_test::running_http server(roomy, [](http_test::exchange& ex) {
    weft::http::response head;
    head.status = weft::http::status::ok;
    auto body = ex.start_response(std::move(head));
    body.write("started\n");
    std::uint64_t got = 0;
    while (auto piece = ex.read_body_chunk()) {
      got += piece->size();
    }
    body.write("got " + std::to_string(got) + "\n");
    body.finish();
  });
  run_clean([&] {
    weft::http::client web;
    const std::string url = http_test::url(server.port(), "/duplex");
    const std::string piece(64 << 10, 'u');
    std::uint64_t given = 0;
    const weft::http::body_source source = http_test::repeated_piece(piece, total, given);
    EXPECT_EQ(web.request(put_request(std::to_string(total)), url, source).body,
              "started\ngot 4194304\n");
    EXPECT_EQ(given, total);
    weft::http::request buffered = put_request();
    buffered.body.assign(total, 'b');
    EXPECT_EQ(web.request(std::move(buffered), url).body, "started\ngot 4194304\n");
    EXPECT_EQ(web.stats().connections_opened, 1u);  // kept across both
    EXPECT_EQ(web.stats().idle_connections, 1u);
    web.close();
  });
}

}  // namespace

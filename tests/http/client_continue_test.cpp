// weft::http::client with "Expect: 100-continue" (RFC 9110 10.1.1): the body waits for the
// server's 100 Continue; a final answer before it means the body is never sent (nor taken from
// a body_source); a server that ignores the expectation gets the body after
// expect_continue_timeout; a 417 sends the request again without the field; a redirect before
// the body is followed with it. Against weft's server, a scripted one and (in
// client_nginx_test.cpp) nginx.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "http/client_support.hpp"
#include "http/server_support.hpp"

namespace {

using namespace std::chrono_literals;
using http_client_test::ok;
using http_client_test::received;
using http_client_test::script_server;
using weft_test::run_clean;

// A body that would arrive only after expect_continue_timeout when the client did not wait
// for the 100 Continue: with the call's own limit far below it, waiting for the timeout
// instead of the 100 fails the test with a timeout_error rather than passing slowly.
weft::http::client_options waits_for_continue() {
  weft::http::client_options options;
  options.expect_continue_timeout = 60s;
  options.request_timeout = 10s;
  return options;
}

weft::http::request expecting_put(std::string_view content_length = {}) {
  weft::http::request r;
  r.method = weft::http::method::put;
  r.headers.add("Expect", "100-continue");
  if (!content_length.empty()) {
    r.headers.add("Content-Length", content_length);
  }
  return r;
}

// Echoes "<Expect field> <body>" after reading the body; answers 401 unread to /refuse.
void echo_or_refuse(http_test::exchange& ex) {
  const std::string expect(ex.request().headers.get("Expect").value_or("-"));
  if (ex.request().target == "/refuse") {
    ex.respond(weft::http::status::unauthorized, "who are you\n");
    return;
  }
  ex.respond(weft::http::status::ok, expect + " " + ex.read_body());
}

TEST(HttpClientContinue, TheBodyFollowsTheServersHundredContinue) {
  http_test::running_http server(http_test::local_http(), echo_or_refuse);
  run_clean([&] {
    weft::http::client web(waits_for_continue());
    // Streamed, chunked and sized, and buffered.
    std::uint64_t given = 0;
    const std::string piece(16 << 10, 's');
    const weft::http::body_source sized = http_test::repeated_piece(piece, 100000, given);
    const weft::http::response a =
        web.request(expecting_put("100000"), http_test::url(server.port(), "/up"), sized);
    EXPECT_EQ(a.status, weft::http::status::ok);
    EXPECT_EQ(a.body, "100-continue " + std::string(100000, 's'));
    std::uint64_t given_chunked = 0;
    const weft::http::body_source chunked = http_test::repeated_piece(piece, 40000, given_chunked);
    const weft::http::response b =
        web.request(expecting_put(), http_test::url(server.port(), "/up"), chunked);
    EXPECT_EQ(b.body, "100-continue " + std::string(40000, 's'));
    weft::http::request buffered = expecting_put();
    buffered.body = "held whole";
    const weft::http::response c = web.request(buffered, http_test::url(server.port(), "/up"));
    EXPECT_EQ(c.body, "100-continue held whole");
    // Each exchange ended in step: one connection carried all three.
    EXPECT_EQ(web.stats().connections_opened, 1u);
    EXPECT_EQ(web.stats().idle_connections, 1u);
    web.close();
  });
}

TEST(HttpClientContinue, AnAnswerBeforeTheContinueMeansTheBodyIsNeverSent) {
  weft::http::server_options options = http_test::local_http();
  options.limits.max_body_size = 4096;
  http_test::running_http server(options, echo_or_refuse);
  run_clean([&] {
    weft::http::client web(waits_for_continue());
    int calls = 0;
    const weft::http::body_source counted = [&calls]() -> std::optional<std::string_view> {
      ++calls;
      return std::nullopt;
    };
    // A handler's answer without reading the body, and the server's own 413 at the head.
    const weft::http::response refused =
        web.request(expecting_put("4000"), http_test::url(server.port(), "/refuse"), counted);
    EXPECT_EQ(refused.status, weft::http::status::unauthorized);
    EXPECT_EQ(refused.body, "who are you\n");
    const weft::http::response large =
        web.request(expecting_put("1000000"), http_test::url(server.port(), "/up"), counted);
    EXPECT_EQ(code_of(large.status), 413);
    EXPECT_EQ(calls, 0);  // nothing was taken from the source
    weft::http::request buffered = expecting_put();
    buffered.body = std::string(8192, 'b');
    EXPECT_EQ(code_of(web.request(buffered, http_test::url(server.port(), "/up")).status), 413);
    // The server may still wait for a withheld body: no such connection is kept.
    EXPECT_EQ(web.stats().idle_connections, 0u);
    EXPECT_EQ(web.stats().connections_opened, 3u);
    EXPECT_EQ(web.get(http_test::url(server.port(), "/up")).body, "- ");
    web.close();
  });
}

TEST(HttpClientContinue, AServerThatIgnoresTheExpectationGetsTheBodyAfterTheTimeout) {
  run_clean([] {
    // The scripted server reads whole requests and never says 100 Continue.
    script_server server([](weft::tcp::stream& s, const received& r) { s.write_all(ok(r.body)); });
    weft::http::client web({.expect_continue_timeout = 50ms});
    weft::http::request buffered = expecting_put();
    buffered.body = "buffered";
    EXPECT_EQ(web.request(buffered, server.url("/a")).body, "buffered");
    int calls = 0;
    const weft::http::body_source once = [&calls]() -> std::optional<std::string_view> {
      return ++calls == 1 ? std::optional<std::string_view>("streamed") : std::nullopt;
    };
    EXPECT_EQ(web.request(expecting_put("8"), server.url("/b"), once).body, "streamed");
    ASSERT_EQ(server.requests().size(), 2u);
    EXPECT_EQ(server.requests()[0].field("Expect"), "100-continue");
    EXPECT_EQ(server.requests()[1].field("Expect"), "100-continue");
    EXPECT_EQ(web.stats().connections_opened, 1u);  // both complete: the connection was kept
    web.close();
    server.close();
  });
}

TEST(HttpClientContinue, TheCallsLimitStillBoundsTheWaitForTheContinue) {
  run_clean([] {
    // The scripted server waits for a body that waits for its 100 Continue.
    script_server server([](weft::tcp::stream& s, const received& r) { s.write_all(ok(r.body)); });
    weft::http::client web({.request_timeout = 200ms, .expect_continue_timeout = 60s});
    weft::http::request buffered = expecting_put();
    buffered.body = "never";
    try {
      web.request(buffered, server.url("/slow"));
      ADD_FAILURE() << "no timeout_error";
    } catch (const weft::timeout_error& e) {
      EXPECT_NE(std::string(e.what()).find("waiting for the response head"), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("request_timeout 200 ms"), std::string::npos)
          << e.what();
    }
    EXPECT_EQ(web.stats().active_connections, 0u);
    web.close();
    server.close();
  });
}

TEST(HttpClientContinue, ExpectationFailedSendsTheRequestAgainWithoutTheField) {
  http_test::running_http server(http_test::local_http(), [](http_test::exchange& ex) {
    if (ex.request().expects_continue()) {
      ex.respond(weft::http::status::expectation_failed, "no expectations here\n");
      return;
    }
    ex.respond(weft::http::status::ok, "got " + ex.read_body());
  });
  run_clean([&] {
    weft::http::client web(waits_for_continue());
    int calls = 0;
    const weft::http::body_source once = [&calls]() -> std::optional<std::string_view> {
      return ++calls == 1 ? std::optional<std::string_view>("streamed") : std::nullopt;
    };
    // Streamed: the source, never taken by the first try, gives the body to the second.
    EXPECT_EQ(web.request(expecting_put(), http_test::url(server.port(), "/x"), once).body,
              "got streamed");
    EXPECT_EQ(calls, 2);
    weft::http::request buffered = expecting_put();
    buffered.body = "buffered";
    // Streaming the response: its callbacks see the final answer only, never the 417.
    int heads = 0;
    std::string body;
    web.request_streaming(
        buffered, http_test::url(server.port(), "/y"),
        [&](const weft::http::response& head) {
          ++heads;
          EXPECT_EQ(head.status, weft::http::status::ok);
        },
        [&](std::string_view piece) { body.append(piece); });
    EXPECT_EQ(heads, 1);
    EXPECT_EQ(body, "got buffered");
    EXPECT_EQ(web.stats().requests, 4u);  // two tries each
    EXPECT_EQ(web.stats().responses, 2u);
    EXPECT_EQ(web.stats().redirects, 0u);
    web.close();
  });
}

TEST(HttpClientContinue, ARedirectBeforeTheBodyIsFollowedWithTheBodyNeverTaken) {
  http_test::running_http server(http_test::local_http(), [](http_test::exchange& ex) {
    if (ex.request().target == "/old") {
      weft::http::headers fields;
      fields.add("Location", "/new");
      ex.respond(weft::http::status::temporary_redirect, fields, "");
      return;
    }
    ex.respond(weft::http::status::ok,
               std::string(ex.request().target) + " " + std::string(ex.read_body()));
  });
  run_clean([&] {
    weft::http::client_options options = waits_for_continue();
    options.max_redirects = 2;
    weft::http::client web(options);
    int calls = 0;
    const weft::http::body_source once = [&calls]() -> std::optional<std::string_view> {
      return ++calls == 1 ? std::optional<std::string_view>("payload") : std::nullopt;
    };
    // Without the expectation the 307 would be returned (client_upload_test.cpp): the body
    // would have gone with the first try.
    const weft::http::response r =
        web.request(expecting_put("7"), http_test::url(server.port(), "/old"), once);
    EXPECT_EQ(r.body, "/new payload");
    EXPECT_EQ(calls, 2);
    EXPECT_EQ(web.stats().redirects, 1u);
    web.close();
  });
}

}  // namespace

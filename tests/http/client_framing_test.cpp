// weft::http::client: how response bodies are framed and read (chunked, close-delimited,
// none for HEAD, 204 and 304), interim 1xx responses, request bodies, and streaming.
#include <string>
#include <vector>

#include "http/client_support.hpp"

namespace {

using namespace std::chrono_literals;
using http_client_test::ok;
using http_client_test::received;
using http_client_test::script_server;
using weft_test::run_clean;

TEST(HttpClientFraming, ChunkedResponseInPiecesWithTrailersKeepsTheConnection) {
  run_clean([] {
    script_server server([](weft::tcp::stream& s, const received&) {
      s.write_all("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel");
      weft::yield();
      s.write_all("lo\r\n6;ext=1\r\n world\r\n0\r\nX-Check: 7\r\n\r\n");
    });
    weft::http::client web;
    for (int i = 0; i < 2; ++i) {
      weft::http::response r = web.get(server.url("/"));
      EXPECT_EQ(r.body, "hello world");
      EXPECT_EQ(r.trailers.get("X-Check"), "7");
    }
    EXPECT_EQ(web.stats().connections_opened, 1u);
    web.close();
    server.close();
  });
}

TEST(HttpClientFraming, CloseDelimitedBodyOfAnHttp10Server) {
  run_clean([] {
    script_server server([](weft::tcp::stream& s, const received&) {
      s.write_all("HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil ");
      weft::yield();
      s.write_all("the end");
      s.close();
    });
    weft::http::client web;
    weft::http::response r = web.get(server.url("/"));
    EXPECT_EQ(r.version_minor, 0);
    EXPECT_EQ(r.body, "until the end");
    EXPECT_EQ(web.stats().idle_connections, 0u);
    EXPECT_EQ(web.get(server.url("/")).body, "until the end");
    EXPECT_EQ(web.stats().connections_opened, 2u);
    web.close();
    server.close();
  });
}

TEST(HttpClientFraming, Http10KeepAliveResponseIsPooled) {
  run_clean([] {
    script_server server([](weft::tcp::stream& s, const received&) {
      s.write_all("HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok");
    });
    weft::http::client web;
    web.get(server.url("/"));
    web.get(server.url("/"));
    EXPECT_EQ(web.stats().connections_opened, 1u);
    web.close();
    server.close();
  });
}

TEST(HttpClientFraming, InterimResponsesAreSkipped) {
  run_clean([] {
    script_server server([](weft::tcp::stream& s, const received&) {
      s.write_all(
          "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n");
      weft::yield();
      s.write_all(ok("final"));
    });
    weft::http::client web;
    weft::http::response r = web.get(server.url("/"));
    EXPECT_EQ(r.status, weft::http::status::ok);
    EXPECT_EQ(r.body, "final");
    EXPECT_FALSE(r.headers.contains("Link"));
    web.get(server.url("/"));
    EXPECT_EQ(web.stats().connections_opened, 1u);
    web.close();
    server.close();
  });
}

TEST(HttpClientFraming, SwitchingProtocolsIsAnError) {
  run_clean([] {
    script_server server([](weft::tcp::stream& s, const received&) {
      s.write_all("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n");
    });
    weft::http::client web;
    try {
      web.get(server.url("/ws"));
      ADD_FAILURE() << "101 was accepted";
    } catch (const weft::http::error& failure) {
      EXPECT_EQ(failure.kind(), weft::http::error_kind::unexpected_response);
      EXPECT_EQ(failure.url(), server.url("/ws"));
    }
    EXPECT_EQ(web.stats().idle_connections, 0u);
    web.close();
    server.close();
  });
}

TEST(HttpClientFraming, HeadAnd204And304HaveNoBody) {
  run_clean([] {
    script_server server([](weft::tcp::stream& s, const received& r) {
      if (r.method == "HEAD") {
        s.write_all("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n");
      } else if (r.target == "/204") {
        s.write_all("HTTP/1.1 204 No Content\r\n\r\n");
      } else if (r.target == "/304") {
        s.write_all("HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n");
      } else {
        s.write_all(ok("after"));
      }
    });
    weft::http::client web;
    weft::http::response head = web.head(server.url("/"));
    EXPECT_EQ(head.headers.get("Content-Length"), "1000");
    EXPECT_TRUE(head.body.empty());
    EXPECT_EQ(web.get(server.url("/204")).status, weft::http::status::no_content);
    EXPECT_EQ(web.get(server.url("/304")).status, weft::http::status::not_modified);
    EXPECT_EQ(web.get(server.url("/x")).body, "after");  // the framing stayed in step
    EXPECT_EQ(web.stats().connections_opened, 1u);
    web.close();
    server.close();
  });
}

TEST(HttpClientFraming, RequestBodyWithContentLength) {
  run_clean([] {
    script_server server([](weft::tcp::stream& s, const received& r) { s.write_all(ok(r.body)); });
    weft::http::client web;
    const std::string big(200000, 'b');
    weft::http::response r = web.post(server.url("/up"), big, "application/octet-stream");
    EXPECT_EQ(r.body.size(), big.size());
    ASSERT_EQ(server.requests().size(), 1u);
    EXPECT_EQ(server.requests()[0].field("Content-Length"), "200000");
    EXPECT_EQ(server.requests()[0].field("Content-Type"), "application/octet-stream");
    web.close();
    server.close();
  });
}

TEST(HttpClientFraming, ChunkedRequestBodyWhenTheCallerAsks) {
  run_clean([] {
    script_server server([](weft::tcp::stream& s, const received&) { s.write_all(ok("got")); });
    weft::http::client web;
    weft::http::request put;
    put.method = weft::http::method::put;
    put.headers.add("Transfer-Encoding", "chunked");
    put.body = "hello world";
    EXPECT_EQ(web.request(put, server.url("/c")).body, "got");
    ASSERT_EQ(server.requests().size(), 1u);
    EXPECT_EQ(server.requests()[0].method, "PUT");
    EXPECT_EQ(server.requests()[0].body, "b\r\nhello world\r\n0\r\n\r\n");
    EXPECT_EQ(server.requests()[0].field("Content-Length"), "");
    web.close();
    server.close();
  });
}

TEST(HttpClientFraming, StreamingDeliversPiecesBeforeTheBodyEnds) {
  run_clean([] {
    weft::event first_piece_seen;
    script_server server([&](weft::tcp::stream& s, const received&) {
      s.write_all("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Kind: stream\r\n\r\n");
      s.write_all("5\r\nfirst\r\n");
      // The second chunk is sent only once the client has handed on the first.
      first_piece_seen.wait(weft::timeout(5s));
      s.write_all("6\r\nsecond\r\n0\r\n\r\n");
    });
    weft::http::client web;
    std::string kind;
    std::vector<std::string> pieces;
    web.request_streaming(
        weft::http::request{}, server.url("/s"),
        [&](const weft::http::response& head) {
          kind = std::string(head.headers.get("X-Kind").value_or(""));
          EXPECT_TRUE(head.body.empty());
        },
        [&](std::string_view piece) {
          pieces.emplace_back(piece);
          first_piece_seen.set();
        });
    EXPECT_EQ(kind, "stream");
    std::string joined;
    for (const auto& piece : pieces) {
      joined += piece;
    }
    EXPECT_EQ(joined, "firstsecond");
    EXPECT_GE(pieces.size(), 2u);
    EXPECT_EQ(web.stats().idle_connections, 1u);
    web.close();
    server.close();
  });
}

TEST(HttpClientFraming, StreamingCallbackExceptionDropsTheConnection) {
  run_clean([] {
    script_server server([](weft::tcp::stream& s, const received&) { s.write_all(ok("abc")); });
    weft::http::client web;
    EXPECT_THROW(web.request_streaming(
                     weft::http::request{}, server.url("/"), [](const weft::http::response&) {},
                     [](std::string_view) { throw std::runtime_error("consumer failed"); }),
                 std::runtime_error);
    EXPECT_EQ(web.stats().idle_connections, 0u);
    EXPECT_EQ(web.stats().active_connections, 0u);
    EXPECT_EQ(web.stats().connections_closed, 1u);
    web.close();
    server.close();
  });
}

}  // namespace

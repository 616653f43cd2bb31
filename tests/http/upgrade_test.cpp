// Both sides of an HTTP/1.1 protocol switch (RFC 9110 7.8) with a protocol the handler speaks
// itself: exchange::switch_protocols on the server, client::upgrade on the client, over plain TCP
// and TLS. The bytes each side sent right behind its head reach the other first; each direction
// ends on its own (shutdown_write); a refusal is an ordinary response on a reused connection;
// and what each side refuses, by name.
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>

#include "http/server_support.hpp"
#include "net/tls_support.hpp"
#include "test_support.hpp"
#include "weft/http/client.hpp"

namespace {

using namespace http_test;
using namespace std::chrono_literals;
using weft_test::run_clean;

std::string pattern(std::size_t size, int seed) {
  std::string bytes(size, '\0');
  for (std::size_t i = 0; i < size; ++i) {
    bytes[i] = static_cast<char>('a' + (i * 7 + i / 251 + static_cast<std::size_t>(seed)) % 26);
  }
  return bytes;
}

// The server's side of "echo/1": a greeting written in the same write as the 101, then every
// byte echoed until the client ends its direction, then "bye: N bytes" and the end.
void echo_protocol(exchange& ex) {
  if (ex.request().headers.get("Upgrade") != "echo/1") {
    weft::http::response refusal;
    refusal.status = status::upgrade_required;
    refusal.headers.add("Upgrade", "echo/1");
    refusal.body = "this resource speaks echo/1\n";
    ex.respond(std::move(refusal));
    return;
  }
  weft::http::response head;
  head.headers.add("Upgrade", "echo/1");
  head.headers.add("X-Session", "7");
  weft::net::connection& c = ex.switch_protocols(head);
  c.send("hello\n");
  weft::net::message m;
  while (c.receive(m)) {
    c.send(m.data);
  }
  // The client's end of its direction ended the receiving; the handler's return closes the
  // connection, which the client reads as the end of the server's direction.
}

weft::http::router echo_routes() {
  weft::http::router routes;
  routes.get("/plain", [](exchange& ex) { ex.respond(status::ok, "plain\n"); });
  routes.get("/echo", echo_protocol);
  return routes;
}

weft::http::request upgrade_request(std::string protocol = "echo/1") {
  weft::http::request r;
  r.method = weft::http::method::get;
  r.headers.add("Upgrade", protocol);
  return r;
}

// Reads from c until `expected` bytes came (or the stream ended).
std::string read_bytes(weft::http::upgraded_connection& c, std::size_t expected) {
  std::string got;
  while (got.size() < expected) {
    auto piece = c.read(weft::timeout(10s));
    if (!piece) {
      break;
    }
    got.append(*piece);
  }
  return got;
}

TEST(HttpUpgrade, ClientAndServerSwitchAndTalkBothWays) {
  running_http server(local_http(), echo_routes());
  run_clean([&] {
    weft::http::client web;
    EXPECT_EQ(web.get(url(server.port(), "/plain")).body, "plain\n");
    weft::http::upgrade_result up = web.upgrade(upgrade_request(), url(server.port(), "/echo"));
    ASSERT_TRUE(up.switched());
    EXPECT_EQ(up.response.status, status::switching_protocols);
    EXPECT_EQ(up.response.reason, "Switching Protocols");
    EXPECT_EQ(up.response.headers.get("Upgrade"), "echo/1");
    EXPECT_EQ(up.response.headers.get("X-Session"), "7");
    EXPECT_TRUE(up.response.headers.has_token("Connection", "upgrade"));
    weft::http::upgraded_connection& c = *up.connection;
    EXPECT_EQ(read_bytes(c, 6), "hello\n");
    // A megabyte each way at once: the server echoes while the client still writes, so the
    // client reads in a second coroutine (one reader and one writer at a time are allowed).
    const std::string sent = pattern(1 << 20, 1);
    auto reader = weft::spawn([&] { return read_bytes(c, sent.size()); });
    for (std::size_t at = 0; at < sent.size(); at += 40000) {
      c.write(std::string_view(sent).substr(at, 40000), weft::timeout(10s));
    }
    const std::string echoed = reader.await();
    EXPECT_EQ(echoed.size(), sent.size());
    EXPECT_TRUE(echoed == sent);
    // The client ends its direction; the server's receive ends, its handler returns, and the
    // connection closes: the client reads the end.
    c.shutdown_write(weft::timeout(5s));
    EXPECT_THROW(c.write("late"), weft::io_error);
    EXPECT_FALSE(c.read(weft::timeout(10s)).has_value());
    c.close();
    EXPECT_FALSE(c.is_open());
    EXPECT_FALSE(c.read().has_value());
    const weft::http::client_stats stats = web.stats();
    EXPECT_EQ(stats.upgrades, 1u);
    EXPECT_EQ(stats.requests, 2u);
    EXPECT_EQ(stats.responses, 2u);
    // The upgraded connection left the pool: the plain request's one went back idle and was
    // reused for the upgrade, so nothing is pooled now.
    EXPECT_EQ(stats.connections_opened, 1u);
    EXPECT_EQ(stats.idle_connections, 0u);
    EXPECT_EQ(stats.active_connections, 0u);
    web.close();
  });
  const auto stats = server.server().stats();
  EXPECT_EQ(stats.total.requests, 2u);
  EXPECT_EQ(stats.total.responses_of_class(1), 1u);
  EXPECT_EQ(stats.total.responses_of_class(2), 1u);
}

TEST(HttpUpgrade, ARefusalIsAnOrdinaryResponseAndTheConnectionIsReused) {
  running_http server(local_http(), echo_routes());
  run_clean([&] {
    weft::http::client web;
    weft::http::upgrade_result up =
        web.upgrade(upgrade_request("chat/2, other"), url(server.port(), "/echo"));
    EXPECT_FALSE(up.switched());
    EXPECT_EQ(up.response.status, status::upgrade_required);
    EXPECT_EQ(up.response.body, "this resource speaks echo/1\n");
    // Streamed, the refusal's body goes to on_body and nothing is handed over.
    std::string streamed;
    int heads = 0;
    auto none = web.upgrade_streaming(
        upgrade_request("chat/2"), url(server.port(), "/echo"),
        [&](const weft::http::response& head) {
          ++heads;
          EXPECT_EQ(head.status, status::upgrade_required);
        },
        [&](std::string_view piece) { streamed += piece; });
    EXPECT_EQ(none, nullptr);
    EXPECT_EQ(heads, 1);
    EXPECT_EQ(streamed, "this resource speaks echo/1\n");
    const weft::http::client_stats stats = web.stats();
    EXPECT_EQ(stats.upgrades, 0u);
    EXPECT_EQ(stats.connections_opened, 1u);
    EXPECT_EQ(stats.connections_reused, 1u);
    EXPECT_EQ(stats.idle_connections, 1u);
    web.close();
  });
}

TEST(HttpUpgrade, TheServersFirstBytesAndTheClientsEarlyBytesArriveFirst) {
  // A raw client writes the upgrade request and its first protocol bytes in one write, before
  // any 101: the handler's first receive has them.
  weft::http::router routes;
  routes.get("/early", [](exchange& ex) {
    weft::http::response head;
    head.headers.add("Upgrade", "echo/1");
    weft::net::connection& c = ex.switch_protocols(head);
    weft::net::message m;
    std::string got;
    while (got.size() < 5 && c.receive(m)) {
      got += m.data;
    }
    c.send("got " + got);
  });
  running_http server(local_http(), std::move(routes));
  client raw(server.port());
  raw.send("GET /early HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\nUpgrade: echo/1\r\n\r\nearly");
  const std::string rest = raw.rest();
  EXPECT_EQ(rest,
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo/1\r\nConnection: Upgrade\r\n\r\n"
            "got early");
}

TEST(HttpUpgrade, TheServerRefusesSwitchesItCannotMakeByName) {
  std::vector<std::string> errors;
  std::mutex mutex;
  weft::http::router routes;
  routes.get("/misuse", [&](exchange& ex) {
    const auto attempt = [&](const weft::http::response& head) {
      try {
        ex.switch_protocols(head);
        return std::string("switched");
      } catch (const std::invalid_argument& e) {
        return std::string("invalid_argument: ") + e.what();
      } catch (const std::logic_error& e) {
        return std::string("logic_error: ") + e.what();
      }
    };
    weft::http::response none;  // no Upgrade field
    weft::http::response other;
    other.headers.add("Upgrade", "h2c");
    weft::http::response framed;
    framed.headers.add("Upgrade", "echo/1");
    framed.headers.add("Content-Length", "0");
    weft::http::response injected;
    injected.headers.add("Upgrade", "echo/1");
    injected.reason = "OK\r\nX: y";
    std::lock_guard lock(mutex);
    for (const auto* head : {&none, &other, &framed, &injected}) {
      errors.push_back(attempt(*head));
    }
    ex.respond(status::ok, "refused\n");
  });
  routes.get("/unasked", [&](exchange& ex) {
    weft::http::response head;
    head.headers.add("Upgrade", "echo/1");
    try {
      ex.switch_protocols(head);
    } catch (const std::logic_error& e) {
      std::lock_guard lock(mutex);
      errors.push_back(std::string("logic_error: ") + e.what());
    }
    ex.respond(status::ok, "not switched\n");
  });
  running_http server(local_http(), std::move(routes));
  client raw(server.port());
  raw.send("GET /misuse HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\nUpgrade: echo/1\r\n\r\n");
  EXPECT_EQ(body_of(raw.response()), "refused\n");
  raw.send("GET /unasked HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(body_of(raw.response()), "not switched\n");
  std::lock_guard lock(mutex);
  ASSERT_EQ(errors.size(), 5u);
  EXPECT_NE(errors[0].find("invalid_argument: "), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("not nothing"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("not 'h2c'"), std::string::npos) << errors[1];
  EXPECT_NE(errors[2].find("Content-Length or Transfer-Encoding"), std::string::npos) << errors[2];
  EXPECT_NE(errors[3].find("control character"), std::string::npos) << errors[3];
  EXPECT_NE(errors[4].find("logic_error: "), std::string::npos) << errors[4];
  EXPECT_NE(errors[4].find("no Upgrade field"), std::string::npos) << errors[4];
}

TEST(HttpUpgrade, TheClientRefusesAnUnofferedSwitchAndARequestWithoutUpgrade) {
  weft::http::router routes;
  routes.get("/wrong", [](exchange& ex) {
    // A server answering 101 to a protocol nobody asked for, written by hand (switch_protocols
    // would refuse it).
    ex.connection().send_raw(
        "HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: h2c\r\n\r\n");
    ex.connection().close();
  });
  running_http server(local_http(), std::move(routes));
  run_clean([&] {
    weft::http::client web;
    try {
      web.upgrade(upgrade_request(), url(server.port(), "/wrong"));
      ADD_FAILURE() << "an unoffered switch was taken";
    } catch (const weft::http::error& e) {
      EXPECT_EQ(e.kind(), weft::http::error_kind::malformed_response);
      EXPECT_NE(std::string(e.what()).find("101 Switching Protocols to 'h2c'"), std::string::npos)
          << e.what();
    }
    // request() does not switch at all.
    weft::http::request plain = upgrade_request();
    plain.headers.add("Connection", "upgrade");
    try {
      web.request(std::move(plain), url(server.port(), "/wrong"));
      ADD_FAILURE() << "request() took a 101";
    } catch (const weft::http::error& e) {
      EXPECT_EQ(e.kind(), weft::http::error_kind::unexpected_response);
    }
    weft::http::request bare;
    EXPECT_THROW(web.upgrade(std::move(bare), url(server.port(), "/wrong")), std::invalid_argument);
    EXPECT_EQ(web.stats().upgrades, 0u);
    web.close();
  });
}

TEST(HttpUpgrade, OverTlsBothDirectionsRunAtOnce) {
  auto options = local_http();
  options.tls = tls_test::server_context();
  running_http server(std::move(options), echo_routes());
  run_clean([&] {
    weft::net::tls_client_options tls;
    tls.ca_file = tls_test::certs().ca;
    weft::http::client web({.tls = weft::net::tls_context::client(tls)});
    weft::http::upgrade_result up = web.upgrade(
        upgrade_request(), "https://localhost:" + std::to_string(server.port()) + "/echo");
    ASSERT_TRUE(up.switched());
    weft::http::upgraded_connection& c = *up.connection;
    EXPECT_EQ(read_bytes(c, 6), "hello\n");
    // Four megabytes in records both ways at once: the writer waits for the socket while the
    // reader decrypts, on one TLS session.
    const std::string sent = pattern(4 << 20, 2);
    auto reader = weft::spawn([&] { return read_bytes(c, sent.size()); });
    for (std::size_t at = 0; at < sent.size(); at += 100000) {
      c.write(std::string_view(sent).substr(at, 100000), weft::timeout(10s));
    }
    const std::string echoed = reader.await();
    EXPECT_EQ(echoed.size(), sent.size());
    EXPECT_TRUE(echoed == sent);
    c.shutdown_write(weft::timeout(5s));
    EXPECT_FALSE(c.read(weft::timeout(10s)).has_value());
    web.close();
  });
}

}  // namespace

// Handler failures: an exception before the response is 500, after the head an aborted
// connection; returning without a response is 500; both logged. Unread bodies are discarded
// before the next request, or the connection closes when they are too large.
#include "http/server_support.hpp"

namespace {

using namespace http_test;

TEST(HttpServerErrors, ThrowingHandlerGets500AndTheConnectionGoesOn) {
  log_lines log;
  auto options = local_http();
  options.log = log.sink();
  running_http server(options, [](exchange& ex) {
    if (ex.request().target == "/throw") {
      throw std::runtime_error("database on fire");
    }
    if (ex.request().target == "/silent") {
      return;
    }
    ex.respond(status::ok, "fine");
  });
  client c(server.port());
  c.send("GET /throw HTTP/1.1\r\nHost: x\r\n\r\n");
  auto r = c.response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, status::internal_server_error);
  c.send("GET /silent HTTP/1.1\r\nHost: x\r\n\r\n");
  r = c.response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, status::internal_server_error);
  c.send("GET /ok HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(body_of(c.response()), "fine");
  EXPECT_TRUE(log.contains("database on fire")) << log.all();
  EXPECT_TRUE(log.contains("returned without responding")) << log.all();
  EXPECT_TRUE(log.contains("\"GET /ok HTTP/1.1\" 200 4")) << log.all();
}

TEST(HttpServerErrors, ThrowAfterTheHeadAbortsTheConnection) {
  running_http server(local_http(), [](exchange& ex) {
    auto writer = ex.start_response(weft::http::response{});
    writer.write("partial");
    throw std::runtime_error("broken mid-body");
  });
  client c(server.port());
  c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  std::string raw = c.rest();
  EXPECT_NE(raw.find("partial"), std::string::npos);
  EXPECT_EQ(raw.find("0\r\n\r\n"), std::string::npos) << raw;  // no last chunk: not complete
}

TEST(HttpServerErrors, UnreadBodyIsDiscardedBeforeTheNextRequest) {
  running_http server(
      local_http(), [](exchange& ex) { ex.respond(status::ok, "target " + ex.request().target); });
  client c(server.port());
  c.send(
      "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nxxxxx"
      "POST /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
      "GET /c HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(body_of(c.response()), "target /a");
  EXPECT_EQ(body_of(c.response()), "target /b");
  EXPECT_EQ(body_of(c.response()), "target /c");
}

TEST(HttpServerErrors, HugeUnreadBodyClosesTheConnection) {
  auto options = local_http();
  options.limits.max_body_size = 64 << 20;
  running_http server(options, [](exchange& ex) { ex.respond(status::ok, "ignored"); });
  client c(server.port());
  c.send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 33554432\r\n\r\n");
  EXPECT_EQ(body_of(c.response()), "ignored");
  // The client keeps sending; past 1 MiB the server stops keeping it, closes its side (the FIN
  // comes), and reads the rest only to drop it (a lingering close: no reset for the client).
  EXPECT_EQ(send_junk(c.fd(), 2u << 20), 0);
  EXPECT_TRUE(c.closes());
  EXPECT_EQ(send_junk(c.fd(), 1u << 20), 0);
  ::shutdown(c.fd(), SHUT_WR);
  EXPECT_TRUE(
      eventually([&] { return server.server().stats().total.net.connections == 0; }, 10000ms));
  EXPECT_EQ(pending_error(c.fd()), 0);
}

TEST(HttpServerErrors, SecondResponseIsALogicError) {
  std::atomic<bool> refused{false};
  running_http server(local_http(), [&](exchange& ex) {
    ex.respond(status::ok, "one");
    try {
      ex.respond(status::ok, "two");
    } catch (const std::logic_error&) {
      refused = true;
    }
  });
  client c(server.port());
  c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(body_of(c.response()), "one");
  EXPECT_TRUE(refused.load());
}

TEST(HttpServerErrors, AContentTypeWithAControlCharacterIsRefusedAndATabIsNot) {
  // respond() checks the content type it writes into the head: CR, LF and the other controls
  // (wherever they are, past the first 16 bytes too) would split or corrupt the head; a tab is
  // field whitespace and allowed.
  std::atomic<int> refused{0};
  running_http server(local_http(), [&](exchange& ex) {
    const std::string long_type = "application/vnd.weft.example+json; charset=utf-8";
    const std::string bad[] = {"text/plain\r\nX-Injected: 1", long_type + "\n",
                               long_type + std::string(1, '\x7f'), "text/\x01plain"};
    for (const std::string& type : bad) {
      try {
        ex.respond(status::ok, "x", type);
      } catch (const std::invalid_argument& failure) {
        if (std::string(failure.what()).find("control character") != std::string::npos) {
          ++refused;
        }
      }
    }
    ex.respond(status::ok, "tabbed", long_type + "\t; q=1");
  });
  client c(server.port());
  c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  auto r = c.response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->body, "tabbed");
  EXPECT_EQ(r->headers.get("Content-Type").value_or(""),
            "application/vnd.weft.example+json; charset=utf-8\t; q=1");
  EXPECT_EQ(refused.load(), 4);
}

TEST(HttpServerErrors, AKeptHeadNeverLetsABadContentTypeThrough) {
  // The thread keeps the heads it made (append_simple_head) and respond() checks only a content
  // type no kept head was made from. A 204's head drops its type, so a kept 204 head matches
  // any type: a bad one must still be refused there, as after a 200 with a good one.
  std::atomic<int> refused{0};
  running_http server(local_http(), [&](exchange& ex) {
    const status code = ex.request().target == "/204" ? status::no_content : status::ok;
    for (const char* type : {"text/\x01plain", "text/plain\r\nX-Injected: 1"}) {
      try {
        ex.respond(code, "", type);
      } catch (const std::invalid_argument& failure) {
        if (std::string(failure.what()).find("control character") != std::string::npos) {
          ++refused;
        }
      }
    }
    ex.respond(code, "", "text/plain");
  });
  client c(server.port());
  for (const char* target : {"/204", "/204", "/200", "/200"}) {
    c.send(std::string("GET ") + target + " HTTP/1.1\r\nHost: x\r\n\r\n");
    auto r = c.response();
    ASSERT_TRUE(r) << target;
    EXPECT_EQ(r->status, std::string_view(target) == "/204" ? status::no_content : status::ok)
        << target;
    EXPECT_FALSE(r->headers.contains("X-Injected")) << target;
  }
  EXPECT_EQ(refused.load(), 8);
}

TEST(HttpServerErrors, RespondWithFieldsWritesThemAndRefusesTheFramingOnes) {
  // respond(status, fields, body): the caller's fields in their order, the server's Server and
  // Date only where the fields have none, Content-Length from the body; a field the server
  // frames with is refused by name, and nothing of the refused answer reaches the wire.
  std::atomic<int> refused{0};
  running_http server(local_http(), [&](exchange& ex) {
    for (const char* name : {"Content-Length", "transfer-encoding", "CONNECTION"}) {
      try {
        ex.respond(status::ok, weft::http::headers{{"X-A", "1"}, {name, "5"}}, "hello");
      } catch (const std::invalid_argument& failure) {
        if (std::string(failure.what()).find(std::string("'") + name + "'") != std::string::npos) {
          ++refused;
        }
      }
    }
    try {
      ex.respond(status::no_content, weft::http::headers{{"X-A", "1"}}, "body");
    } catch (const std::invalid_argument&) {
      ++refused;
    }
    if (ex.request().target == "/own") {
      ex.respond(status::created,
                 weft::http::headers{{"Server", "mine"}, {"Date", "Tue, 01 Dec 2026 00:00:00 GMT"}},
                 "made");
      return;
    }
    ex.respond(status::ok, weft::http::headers{{"Content-Type", "text/x-a"}, {"X-B", "two"}},
               "hello");
  });
  client c(server.port());
  c.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
  auto r = c.response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, status::ok);
  EXPECT_EQ(r->body, "hello");
  EXPECT_EQ(r->headers.get("Content-Type").value_or(""), "text/x-a");
  EXPECT_EQ(r->headers.get("X-B").value_or(""), "two");
  EXPECT_EQ(r->headers.get("Content-Length").value_or(""), "5");
  EXPECT_EQ(r->headers.count("X-A"), 0u);
  EXPECT_EQ(r->headers.count("Server"), 1u);
  EXPECT_EQ(r->headers.count("Date"), 1u);
  EXPECT_EQ(refused.load(), 4);
  c.send("HEAD / HTTP/1.1\r\nHost: x\r\n\r\n");
  auto head = c.response(weft::http::method::head);
  ASSERT_TRUE(head);
  EXPECT_EQ(head->headers.get("Content-Length").value_or(""), "5");
  EXPECT_EQ(head->body, "");
  c.send("GET /own HTTP/1.1\r\nHost: x\r\n\r\n");
  auto own = c.response();
  ASSERT_TRUE(own);
  EXPECT_EQ(own->status, status::created);
  EXPECT_EQ(own->body, "made");
  EXPECT_EQ(own->headers.get_all("Server"), std::vector<std::string_view>{"mine"});
  EXPECT_EQ(own->headers.get_all("Date"),
            std::vector<std::string_view>{"Tue, 01 Dec 2026 00:00:00 GMT"});
  EXPECT_EQ(refused.load(), 12);  // four refusals in each of the three calls
}

}  // namespace

// Expect: 100-continue: the 100 goes out only when the handler reads the body; a handler that
// answers without reading gets no 100 and the connection closes after its response. Any other
// expectation gets 417 without the handler (RFC 9110 10.1.1), unless the handler is asked to
// meet them (server_options::refuse_unknown_expectations).
#include <atomic>

#include "http/server_support.hpp"

namespace {

using namespace http_test;

TEST(HttpServerContinue, ContinueIsSentWhenTheHandlerReadsTheBody) {
  running_http server(local_http(),
                      [](exchange& ex) { ex.respond(status::ok, "read " + ex.read_body()); });
  client c(server.port());
  c.send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n");
  auto interim = c.response();
  ASSERT_TRUE(interim);
  EXPECT_EQ(interim->status, status::continue_);
  c.send("data");
  EXPECT_EQ(body_of(c.response()), "read data");
  EXPECT_EQ(server.server().stats().total.responses_of_class(1), 1u);
}

TEST(HttpServerContinue, HandlerThatDoesNotReadAnswersWithoutContinueAndCloses) {
  running_http server(local_http(),
                      [](exchange& ex) { ex.respond(status::forbidden, "no upload"); });
  client c(server.port());
  c.send("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n");
  auto r = c.response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, status::forbidden);
  EXPECT_EQ(r->headers.get("Connection"), "close");
  EXPECT_TRUE(c.closes());
}

TEST(HttpServerContinue, CurlWaitsForContinueAndUploads) {
  running_http server(local_http(), [](exchange& ex) {
    ex.respond(status::ok, "size " + std::to_string(ex.read_body().size()));
  });
  std::string out = run_command(
      "curl -sv -H 'Expect: 100-continue' --data-binary "
      "'0123456789' " +
      url(server.port(), "/"));
  EXPECT_NE(out.find("HTTP/1.1 100 Continue"), std::string::npos) << out;
  EXPECT_NE(out.find("size 10"), std::string::npos) << out;
}

// A handler that counts its calls and answers with the target and the body it read.
struct counting_echo {
  std::atomic<int>* calls;
  void operator()(exchange& ex) const {
    calls->fetch_add(1);
    const std::string body = ex.read_body();
    ex.respond(status::ok, ex.request().target + " " + body);
  }
};

TEST(HttpServerContinue, AnExpectationOtherThanContinueGets417WithoutTheHandler) {
  std::atomic<int> calls{0};
  log_lines log;
  auto options = local_http();
  options.log = log.sink();
  running_http server(options, counting_echo{&calls});
  client c(server.port());
  c.send(
      "GET /a HTTP/1.1\r\nHost: x\r\nExpect: x-custom=1\r\n\r\n"
      "GET /b HTTP/1.1\r\nHost: x\r\n\r\n");
  auto refused = c.response();
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, status::expectation_failed);
  EXPECT_FALSE(refused->headers.get("Connection").has_value());
  EXPECT_NE(refused->body.find("'x-custom=1' cannot be met"), std::string::npos) << refused->body;
  EXPECT_EQ(body_of(c.response()), "/b ");  // the connection goes on
  EXPECT_EQ(calls.load(), 1);
  EXPECT_TRUE(log.contains("417: the expectation 'x-custom=1' cannot be met"));
  EXPECT_EQ(server.server().stats().total.responses_of_class(4), 1u);
}

// Such a client sends its body without waiting (it awaits no 100): the body is read past and
// the next request served, whether Expect is one field, a list or repeated, in any case.
TEST(HttpServerContinue, ARefusedExpectationsBodyIsDiscardedAndTheConnectionGoesOn) {
  std::atomic<int> calls{0};
  running_http server(local_http(), counting_echo{&calls});
  client c(server.port());
  for (const std::string expect :
       {"Expect: Foo\r\n", "Expect: , bar\r\n", "Expect: \r\nExpect: baz\r\n", "EXPECT: 1\r\n"}) {
    SCOPED_TRACE(expect);
    c.send("POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n" + expect +
           "\r\nhelloPOST /next HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok");
    auto refused = c.response(weft::http::method::post);
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->status, status::expectation_failed);
    EXPECT_EQ(body_of(c.response(weft::http::method::post)), "/next ok");
  }
  EXPECT_EQ(calls.load(), 4);
}

// 100-continue beside an expectation weft cannot meet: 417 and no 100 (the client may wait
// for one and never send the body), so the connection closes after it.
TEST(HttpServerContinue, ContinueBesideAnotherExpectationGets417AndAClose) {
  std::atomic<int> calls{0};
  running_http server(local_http(), counting_echo{&calls});
  for (const std::string expect :
       {"Expect: 100-continue, x-foo\r\n", "Expect: 100-continue\r\nExpect: x-foo\r\n"}) {
    SCOPED_TRACE(expect);
    client c(server.port());
    c.send("PUT /f HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n" + expect + "\r\n");
    auto r = c.response(weft::http::method::put);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, status::expectation_failed);
    EXPECT_EQ(r->headers.get("Connection"), "close");
    EXPECT_TRUE(c.closes());
  }
  EXPECT_EQ(calls.load(), 0);
  EXPECT_EQ(server.server().stats().total.responses_of_class(1), 0u);
}

// refuse_unknown_expectations off: the handler sees the field and decides; a 100-continue
// beside it is still met when the handler reads the body, and a handler's own 417 keeps the
// connection as any response does.
TEST(HttpServerContinue, WithoutRefusalTheHandlerMeetsExpectationsItself) {
  auto options = local_http();
  options.refuse_unknown_expectations = false;
  running_http server(options, [](exchange& ex) {
    const std::string expect(ex.request().headers.get("Expect").value_or(""));
    if (expect.find("x-known") == std::string::npos) {
      ex.respond(status::expectation_failed, "not " + expect);
      return;
    }
    ex.respond(status::ok, "met " + expect + " " + ex.read_body());
  });
  client c(server.port());
  c.send("GET /a HTTP/1.1\r\nHost: x\r\nExpect: x-known\r\n\r\n");
  EXPECT_EQ(body_of(c.response()), "met x-known ");
  c.send(
      "PUT /b HTTP/1.1\r\nHost: x\r\nExpect: 100-continue, x-known\r\n"
      "Content-Length: 2\r\n\r\n");
  auto interim = c.response(weft::http::method::put);
  ASSERT_TRUE(interim);
  EXPECT_EQ(interim->status, status::continue_);
  c.send("up");
  EXPECT_EQ(body_of(c.response(weft::http::method::put)), "met 100-continue, x-known up");
  c.send(
      "GET /c HTTP/1.1\r\nHost: x\r\nExpect: other\r\n\r\nGET /d HTTP/1.1\r\nHost: x\r\n"
      "Expect: x-known\r\n\r\n");
  auto refused = c.response();
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, status::expectation_failed);
  EXPECT_EQ(refused->body, "not other");
  EXPECT_EQ(body_of(c.response()), "met x-known ");
  EXPECT_EQ(server.server().stats().total.responses_of_class(1), 1u);
}

// An empty Expect asks nothing; 100-continue matches in any case and in a list; an HTTP/1.0
// request's 100-continue is ignored (RFC 9110 10.1.1): its body comes unasked, and no 100 goes out.
TEST(HttpServerContinue, ExpectationsThatCanBeMetAreServed) {
  std::atomic<int> calls{0};
  running_http server(local_http(), counting_echo{&calls});
  client c(server.port());
  c.send("POST /empty HTTP/1.1\r\nHost: x\r\nExpect:\r\nContent-Length: 1\r\n\r\na");
  EXPECT_EQ(body_of(c.response(weft::http::method::post)), "/empty a");
  c.send("POST /case HTTP/1.1\r\nHost: x\r\nExpect: 100-Continue\r\nContent-Length: 1\r\n\r\n");
  auto interim = c.response(weft::http::method::post);
  ASSERT_TRUE(interim);
  EXPECT_EQ(interim->status, status::continue_);
  c.send("b");
  EXPECT_EQ(body_of(c.response(weft::http::method::post)), "/case b");
  // A member of a list, beside an empty one, is asked as much as the field alone.
  c.send("POST /list HTTP/1.1\r\nHost: x\r\nExpect: ,100-continue\r\nContent-Length: 1\r\n\r\n");
  interim = c.response(weft::http::method::post);
  ASSERT_TRUE(interim);
  EXPECT_EQ(interim->status, status::continue_);
  c.send("d");
  EXPECT_EQ(body_of(c.response(weft::http::method::post)), "/list d");
  client old(server.port());
  old.send("POST /old HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nc");
  auto r = old.response(weft::http::method::post);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, status::ok);
  EXPECT_EQ(r->body, "/old c");
  EXPECT_EQ(calls.load(), 4);
  EXPECT_EQ(server.server().stats().total.responses_of_class(1), 2u);
}

}  // namespace

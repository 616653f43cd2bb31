// Expect: 100-continue: the 100 goes out only when the handler reads the body; a handler that
// answers without reading gets no 100 and the connection closes after its response.
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

}  // namespace

// The router: literal and parameter segments, the trailing wildcard, 404, 405 with Allow, HEAD
// served by GET, OPTIONS answered with Allow, and malformed patterns refused by name.
#include "http/server_support.hpp"
#include "weft/http/router.hpp"

namespace {

using namespace http_test;
using weft::http::router;

router make_routes() {
  router r;
  r.get("/", [](exchange& ex) { ex.respond(status::ok, "root"); });
  r.get("/users/:id",
        [](exchange& ex) { ex.respond(status::ok, "user " + std::string(ex.param("id"))); });
  r.post("/users/:id", [](exchange& ex) {
    ex.respond(status::created, "made " + std::string(ex.param("id")) + " " + ex.read_body());
  });
  r.get("/users/:id/posts/:post", [](exchange& ex) {
    ex.respond(status::ok, std::string(ex.param("id")) + "/" + std::string(ex.param("post")));
  });
  r.get("/static/*rest", [](exchange& ex) {
    ex.respond(status::ok, "file [" + std::string(ex.param("rest")) + "]");
  });
  r.any("/any", [](exchange& ex) {
    ex.respond(status::ok, std::string(weft::http::method_name(ex.request().method)));
  });
  r.delete_("/users/:id", [](exchange& ex) { ex.respond(status::no_content, ""); });
  return r;
}

std::string get(client& c, const std::string& target, status expected = status::ok) {
  c.send("GET " + target + " HTTP/1.1\r\nHost: x\r\n\r\n");
  auto r = c.response();
  if (!r) {
    return "<none>";
  }
  EXPECT_EQ(r->status, expected) << target;
  return r->body;
}

TEST(HttpServerRouter, RoutesMatchSegmentsParametersAndWildcards) {
  running_http server(local_http(), make_routes());
  client c(server.port());
  EXPECT_EQ(get(c, "/"), "root");
  EXPECT_EQ(get(c, "/users/42"), "user 42");
  EXPECT_EQ(get(c, "/users/a%20b"), "user a b");
  EXPECT_EQ(get(c, "/users/7/posts/9"), "7/9");
  EXPECT_EQ(get(c, "/static/css/site.css"), "file [css/site.css]");
  EXPECT_EQ(get(c, "/static/"), "file []");
  EXPECT_EQ(get(c, "/users/42/", status::not_found), "Not Found\n");
  EXPECT_EQ(get(c, "/users", status::not_found), "Not Found\n");
  EXPECT_EQ(get(c, "/nothing", status::not_found), "Not Found\n");
  EXPECT_EQ(get(c, "/any"), "GET");
  c.send("POST /users/5 HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc");
  EXPECT_EQ(body_of(c.response()), "made 5 abc");
  c.send("PATCH /any HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(body_of(c.response()), "PATCH");
}

// Routes of literal segments only are matched by comparing the whole path; escapes on either
// side and other target forms still go segment by segment, with the same answers.
TEST(HttpServerRouter, LiteralRoutesMatchEscapedAndAbsoluteFormPathsAlike) {
  router r;
  r.get("/hello", [](exchange& ex) { ex.respond(status::ok, "hello"); });
  r.get("/a/b/", [](exchange& ex) { ex.respond(status::ok, "a/b/"); });
  r.get("/sp%61ce", [](exchange& ex) { ex.respond(status::ok, "space"); });
  r.get("/a%2Fb", [](exchange& ex) { ex.respond(status::ok, "slash"); });
  running_http server(local_http(), std::move(r));
  client c(server.port());
  EXPECT_EQ(get(c, "/hello"), "hello");
  EXPECT_EQ(get(c, "/h%65llo"), "hello");
  EXPECT_EQ(get(c, "/hello?x=1"), "hello");
  EXPECT_EQ(get(c, "http://x/hello"), "hello");
  EXPECT_EQ(get(c, "/hello/", status::not_found), "Not Found\n");
  EXPECT_EQ(get(c, "/hell", status::not_found), "Not Found\n");
  EXPECT_EQ(get(c, "/Hello", status::not_found), "Not Found\n");
  EXPECT_EQ(get(c, "/a/b/"), "a/b/");
  EXPECT_EQ(get(c, "/a/b", status::not_found), "Not Found\n");
  // A pattern with an escape matches its decoded segment, escaped in the request or not.
  EXPECT_EQ(get(c, "/space"), "space");
  EXPECT_EQ(get(c, "/sp%61ce"), "space");
  EXPECT_EQ(get(c, "/a%2fb"), "slash");
  EXPECT_EQ(get(c, "/a/b", status::not_found), "Not Found\n");
  // Dot segments, which clients resolve before sending, are refused rather than matched (they
  // would leave the route's prefix) or resolved (another request than the one sent).
  for (const char* path : {"/a/../hello", "/./hello", "/hello/.", "/%2e%2E/hello"}) {
    EXPECT_NE(get(c, path, status::bad_request).find("\"..\" segment"), std::string::npos) << path;
  }
  EXPECT_EQ(get(c, "/hello"), "hello");
}

std::optional<weft::http::response> options_of(client& c, std::string_view target) {
  c.send("OPTIONS " + std::string(target) + " HTTP/1.1\r\nHost: x\r\n\r\n");
  return c.response();
}

TEST(HttpServerRouter, WrongMethodGets405WithAllowAndHeadUsesGet) {
  running_http server(local_http(), make_routes());
  client c(server.port());
  c.send("PUT /users/1 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
  auto r = c.response();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, status::method_not_allowed);
  EXPECT_EQ(r->headers.get("Allow"), "GET, POST, DELETE, HEAD, OPTIONS");
  c.send("HEAD /users/3 HTTP/1.1\r\nHost: x\r\n\r\n");
  auto head = c.response(weft::http::method::head);
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, status::ok);
  EXPECT_EQ(head->headers.get("Content-Length"), "6");
  EXPECT_EQ(head->body, "");
  c.send("DELETE /users/3 HTTP/1.1\r\nHost: x\r\n\r\n");
  auto deleted = c.response();
  ASSERT_TRUE(deleted);
  EXPECT_EQ(deleted->status, status::no_content);
}

// OPTIONS that no route takes: 200, no content, Allow naming what the path allows; "OPTIONS *"
// (the server as a whole) what any route allows. It was a 405 for a path, a 404 for "*".
TEST(HttpServerRouter, OptionsIsAnsweredWithAllowForAPathAndForTheServer) {
  router plain;
  plain.get("/a", [](exchange& ex) { ex.respond(status::ok, "a"); });
  plain.post("/b", [](exchange& ex) { ex.respond(status::ok, "b"); });
  plain.add(weft::http::method::options, "/cors", [](exchange& ex) {
    weft::http::response r;
    r.status = status::no_content;
    r.headers.add("Access-Control-Allow-Methods", "GET");
    ex.respond(std::move(r));
  });
  running_http server(local_http(), std::move(plain));
  client c(server.port());
  auto path = options_of(c, "/a");
  ASSERT_TRUE(path);
  EXPECT_EQ(path->status, status::ok);
  EXPECT_EQ(path->headers.get("Allow"), "GET, HEAD, OPTIONS");
  EXPECT_EQ(path->headers.get("Content-Length"), "0");
  EXPECT_EQ(path->body, "");
  auto whole = options_of(c, "*");
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->status, status::ok);
  EXPECT_EQ(whole->headers.get("Allow"), "GET, POST, OPTIONS, HEAD");
  EXPECT_EQ(whole->headers.get("Content-Length"), "0");
  auto own = options_of(c, "/cors");
  ASSERT_TRUE(own);
  EXPECT_EQ(own->status, status::no_content);
  EXPECT_EQ(own->headers.get("Access-Control-Allow-Methods"), "GET");
  auto nowhere = options_of(c, "/nowhere");
  ASSERT_TRUE(nowhere);
  EXPECT_EQ(nowhere->status, status::not_found);
  // The connection went on through all of them.
  EXPECT_EQ(get(c, "/a"), "a");
}

TEST(HttpServerRouter, OptionsOfTheServerListsEveryMethodWhenARouteTakesAny) {
  running_http server(local_http(), make_routes());
  client c(server.port());
  auto r = options_of(c, "*");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, status::ok);
  EXPECT_EQ(r->headers.get("Allow"), "GET, HEAD, POST, PUT, DELETE, OPTIONS, TRACE, PATCH");
  r = options_of(c, "/users/7");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->headers.get("Allow"), "GET, POST, DELETE, HEAD, OPTIONS");
  EXPECT_EQ(body_of(options_of(c, "/any")), "OPTIONS");  // the any route takes it itself
}

TEST(HttpServerRouter, MalformedPatternsAreRefusedByName) {
  router r;
  auto h = [](exchange& ex) { ex.respond(status::ok, ""); };
  EXPECT_THROW(r.get("users", h), std::invalid_argument);
  EXPECT_THROW(r.get("/a/:", h), std::invalid_argument);
  EXPECT_THROW(r.get("/a/:x/:x", h), std::invalid_argument);
  try {
    r.get("/a/*rest/b", h);
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("/a/*rest/b"), std::string::npos) << e.what();
  }
  EXPECT_EQ(r.size(), 0u);
}

}  // namespace

// server_options::access_log: one record per response with what nginx's log formats take (the
// client, the request line, status, body bytes, Referer, User-Agent, the time it took), a
// streamed body's record at its end, the answers to requests that never reached a handler, and
// combined_log_line's format and escaping; a file's record once its bytes went out.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <regex>
#include <string>
#include <vector>

#include "http/server_support.hpp"

namespace {

using namespace http_test;
using namespace std::chrono_literals;

// A record kept past the call (its views copied).
struct kept_record {
  std::string peer;
  std::string line;  // combined_log_line of it
  weft::http::method method;
  std::string target;
  status code;
  std::uint64_t bytes;
  bool aborted;
  std::string referer;
  std::string user_agent;
  std::chrono::nanoseconds duration;
};

struct access_records {
  std::mutex mutex;
  std::vector<kept_record> all;
  std::function<void(const weft::http::access_record&)> sink() {
    return [this](const weft::http::access_record& r) {
      std::lock_guard lock(mutex);
      all.push_back({std::string(r.peer), weft::http::combined_log_line(r), r.method,
                     std::string(r.target), r.status, r.body_bytes, r.aborted,
                     std::string(r.referer), std::string(r.user_agent), r.duration});
    };
  }
  std::vector<kept_record> snapshot() {
    std::lock_guard lock(mutex);
    return all;
  }
};

weft::http::router routes() {
  weft::http::router r;
  r.get("/hello", [](exchange& ex) { ex.respond(status::ok, "hello\n"); });
  r.get("/slow", [](exchange& ex) {
    weft::sleep_for(50ms);
    ex.respond(status::ok, "slow\n");
  });
  r.get("/stream", [](exchange& ex) {
    auto writer = ex.start_response({});
    writer.write("abc");
    writer.write("defg");
    writer.finish();
  });
  return r;
}

TEST(HttpServerAccessLog, EachResponseIsOneRecordWithWhatLogFormatsTake) {
  access_records records;
  auto options = local_http();
  options.access_log = records.sink();
  running_http server(options, routes());
  client c(server.port());
  c.send(
      "GET /hello?x=1 HTTP/1.1\r\nHost: h\r\nReferer: http://example.com/a\"b\r\n"
      "User-Agent: tester/1.0 (\xc3\xa9)\r\n\r\n");
  EXPECT_EQ(body_of(c.response()), "hello\n");
  c.send("HEAD /hello HTTP/1.1\r\nHost: h\r\n\r\n");
  EXPECT_TRUE(c.response(weft::http::method::head));
  c.send("GET /missing HTTP/1.1\r\nHost: h\r\n\r\n");
  EXPECT_TRUE(c.response());
  c.send("GET /stream HTTP/1.0\r\n\r\n");
  EXPECT_NE(c.rest().find("abcdefg"), std::string::npos);  // delimited by the close
  client d(server.port());
  d.send("GET /slow HTTP/1.1\r\nHost: h\r\n\r\n");
  EXPECT_EQ(body_of(d.response()), "slow\n");
  // A malformed head (a field line without a colon): answered 400 before any handler, so it
  // took no time of one.
  d.send("GET /x HTTP/1.1\r\nHost: h\r\nNo colon here\r\n\r\n");
  EXPECT_TRUE(d.response(weft::http::method::get, true));

  const auto all = records.snapshot();
  ASSERT_EQ(all.size(), 6u);
  EXPECT_EQ(all[0].target, "/hello?x=1");
  EXPECT_EQ(all[0].code, status::ok);
  EXPECT_EQ(all[0].bytes, 6u);
  EXPECT_EQ(all[0].referer, "http://example.com/a\"b");
  EXPECT_EQ(all[0].user_agent, "tester/1.0 (\xc3\xa9)");
  EXPECT_EQ(all[0].peer.rfind("127.0.0.1:", 0), 0u);
  // nginx's combined format, escaped: one line of printable ASCII whatever the client sent.
  const std::regex combined(
      R"re(127\.0\.0\.1 - - \[\d\d/[A-Z][a-z][a-z]/\d{4}:\d\d:\d\d:\d\d [+-]\d{4}\] )re"
      R"re("GET /hello\?x=1 HTTP/1\.1" 200 6 "http://example\.com/a\\x22b" )re"
      R"re("tester/1\.0 \(\\xC3\\xA9\)" \d+\.\d{3})re");
  EXPECT_TRUE(std::regex_match(all[0].line, combined)) << all[0].line;
  EXPECT_EQ(all[1].method, weft::http::method::head);
  EXPECT_EQ(all[1].bytes, 0u);
  EXPECT_EQ(all[2].code, status::not_found);
  EXPECT_NE(all[2].line.find("\"GET /missing HTTP/1.1\" 404 "), std::string::npos) << all[2].line;
  EXPECT_NE(all[2].line.find(" \"-\" \"-\" "), std::string::npos) << all[2].line;
  EXPECT_EQ(all[3].target, "/stream");
  EXPECT_EQ(all[3].bytes, 7u);
  EXPECT_FALSE(all[3].aborted);
  EXPECT_NE(all[3].line.find("\"GET /stream HTTP/1.0\" 200 7 "), std::string::npos) << all[3].line;
  EXPECT_EQ(all[4].target, "/slow");
  EXPECT_GE(all[4].duration, 50ms);
  EXPECT_LT(all[4].duration, 10s);
  EXPECT_EQ(all[5].code, status::bad_request);
  EXPECT_EQ(all[5].duration.count(), 0);
}

// A request refused for its target is logged with the method and target it was sent with, as
// nginx logs it (it showed as "GET  HTTP/1.1"), escaped like any other.
TEST(HttpServerAccessLog, ARefusedTargetIsLoggedAsSent) {
  access_records records;
  auto options = local_http();
  options.access_log = records.sink();
  running_http server(options, routes());
  client c(server.port());
  c.send("DELETE /a%zz\"b?q HTTP/1.1\r\nHost: h\r\n\r\n");
  auto refused = c.response(weft::http::method::delete_, true);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, status::bad_request);
  const auto all = records.snapshot();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].method, weft::http::method::delete_);
  EXPECT_EQ(all[0].target, "/a%zz\"b?q");
  EXPECT_NE(all[0].line.find("\"DELETE /a%zz\\x22b?q HTTP/1.1\" 400 "), std::string::npos)
      << all[0].line;
}

// A file's record waits until its bytes went out: a download the client cut short logs the
// bytes written, marked aborted (logged when queued, it showed as whole and instant), and a
// whole one its length.
TEST(HttpServerAccessLog, AFileCountsTheBytesDeliveredAndACutDownloadIsAborted) {
  constexpr std::uint64_t size = std::uint64_t{32} << 20;
  char name[] = "/tmp/weft-access-file-XXXXXX";
  const int fd = ::mkstemp(name);
  ASSERT_GE(fd, 0);
  ::unlink(name);
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(size)), 0);  // sparse: zeros, no disk
  access_records records;
  auto options = local_http();
  options.access_log = records.sink();
  weft::http::router r;
  r.get("/big", [&](exchange& ex) { ex.send_file({}, fd, 0, size); });
  running_http server(options, std::move(r));
  {
    // Reads 100 KiB of the body through a small receive window, then closes with the rest
    // unread: a reset.
    const int cut = connect_to(server.port(), 16384);
    send_all(cut, "GET /big HTTP/1.1\r\nHost: h\r\n\r\n");
    EXPECT_EQ(read_bytes(cut, 100 * 1024).size(), 100u * 1024);
    ::close(cut);
  }
  ASSERT_TRUE(eventually([&] { return records.snapshot().size() == 1; }, 10000ms));
  const int whole = connect_to(server.port());
  send_all(whole, "GET /big HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
  const std::string got = read_to_end(whole, 20000ms);
  ::close(whole);
  const std::size_t head_end = got.find("\r\n\r\n");
  ASSERT_NE(head_end, std::string::npos);
  EXPECT_EQ(got.size() - head_end - 4, size);
  ASSERT_TRUE(eventually([&] { return records.snapshot().size() == 2; }, 10000ms));
  const auto all = records.snapshot();
  EXPECT_EQ(all[0].code, status::ok);
  EXPECT_TRUE(all[0].aborted);
  EXPECT_GT(all[0].bytes, 0u);  // at least what reached the client, less the head
  EXPECT_LT(all[0].bytes, size / 2) << "a cut download logged as (nearly) whole";
  EXPECT_NE(all[0].line.find("\"GET /big HTTP/1.1\" 200 " + std::to_string(all[0].bytes) + " "),
            std::string::npos)
      << all[0].line;
  EXPECT_NE(all[0].line.find(" aborted"), std::string::npos) << all[0].line;
  EXPECT_FALSE(all[1].aborted);
  EXPECT_EQ(all[1].bytes, size);
  ::close(fd);
}

// So does a large body made in memory (respond() waits until the socket took it): the client
// that leaves mid-body is counted with what was written; a small one is logged as it is
// batched, as before.
TEST(HttpServerAccessLog, ALargeBodyInMemoryCountsTheBytesDeliveredToo) {
  constexpr std::size_t size = std::size_t{32} << 20;
  const std::string big(size, 'm');
  access_records records;
  auto options = local_http();
  options.access_log = records.sink();
  weft::http::router r;
  r.get("/big", [&](exchange& ex) { ex.respond(status::ok, big); });
  r.get("/hello", [](exchange& ex) { ex.respond(status::ok, "hello\n"); });
  running_http server(options, std::move(r));
  {
    const int cut = connect_to(server.port(), 16384);
    send_all(cut, "GET /big HTTP/1.1\r\nHost: h\r\n\r\n");
    EXPECT_EQ(read_bytes(cut, 100 * 1024).size(), 100u * 1024);
    ::close(cut);
  }
  ASSERT_TRUE(eventually([&] { return records.snapshot().size() == 1; }, 10000ms));
  const int whole = connect_to(server.port());
  send_all(whole,
           "GET /big HTTP/1.1\r\nHost: h\r\n\r\nGET /hello HTTP/1.1\r\nHost: h\r\n"
           "Connection: close\r\n\r\n");
  const std::string got = read_to_end(whole, 20000ms);
  ::close(whole);
  EXPECT_EQ(got.find(big), got.find("\r\n\r\n") + 4);
  EXPECT_NE(got.find("\r\n\r\nhello\n"), std::string::npos);
  ASSERT_TRUE(eventually([&] { return records.snapshot().size() == 3; }, 10000ms));
  const auto all = records.snapshot();
  EXPECT_TRUE(all[0].aborted);
  EXPECT_GT(all[0].bytes, 0u);
  EXPECT_LT(all[0].bytes, size / 2) << "a cut download logged as (nearly) whole";
  EXPECT_NE(all[0].line.find(" aborted"), std::string::npos) << all[0].line;
  EXPECT_FALSE(all[1].aborted);
  EXPECT_EQ(all[1].bytes, size);
  EXPECT_EQ(all[1].target, "/big");
  EXPECT_EQ(all[2].target, "/hello");  // in the order of the responses
  EXPECT_EQ(all[2].bytes, 6u);
}

TEST(HttpServerAccessLog, AnAbortedStreamSaysSo) {
  weft::http::access_record record;
  record.peer = "[::1]:5000";
  record.method = weft::http::method::post;
  record.target = "/up";
  record.status = status::ok;
  record.body_bytes = 3;
  record.aborted = true;
  record.duration = 1234ms;
  const std::string line = weft::http::combined_log_line(record);
  EXPECT_EQ(line.rfind("::1 - - [", 0), 0u) << line;
  EXPECT_NE(line.find("] \"POST /up HTTP/1.1\" 200 3 \"-\" \"-\" 1.234 aborted"), std::string::npos)
      << line;
}

}  // namespace

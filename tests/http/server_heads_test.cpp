// The heads the server writes for respond(status, body, type): every response's head is exactly
// the one its own status, Server name, Date, Content-Type, length and connection call for, byte
// for byte, however many kinds of head alternate on a thread (each thread keeps its last few
// heads whole, append_simple_head), and the Date moves on with the clock.
#include <ctime>
#include <string>
#include <vector>

#include "http/server_support.hpp"
#include "weft/http/message.hpp"
#include "weft/http/static_files.hpp"

namespace {

using namespace http_test;

struct kind {
  status code;
  std::string type;
  std::string body;
};

// More kinds than the thread keeps (four), a type too long for a kept prefix, statuses with and
// without content, an empty body.
const std::vector<kind>& kinds() {
  static const std::vector<kind> all = {
      {status::ok, "text/plain", "hello\n"},
      {status::ok, "application/json", "{\"a\":1}"},
      {status::not_found, "text/plain", "none"},
      {status::created, "text/html; charset=utf-8", "<p>made</p>"},
      {status::no_content, "text/plain", ""},
      {status::ok, "text/plain", ""},
      {status::accepted, "application/x-" + std::string(300, 'y'), "long type"},
      {status::ok, "", "no type"},
  };
  return all;
}

void respond_kind(exchange& ex) {
  const std::string& target = ex.request().target;
  const std::size_t index = static_cast<std::size_t>(std::stoul(target.substr(3)));
  const kind& k = kinds().at(index);
  ex.respond(k.code, k.body, k.type);
}

// The head and body respond() must produce for k, with the Date the response carries.
std::string expected(const kind& k, std::string_view date, std::string_view connection) {
  std::string out = "HTTP/1.1 " + std::to_string(static_cast<int>(weft::http::code_of(k.code))) +
                    " " + std::string(weft::http::reason_phrase(k.code)) +
                    "\r\nServer: weft\r\nDate: " + std::string(date) + "\r\n";
  const bool content = k.code != status::no_content;
  if (content && !k.type.empty()) out += "Content-Type: " + k.type + "\r\n";
  if (content) out += "Content-Length: " + std::to_string(k.body.size()) + "\r\n";
  out += std::string(connection) + "\r\n";
  return out + k.body;
}

// Walks the raw bytes of several responses against expected(), taking each one's Date from the
// bytes (29 characters, "Sat, 28 Nov 2026 10:00:00 GMT").
void check_stream(std::string_view bytes, const std::vector<std::size_t>& order,
                  const std::vector<std::string>& connections) {
  std::size_t at = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const std::size_t date_at = bytes.find("\r\nDate: ", at);
    ASSERT_NE(date_at, std::string_view::npos) << "response " << i;
    const std::string_view date = bytes.substr(date_at + 8, 29);
    ASSERT_EQ(date.substr(25), " GMT") << "response " << i;
    const std::string want = expected(kinds()[order[i]], date, connections[i]);
    ASSERT_EQ(bytes.substr(at, want.size()), want)
        << "response " << i << " (kind " << order[i] << ")";
    at += want.size();
  }
  EXPECT_EQ(at, bytes.size());
}

TEST(HttpServerHeads, AlternatingHeadsAreEachExactlyTheirOwn) {
  running_http server(local_http(), respond_kind);
  client c(server.port());
  std::vector<std::size_t> order;
  std::vector<std::string> connections;
  std::string batch;
  // Every kind after every other, pipelined, so kept prefixes are found, missed and replaced.
  for (std::size_t round = 0; round < 3; ++round) {
    for (std::size_t a = 0; a < kinds().size(); ++a) {
      const std::size_t b = (a * 3 + round) % kinds().size();
      for (std::size_t index : {a, b}) {
        batch += "GET /k/" + std::to_string(index) + " HTTP/1.1\r\nHost: x\r\n\r\n";
        order.push_back(index);
        connections.emplace_back();
      }
    }
  }
  // The same kinds over HTTP/1.0 keep-alive, and a last request that closes.
  for (std::size_t index = 0; index < kinds().size(); ++index) {
    batch += "GET /k/" + std::to_string(index) + " HTTP/1.0\r\nConnection: keep-alive\r\n\r\n";
    order.push_back(index);
    connections.emplace_back("Connection: keep-alive\r\n");
  }
  batch += "GET /k/0 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  order.push_back(0);
  connections.emplace_back("Connection: close\r\n");
  c.send(batch);
  const std::string bytes = c.rest();
  check_stream(bytes, order, connections);
  EXPECT_EQ(server.server().stats().total.requests, order.size());
}

TEST(HttpServerHeads, TheDateOfARepeatedHeadFollowsTheClock) {
  running_http server(local_http(), respond_kind);
  client c(server.port());
  c.send("GET /k/0 HTTP/1.1\r\nHost: x\r\n\r\n");
  auto first = c.response();
  ASSERT_TRUE(first);
  const std::string first_date(*first->headers.get("Date"));
  // Wait for the wall clock's next second (what the Date names), at most a few seconds.
  const std::time_t start = std::time(nullptr);
  ASSERT_TRUE(eventually([&] { return std::time(nullptr) > start + 1; }, 5000ms));
  c.send("GET /k/0 HTTP/1.1\r\nHost: x\r\n\r\n");
  auto second = c.response();
  ASSERT_TRUE(second);
  const std::string second_date(*second->headers.get("Date"));
  EXPECT_NE(second_date, first_date);
  EXPECT_EQ(second->body, "hello\n");
  const auto parsed = weft::http::parse_http_date(second_date);
  ASSERT_TRUE(parsed);
  EXPECT_GT(*parsed, *weft::http::parse_http_date(first_date));
}

}  // namespace

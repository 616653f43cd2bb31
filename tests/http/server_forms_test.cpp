// Forms and cookies through the server, with curl as the client no one here wrote: a
// multipart/form-data upload (a field, a 3 MiB file, a hostile file name) streamed by
// multipart_reader in pieces of bounded size; an urlencoded body; a broken form body and a
// wrong Content-Type answered 400 and 415 from the escaping form_error while the connection
// goes on; and a cookie set with add_cookie that curl's cookie engine stores and sends back.
#include <atomic>
#include <cstdint>
#include <random>
#include <string>

#include "http/server_support.hpp"
#include "http/static_tree.hpp"
#include "test_support.hpp"
#include "weft/http/cookies.hpp"
#include "weft/http/forms.hpp"

namespace {

using namespace http_test;
using weft_static_test::tree;

std::uint64_t fnv1a(std::uint64_t hash, std::string_view bytes) {
  for (unsigned char c : bytes) hash = (hash ^ c) * 1099511628211u;
  return hash;
}
constexpr std::uint64_t fnv_basis = 14695981039346656037u;

struct form_site {
  std::atomic<std::size_t> largest_piece{0};

  weft::http::router routes() {
    weft::http::router r;
    r.post("/upload", [this](exchange& ex) {
      weft::http::multipart_reader form(ex);
      std::string report;
      while (std::optional<weft::http::form_part> part = form.next_part()) {
        std::uint64_t hash = fnv_basis;
        std::size_t size = 0;
        while (std::optional<std::string_view> piece = form.read()) {
          hash = fnv1a(hash, *piece);
          size += piece->size();
          if (piece->size() > largest_piece) largest_piece = piece->size();
        }
        report += part->name + " " + part->filename.value_or("-") + " " + part->content_type + " " +
                  std::to_string(size) + " " + std::to_string(hash) + "\n";
      }
      ex.respond(status::ok, report);
    });
    r.post("/form", [](exchange& ex) {
      std::string report;
      for (const auto& [name, value] : weft::http::parse_urlencoded(ex.read_body())) {
        report += "[" + name + "]=[" + value + "]\n";
      }
      ex.respond(status::ok, report);
    });
    r.get("/login", [](exchange& ex) {
      weft::http::response answer;
      answer.headers.add("Content-Type", "text/plain");
      weft::http::add_cookie(answer, {.name = "session",
                                      .value = "s3cr3t",
                                      .path = "/",
                                      .max_age = std::chrono::seconds(600),
                                      .http_only = true,
                                      .same_site = weft::http::same_site::lax});
      weft::http::add_cookie(answer, {.name = "theme", .value = "dark", .path = "/"});
      answer.body = "welcome\n";
      ex.respond(std::move(answer));
    });
    r.get("/whoami", [](exchange& ex) {
      const auto session = weft::http::cookie(ex.request().headers, "session");
      const auto theme = weft::http::cookie(ex.request().headers, "theme");
      ex.respond(status::ok, std::string(session.value_or("nobody")) + " " +
                                 std::string(theme.value_or("-")) + "\n");
    });
    return r;
  }
};

weft::http::server_options roomy() {
  weft::http::server_options options = local_http();
  options.limits.max_body_size = 16 << 20;
  return options;
}

TEST(HttpServerForms, CurlsMultipartUploadIsStreamedPartByPart) {
  tree files;
  std::string data(3 << 20, '\0');
  std::mt19937_64 bits(7);
  for (char& c : data) c = static_cast<char>(bits());
  files.file("big.bin", data);
  files.file("note.txt", "a note\n");
  form_site site;
  running_http server(roomy(), site.routes());
  const std::string report = run_command(
      "curl -s -F title=hello -F 'file=@" + (files.root() / "big.bin").string() +
      ";type=application/octet-stream' -F 'doc=@" + (files.root() / "note.txt").string() +
      ";filename=../../etc/evil.txt' " + url(server.port(), "/upload"));
  EXPECT_EQ(report, "title - text/plain 5 " + std::to_string(fnv1a(fnv_basis, "hello")) +
                        "\n"
                        "file big.bin application/octet-stream " +
                        std::to_string(data.size()) + " " + std::to_string(fnv1a(fnv_basis, data)) +
                        "\n"
                        "doc evil.txt text/plain 7 " +
                        std::to_string(fnv1a(fnv_basis, "a note\n")) + "\n");
  // Streamed: no piece near the file's size was ever held.
  EXPECT_GT(site.largest_piece.load(), 0u);
  EXPECT_LT(site.largest_piece.load(), std::size_t{1} << 20);
}

TEST(HttpServerForms, AnUrlencodedBodyIsDecoded) {
  form_site site;
  running_http server(roomy(), site.routes());
  const std::string report = run_command(
      "curl -s --data-urlencode 'q=a b&c=d' --data-urlencode 'caf\xc3\xa9=\xe2\x82\xac' " +
      url(server.port(), "/form"));
  EXPECT_EQ(report, "[q]=[a b&c=d]\n[caf\xc3\xa9]=[\xe2\x82\xac]\n");
}

TEST(HttpServerForms, ABrokenFormIs400AndAnotherTypeIs415AndTheConnectionGoesOn) {
  form_site site;
  running_http server(roomy(), site.routes());
  client c(server.port());
  const std::string broken = "--B\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\nno end";
  c.send(
      "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=B\r\n"
      "Content-Length: " +
      std::to_string(broken.size()) + "\r\n\r\n" + broken);
  auto bad = c.response();
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, status::bad_request);
  EXPECT_NE(bad->body.find("the body ended inside part 1 ('f')"), std::string::npos) << bad->body;
  c.send(
      "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: "
      "2\r\n\r\nhi");
  auto other = c.response();
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, status::unsupported_media_type);
  EXPECT_NE(other->body.find("not multipart/form-data"), std::string::npos) << other->body;
  c.send("GET /whoami HTTP/1.1\r\nHost: x\r\n\r\n");
  auto next = c.response();
  ASSERT_TRUE(next);
  EXPECT_EQ(next->body, "nobody -\n");
}

TEST(HttpServerForms, CurlsCookieEngineKeepsWhatAddCookieSetAndSendsItBack) {
  tree files;
  form_site site;
  running_http server(roomy(), site.routes());
  const std::string jar = (files.base() / "jar.txt").string();
  run_command("curl -s -o /dev/null -c " + jar + " " + url(server.port(), "/login"));
  EXPECT_EQ(run_command("curl -s -b " + jar + " " + url(server.port(), "/whoami")),
            "s3cr3t dark\n");
  const std::string stored = run_command("cat " + jar);
  EXPECT_NE(stored.find("#HttpOnly_127.0.0.1"), std::string::npos) << stored;
}

// multipart_form as a client sends it: parsed by Python's email package (tests/http/clients/
// form_parts.py), then posted by weft's client to the server's multipart_reader.
TEST(HttpServerForms, AMultipartFormFromWeftsClientIsReadByTheServerAndByPython) {
  std::string photo(200000, '\0');
  std::mt19937_64 bits(11);
  for (char& c : photo) c = static_cast<char>(bits());
  weft::http::multipart_form form;
  form.field("title", "holiday").file("photo", "beach.jpg", photo, "image/jpeg");
  const std::string body = form.body();
  const std::string type = form.content_type();

  tree scratch;
  scratch.file("body", body);
  static constexpr char hex_digits[] = "0123456789abcdef";
  std::string photo_hex;
  for (unsigned char c : photo) {
    photo_hex.push_back(hex_digits[c >> 4]);
    photo_hex.push_back(hex_digits[c & 15]);
  }
  const std::string parsed =
      run_command(std::string("python3 ") + WEFT_TEST_SOURCE_DIR + "/http/clients/form_parts.py '" +
                  type + "' < " + (scratch.root() / "body").string());
  EXPECT_TRUE(parsed ==
              "title - text/plain 686f6c69646179\nphoto beach.jpg image/jpeg " + photo_hex + "\n")
      << parsed.substr(0, 300);

  form_site site;
  running_http server(roomy(), site.routes());
  weft_test::run_clean([&] {
    weft::http::client web;
    weft::http::response answer = web.post(url(server.port(), "/upload"), body, type);
    EXPECT_EQ(answer.status, status::ok);
    EXPECT_EQ(answer.body, "title - text/plain 7 " + std::to_string(fnv1a(fnv_basis, "holiday")) +
                               "\nphoto beach.jpg image/jpeg 200000 " +
                               std::to_string(fnv1a(fnv_basis, photo)) + "\n");
    web.close();
  });
}

}  // namespace

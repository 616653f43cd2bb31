// weft-test: driver-independent
// http::parse_urlencoded, and http::multipart_reader over a scripted source: parts, heads and
// bytes whatever sizes the body arrives in (one byte at a time included), preamble, epilogue
// and padding ignored, file names cut to their base name, and each framing error and limit a
// form_error with the right status that names what is wrong.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "weft/http/forms.hpp"

namespace {

namespace http = weft::http;

TEST(HttpForms, UrlencodedPairsAreDecodedInOrder) {
  const auto pairs = http::parse_urlencoded("a=1&b=x+y%21&c&&d=&%C3%A9=caf%C3%A9&a=2");
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"a", "1"}, {"b", "x y!"}, {"c", ""}, {"d", ""}, {"\xc3\xa9", "caf\xc3\xa9"}, {"a", "2"}};
  EXPECT_EQ(pairs, expected);
  EXPECT_TRUE(http::parse_urlencoded("").empty());
  EXPECT_THROW(http::parse_urlencoded("a=%zz"), std::invalid_argument);
}

// A source that hands out `body` in pieces of `step` bytes, and counts its calls.
struct pieces {
  std::string body;
  std::size_t step;
  std::size_t at = 0;
  std::string current{};
  std::optional<std::string_view> operator()() {
    if (at >= body.size()) return std::nullopt;
    current = body.substr(at, step);  // a copy: the reader must not rely on it lasting
    at += current.size();
    return std::string_view(current);
  }
};

constexpr std::string_view type = "multipart/form-data; boundary=----weftBoundary7MA4YWxk";

std::string sample_body() {
  return "this preamble is ignored\r\n"
         "------weftBoundary7MA4YWxk\r\n"
         "Content-Disposition: form-data; name=\"title\"\r\n"
         "\r\n"
         "A title\r\n"
         "------weftBoundary7MA4YWxk  \t\r\n"
         "Content-Disposition: form-data; name=\"upload\"; "
         "filename=\"C:\\\\Users\\\\me\\\\a.txt\"\r\n"
         "Content-Type: text/plain\r\n"
         "\r\n"
         "line one\r\n"
         "\r\n--not the boundary\r\n------weftBoundary7MA4YWx (almost)\r\n"
         "------weftBoundary7MA4YWxk\r\n"
         "content-disposition: FORM-DATA; name=empty; filename=\"\"\r\n"
         "Content-Type: application/octet-stream\r\n"
         "\r\n"
         "\r\n"
         "------weftBoundary7MA4YWxk--\r\n"
         "this epilogue is ignored, ------weftBoundary7MA4YWxk\r\n";
}

struct read_part {
  http::form_part head;
  std::string data;
};

std::vector<read_part> read_everything(http::multipart_reader& reader) {
  std::vector<read_part> parts;
  while (std::optional<http::form_part> part = reader.next_part()) {
    read_part p{std::move(*part), {}};
    while (std::optional<std::string_view> piece = reader.read()) p.data.append(*piece);
    parts.push_back(std::move(p));
  }
  return parts;
}

TEST(HttpForms, PartsComeOutWhateverSizesTheBodyArrivesIn) {
  // Every piece size up to past the longest line, so that a piece ends at each point of every
  // delimiter line and head (an offset kept across a refill of the buffer once read the wrong
  // head at some of them: found by http_multipart_fuzz), and the whole body at once.
  std::vector<std::size_t> steps(64);
  for (std::size_t i = 0; i < steps.size(); ++i) steps[i] = i + 1;
  steps.push_back(100000);
  for (std::size_t step : steps) {
    SCOPED_TRACE("pieces of " + std::to_string(step));
    http::multipart_reader reader(type, pieces{sample_body(), step});
    const std::vector<read_part> parts = read_everything(reader);
    ASSERT_EQ(parts.size(), 3u);
    EXPECT_EQ(parts[0].head.name, "title");
    EXPECT_FALSE(parts[0].head.filename);
    EXPECT_EQ(parts[0].head.content_type, "text/plain") << "the default, RFC 7578 4.4";
    EXPECT_EQ(parts[0].data, "A title");
    EXPECT_EQ(parts[1].head.name, "upload");
    EXPECT_EQ(parts[1].head.filename, "a.txt") << "the base name of what was sent";
    EXPECT_EQ(parts[1].data,
              "line one\r\n\r\n--not the boundary\r\n------weftBoundary7MA4YWx (almost)");
    EXPECT_EQ(parts[2].head.name, "empty");
    EXPECT_EQ(parts[2].head.filename, "");
    EXPECT_EQ(parts[2].head.content_type, "application/octet-stream");
    EXPECT_EQ(parts[2].data, "");
    EXPECT_EQ(reader.parts(), 3u);
    EXPECT_FALSE(reader.next_part()) << "done stays done";
  }
}

TEST(HttpForms, NextPartSkipsWhatWasNotReadAndReadAllIsBounded) {
  http::multipart_reader reader(type, pieces{sample_body(), 5});
  ASSERT_TRUE(reader.next_part());
  ASSERT_EQ(reader.read_all(100), "A title");
  auto upload = reader.next_part();
  ASSERT_TRUE(upload);
  EXPECT_EQ(upload->fields.get("Content-Disposition"),
            "form-data; name=\"upload\"; filename=\"C:\\\\Users\\\\me\\\\a.txt\"")
      << "the fields as sent";
  auto empty = reader.next_part();  // the upload's bytes skipped unread
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->name, "empty");
  EXPECT_FALSE(reader.next_part());

  http::multipart_reader bounded(type, pieces{sample_body(), 3});
  bounded.next_part();
  bounded.next_part();
  try {
    bounded.read_all(10);
    ADD_FAILURE() << "read_all went past its bound";
  } catch (const http::form_error& e) {
    EXPECT_EQ(e.status(), http::status::content_too_large);
    EXPECT_NE(std::string(e.what()).find("part 2 ('upload') is larger than 10 bytes"),
              std::string::npos)
        << e.what();
  }
}

TEST(HttpForms, AHeadOfExactlyMaxHeadSizeIsTakenWhateverThePieces) {
  // The head's lines with their CRLFs: 100 bytes, then the empty line and the part's bytes.
  const std::string line = "Content-Disposition: form-data; name=\"f\"\r\n";
  const std::string head = line + "X: " + std::string(100 - line.size() - 5, 'x') + "\r\n";
  ASSERT_EQ(head.size(), 100u);
  const std::string body = "--B\r\n" + head + "\r\nvalue\r\n--B--";
  const std::string longer = "--B\r\n" + head.substr(0, 98) + "xx\r\n\r\nvalue\r\n--B--";
  for (std::size_t step = 1; step <= body.size(); ++step) {
    SCOPED_TRACE("pieces of " + std::to_string(step));
    http::multipart_reader reader("multipart/form-data; boundary=B", pieces{body, step},
                                  {.max_head_size = 100});
    auto parts = read_everything(reader);
    ASSERT_EQ(parts.size(), 1u);
    EXPECT_EQ(parts[0].data, "value");
    http::multipart_reader refusing("multipart/form-data; boundary=B", pieces{longer, step},
                                    {.max_head_size = 100});
    try {
      read_everything(refusing);
      ADD_FAILURE() << "a head past 100 bytes was taken";
    } catch (const http::form_error& e) {
      EXPECT_EQ(e.status(), http::status::content_too_large) << e.what();
    }
  }
}

TEST(HttpForms, TheBoundaryMayBeQuotedAndTheTypeIsCaseInsensitive) {
  const std::string body =
      "--a b:c\r\nContent-Disposition: form-data; name=\"x\"\r\n\r\n1\r\n--a b:c--";
  http::multipart_reader reader("Multipart/Form-Data; charset=utf-8; boundary=\"a b:c\"",
                                pieces{body, 4});
  auto parts = read_everything(reader);
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_EQ(parts[0].data, "1");
}

// The form_error a body (or Content-Type) gets, with its status and message.
void expect_error(std::string_view content_type, const std::string& body, http::status status,
                  const std::string& message, http::multipart_limits limits = {}) {
  SCOPED_TRACE(message);
  try {
    http::multipart_reader reader(content_type, pieces{body, 3}, limits);
    read_everything(reader);
    ADD_FAILURE() << "accepted";
  } catch (const http::form_error& e) {
    EXPECT_EQ(e.status(), status);
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
}

TEST(HttpForms, EveryFramingErrorAndLimitIsAFormErrorNamingIt) {
  using s = http::status;
  const std::string open = "--B\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\n";
  expect_error("text/plain", "", s::unsupported_media_type, "not multipart/form-data");
  expect_error("multipart/form-data", "", s::bad_request, "has no valid boundary");
  expect_error("multipart/form-data; boundary=", "", s::bad_request, "has no valid boundary");
  expect_error("multipart/form-data; boundary=" + std::string(71, 'x'), "", s::bad_request,
               "has no valid boundary");
  expect_error("multipart/form-data; boundary=\"ends \"", "", s::bad_request,
               "has no valid boundary");
  const std::string b = "multipart/form-data; boundary=B";
  expect_error(b, "no delimiter here at all", s::bad_request, "has no delimiter of its boundary");
  expect_error(b, "--B", s::bad_request, "ended on a delimiter line");
  expect_error(b, "--Bx\r\n", s::bad_request, "does not end in CRLF");
  expect_error(b, "--B\r\nContent-Disposition: form-data; name=\"f\"\r\n", s::bad_request,
               "ended inside the head of part 1");
  expect_error(b, open + "data that never ends", s::bad_request, "ended inside part 1 ('f')");
  expect_error(b, "--B\r\n\r\ndata\r\n--B--", s::bad_request, "part 1 has no Content-Disposition");
  expect_error(b, "--B\r\nContent-Disposition: attachment; name=\"f\"\r\n\r\n\r\n--B--",
               s::bad_request, "is not form-data with a name");
  expect_error(b, "--B\r\nContent-Disposition: form-data; filename=\"a\"\r\n\r\n\r\n--B--",
               s::bad_request, "is not form-data with a name");
  expect_error(b, "--B\r\nContent-Disposition: form-data; name=\"unclosed\r\n\r\n\r\n--B--",
               s::bad_request, "is not form-data with a name");
  expect_error(b, "--B\r\nContent-Disposition: form-data; name=f\r\n folded\r\n\r\n\r\n--B--",
               s::bad_request, "is not a field");
  expect_error(b, "--B\r\nno colon\r\n\r\n\r\n--B--", s::bad_request, "is not a field");
  expect_error(b, "--B\r\nContent-Disposition: form-data; name=f\r\nX: a\x01z\r\n\r\n\r\n--B--",
               s::bad_request, "holds a control byte");
  expect_error(b, "--B\r\nX-Long: " + std::string(300, 'h') + "\r\n\r\n", s::content_too_large,
               "is larger than max_head_size (100 bytes)", {.max_head_size = 100});
  std::string many;
  for (int i = 0; i < 4; ++i) many += open + "v\r\n";
  expect_error(b, many + "--B--", s::content_too_large, "more than max_parts (3) parts",
               {.max_parts = 3});
}

TEST(HttpForms, AMultipartFormReadsBackPartByPart) {
  const std::string binary("\x00\xff\r\n--not a delimiter\r\n\r\n", 25);
  http::multipart_form form;
  form.field("title", "A title").field("quote\"d", "q").file("upload", "a.bin", binary);
  form.file("doc", "notes.txt", "some notes\n", "text/plain");
  EXPECT_EQ(form.parts(), 4u);
  const std::string type = form.content_type();
  ASSERT_EQ(type.substr(0, 30), "multipart/form-data; boundary=");
  const std::string body = form.body();
  EXPECT_EQ(form.content_type(), type) << "the boundary stays once chosen";
  for (std::size_t step : {std::size_t{1}, std::size_t{13}, body.size()}) {
    http::multipart_reader reader(type, pieces{body, step});
    auto parts = read_everything(reader);
    ASSERT_EQ(parts.size(), 4u);
    EXPECT_EQ(parts[0].head.name, "title");
    EXPECT_EQ(parts[0].data, "A title");
    EXPECT_EQ(parts[1].head.name, "quote%22d") << "as browsers write a quote in a name";
    EXPECT_EQ(parts[2].head.filename, "a.bin");
    EXPECT_EQ(parts[2].head.content_type, "application/octet-stream");
    EXPECT_EQ(parts[2].data, binary);
    EXPECT_EQ(parts[3].head.content_type, "text/plain");
    EXPECT_EQ(parts[3].data, "some notes\n");
  }
  // A random boundary each time; an empty form is its closing delimiter alone.
  EXPECT_NE(http::multipart_form().content_type(), http::multipart_form().content_type());
  http::multipart_form empty("xyz");
  EXPECT_EQ(empty.body(), "--xyz--\r\n");
}

TEST(HttpForms, AGivenBoundaryThatAPartHoldsIsRefused) {
  http::multipart_form form("frontier");
  form.field("a", "1").file("f", "x.txt", "text with --frontier in it", "text/plain");
  try {
    form.body();
    ADD_FAILURE() << "a part holding the boundary was framed";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("name=\"f\"; filename=\"x.txt\""), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(http::multipart_form("bad\"boundary"), std::invalid_argument);
  EXPECT_THROW(http::multipart_form(std::string(71, 'b')), std::invalid_argument);
  EXPECT_THROW(http::multipart_form().file("f", "x", "", "text/plain\r\nX: 1"),
               std::invalid_argument);
}

}  // namespace

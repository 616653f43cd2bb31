// weft-test: driver-independent
// Byte ranges from static_files: one range of each form is 206 with Content-Range and the
// matching offset and length; a range past the end is 416 "bytes */SIZE"; several ranges are a
// multipart/byteranges 206 within max_ranges and multipart_max, and the whole file past them;
// a malformed Range sends the whole file; If-Range decides whether a range applies; HEAD
// ignores Range.
#include <gtest/gtest.h>

#include <chrono>
#include <ctime>
#include <string>
#include <utility>
#include <vector>

#include "http/static_tree.hpp"
#include "weft/http/static_files.hpp"

namespace http = weft::http;
using weft_static_test::field;
using weft_static_test::open_descriptors;
using weft_static_test::request_for;
using weft_static_test::sent_bytes;

namespace {

constexpr std::time_t modified = 1'000'000'000;
const std::string content = "0123456789abcdefghij";  // 20 bytes

class StaticRange : public ::testing::Test {
 protected:
  void SetUp() override {
    descriptors_ = open_descriptors();
    auto path = tree_.file("data.bin", content);
    weft_static_test::tree::set_mtime(path, modified);
    tree_.file("empty.bin", "");
  }
  void TearDown() override {
    EXPECT_EQ(open_descriptors(), descriptors_) << "a descriptor was left open";
  }

  http::static_reply get(const std::string& range, std::string_view if_range = {},
                         http::method m = http::method::get, const char* file = "data.bin") {
    http::request req = request_for(std::string("/") + file, m);
    if (!range.empty()) req.headers.add("Range", range);
    if (!if_range.empty()) req.headers.add("If-Range", if_range);
    return server_.resolve(req, file);
  }
  http::static_files make() const {
    http::static_options options;
    options.root = tree_.root().string();
    options.cache_valid = std::chrono::milliseconds(0);  // each resolve looks afresh
    return http::static_files(options);
  }
  // Checks a 206 for [first, last] of content.
  void expect_partial(const std::string& range, std::uint64_t first, std::uint64_t last) {
    http::static_reply reply = get(range);
    ASSERT_EQ(reply.head.status, http::status::partial_content) << range;
    EXPECT_EQ(field(reply, "Content-Range"),
              "bytes " + std::to_string(first) + "-" + std::to_string(last) + "/20")
        << range;
    EXPECT_EQ(field(reply, "Content-Length"), std::to_string(last - first + 1)) << range;
    EXPECT_EQ(field(reply, "Accept-Ranges"), "bytes") << range;
    EXPECT_EQ(reply.offset, first) << range;
    EXPECT_EQ(reply.length, last - first + 1) << range;
    EXPECT_EQ(sent_bytes(reply), content.substr(first, last - first + 1)) << range;
  }
  void expect_whole(const std::string& range, std::string_view if_range = {}) {
    http::static_reply reply = get(range, if_range);
    EXPECT_EQ(reply.head.status, http::status::ok) << range << " / " << if_range;
    EXPECT_EQ(field(reply, "Content-Range"), "<absent>") << range;
    EXPECT_EQ(field(reply, "Content-Length"), "20") << range;
    EXPECT_EQ(sent_bytes(reply), content) << range;
  }
  void expect_unsatisfiable(const std::string& range, const char* file = "data.bin",
                            const char* size = "20") {
    http::static_reply reply = get(range, {}, http::method::get, file);
    EXPECT_EQ(reply.head.status, http::status::range_not_satisfiable) << range;
    EXPECT_EQ(field(reply, "Content-Range"), std::string("bytes */") + size) << range;
    EXPECT_EQ(field(reply, "Accept-Ranges"), "bytes") << range;
    EXPECT_FALSE(reply.has_file()) << range;
  }

  weft_static_test::tree tree_;
  std::size_t descriptors_ = 0;
  http::static_files server_ = make();
};

TEST_F(StaticRange, OneRangeOfEachFormIs206) {
  expect_partial("bytes=0-4", 0, 4);
  expect_partial("bytes=5-", 5, 19);
  expect_partial("bytes=-3", 17, 19);
  expect_partial("bytes=19-19", 19, 19);
  expect_partial("BYTES = 2-3", 2, 3);  // the unit is case-insensitive; OWS allowed
  expect_partial("bytes=3-3,", 3, 3);   // an empty list element is no second range
}

TEST_F(StaticRange, RangesPastTheEndAreClamped) {
  expect_partial("bytes=10-1000", 10, 19);
  expect_partial("bytes=-1000", 0, 19);
  expect_partial("bytes=0-99999999999999999999999999", 0, 19);
}

TEST_F(StaticRange, RangeStartingAtOrPastTheEndIs416WithTheSize) {
  expect_unsatisfiable("bytes=20-");
  expect_unsatisfiable("bytes=20-30");
  expect_unsatisfiable("bytes=99999999999999999999999999-");
  expect_unsatisfiable("bytes=-0");
}

TEST_F(StaticRange, AnEmptyFileIsSentWholeWhateverRangeIsAsked) {
  // Players and download managers ask for bytes=0- of everything: an empty file is their 200
  // with no content (nginx's answer), not a 416.
  for (const char* range : {"bytes=0-", "bytes=-5", "bytes=0-0", "bytes=3-"}) {
    http::static_reply reply = get(range, {}, http::method::get, "empty.bin");
    EXPECT_EQ(reply.head.status, http::status::ok) << range;
    EXPECT_EQ(field(reply, "Content-Length"), "0") << range;
    EXPECT_EQ(field(reply, "Content-Range"), "<absent>") << range;
    EXPECT_FALSE(reply.has_file()) << range;
  }
}

TEST_F(StaticRange, MalformedSendsTheWholeFile) {
  for (std::string range :
       {"bytes=abc", "bytes=5-3", "items=0-1", "bytes=", "bytes 0-1", "bytes=1", "bytes=--1",
        "bytes=1-2-3", "bytes=+1-2", "bytes=0x1-2", "bytes=0-1,abc", "bytes=0-1,5-3"}) {
    expect_whole(range);
  }
}

// One part of a multipart/byteranges body: its fields and its bytes.
struct part {
  std::string type;
  std::string range;
  std::string data;
};

// Splits a multipart/byteranges answer by the boundary its Content-Type names, checking the
// framing RFC 2046 asks for on the way (a test failure where it is broken).
std::vector<part> parts_of(const http::static_reply& reply) {
  std::vector<part> parts;
  const std::string type = field(reply, "Content-Type");
  const std::string prefix = "multipart/byteranges; boundary=";
  EXPECT_EQ(type.substr(0, prefix.size()), prefix);
  const std::string delimiter = "--" + type.substr(prefix.size());
  const std::string& body = reply.head.body;
  EXPECT_EQ(field(reply, "Content-Length"), std::to_string(body.size()));
  std::size_t at = 0;
  while (true) {
    EXPECT_EQ(body.compare(at, delimiter.size(), delimiter), 0) << "no delimiter at " << at;
    at += delimiter.size();
    if (body.compare(at, 4, "--\r\n") == 0) {
      EXPECT_EQ(at + 4, body.size()) << "bytes after the closing delimiter";
      return parts;
    }
    EXPECT_EQ(body.compare(at, 2, "\r\n"), 0);
    const std::size_t end_of_head = body.find("\r\n\r\n", at);
    if (end_of_head == std::string::npos) {
      ADD_FAILURE() << "a part without the end of its head";
      return parts;
    }
    part p;
    std::string head = body.substr(at + 2, end_of_head - at - 2);
    for (std::size_t line = 0; line < head.size();) {
      std::size_t end = head.find("\r\n", line);
      if (end == std::string::npos) end = head.size();
      const std::string text = head.substr(line, end - line);
      if (text.starts_with("Content-Type: ")) p.type = text.substr(14);
      if (text.starts_with("Content-Range: ")) p.range = text.substr(15);
      line = end + 2;
    }
    // The data runs to the CRLF before the next delimiter: its length is Content-Range's.
    const std::size_t data_start = end_of_head + 4;
    const std::size_t next = body.find("\r\n" + delimiter, data_start);
    if (next == std::string::npos) {
      ADD_FAILURE() << "a part without a delimiter after it";
      return parts;
    }
    p.data = body.substr(data_start, next - data_start);
    parts.push_back(std::move(p));
    at = next + 2;
  }
}

TEST_F(StaticRange, SeveralRangesAreOneMultipartAnswerInTheOrderAsked) {
  for (auto valid : {std::chrono::milliseconds(0), std::chrono::milliseconds(60000)}) {
    http::static_options options;
    options.root = tree_.root().string();
    options.cache_valid = valid;  // from the descriptor, then from the cache
    http::static_files files(options);
    for (int round = 0; round < 2; ++round) {
      http::request req = request_for("/data.bin");
      req.headers.add("Range", "bytes=10-11, 0-1,-2");
      http::static_reply reply = files.resolve(req, "data.bin");
      ASSERT_EQ(reply.head.status, http::status::partial_content);
      EXPECT_FALSE(reply.has_file());
      EXPECT_EQ(field(reply, "Content-Range"), "<absent>") << "each part has its own";
      EXPECT_EQ(field(reply, "Accept-Ranges"), "bytes");
      EXPECT_NE(field(reply, "ETag"), "<absent>");
      const std::vector<part> parts = parts_of(reply);
      ASSERT_EQ(parts.size(), 3u);
      const std::pair<const char*, const char*> expected[] = {
          {"bytes 10-11/20", "ab"}, {"bytes 0-1/20", "01"}, {"bytes 18-19/20", "ij"}};
      for (std::size_t i = 0; i < 3; ++i) {
        EXPECT_EQ(parts[i].type, "application/octet-stream");
        EXPECT_EQ(parts[i].range, expected[i].first);
        EXPECT_EQ(parts[i].data, expected[i].second);
      }
    }
  }
  // Each answer has a boundary of its own.
  http::request req = request_for("/data.bin");
  req.headers.add("Range", "bytes=0-0,2-2");
  EXPECT_NE(field(server_.resolve(req, "data.bin"), "Content-Type"),
            field(server_.resolve(req, "data.bin"), "Content-Type"));
}

TEST_F(StaticRange, RangesPastTheEndAreLeftOutOfAList) {
  // One satisfiable range left: a plain 206 of it.
  expect_partial("bytes=50-60,2-3", 2, 3);
  expect_partial("bytes=2-3, 20-", 2, 3);
  // None left: 416.
  expect_unsatisfiable("bytes=20-,50-60");
}

TEST_F(StaticRange, TooManyOverlappingOrTooLargeRangesSendTheWholeFile) {
  // 17 ranges (max_ranges is 16), overlapping ranges adding up past the file's size.
  std::string many = "bytes=0-0";
  for (int i = 1; i < 17; ++i) many += "," + std::to_string(i) + "-" + std::to_string(i);
  expect_whole(many);
  expect_whole("bytes=0-19,5-9");
  expect_whole("bytes=0-,0-");
  // 16 are fine, and overlapping ones are too while they add up to the size at most.
  http::request sixteen = request_for("/data.bin");
  sixteen.headers.add("Range", many.substr(0, many.rfind(',')));
  EXPECT_EQ(parts_of(server_.resolve(sixteen, "data.bin")).size(), 16u);
  http::request overlapping = request_for("/data.bin");
  overlapping.headers.add("Range", "bytes=0-9,5-14");
  EXPECT_EQ(parts_of(server_.resolve(overlapping, "data.bin")).size(), 2u);
  // max_ranges 1 turns multipart off; a body past multipart_max is not made.
  for (auto [max_ranges, multipart_max] :
       {std::pair<std::size_t, std::size_t>{1, 1 << 20}, {16, 100}}) {
    http::static_options options;
    options.root = tree_.root().string();
    options.max_ranges = max_ranges;
    options.multipart_max = multipart_max;
    http::static_files files(options);
    http::request req = request_for("/data.bin");
    req.headers.add("Range", "bytes=0-1,3-4");
    http::static_reply reply = files.resolve(req, "data.bin");
    EXPECT_EQ(reply.head.status, http::status::ok);
    EXPECT_EQ(sent_bytes(reply) + reply.head.body, content);
  }
  http::static_options none;
  none.root = tree_.root().string();
  none.max_ranges = 0;
  EXPECT_THROW(http::static_files{none}, std::invalid_argument);
}

TEST_F(StaticRange, IfRangeAppliesTheRangeOnlyForTheCurrentFile) {
  std::string tag = field(get(""), "ETag");
  EXPECT_EQ(get("bytes=0-1", tag).head.status, http::status::partial_content);
  EXPECT_EQ(get("bytes=0-1", http::format_http_date(modified)).head.status,
            http::status::partial_content);
  expect_whole("bytes=0-1", "\"stale\"");
  expect_whole("bytes=0-1", "W/" + tag);  // If-Range compares strongly
  expect_whole("bytes=0-1", http::format_http_date(modified + 1));
  expect_whole("bytes=0-1", "not a date");
  // A stale If-Range with an unsatisfiable range sends the whole file, not 416.
  expect_whole("bytes=50-", "\"stale\"");
}

TEST_F(StaticRange, FileModifiedThisSecondNeverMatchesIfRangeByDate) {
  auto path = tree_.root() / "data.bin";
  std::time_t now = std::time(nullptr) + 5;  // "now" or later: not a strong validator
  weft_static_test::tree::set_mtime(path, now);
  expect_whole("bytes=0-1", http::format_http_date(now));
}

TEST_F(StaticRange, HeadIgnoresRange) {
  http::static_reply reply = get("bytes=0-4", {}, http::method::head);
  EXPECT_EQ(reply.head.status, http::status::ok);
  EXPECT_EQ(field(reply, "Content-Length"), "20");
  EXPECT_FALSE(reply.has_file());
}

}  // namespace

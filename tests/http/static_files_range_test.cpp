// weft-test: driver-independent
// Byte ranges from static_files: one range of each form is 206 with Content-Range and the
// matching offset and length; a range past the end is 416 "bytes */SIZE"; several ranges or a
// malformed Range send the whole file (no multipart/byteranges); If-Range decides whether a
// range applies; HEAD ignores Range.
#include <gtest/gtest.h>

#include <ctime>
#include <string>

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
  // Any range of an empty file.
  expect_unsatisfiable("bytes=0-", "empty.bin", "0");
  expect_unsatisfiable("bytes=-5", "empty.bin", "0");
}

TEST_F(StaticRange, SeveralRangesOrMalformedSendTheWholeFile) {
  for (std::string range : {"bytes=0-1,3-4", "bytes=0-1, -2", "bytes=abc", "bytes=5-3", "items=0-1",
                            "bytes=", "bytes 0-1", "bytes=1", "bytes=--1", "bytes=1-2-3",
                            "bytes=+1-2", "bytes=0x1-2"}) {
    expect_whole(range);
  }
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

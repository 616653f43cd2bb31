// weft-test: driver-independent
// static_files' small-file cache: a file of at most cache_file_max bytes is answered from the
// resolving thread's memory for cache_valid (same head, its bytes in the body, no descriptor),
// then looked up afresh; big files, HEAD, ranges and the byte bound behave as the contract says.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "http/static_tree.hpp"
#include "weft/http/static_files.hpp"

namespace {

namespace http = weft::http;
using weft_static_test::field;
using weft_static_test::request_for;
using weft_static_test::sent_bytes;
using weft_static_test::tree;
using namespace std::chrono_literals;

http::static_files files_of(const tree& t, std::chrono::milliseconds valid,
                            std::size_t file_max = 64 << 10, std::size_t bytes = 8 << 20) {
  http::static_options options;
  options.root = t.root().string();
  options.cache_valid = valid;
  options.cache_file_max = file_max;
  options.cache_bytes = bytes;
  return http::static_files(options);
}

// Waits until `span` has passed since `since` (the cache's validity is a span of time: the test
// has to let it pass).
void let_pass(std::chrono::steady_clock::time_point since, std::chrono::milliseconds span) {
  while (std::chrono::steady_clock::now() - since <= span) {
    std::this_thread::sleep_for(5ms);
  }
}

TEST(StaticCache, ASmallFileIsAnsweredFromMemoryWithTheSameHead) {
  tree t;
  t.file("a.txt", "alpha\n");
  auto files = files_of(t, 60s);
  http::static_reply first = files.resolve(request_for("/a.txt"), "a.txt");
  http::static_reply second = files.resolve(request_for("/a.txt"), "a.txt");
  for (const http::static_reply* reply : {&first, &second}) {
    EXPECT_EQ(reply->head.status, http::status::ok);
    EXPECT_FALSE(reply->has_file());
    EXPECT_EQ(reply->head.body, "alpha\n");
    EXPECT_EQ(field(*reply, "Content-Length"), "6");
  }
  EXPECT_EQ(field(first, "ETag"), field(second, "ETag"));
  EXPECT_EQ(field(first, "Last-Modified"), field(second, "Last-Modified"));
}

TEST(StaticCache, AChangedFileIsServedAsItWasUntilCacheValidHasPassed) {
  tree t;
  t.file("a.txt", "version 1\n");
  auto files = files_of(t, 200ms);
  // The entry's time lies between these two: within cache_valid of the first it is surely
  // fresh, past cache_valid after the second surely stale.
  const auto cached_at = std::chrono::steady_clock::now();
  EXPECT_EQ(files.resolve(request_for("/a.txt"), "a.txt").head.body, "version 1\n");
  const auto read_by = std::chrono::steady_clock::now();
  t.file("a.txt", "version two\n");
  // Within cache_valid (a generous 200 ms; checked against the clock, so a slow machine that
  // got here late skips this half rather than fail it).
  http::static_reply meanwhile = files.resolve(request_for("/a.txt"), "a.txt");
  if (std::chrono::steady_clock::now() - cached_at < 200ms) {
    EXPECT_EQ(meanwhile.head.body, "version 1\n");
  }
  let_pass(read_by, 200ms);
  http::static_reply after = files.resolve(request_for("/a.txt"), "a.txt");
  EXPECT_EQ(after.head.body, "version two\n");
  EXPECT_EQ(field(after, "Content-Length"), "12");
}

TEST(StaticCache, FilesOverTheLimitAndAZeroValidityAreSentFromTheirDescriptor) {
  tree t;
  const std::string big(5000, 'b');
  t.file("big.txt", big);
  t.file("small.txt", "s");
  auto limited = files_of(t, 60s, 4096);
  for (int round = 0; round < 2; ++round) {
    http::static_reply reply = limited.resolve(request_for("/big.txt"), "big.txt");
    ASSERT_TRUE(reply.has_file());
    EXPECT_EQ(sent_bytes(reply), big);
    EXPECT_EQ(reply.head.body, "");
  }
  auto off = files_of(t, 0ms);
  for (int round = 0; round < 2; ++round) {
    http::static_reply reply = off.resolve(request_for("/small.txt"), "small.txt");
    ASSERT_TRUE(reply.has_file());
    EXPECT_EQ(sent_bytes(reply), "s");
  }
}

TEST(StaticCache, HeadRangesAndConditionsWorkOnACachedFile) {
  tree t;
  t.file("digits.txt", "0123456789");
  auto files = files_of(t, 60s);
  http::static_reply warm = files.resolve(request_for("/digits.txt"), "digits.txt");
  const std::string tag = field(warm, "ETag");

  http::static_reply head =
      files.resolve(request_for("/digits.txt", http::method::head), "digits.txt");
  EXPECT_EQ(head.head.body, "");
  EXPECT_FALSE(head.has_file());
  EXPECT_EQ(field(head, "Content-Length"), "10");

  http::request ranged = request_for("/digits.txt");
  ranged.headers.add("Range", "bytes=2-4");
  http::static_reply part = files.resolve(ranged, "digits.txt");
  EXPECT_EQ(part.head.status, http::status::partial_content);
  EXPECT_EQ(part.head.body, "234");
  EXPECT_EQ(field(part, "Content-Range"), "bytes 2-4/10");

  http::request conditional = request_for("/digits.txt");
  conditional.headers.add("If-None-Match", tag);
  http::static_reply same = files.resolve(conditional, "digits.txt");
  EXPECT_EQ(same.head.status, http::status::not_modified);
  EXPECT_EQ(same.head.body, "");
}

TEST(StaticCache, TheByteBoundEvictsButEveryAnswerStaysRight) {
  tree t;
  for (char name = 'a'; name <= 'f'; ++name) {
    t.file(std::string(1, name) + ".txt", std::string(3000, name));
  }
  // Room for three of the six files at most.
  auto files = files_of(t, 60s, 64 << 10, 10000);
  for (int round = 0; round < 3; ++round) {
    for (char name = 'a'; name <= 'f'; ++name) {
      const std::string path = std::string(1, name) + ".txt";
      http::static_reply reply = files.resolve(request_for("/" + path), path);
      const std::string bytes = reply.has_file() ? sent_bytes(reply) : reply.head.body;
      EXPECT_EQ(bytes, std::string(3000, name)) << path << " round " << round;
    }
  }
}

TEST(StaticCache, TwoInstancesOnTheSameTreeNeverShareEntries) {
  tree t;
  t.file("a.txt", "one");
  auto first = files_of(t, 60s);
  EXPECT_EQ(first.resolve(request_for("/a.txt"), "a.txt").head.body, "one");
  t.file("a.txt", "two!");
  auto second = files_of(t, 60s);
  EXPECT_EQ(second.resolve(request_for("/a.txt"), "a.txt").head.body, "two!");
}

}  // namespace

// weft-test: driver-independent
// static_options::precompressed: a client that takes gzip is sent NAME.gz in place of NAME
// (Content-Encoding, NAME's type, the sibling's own validators, ranges of its bytes), from the
// cache or from its descriptor; a client that does not gets NAME; both carry Vary exactly when a
// usable sibling exists. Stale, special and escaping siblings are never used, and the
// validators' answers (304, 206) vary as the 200 does.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "http/static_tree.hpp"
#include "weft/http/static_files.hpp"

namespace {

namespace http = weft::http;
using weft_static_test::field;
using weft_static_test::open_descriptors;
using weft_static_test::request_for;
using weft_static_test::sent_bytes;
using weft_static_test::tree;
using namespace std::chrono_literals;

// Stand-ins for the gzip bytes: the resolver never looks inside a sibling.
const std::string page = "<p>the page itself, as written</p>\n";
const std::string page_gz = "\x1f\x8b pretend gzip of the page";

http::static_files precompressing(const tree& t, std::chrono::milliseconds valid = 60s,
                                  std::size_t file_max = 64 << 10, std::size_t bytes = 8 << 20) {
  http::static_options options;
  options.root = t.root().string();
  options.precompressed = true;
  options.cache_valid = valid;
  options.cache_file_max = file_max;
  options.cache_bytes = bytes;
  return http::static_files(options);
}

http::request taking_gzip(std::string target, http::method m = http::method::get) {
  http::request req = request_for(std::move(target), m);
  req.headers.add("Accept-Encoding", "gzip, deflate, br");
  return req;
}

// The bytes of a reply, from the cache (its body) or its descriptor.
std::string bytes_of(const http::static_reply& reply) {
  return reply.has_file() ? sent_bytes(reply) : reply.head.body;
}

// A tree with page.html and its sibling, the sibling written a second later.
void write_page(const tree& t, const std::string& name = "page.html") {
  t.file(name, page);
  t.file(name + ".gz", page_gz);
  tree::set_mtime(t.root() / name, 1'700'000'000);
  tree::set_mtime(t.root() / (name + ".gz"), 1'700'000'001);
}

TEST(StaticPrecompressed, AClientTakingGzipGetsTheSiblingAndOneThatDoesNotGetsTheFile) {
  const std::size_t descriptors = weft_static_test::open_descriptors();
  tree t;
  write_page(t);
  // Cached (twice: the entry's fill, then a hit) and with the cache off.
  for (auto valid : {60s, 0s}) {
    auto files = precompressing(t, std::chrono::duration_cast<std::chrono::milliseconds>(valid));
    for (int round = 0; round < 2; ++round) {
      SCOPED_TRACE("cache_valid " + std::to_string(valid.count()) + " s, round " +
                   std::to_string(round));
      http::static_reply gz = files.resolve(taking_gzip("/page.html"), "page.html");
      EXPECT_EQ(gz.head.status, http::status::ok);
      EXPECT_EQ(bytes_of(gz), page_gz);
      EXPECT_EQ(field(gz, "Content-Encoding"), "gzip");
      EXPECT_EQ(field(gz, "Content-Type"), "text/html; charset=utf-8");
      EXPECT_EQ(field(gz, "Content-Length"), std::to_string(page_gz.size()));
      EXPECT_EQ(field(gz, "Vary"), "Accept-Encoding");
      EXPECT_EQ(field(gz, "Last-Modified"), http::format_http_date(1'700'000'001));

      http::static_reply plain = files.resolve(request_for("/page.html"), "page.html");
      EXPECT_EQ(bytes_of(plain), page);
      EXPECT_EQ(field(plain, "Content-Encoding"), "<absent>");
      EXPECT_EQ(field(plain, "Vary"), "Accept-Encoding");
      EXPECT_EQ(field(plain, "Last-Modified"), http::format_http_date(1'700'000'000));
      EXPECT_NE(field(plain, "ETag"), field(gz, "ETag")) << "two representations, two tags";

      // q=0 refuses gzip.
      http::request refusing = request_for("/page.html");
      refusing.headers.add("Accept-Encoding", "gzip;q=0, br");
      EXPECT_EQ(bytes_of(files.resolve(refusing, "page.html")), page);
    }
  }
  EXPECT_EQ(weft_static_test::open_descriptors(), descriptors);
}

TEST(StaticPrecompressed, OffByDefaultAndAFileWithoutASiblingDoesNotVary) {
  tree t;
  write_page(t);
  t.file("alone.txt", "no sibling\n");
  http::static_files plain_files(http::static_options{.root = t.root().string()});
  http::static_reply off = plain_files.resolve(taking_gzip("/page.html"), "page.html");
  EXPECT_EQ(bytes_of(off), page);
  EXPECT_EQ(field(off, "Vary"), "<absent>");
  auto files = precompressing(t);
  for (int round = 0; round < 2; ++round) {
    http::static_reply alone = files.resolve(taking_gzip("/alone.txt"), "alone.txt");
    EXPECT_EQ(bytes_of(alone), "no sibling\n");
    EXPECT_EQ(field(alone, "Vary"), "<absent>");
    EXPECT_EQ(field(alone, "Content-Encoding"), "<absent>");
  }
  // The sibling itself, asked for by name, is a file like any other.
  http::static_reply direct = files.resolve(taking_gzip("/page.html.gz"), "page.html.gz");
  EXPECT_EQ(bytes_of(direct), page_gz);
  EXPECT_EQ(field(direct, "Content-Encoding"), "<absent>");
}

TEST(StaticPrecompressed, StaleSpecialAndEscapingSiblingsAreNeverUsed) {
  tree t;
  // Older than its file: left behind by a deploy that changed the file.
  t.file("stale.css", "body{}\n");
  t.file("stale.css.gz", "old gzip");
  tree::set_mtime(t.root() / "stale.css", 1'700'000'100);
  tree::set_mtime(t.root() / "stale.css.gz", 1'700'000'000);
  // A directory, and a symlink that leaves the root.
  t.file("dir.txt", "a file\n");
  t.directory("dir.txt.gz");
  t.file("link.txt", "linked\n");
  t.symlink("link.txt.gz", "../../outside/secret.txt");
  // A symlink that stays under the root is followed, as for any file.
  t.file("inside.txt", "inside\n");
  t.file("real.gz", "inside gzip");
  tree::set_mtime(t.root() / "inside.txt", 1'700'000'000);
  tree::set_mtime(t.root() / "real.gz", 1'700'000'001);
  t.symlink("inside.txt.gz", "real.gz");
  for (auto valid : {60000ms, 0ms}) {
    auto files = precompressing(t, valid);
    for (const auto& [name, content] :
         {std::pair<std::string, std::string>{"stale.css", "body{}\n"},
          {"dir.txt", "a file\n"},
          {"link.txt", "linked\n"}}) {
      SCOPED_TRACE(name);
      http::static_reply reply = files.resolve(taking_gzip("/" + name), name);
      EXPECT_EQ(bytes_of(reply), content);
      EXPECT_EQ(field(reply, "Content-Encoding"), "<absent>");
      EXPECT_EQ(field(reply, "Vary"), "<absent>");
    }
    http::static_reply inside = files.resolve(taking_gzip("/inside.txt"), "inside.txt");
    EXPECT_EQ(bytes_of(inside), "inside gzip");
    EXPECT_EQ(field(inside, "Content-Encoding"), "gzip");
  }
}

TEST(StaticPrecompressed, ValidatorsAndRangesAreTheSiblingsOwnAndTheirAnswersVary) {
  tree t;
  write_page(t);
  for (auto valid : {60000ms, 0ms}) {
    auto files = precompressing(t, valid);
    const std::string gz_tag = field(files.resolve(taking_gzip("/page.html"), "page.html"), "ETag");
    const std::string plain_tag =
        field(files.resolve(request_for("/page.html"), "page.html"), "ETag");

    http::request revalidate = taking_gzip("/page.html");
    revalidate.headers.add("If-None-Match", gz_tag);
    http::static_reply not_modified = files.resolve(revalidate, "page.html");
    EXPECT_EQ(not_modified.head.status, http::status::not_modified);
    EXPECT_EQ(field(not_modified, "ETag"), gz_tag);
    EXPECT_EQ(field(not_modified, "Vary"), "Accept-Encoding");
    // The identity's tag does not revalidate the gzip, nor the other way round.
    revalidate.headers.set("If-None-Match", plain_tag);
    EXPECT_EQ(files.resolve(revalidate, "page.html").head.status, http::status::ok);
    http::request plain_revalidate = request_for("/page.html");
    plain_revalidate.headers.add("If-None-Match", plain_tag);
    http::static_reply plain_304 = files.resolve(plain_revalidate, "page.html");
    EXPECT_EQ(plain_304.head.status, http::status::not_modified);
    EXPECT_EQ(field(plain_304, "ETag"), plain_tag);
    EXPECT_EQ(field(plain_304, "Vary"), "Accept-Encoding");

    // A range is of the gzip's bytes, and says so.
    http::request range = taking_gzip("/page.html");
    range.headers.add("Range", "bytes=2-5");
    http::static_reply part = files.resolve(range, "page.html");
    EXPECT_EQ(part.head.status, http::status::partial_content);
    EXPECT_EQ(bytes_of(part), page_gz.substr(2, 4));
    EXPECT_EQ(field(part, "Content-Range"), "bytes 2-5/" + std::to_string(page_gz.size()));
    EXPECT_EQ(field(part, "Content-Encoding"), "gzip");
    EXPECT_EQ(field(part, "Vary"), "Accept-Encoding");
    range.headers.set("Range", "bytes=900-");
    http::static_reply past = files.resolve(range, "page.html");
    EXPECT_EQ(past.head.status, http::status::range_not_satisfiable);
    EXPECT_EQ(field(past, "Content-Range"), "bytes */" + std::to_string(page_gz.size()));

    // HEAD gets GET's head.
    http::static_reply head =
        files.resolve(taking_gzip("/page.html", http::method::head), "page.html");
    EXPECT_EQ(field(head, "Content-Length"), std::to_string(page_gz.size()));
    EXPECT_EQ(field(head, "Content-Encoding"), "gzip");
    EXPECT_EQ(bytes_of(head), "");
  }
}

TEST(StaticPrecompressed, ADirectorysIndexHasItsSiblingToo) {
  tree t;
  t.directory("docs");
  write_page(t, "docs/index.html");
  auto files = precompressing(t);
  for (int round = 0; round < 2; ++round) {
    http::static_reply index = files.resolve(taking_gzip("/docs/"), "docs/");
    EXPECT_EQ(bytes_of(index), page_gz);
    EXPECT_EQ(field(index, "Content-Type"), "text/html; charset=utf-8");
  }
}

TEST(StaticPrecompressed, ASiblingTooBigForTheCacheIsSentFromItsDescriptor) {
  const std::size_t descriptors = weft_static_test::open_descriptors();
  {
    tree t;
    const std::string big_gz(3000, 'z');
    t.file("app.js", "small enough to cache\n");
    t.file("app.js.gz", big_gz);
    tree::set_mtime(t.root() / "app.js", 1'700'000'000);
    tree::set_mtime(t.root() / "app.js.gz", 1'700'000'001);
    // The file fits cache_file_max (1 KiB); its sibling does not.
    auto files = precompressing(t, 60s, 1024);
    for (int round = 0; round < 3; ++round) {
      http::static_reply gz = files.resolve(taking_gzip("/app.js"), "app.js");
      EXPECT_TRUE(gz.has_file());
      EXPECT_EQ(bytes_of(gz), big_gz);
      EXPECT_EQ(field(gz, "Content-Encoding"), "gzip");
      http::static_reply plain = files.resolve(request_for("/app.js"), "app.js");
      EXPECT_FALSE(plain.has_file()) << "the file itself is cached";
      EXPECT_EQ(field(plain, "Vary"), "Accept-Encoding");
    }
    // Removed while the file's entry is fresh: the file itself, still with Vary.
    std::filesystem::remove(t.root() / "app.js.gz");
    http::static_reply after = files.resolve(taking_gzip("/app.js"), "app.js");
    EXPECT_EQ(bytes_of(after), "small enough to cache\n");
    EXPECT_EQ(field(after, "Content-Encoding"), "<absent>");
    // The same with both too big for the cache: both from their descriptors.
    const std::string big(5000, 'p');
    t.file("big.txt", big);
    t.file("big.txt.gz", big_gz);
    tree::set_mtime(t.root() / "big.txt", 1'700'000'000);
    tree::set_mtime(t.root() / "big.txt.gz", 1'700'000'001);
    http::static_reply big_gz_reply = files.resolve(taking_gzip("/big.txt"), "big.txt");
    EXPECT_EQ(bytes_of(big_gz_reply), big_gz);
    EXPECT_EQ(field(big_gz_reply, "Vary"), "Accept-Encoding");
    http::static_reply big_plain = files.resolve(request_for("/big.txt"), "big.txt");
    EXPECT_EQ(bytes_of(big_plain), big);
    EXPECT_EQ(field(big_plain, "Vary"), "Accept-Encoding");
  }
  EXPECT_EQ(weft_static_test::open_descriptors(), descriptors) << "every reply closed its file";
}

}  // namespace

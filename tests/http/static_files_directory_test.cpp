// weft-test: driver-independent
// Directories under static_files: named without a trailing '/' they redirect (301, query kept)
// to the same path with it; with it they serve the index file or 404, never a listing. Also
// HEAD (the head GET gets, no file) and what the constructor refuses.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "http/static_tree.hpp"
#include "weft/error.hpp"
#include "weft/http/static_files.hpp"

namespace fs = std::filesystem;
namespace http = weft::http;
using weft_static_test::field;
using weft_static_test::open_descriptors;
using weft_static_test::request_for;
using weft_static_test::sent_bytes;

namespace {

class StaticDirectory : public ::testing::Test {
 protected:
  void SetUp() override {
    descriptors_ = open_descriptors();
    tree_.file("index.html", "<h1>root</h1>\n");
    tree_.file("docs/index.html", "<h1>docs</h1>\n");
    tree_.file("docs/page.txt", "page\n");
    tree_.directory("empty");
    tree_.directory("odd/index.html");  // an index that is a directory
  }
  void TearDown() override {
    EXPECT_EQ(open_descriptors(), descriptors_) << "a descriptor was left open";
  }

  http::static_files files(std::string index = "index.html") const {
    http::static_options options;
    options.root = tree_.root().string();
    options.cache_valid = std::chrono::milliseconds(0);  // each resolve looks afresh
    options.index = std::move(index);
    return http::static_files(options);
  }

  weft_static_test::tree tree_;
  std::size_t descriptors_ = 0;
};

TEST_F(StaticDirectory, DirectoryWithoutSlashRedirectsToItWithTheQueryKept) {
  auto server = files();
  http::static_reply reply = server.resolve(request_for("/static/docs?lang=en&x=1"), "docs");
  EXPECT_EQ(reply.head.status, http::status::moved_permanently);
  EXPECT_EQ(field(reply, "Location"), "/static/docs/?lang=en&x=1");
  EXPECT_EQ(field(reply, "Content-Length"), "0");
  EXPECT_FALSE(reply.has_file());
  // Without a query, none is added; an absolute-form target redirects by its path.
  EXPECT_EQ(field(server.resolve(request_for("/static/empty"), "empty"), "Location"),
            "/static/empty/");
  EXPECT_EQ(
      field(server.resolve(request_for("http://example.test/static/docs"), "docs"), "Location"),
      "/static/docs/");
}

TEST_F(StaticDirectory, TheRootItselfRedirectsOrServesItsIndex) {
  auto server = files();
  // A route "/static" matched the whole path: no '/' after it.
  http::static_reply bare = server.resolve(request_for("/static"), "");
  EXPECT_EQ(bare.head.status, http::status::moved_permanently);
  EXPECT_EQ(field(bare, "Location"), "/static/");
  EXPECT_EQ(sent_bytes(server.resolve(request_for("/static/"), "")), "<h1>root</h1>\n");
  EXPECT_EQ(sent_bytes(server.resolve(request_for("/static/"), "/")), "<h1>root</h1>\n");
  EXPECT_EQ(sent_bytes(server.resolve(request_for("/"), "/")), "<h1>root</h1>\n");
}

TEST_F(StaticDirectory, RedirectNeverLeavesTheSite) {
  auto server = files();
  // "//evil.example/docs/" would be a network-path reference: the browser would go there.
  EXPECT_EQ(field(server.resolve(request_for("//evil.example/docs"), "docs"), "Location"),
            "/evil.example/docs/");
  EXPECT_EQ(field(server.resolve(request_for("/\\evil.example/docs"), "docs"), "Location"),
            "/evil.example/docs/");
}

TEST_F(StaticDirectory, DirectoryWithSlashServesItsIndexAsHtml) {
  auto server = files();
  http::static_reply reply = server.resolve(request_for("/static/docs/"), "docs/");
  ASSERT_EQ(reply.head.status, http::status::ok);
  EXPECT_EQ(field(reply, "Content-Type"), "text/html; charset=utf-8");
  EXPECT_EQ(sent_bytes(reply), "<h1>docs</h1>\n");
}

TEST_F(StaticDirectory, NoIndexIs404AndNeverAListing) {
  auto server = files();
  for (std::string path : {"empty/", "odd/", "missing/"}) {
    http::static_reply reply = server.resolve(request_for("/static/" + path), path);
    EXPECT_EQ(reply.head.status, http::status::not_found) << path;
    EXPECT_EQ(reply.head.body, "Not Found\n") << path;
  }
  // With no index configured, a directory with an index.html is 404 too.
  auto no_index = files("");
  EXPECT_EQ(no_index.resolve(request_for("/static/docs/"), "docs/").head.status,
            http::status::not_found);
  EXPECT_EQ(no_index.resolve(request_for("/static/docs"), "docs").head.status,
            http::status::moved_permanently);
  // Another index name is honoured.
  auto other = files("page.txt");
  EXPECT_EQ(sent_bytes(other.resolve(request_for("/static/docs/"), "docs/")), "page\n");
}

TEST_F(StaticDirectory, FileWithTrailingSlashIs404) {
  auto server = files();
  EXPECT_EQ(server.resolve(request_for("/static/docs/page.txt/"), "docs/page.txt/").head.status,
            http::status::not_found);
}

TEST_F(StaticDirectory, HeadGetsTheHeadOfGetAndNoFile) {
  auto server = files();
  http::static_reply get = server.resolve(request_for("/static/docs/page.txt"), "docs/page.txt");
  http::static_reply head =
      server.resolve(request_for("/static/docs/page.txt", http::method::head), "docs/page.txt");
  EXPECT_EQ(head.head.status, http::status::ok);
  EXPECT_EQ(head.head.headers, get.head.headers);
  EXPECT_FALSE(head.has_file());
  EXPECT_EQ(head.length, 0u);
  EXPECT_TRUE(get.has_file());
  // HEAD of a missing file still says 404 (its short body is for GET; a HEAD serialiser omits
  // it).
  EXPECT_EQ(server.resolve(request_for("/x", http::method::head), "x").head.status,
            http::status::not_found);
}

TEST_F(StaticDirectory, EmptyFileHasContentLengthZeroAndNoFile) {
  tree_.file("empty.txt", "");
  auto server = files();
  http::static_reply reply = server.resolve(request_for("/empty.txt"), "empty.txt");
  EXPECT_EQ(reply.head.status, http::status::ok);
  EXPECT_EQ(field(reply, "Content-Length"), "0");
  EXPECT_FALSE(reply.has_file());
}

TEST_F(StaticDirectory, ConstructorRefusesBadOptionsNamingThem) {
  auto message_of = [](http::static_options options) -> std::string {
    try {
      http::static_files server(std::move(options));
    } catch (const std::invalid_argument& failure) {
      return failure.what();
    }
    return "<no exception>";
  };
  http::static_options missing;
  missing.root = (tree_.base() / "nowhere").string();
  EXPECT_NE(message_of(missing).find(missing.root + "' does not exist"), std::string::npos)
      << message_of(missing);
  http::static_options a_file;
  a_file.root = (tree_.root() / "index.html").string();
  EXPECT_NE(message_of(a_file).find("is not a directory"), std::string::npos);
  EXPECT_NE(message_of(http::static_options{}).find("root is empty"), std::string::npos);
  for (std::string index : {"a/b.html", "..", "."}) {
    http::static_options bad_index;
    bad_index.root = tree_.root().string();
    bad_index.index = index;
    EXPECT_NE(message_of(bad_index).find("'" + index + "' must be a plain file name"),
              std::string::npos)
        << index;
  }
  http::static_options negative;
  negative.root = tree_.root().string();
  negative.max_age = std::chrono::seconds(-1);
  EXPECT_NE(message_of(negative).find("max_age is negative"), std::string::npos);
}

TEST_F(StaticDirectory, UnreachableRootIsAnIoErrorNamingIt) {
  fs::path locked = tree_.base() / "locked";
  fs::create_directories(locked / "www");
  fs::permissions(locked, fs::perms::none);
  http::static_options options;
  options.root = (locked / "www").string();
  std::string message;
  {
    weft_static_test::permission_bits_enforced enforced;
    try {
      http::static_files server(options);
    } catch (const weft::io_error& failure) {
      message = failure.what();
    }
  }
  EXPECT_NE(message.find(options.root), std::string::npos) << message;
  EXPECT_NE(message.find("ermission denied"), std::string::npos) << message;
}

TEST_F(StaticDirectory, TheRootIsOpenedOnceRenamingItLaterChangesNothing) {
  auto server = files();
  fs::rename(tree_.root(), tree_.base() / "moved");
  EXPECT_EQ(sent_bytes(server.resolve(request_for("/docs/page.txt"), "docs/page.txt")), "page\n");
  fs::rename(tree_.base() / "moved", tree_.root());
}

}  // namespace

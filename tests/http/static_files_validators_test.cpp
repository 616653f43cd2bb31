// weft-test: driver-independent
// static_files' validators and preconditions: the strong ETag and Last-Modified every file
// response carries, Cache-Control, 304 for If-None-Match (weak comparison, lists, "*") and,
// only without it, If-Modified-Since; 412 for If-Match and If-Unmodified-Since; the options
// that switch validators off.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <chrono>
#include <ctime>
#include <string>

#include "http/static_tree.hpp"
#include "weft/http/static_files.hpp"

namespace http = weft::http;
using weft_static_test::field;
using weft_static_test::open_descriptors;
using weft_static_test::request_for;

namespace {

// 2001-09-09 01:46:40 UTC: a modification time well in the past.
constexpr std::time_t modified = 1'000'000'000;

class StaticValidators : public ::testing::Test {
 protected:
  void SetUp() override {
    descriptors_ = open_descriptors();
    path_ = tree_.file("app.js", "console.log(1);\n");
    weft_static_test::tree::set_mtime(path_, modified);
  }
  void TearDown() override {
    EXPECT_EQ(open_descriptors(), descriptors_) << "a descriptor was left open";
  }

  http::static_files files(bool etag = true, bool last_modified = true,
                           std::chrono::seconds max_age = std::chrono::seconds(0)) const {
    http::static_options options;
    options.root = tree_.root().string();
    options.cache_valid = std::chrono::milliseconds(0);  // each resolve looks afresh
    options.etag = etag;
    options.last_modified = last_modified;
    options.max_age = max_age;
    return http::static_files(options);
  }
  // A GET of app.js with one extra field (none when name is empty).
  http::static_reply get(const http::static_files& server, std::string_view name = {},
                         std::string_view value = {}, http::method m = http::method::get) const {
    http::request req = request_for("/app.js", m);
    if (!name.empty()) req.headers.add(name, value);
    return server.resolve(req, "app.js");
  }
  std::string etag_now() const { return field(get(files()), "ETag"); }

  weft_static_test::tree tree_;
  std::filesystem::path path_;
  std::size_t descriptors_ = 0;
};

TEST_F(StaticValidators, FileResponseCarriesStrongEtagLastModifiedAndCacheControl) {
  http::static_reply reply = get(files());
  ASSERT_EQ(reply.head.status, http::status::ok);
  struct stat st {};
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  char expected[80];
  std::snprintf(expected, sizeof expected, "\"%llx-%llx-%llx\"",
                static_cast<unsigned long long>(st.st_ino),
                static_cast<unsigned long long>(st.st_size),
                static_cast<unsigned long long>(modified) * 1'000'000'000ull);
  EXPECT_EQ(field(reply, "ETag"), expected);
  EXPECT_EQ(field(reply, "Last-Modified"), "Sun, 09 Sep 2001 01:46:40 GMT");
  EXPECT_EQ(field(reply, "Last-Modified"), http::format_http_date(modified));
  EXPECT_EQ(field(reply, "Cache-Control"), "no-cache");
  EXPECT_EQ(field(reply, "Content-Type"), "text/javascript; charset=utf-8");
  EXPECT_EQ(field(get(files(true, true, std::chrono::hours(1))), "Cache-Control"), "max-age=3600");
}

TEST_F(StaticValidators, EtagChangesWithTheContentAndTheNanosecondsOfMtime) {
  std::string before = etag_now();
  timespec times[2] = {{modified, 1}, {modified, 1}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path_.c_str(), times, 0), 0);
  std::string nanosecond_later = etag_now();
  EXPECT_NE(nanosecond_later, before);
  tree_.file("app.js", "console.log(22);\n");
  weft_static_test::tree::set_mtime(path_, modified);
  EXPECT_NE(etag_now(), before);  // the size differs
}

TEST_F(StaticValidators, MatchingIfNoneMatchIs304WithValidatorsAndNoContent) {
  auto server = files();
  std::string tag = etag_now();
  http::static_reply reply = get(server, "If-None-Match", tag);
  EXPECT_EQ(reply.head.status, http::status::not_modified);
  EXPECT_FALSE(reply.has_file());
  EXPECT_TRUE(reply.head.body.empty());
  EXPECT_EQ(field(reply, "ETag"), tag);
  EXPECT_EQ(field(reply, "Cache-Control"), "no-cache");
  EXPECT_EQ(field(reply, "Content-Length"), "<absent>");
  EXPECT_EQ(field(reply, "Last-Modified"), "<absent>");  // the ETag is the validator
  // The same on HEAD.
  EXPECT_EQ(get(server, "If-None-Match", tag, http::method::head).head.status,
            http::status::not_modified);
}

TEST_F(StaticValidators, IfNoneMatchComparesWeaklyOverListsAndStar) {
  auto server = files();
  std::string tag = etag_now();
  EXPECT_EQ(get(server, "If-None-Match", "W/" + tag).head.status, http::status::not_modified);
  EXPECT_EQ(get(server, "If-None-Match", "\"a\", W/\"b\" ," + tag).head.status,
            http::status::not_modified);
  EXPECT_EQ(get(server, "If-None-Match", "*").head.status, http::status::not_modified);
  EXPECT_EQ(get(server, "If-None-Match", "\"other\", W/\"x\"").head.status, http::status::ok);
  EXPECT_EQ(get(server, "If-None-Match", tag.substr(1, tag.size() - 2)).head.status,
            http::status::ok);  // unquoted: not an entity tag
  // A tag holding a comma inside its quotes is one tag.
  EXPECT_EQ(get(server, "If-None-Match", "\"a," + tag.substr(1)).head.status, http::status::ok);
}

TEST_F(StaticValidators, IfModifiedSinceIs304OnlyWhenNotModifiedSince) {
  auto server = files();
  EXPECT_EQ(get(server, "If-Modified-Since", http::format_http_date(modified)).head.status,
            http::status::not_modified);
  EXPECT_EQ(get(server, "If-Modified-Since", http::format_http_date(modified + 60)).head.status,
            http::status::not_modified);
  http::static_reply older = get(server, "If-Modified-Since", http::format_http_date(modified - 1));
  EXPECT_EQ(older.head.status, http::status::ok);
  EXPECT_TRUE(older.has_file());
  // The obsolete forms count too.
  EXPECT_EQ(get(server, "If-Modified-Since", "Sunday, 09-Sep-01 01:46:40 GMT").head.status,
            http::status::not_modified);
  EXPECT_EQ(get(server, "If-Modified-Since", "Sun Sep  9 01:46:40 2001").head.status,
            http::status::not_modified);
}

TEST_F(StaticValidators, InvalidIfModifiedSinceIsIgnored) {
  auto server = files();
  for (std::string date :
       {"yesterday", "Sun, 09 Sep 2001 01:46:40", "Sun, 31 Feb 2001 00:00:00 GMT",
        "Sun, 09 Sep 2001 25:00:00 GMT", "", "1000000000"}) {
    EXPECT_EQ(get(server, "If-Modified-Since", date).head.status, http::status::ok) << date;
  }
}

TEST_F(StaticValidators, IfModifiedSinceIsIgnoredWhenIfNoneMatchIsPresent) {
  auto server = files();
  http::request req = request_for("/app.js");
  req.headers.add("If-None-Match", "\"stale\"");
  req.headers.add("If-Modified-Since", http::format_http_date(modified + 3600));
  EXPECT_EQ(server.resolve(req, "app.js").head.status, http::status::ok);
}

TEST_F(StaticValidators, IfMatchAndIfUnmodifiedSinceFailWith412) {
  auto server = files();
  std::string tag = etag_now();
  EXPECT_EQ(get(server, "If-Match", "\"stale\"").head.status, http::status::precondition_failed);
  EXPECT_EQ(get(server, "If-Match", "W/" + tag).head.status,
            http::status::precondition_failed);  // strong comparison
  EXPECT_EQ(get(server, "If-Match", tag).head.status, http::status::ok);
  EXPECT_EQ(get(server, "If-Match", "*").head.status, http::status::ok);
  EXPECT_EQ(get(server, "If-Unmodified-Since", http::format_http_date(modified - 1)).head.status,
            http::status::precondition_failed);
  EXPECT_EQ(get(server, "If-Unmodified-Since", http::format_http_date(modified)).head.status,
            http::status::ok);
  http::static_reply failed = get(server, "If-Match", "\"stale\"");
  EXPECT_FALSE(failed.has_file());
  EXPECT_EQ(failed.head.body, "Precondition Failed\n");
}

TEST_F(StaticValidators, AModificationTimeInTheFutureIsGivenAsNow) {
  // RFC 9110 8.8.2.1: a Last-Modified later than the response's Date is replaced by it; a
  // client's If-Modified-Since from the future date would otherwise hide every change until then.
  const std::time_t later = std::time(nullptr) + 10 * 365 * 24 * 3600;
  weft_static_test::tree::set_mtime(path_, later);
  const std::time_t before = std::time(nullptr);
  const http::static_reply reply = get(files());
  const std::time_t after = std::time(nullptr);
  const std::string last_modified = field(reply, "Last-Modified");
  EXPECT_TRUE(last_modified == http::format_http_date(before) ||
              last_modified == http::format_http_date(after))
      << last_modified;
  // Revalidated with what it was given, in the same second, it is not modified.
  const http::static_reply again = get(files(), "If-Modified-Since", last_modified);
  if (std::time(nullptr) == after) {
    EXPECT_EQ(again.head.status, http::status::not_modified);
  }
}

TEST_F(StaticValidators, SwitchedOffValidatorsAreNeitherSentNorHonoured) {
  auto no_etag = files(false, true);
  http::static_reply reply = get(no_etag);
  EXPECT_EQ(field(reply, "ETag"), "<absent>");
  EXPECT_EQ(field(reply, "Last-Modified"), http::format_http_date(modified));
  // If-None-Match counts as absent, so If-Modified-Since decides; the 304 carries
  // Last-Modified for want of an ETag.
  http::request req = request_for("/app.js");
  req.headers.add("If-None-Match", "*");
  EXPECT_EQ(no_etag.resolve(req, "app.js").head.status, http::status::ok);
  req.headers.add("If-Modified-Since", http::format_http_date(modified));
  http::static_reply not_modified = no_etag.resolve(req, "app.js");
  EXPECT_EQ(not_modified.head.status, http::status::not_modified);
  EXPECT_EQ(field(not_modified, "Last-Modified"), http::format_http_date(modified));

  auto no_dates = files(true, false);
  EXPECT_EQ(field(get(no_dates), "Last-Modified"), "<absent>");
  EXPECT_EQ(get(no_dates, "If-Modified-Since", http::format_http_date(modified)).head.status,
            http::status::ok);
}

}  // namespace

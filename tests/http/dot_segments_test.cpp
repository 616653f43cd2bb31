// weft-test: driver-independent
// detail::has_dot_segment (src/http/dot_segments.hpp), which the router and the reverse proxy
// refuse paths by: "." and ".." segments written as dots or percent-encoded in any case and
// mix, anywhere in the path, against names that only look alike.
#include "http/dot_segments.hpp"

#include <gtest/gtest.h>

namespace {

using weft::http::detail::has_dot_segment;

TEST(HttpDotSegments, DotSegmentsAreFoundHoweverWritten) {
  for (const char* path : {"/.", "/..", "/./", "/../", "/a/..", "/a/../b", "/a/./b", "/a/.", "/%2e",
                           "/%2E", "/%2e%2e", "/%2E%2e/x", "/.%2e/x", "/%2e./x", "/a/b/%2e%2E",
                           "/a//../b", "//..", "/api/../admin", "/pub/%2e%2e/api/ok"}) {
    EXPECT_TRUE(has_dot_segment(path)) << path;
  }
}

TEST(HttpDotSegments, NamesThatOnlyLookAlikeAreNot) {
  for (const char* path :
       {"/",      "",      "/a",     "/...",           "/..../x",     "/.x",          "/x.",
        "/a.b/c", "/..a",  "/a..",   "/.well-known/x", "/%2e%2e%2e",  "/%2ex",        "/%2",
        "/%2e%2", "/a%2e", "/%2f..", "/..%2f",         "/%252e%252e", "/file.tar.gz", "/.%2fx"}) {
    EXPECT_FALSE(has_dot_segment(path)) << path;
  }
}

}  // namespace

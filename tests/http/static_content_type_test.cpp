// weft-test: driver-independent
// content_type_for: the media type by extension, case-insensitive, text types with their
// charset, application/octet-stream for anything unknown.
#include <gtest/gtest.h>

#include <string_view>

#include "weft/http/static_files.hpp"

namespace http = weft::http;

namespace {

TEST(StaticContentType, KnownExtensionsGetTheirTypes) {
  struct expectation {
    std::string_view name;
    std::string_view type;
  };
  for (auto [name, type] : std::initializer_list<expectation>{
           {"index.html", "text/html; charset=utf-8"},
           {"old.htm", "text/html; charset=utf-8"},
           {"site.css", "text/css; charset=utf-8"},
           {"app.js", "text/javascript; charset=utf-8"},
           {"module.mjs", "text/javascript; charset=utf-8"},
           {"data.json", "application/json"},
           {"notes.txt", "text/plain; charset=utf-8"},
           {"logo.svg", "image/svg+xml"},
           {"logo.png", "image/png"},
           {"photo.jpg", "image/jpeg"},
           {"photo.jpeg", "image/jpeg"},
           {"anim.gif", "image/gif"},
           {"pic.webp", "image/webp"},
           {"favicon.ico", "image/x-icon"},
           {"code.wasm", "application/wasm"},
           {"paper.pdf", "application/pdf"},
           {"feed.xml", "application/xml"},
           {"font.woff", "font/woff"},
           {"font.woff2", "font/woff2"},
           {"clip.mp4", "video/mp4"},
           {"clip.webm", "video/webm"},
           {"site.webmanifest", "application/manifest+json"},
       }) {
    EXPECT_EQ(http::content_type_for(name), type) << name;
  }
}

TEST(StaticContentType, ExtensionsCompareCaseInsensitively) {
  EXPECT_EQ(http::content_type_for("INDEX.HTML"), "text/html; charset=utf-8");
  EXPECT_EQ(http::content_type_for("Photo.JpEg"), "image/jpeg");
  EXPECT_EQ(http::content_type_for("font.WOFF2"), "font/woff2");
}

TEST(StaticContentType, UnknownOrMissingExtensionIsOctetStream) {
  for (std::string_view name :
       {"archive.xyz", "README", "", ".", "trailing.", ".profile", "a.b/noext", "dir.html/file",
        "x.verylongextension", "page.html.bak", "a.htmll"}) {
    EXPECT_EQ(http::content_type_for(name), "application/octet-stream") << name;
  }
  // A NUL ends nothing: "htm\0l" is not "htm".
  EXPECT_EQ(http::content_type_for(std::string_view("a.htm\0l", 7)), "application/octet-stream");
  // Only the last extension counts, and directories before the name do not.
  EXPECT_EQ(http::content_type_for("archive.tar.gz"), "application/gzip");
  EXPECT_EQ(http::content_type_for("css.d/site.css"), "text/css; charset=utf-8");
}

}  // namespace

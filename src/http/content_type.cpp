// content_type_for (static_files.hpp): the media type of a file by its extension.
//
// A sorted table searched by binary search on the lowercased extension: no allocation, no
// locale, and the answer never depends on the machine (/etc/mime.types differs between hosts,
// and a static server that answers differently on two of them is hard to debug).
#include <algorithm>
#include <array>
#include <cstddef>
#include <string_view>

#include "http/chars.hpp"
#include "weft/http/static_files.hpp"

namespace weft::http {

namespace {

struct media_type {
  std::string_view extension;  // lowercase, without the dot
  std::string_view type;
};

// Text types carry the charset: browsers otherwise guess it (windows-1252 for text/plain in
// some), and everything a web project ships today is UTF-8. JSON has no charset parameter
// (RFC 8259: it is UTF-8 by definition), nor do XML and SVG (their declaration says it).
constexpr std::array<media_type, 39> table = {{
    {"avif", "image/avif"},
    {"bmp", "image/bmp"},
    {"css", "text/css; charset=utf-8"},
    {"csv", "text/csv; charset=utf-8"},
    {"gif", "image/gif"},
    {"gz", "application/gzip"},
    {"htm", "text/html; charset=utf-8"},
    {"html", "text/html; charset=utf-8"},
    {"ico", "image/x-icon"},
    {"jpeg", "image/jpeg"},
    {"jpg", "image/jpeg"},
    {"js", "text/javascript; charset=utf-8"},
    {"json", "application/json"},
    {"map", "application/json"},
    {"md", "text/markdown; charset=utf-8"},
    {"mjs", "text/javascript; charset=utf-8"},
    {"mp3", "audio/mpeg"},
    {"mp4", "video/mp4"},
    {"oga", "audio/ogg"},
    {"ogg", "audio/ogg"},
    {"ogv", "video/ogg"},
    {"otf", "font/otf"},
    {"pdf", "application/pdf"},
    {"png", "image/png"},
    {"svg", "image/svg+xml"},
    {"tar", "application/x-tar"},
    {"ttf", "font/ttf"},
    {"txt", "text/plain; charset=utf-8"},
    {"wasm", "application/wasm"},
    {"wav", "audio/wav"},
    {"webm", "video/webm"},
    {"webmanifest", "application/manifest+json"},
    {"webp", "image/webp"},
    {"woff", "font/woff"},
    {"woff2", "font/woff2"},
    {"xhtml", "application/xhtml+xml"},
    {"xml", "application/xml"},
    {"yaml", "text/yaml; charset=utf-8"},
    {"zip", "application/zip"},
}};

constexpr std::size_t longest_extension = 11;  // "webmanifest"

constexpr bool sorted_and_lowercase() {
  for (std::size_t i = 0; i < table.size(); ++i) {
    if (table[i].extension.size() > longest_extension) return false;
    for (char c : table[i].extension) {
      if (c >= 'A' && c <= 'Z') return false;
    }
    if (i > 0 && !(table[i - 1].extension < table[i].extension)) return false;
  }
  return true;
}
static_assert(sorted_and_lowercase(), "the media type table must be sorted, lowercase, short");

constexpr std::string_view octet_stream = "application/octet-stream";

}  // namespace

std::string_view content_type_for(std::string_view file_name) noexcept {
  std::size_t slash = file_name.find_last_of('/');
  if (slash != std::string_view::npos) file_name.remove_prefix(slash + 1);
  std::size_t dot = file_name.rfind('.');
  // No dot, or only a leading one (".profile" is a name, not an extension).
  if (dot == std::string_view::npos || dot == 0) return octet_stream;
  std::string_view extension = file_name.substr(dot + 1);
  if (extension.empty() || extension.size() > longest_extension) return octet_stream;
  char lowered[longest_extension];
  for (std::size_t i = 0; i < extension.size(); ++i) {
    lowered[i] = static_cast<char>(detail::ascii_lower(static_cast<unsigned char>(extension[i])));
  }
  std::string_view key(lowered, extension.size());
  auto it =
      std::lower_bound(table.begin(), table.end(), key,
                       [](const media_type& m, std::string_view k) { return m.extension < k; });
  return it != table.end() && it->extension == key ? it->type : octet_stream;
}

}  // namespace weft::http

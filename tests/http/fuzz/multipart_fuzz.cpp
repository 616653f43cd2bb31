// libFuzzer target over weft::http::multipart_reader (src/http/forms.cpp), which reads bytes a
// client chose: every form upload a server takes.
//
// Input layout: byte 0 picks the size of the pieces the body arrives in (1 to 64 bytes, or the
// whole body at once when it is 0) and small limits (bit 7: max_parts 4, max_head_size 64);
// then the boundary up to the first '\n'; then the body.
//
// Invariants (a violation aborts; form_error is the only failure the reader may raise):
//   - the same body gives the same parts, bytes and outcome (the same error, at the same
//     point) whatever the pieces it arrives in: the reader's state never depends on where a
//     piece ended;
//   - no part's bytes hold a delimiter ("\r\n--" + boundary), and every piece read() hands out
//     is non-empty; all of them together are no more than the body;
//   - a part has a name (possibly empty) and a filename, when it has one, without '/' or '\';
//   - parts() never passes max_parts, and after an error or the end next_part() gives nothing.
//
// Build and run: the http fuzz project (tests/http/fuzz/CMakeLists.txt) builds it as
// http_multipart_fuzz;
//   build/fuzz/http_multipart_fuzz -dict=tests/http/fuzz/multipart.dict -max_total_time=3600 \
//       build/fuzz/multipart-corpus tests/http/fuzz/multipart-corpus
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "weft/http/forms.hpp"

namespace http = weft::http;

namespace {

[[noreturn]] void violated(const char* what, std::string_view detail) {
  std::fprintf(stderr, "http_multipart_fuzz: invariant violated: %s [%.*s]\n", what,
               static_cast<int>(detail.size() > 200 ? 200 : detail.size()), detail.data());
  std::abort();
}

void check(bool ok, const char* what, std::string_view detail = {}) {
  if (!ok) violated(what, detail);
}

// What one reading of the body came to: each part's head and bytes, then how it ended.
struct outcome {
  std::vector<std::string> parts;  // name, filename, type and bytes, joined
  std::string ending;              // "end", or the error's status and message
  bool operator==(const outcome&) const = default;
};

outcome read_form(const std::string& content_type, std::string_view body, std::size_t step,
                  http::multipart_limits limits, const std::string& delimiter) {
  outcome got;
  std::size_t at = 0;
  std::string current;
  auto source = [&]() -> std::optional<std::string_view> {
    if (at >= body.size()) return std::nullopt;
    const std::size_t n = step == 0 ? body.size() - at : std::min(step, body.size() - at);
    current.assign(body.substr(at, n));
    at += n;
    return std::string_view(current);
  };
  std::size_t handed_out = 0;
  try {
    http::multipart_reader reader(content_type, source, limits);
    try {
      while (std::optional<http::form_part> part = reader.next_part()) {
        check(reader.parts() <= limits.max_parts, "more parts than max_parts");
        if (part->filename) {
          check(part->filename->find_first_of("/\\") == std::string::npos,
                "a filename with a directory", *part->filename);
        }
        std::string data;
        while (std::optional<std::string_view> piece = reader.read()) {
          check(!piece->empty(), "an empty piece");
          handed_out += piece->size();
          data.append(*piece);
        }
        check(data.find(delimiter) == std::string::npos, "a part's bytes hold a delimiter", data);
        got.parts.push_back(part->name + '\0' + part->filename.value_or("<none>") + '\0' +
                            part->content_type + '\0' + data);
      }
      got.ending = "end";
    } catch (const http::form_error& e) {
      got.ending = std::to_string(static_cast<int>(e.status())) + " " + e.what();
    }
    check(!reader.next_part(), "a part after the end or an error");
  } catch (const http::form_error& e) {
    got.ending = "refused " + std::to_string(static_cast<int>(e.status())) + " " + e.what();
  }
  check(handed_out <= body.size(), "more bytes handed out than the body holds");
  return got;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const std::uint8_t mode = data[0];
  std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::size_t newline = rest.find('\n');
  if (newline == std::string_view::npos) return 0;
  const std::string boundary(rest.substr(0, newline));
  const std::string_view body = rest.substr(newline + 1);
  const std::string content_type = "multipart/form-data; boundary=\"" + boundary + "\"";
  http::multipart_limits limits;
  if (mode & 0x80) limits = {.max_parts = 4, .max_head_size = 64};
  const std::size_t step = mode & 0x3F;  // 0: the whole body in one piece
  const std::string delimiter = "\r\n--" + boundary;
  const outcome pieces = read_form(content_type, body, step, limits, delimiter);
  const outcome whole = read_form(content_type, body, 0, limits, delimiter);
  const outcome bytes = read_form(content_type, body, 1, limits, delimiter);
  check(pieces == whole && whole == bytes, "the outcome depends on the pieces the body arrived in",
        whole.ending);
  return 0;
}

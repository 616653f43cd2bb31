// gzip for response bodies. The contract is server_options::compression's comment
// (include/weft/http/server.hpp); the helpers are described in compression.hpp.
#include "http/compression.hpp"

#include <zlib.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <vector>

#include "http/chars.hpp"
#include "net/zlib_stream.hpp"

namespace weft::http::detail {

namespace {

// A qvalue (RFC 9110 12.4.2): "0", "0.", "0.0" to "0.000" are zero; anything else that parses
// is above it. A malformed one counts as 1 (what the client meant was most likely "take it").
bool q_above_zero(std::string_view q) noexcept {
  if (q.empty() || q[0] != '0') {
    return true;
  }
  for (std::size_t i = 1; i < q.size(); ++i) {
    if (q[i] != '.' && q[i] != '0') {
      return true;
    }
  }
  return false;
}

// gzip's wrapper (RFC 1952) around a 32 KiB window: zlib's window_bits 15 + 16.
constexpr int gzip_window_bits = 15 + 16;

}  // namespace

void check_compression_options(const compression_options& options) {
  if (options.level < 1 || options.level > 9) {
    throw std::invalid_argument("weft::http::server: compression.level must be 1 to 9, not " +
                                std::to_string(options.level));
  }
  for (const std::string& type : options.types) {
    if (type.empty() || type.find('/') == std::string::npos) {
      throw std::invalid_argument("weft::http::server: compression.types holds '" + type +
                                  "', which is not a media type (\"text/html\") or a whole type "
                                  "(\"text/\")");
    }
  }
}

bool accepts_gzip(std::string_view accept_encoding) noexcept {
  bool gzip_named = false;
  bool gzip_taken = false;
  bool any_taken = false;
  while (!accept_encoding.empty()) {
    const std::size_t comma = accept_encoding.find(',');
    std::string_view element = accept_encoding.substr(0, comma);
    accept_encoding.remove_prefix(comma == std::string_view::npos ? accept_encoding.size()
                                                                  : comma + 1);
    const std::size_t semicolon = element.find(';');
    const std::string_view coding = trim_ows(element.substr(0, semicolon));
    bool taken = true;
    if (semicolon != std::string_view::npos) {
      // Parameters: only q is defined; "q=0.5".
      std::string_view params = element.substr(semicolon + 1);
      while (!params.empty()) {
        const std::size_t next = params.find(';');
        const std::string_view param = trim_ows(params.substr(0, next));
        params.remove_prefix(next == std::string_view::npos ? params.size() : next + 1);
        if (param.size() >= 2 && ascii_lower(static_cast<unsigned char>(param[0])) == 'q' &&
            param[1] == '=') {
          taken = q_above_zero(trim_ows(param.substr(2)));
        }
      }
    }
    if (iequals(coding, "gzip") || iequals(coding, "x-gzip")) {
      gzip_named = true;
      gzip_taken = gzip_taken || taken;
    } else if (coding == "*") {
      any_taken = taken;
    }
  }
  return gzip_named ? gzip_taken : any_taken;
}

bool compressible_type(std::string_view content_type, const compression_options& options) noexcept {
  const std::string_view media = trim_ows(content_type.substr(0, content_type.find(';')));
  for (const std::string& type : options.types) {
    if (type.back() == '/') {
      if (media.size() > type.size() && iequals(media.substr(0, type.size()), type)) {
        return true;
      }
    } else if (iequals(media, type)) {
      return true;
    }
  }
  return false;
}

void gzip(std::string_view data, int level, std::string& out) {
  z_stream& z = net::detail::thread_deflater(level, gzip_window_bits, 8).z;
  const net::detail::deflate_reset_on_exit reset(&z);
  out.resize(deflateBound(&z, static_cast<uLong>(data.size())));
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));  // only read
  z.avail_in = static_cast<uInt>(data.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  // deflateBound is enough for one Z_FINISH call on a fresh stream.
  const int status = deflate(&z, Z_FINISH);
  if (status != Z_STREAM_END) {
    throw std::logic_error("weft::http: gzip ended with zlib status " + std::to_string(status));
  }
  out.resize(out.size() - z.avail_out);
}

bool request_accepts_gzip(const headers& request_fields) {
  if (request_fields.count("Accept-Encoding") <= 1) {
    const std::optional<std::string_view> value = request_fields.get("Accept-Encoding");
    return value && accepts_gzip(*value);
  }
  std::string joined;
  for (std::string_view value : request_fields.get_all("Accept-Encoding")) {
    joined.append(value).push_back(',');
  }
  return accepts_gzip(joined);
}

bool compress_response(http::response& r, const headers& request_fields,
                       const compression_options& options) {
  const std::uint16_t code = code_of(r.status);
  if (r.body.size() < options.min_size || code == 206 || forbids_content(r.status) ||
      r.body.size() > UINT32_MAX || r.headers.contains("Content-Encoding")) {
    return false;
  }
  const std::optional<std::string_view> type = r.headers.get("Content-Type");
  if (!type || !compressible_type(*type, options)) {
    return false;
  }
  // The answer depends on Accept-Encoding whichever way it goes.
  const std::optional<std::string_view> vary = r.headers.get("Vary");
  if (!vary) {
    r.headers.add("Vary", "Accept-Encoding");
  } else if (*vary != "*" && !r.headers.has_token("Vary", "accept-encoding")) {
    r.headers.set("Vary", std::string(*vary) + ", Accept-Encoding");
  }
  if (!request_accepts_gzip(request_fields)) {
    return false;
  }
  thread_local std::string compressed;
  gzip(r.body, options.level, compressed);
  if (compressed.size() >= r.body.size()) {
    return false;
  }
  r.body.swap(compressed);
  r.headers.add("Content-Encoding", "gzip");
  if (r.headers.contains("Content-Length")) {  // a head made for the whole body (static_files')
    r.headers.set("Content-Length", std::to_string(r.body.size()));
  }
  if (const std::optional<std::string_view> tag = r.headers.get("ETag");
      tag && tag->size() >= 2 && (*tag)[0] == '"') {
    r.headers.set("ETag", "W/" + std::string(*tag));
  }
  return true;
}

struct gunzip_stream::state {
  // gzip's wrapper only: a zlib stream or raw DEFLATE is not a gzip body.
  net::detail::zlib_inflater inflater{gzip_window_bits};
  char window[16384];
};

gunzip_stream::gunzip_stream(std::uint64_t limit)
    : state_(std::make_unique<state>()), limit_(limit) {}

gunzip_stream::~gunzip_stream() = default;

std::string_view gunzip_stream::step(std::string_view& data, bool& full) {
  full = false;
  if (ended_) {
    if (!data.empty()) {
      throw gunzip_error("the body goes on after the end of its gzip data", false);
    }
    return {};
  }
  z_stream& z = state_->inflater.z;
  const std::size_t offered = std::min<std::size_t>(data.size(), UINT32_MAX);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));  // only read
  z.avail_in = static_cast<uInt>(offered);
  z.next_out = reinterpret_cast<Bytef*>(state_->window);
  z.avail_out = sizeof state_->window;
  const int status = inflate(&z, Z_NO_FLUSH);
  if (status == Z_MEM_ERROR) {
    throw std::bad_alloc();
  }
  if (status != Z_OK && status != Z_STREAM_END && status != Z_BUF_ERROR) {
    throw gunzip_error(std::string("the gzip body does not decode (") +
                           (z.msg != nullptr ? z.msg : "zlib error") + ")",
                       false);
  }
  data.remove_prefix(offered - z.avail_in);
  const std::size_t made = sizeof state_->window - z.avail_out;
  full = z.avail_out == 0;
  produced_ += made;
  if (produced_ > limit_) {
    throw gunzip_error("the gzip body decodes to more than " + std::to_string(limit_) +
                           " bytes (limits.max_body_size)",
                       true);
  }
  if (status == Z_STREAM_END) {
    ended_ = true;
    if (!data.empty()) {
      throw gunzip_error("the body goes on after the end of its gzip data", false);
    }
  } else if (made == 0 && offered != 0 && z.avail_in == offered) {
    throw gunzip_error("the gzip body does not decode (no progress)", false);
  }
  return {state_->window, made};
}

void gunzip_stream::finish() const {
  if (began_ && !ended_) {
    throw gunzip_error("the body ended inside its gzip data", false);
  }
}

}  // namespace weft::http::detail

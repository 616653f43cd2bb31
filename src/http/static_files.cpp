// weft::http::static_files (static_files.hpp): checking the options, splitting and checking
// the request path, and choosing the answer: 405, 400, 404, 301, 412, 304, 416, 206 or 200.
// Opening under the root is static_confine.cpp's; the field grammars are
// static_validators.cpp's.
#include "weft/http/static_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

#include "http/boundary.hpp"
#include "http/chars.hpp"
#include "http/compression.hpp"
#include "http/fields_builder.hpp"
#include "http/static_support.hpp"
#include "weft/error.hpp"
#include "weft/http/detail/static_confine.hpp"
#include "weft/http/server.hpp"

namespace weft::http {

namespace {

constexpr std::string_view text_plain = "text/plain; charset=utf-8";

void add_number(headers& fields, std::string_view name, std::uint64_t n) {
  char digits[24];
  auto [end, ec] = std::to_chars(digits, digits + sizeof digits, n);
  static_cast<void>(ec);
  fields.add(name, std::string_view(digits, static_cast<std::size_t>(end - digits)));
}

// A small answer the resolver writes itself: a status and a line of text.
static_reply generated(status code, std::string_view text) {
  static_reply reply;
  reply.head.status = code;
  reply.head.headers.add("Content-Type", text_plain);
  add_number(reply.head.headers, "Content-Length", text.size());
  reply.head.body.assign(text);
  return reply;
}

// One answer for every refusal and every miss, so that neither tells what exists.
static_reply not_found() { return generated(status::not_found, "Not Found\n"); }

// The 301 for a directory named without its trailing '/': the request's own path plus '/',
// query kept. Leading '/' and '\' are collapsed into one '/' so that the Location can never
// read as a network-path reference ("//evil.example/", which a browser would leave for).
static_reply redirect_to_directory(const request& req) {
  std::string_view path = req.raw_path();
  while (!path.empty() && (path.front() == '/' || path.front() == '\\')) path.remove_prefix(1);
  std::string location;
  std::string_view query = req.raw_query();
  location.reserve(path.size() + query.size() + 3);
  location.push_back('/');
  location.append(path);
  location.push_back('/');
  if (!query.empty()) {
    location.push_back('?');
    location.append(query);
  }
  static_reply reply;
  reply.head.status = status::moved_permanently;
  reply.head.headers.add("Location", location);
  reply.head.headers.add("Content-Length", "0");
  return reply;
}

enum class segment_verdict : std::uint8_t { ok, refused, malformed };

// Appends the percent-decoded `raw` segment to `out` and judges it: "", ".", "..", a byte '/',
// '\' or NUL once decoded, or a leading '.' without `dotfiles`, is refused; an escape that is
// not '%' and two hex digits is malformed.
segment_verdict append_segment(std::string& out, std::string_view raw, bool dotfiles) {
  if (raw.empty()) return segment_verdict::refused;
  std::size_t start = out.size();
  for (std::size_t i = 0; i < raw.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(raw[i]);
    if (c == '%') {
      if (i + 2 >= raw.size()) return segment_verdict::malformed;
      unsigned char high = static_cast<unsigned char>(raw[i + 1]);
      unsigned char low = static_cast<unsigned char>(raw[i + 2]);
      if (!detail::is_hex_digit(high) || !detail::is_hex_digit(low)) {
        return segment_verdict::malformed;
      }
      c = static_cast<unsigned char>(detail::hex_value(high) * 16 + detail::hex_value(low));
      i += 2;
    }
    if (c == '/' || c == '\\' || c == '\0') return segment_verdict::refused;
    out.push_back(static_cast<char>(c));
  }
  std::string_view segment(out.data() + start, out.size() - start);
  if (segment == "." || segment == "..") return segment_verdict::refused;
  if (!dotfiles && segment.front() == '.') return segment_verdict::refused;
  return segment_verdict::ok;
}

// The errors of an open that say "no such file for this request": missing, refused by the
// confinement (EXDEV, ELOOP), not readable by the server (EACCES, EPERM: 404 too, see the
// header), a name too long, or a special file that cannot be opened this way.
bool is_miss(int err) noexcept {
  switch (err) {
    case ENOENT:
    case ENOTDIR:
    case ELOOP:
    case EXDEV:
    case EACCES:
    case EPERM:
    case ENAMETOOLONG:
    case ENXIO:
    case ENODEV:
      return true;
    default:
      return false;
  }
}

[[noreturn]] void throw_io_error(int err, const char* operation, const static_options& options,
                                 std::string_view relative) {
  std::string subject = options.root;
  if (!subject.empty() && subject.back() != '/') subject.push_back('/');
  subject.append(relative);
  throw io_error(-err, operation, std::move(subject),
                 std::error_code(err, std::system_category()).message());
}

// Every If-Match (or If-None-Match) field, as one list, against our entity tag.
bool any_field_matches(const headers& fields, std::string_view name, std::string_view tag,
                       bool weak) {
  for (headers::field f : fields) {
    if (detail::iequals(f.name, name) && detail::entity_tag_list_matches(f.value, tag, weak)) {
      return true;
    }
  }
  return false;
}

// The date of a field that must appear once to count (RFC 9110 13.1.3: a recipient ignores a
// date that is not a valid HTTP-date, or a field with more than one member).
std::optional<std::time_t> single_date(const headers& fields, std::string_view name) {
  if (fields.count(name) != 1) return std::nullopt;
  return parse_http_date(*fields.get(name));
}

// Whether If-Range (RFC 9110 13.1.5) lets the Range apply: absent, or naming the current
// representation by a strong entity tag or its exact Last-Modified date. A date is a strong
// validator only if the file was not modified again in the second it names, so a file modified
// in the current second never matches by date.
bool if_range_holds(const headers& fields, const static_options& options, std::string_view tag,
                    std::time_t modified) {
  std::size_t count = fields.count("If-Range");
  if (count == 0) return true;
  if (count > 1) return false;
  std::string_view value = detail::trim_ows(*fields.get("If-Range"));
  if (value.starts_with('"') || value.starts_with("W/")) {
    return options.etag && value == tag;  // a weak tag never matches (strong comparison)
  }
  if (!options.last_modified) return false;
  std::optional<std::time_t> date = parse_http_date(value);
  return date && *date == modified && modified < std::time(nullptr);
}

// A file's validators as field values: the ETag (when options.etag) and the Last-Modified
// (when options.last_modified), empty where switched off.
struct validators {
  std::string tag;
  std::string last_modified;
};

// The file's modification time as Last-Modified gives it: one in the future (a clock set wrong
// where the file was made, `touch -d`) is now, as RFC 9110 8.8.2.1 asks, so that a client's
// If-Modified-Since from it cannot hide a real change until then.
std::time_t modified_time(const struct stat& st) {
  return std::min<std::time_t>(st.st_mtim.tv_sec, std::time(nullptr));
}

validators validators_of(const static_options& options, const struct stat& st) {
  validators made;
  if (options.etag) made.tag = detail::entity_tag_of(st);
  if (options.last_modified) made.last_modified = format_http_date(modified_time(st));
  return made;
}

// How an answer's bytes relate to Accept-Encoding.
struct representation {
  // The bytes are a precompressed sibling's (static_options::precompressed): Content-Encoding.
  bool gzip_file = false;
  // The answer depends on Accept-Encoding (a sibling exists, or gzip on the fly applies): Vary
  // on the 200, 206 and 304.
  bool vary = false;
  // This client's 200 would be gzipped on the fly (compression.hpp's compress_response), so its
  // ETag would be weak: the 304 carries it so.
  bool weak_tag = false;
};

constexpr std::string_view vary_line = "Vary: Accept-Encoding\r\n";

// The fields every answer with a file's bytes ends with, after its type and length: one list
// for serve_file's 200 and 206 and for a cache entry's prepared lines.
void add_file_fields(headers& out, const static_options& options, std::string_view cache_control,
                     const validators& made, representation rep = {}) {
  out.add("Accept-Ranges", "bytes");
  // Gzipped on the fly (weak_tag with gzip_file): not the file's bytes, so a weak tag.
  if (options.etag) out.add("ETag", rep.gzip_file && rep.weak_tag ? "W/" + made.tag : made.tag);
  if (options.last_modified) out.add("Last-Modified", made.last_modified);
  out.add("Cache-Control", cache_control);
  if (rep.gzip_file) out.add("Content-Encoding", "gzip");
  if (rep.vary) out.add("Vary", "Accept-Encoding");
}

// An entry of the small-file cache of one thread (see the header's contract): the fstat it was
// read with, when it was last checked, its validators and the fields of its whole 200 answer,
// made once per entry rather than per hit (formatting the validators was a tenth of a cached
// hit's user time; adding the five fields, each name and value checked byte by byte, was a
// fifth of its instructions: 2,900 of 14,700 per request, callgrind).
struct cached_file {
  struct stat st {};
  std::string content;
  validators made;
  std::string_view type;  // content_type_for's (static storage)
  // Content-Type, Accept-Ranges, ETag, Last-Modified, Cache-Control as field lines, checked
  // (by headers::add) and serialised once: what exchange::respond_prepared writes ahead of
  // Content-Length for a GET or HEAD of the whole file.
  std::string wire_fields;
  std::chrono::nanoseconds checked{};  // cache_now() when the file was opened and read
  std::uint64_t used = 0;  // the cache's tick at the last hit: the least recent goes first
  // With server_options::compression on and a type it takes: the content gzipped at
  // gzip_level (0: not made yet; made at the first hit that needs it, by this thread) and
  // the fields of both answers, each with "Vary: Accept-Encoding", the gzipped one with
  // Content-Encoding and its ETag made weak. Not counted in cache_bytes: at most as large as
  // the content (a file that does not shrink is kept as it is), so a thread holds at most
  // twice cache_bytes.
  int gzip_level = 0;
  std::string gzipped;
  std::string gzip_wire_fields;
  std::string vary_wire_fields;  // also made with the entry when it has a precompressed sibling
  // static_options::precompressed: NAME.gz as it was when this entry was made. none: no usable
  // sibling; cached: its bytes in `sibling` (an entry of its own: its stat, validators, and the
  // fields of its 200 with Content-Encoding and Vary); on_disk: too big for the cache, opened
  // from sibling_path for each request that takes gzip.
  enum class sibling_kind : std::uint8_t { none, cached, on_disk };
  sibling_kind gz = sibling_kind::none;
  std::unique_ptr<cached_file> sibling;
  std::string sibling_path;

  // The bytes the entry holds, as the cache counts them.
  std::size_t bytes() const noexcept {
    return content.size() + (sibling != nullptr ? sibling->content.size() : 0);
  }
};

// The clock of the cache's ages: steady_clock, precise, so that an entry is never served once
// cache_valid has passed since its file was read (a coarse clock, a tick behind at times, let
// one be served a few milliseconds late).
std::chrono::nanoseconds cache_now() noexcept {
  return std::chrono::steady_clock::now().time_since_epoch();
}

// A request that asks for the whole representation whatever its state: none of the fields
// that make an answer conditional or partial (If-Range counts only with Range).
bool unconditional(const headers& fields) noexcept {
  constexpr std::string_view conditional[] = {"If-Match", "If-None-Match", "If-Modified-Since",
                                              "If-Unmodified-Since", "Range"};
  constexpr std::uint32_t hashes[] = {
      detail::name_hash(conditional[0]), detail::name_hash(conditional[1]),
      detail::name_hash(conditional[2]), detail::name_hash(conditional[3]),
      detail::name_hash(conditional[4])};
  for (headers::field f : fields) {
    const std::uint32_t hash = detail::name_hash(f.name);
    for (std::size_t i = 0; i < std::size(conditional); ++i) {
      if (hash == hashes[i] && detail::iequals(f.name, conditional[i])) return false;
    }
  }
  return true;
}

// Reads [first, first + length) of fd onto the end of out; false when the file ended sooner
// (it shrank since its fstat). A read error throws, as for the file's open.
bool append_range(int fd, std::uint64_t first, std::uint64_t length, std::string& out,
                  const static_options& options) {
  const std::size_t start = out.size();
  out.resize(start + static_cast<std::size_t>(length));
  std::size_t done = 0;
  while (done < length) {
    const ssize_t got =
        ::pread(fd, out.data() + start + done, static_cast<std::size_t>(length) - done,
                static_cast<off_t>(first + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw_io_error(errno, "pread", options, "(a file of a multipart answer)");
    if (got == 0) return false;
    done += static_cast<std::size_t>(got);
  }
  return true;
}

// The 206 multipart/byteranges answer (RFC 9110 14.6) for several ranges of a file: a part per
// span in the order asked, each with the file's type and its Content-Range, the whole body in
// memory (from the cache entry, or read from `file`). Nothing when the body would pass
// options.multipart_max, or the file shrank under the reads: the caller sends the whole file.
std::optional<static_reply> multipart_reply(const static_options& options,
                                            std::string_view cache_control, const file_handle& file,
                                            std::uint64_t size, std::string_view type,
                                            const std::vector<detail::byte_span>& spans,
                                            const validators& made, representation rep,
                                            const cached_file* cached) {
  const std::string boundary = detail::random_boundary();
  const std::string size_text = std::to_string(size);
  std::vector<std::string> heads;
  heads.reserve(spans.size());
  std::uint64_t body_size = 0;
  for (const detail::byte_span& span : spans) {
    std::string head = "--" + boundary + "\r\nContent-Type: ";
    head.append(type);
    head += "\r\nContent-Range: bytes " + std::to_string(span.first) + "-" +
            std::to_string(span.first + span.length - 1) + "/" + size_text + "\r\n\r\n";
    body_size += head.size() + span.length + 2;  // the part's CRLF before the next delimiter
    heads.push_back(std::move(head));
  }
  const std::string closing = "--" + boundary + "--\r\n";
  body_size += closing.size();
  if (body_size > options.multipart_max) return std::nullopt;

  static_reply reply;
  std::string& body = reply.head.body;
  body.reserve(static_cast<std::size_t>(body_size));
  for (std::size_t i = 0; i < spans.size(); ++i) {
    body += heads[i];
    if (cached != nullptr) {
      body.append(cached->content, static_cast<std::size_t>(spans[i].first),
                  static_cast<std::size_t>(spans[i].length));
    } else if (!append_range(file.get(), spans[i].first, spans[i].length, body, options)) {
      return std::nullopt;
    }
    body += "\r\n";
  }
  body += closing;
  headers& out = reply.head.headers;
  reply.head.status = status::partial_content;
  out.add("Content-Type", "multipart/byteranges; boundary=" + boundary);
  add_number(out, "Content-Length", body.size());
  add_file_fields(out, options, cache_control, made, rep);
  return reply;
}

// The answer for a regular file that exists: preconditions, then the range.
// cached: the file's cache entry (its bytes and validators), or null to send `file`.
// rep: what the bytes are (a precompressed sibling's) and what the answer depends on.
static_reply serve_file(const request& req, const static_options& options,
                        std::string_view cache_control, file_handle file, const struct stat& st,
                        std::string_view type, const cached_file* cached = nullptr,
                        representation rep = {}) {
  const headers& fields = req.headers;
  validators own;
  if (cached == nullptr) own = validators_of(options, st);
  const validators& made = cached != nullptr ? cached->made : own;
  const std::string& tag = made.tag;
  std::time_t modified = modified_time(st);

  // RFC 9110 13.2.2: If-Match, else If-Unmodified-Since; then If-None-Match, else
  // If-Modified-Since; then If-Range with the Range. A validator switched off in the options
  // is not honoured either: its fields count as absent.
  bool precondition_failed = false;
  if (options.etag && fields.contains("If-Match")) {
    precondition_failed = !any_field_matches(fields, "If-Match", tag, false);
  } else if (options.last_modified) {
    std::optional<std::time_t> date = single_date(fields, "If-Unmodified-Since");
    precondition_failed = date && modified > *date;
  }
  if (precondition_failed) return generated(status::precondition_failed, "Precondition Failed\n");

  bool not_modified = false;
  if (options.etag && fields.contains("If-None-Match")) {
    not_modified = any_field_matches(fields, "If-None-Match", tag, true);
  } else if (options.last_modified) {
    std::optional<std::time_t> date = single_date(fields, "If-Modified-Since");
    not_modified = date && modified <= *date;
  }
  if (not_modified) {
    // RFC 9110 15.4.5: the fields a 200 would carry that guide the cache update; Last-Modified
    // only where there is no ETag.
    // The ETag is the one this client's 200 would carry (weak when gzipped on the fly), and the
    // Vary too (RFC 9110 15.4.5 names both).
    static_reply reply;
    reply.head.status = status::not_modified;
    if (options.etag) {
      reply.head.headers.add("ETag", rep.weak_tag ? "W/" + tag : tag);
    } else if (options.last_modified) {
      reply.head.headers.add("Last-Modified", made.last_modified);
    }
    reply.head.headers.add("Cache-Control", cache_control);
    if (rep.vary) reply.head.headers.add("Vary", "Accept-Encoding");
    return reply;
  }

  std::uint64_t size = static_cast<std::uint64_t>(st.st_size);
  detail::byte_ranges ranges;
  // RFC 9110 14.2: Range is for GET only; a HEAD gets the head of the whole file. An empty
  // file has no range to give (even bytes=0- is unsatisfiable): its 200 is the answer, as
  // nginx's, rather than a 416 to the players and download managers that ask for bytes=0-.
  if (req.method == method::get && size > 0 && fields.count("Range") == 1 &&
      if_range_holds(fields, options, tag, modified)) {
    ranges = detail::parse_byte_ranges(*fields.get("Range"), size, options.max_ranges);
  }
  if (ranges.result == detail::byte_ranges::kind::unsatisfiable) {
    static_reply reply = generated(status::range_not_satisfiable, "Range Not Satisfiable\n");
    reply.head.headers.add("Content-Range", "bytes */" + std::to_string(size));
    reply.head.headers.add("Accept-Ranges", "bytes");
    if (rep.vary) reply.head.headers.add("Vary", "Accept-Encoding");
    return reply;
  }
  if (ranges.spans.size() > 1) {
    if (std::optional<static_reply> parts = multipart_reply(
            options, cache_control, file, size, type, ranges.spans, made, rep, cached)) {
      return std::move(*parts);
    }
    ranges = {};  // more than multipart_max: the whole file
  }
  const bool partial = ranges.result == detail::byte_ranges::kind::satisfiable;
  const detail::byte_span range = partial ? ranges.spans.front() : detail::byte_span{};
  std::uint64_t first = partial ? range.first : 0;
  std::uint64_t length = partial ? range.length : size;

  // This client's 200 is the entry's gzip (rep.weak_tag: made on the fly and kept with it): sent
  // as such here, with its length, so that a HEAD, which has no body for respond() to compress,
  // gets the fields its GET gets (RFC 9110 9.3.2).
  const std::string* gzipped =
      !partial && rep.weak_tag && cached != nullptr && !cached->gzipped.empty() ? &cached->gzipped
                                                                                : nullptr;
  if (gzipped != nullptr) {
    rep.gzip_file = true;
    length = gzipped->size();
  }
  static_reply reply;
  headers& out = reply.head.headers;
  reply.head.status = partial ? status::partial_content : status::ok;
  out.add("Content-Type", type);
  add_number(out, "Content-Length", length);
  if (partial) {
    out.add("Content-Range", "bytes " + std::to_string(first) + "-" +
                                 std::to_string(first + length - 1) + "/" + std::to_string(size));
  }
  add_file_fields(out, options, cache_control, made, rep);
  if (req.method == method::get && length > 0) {
    if (gzipped != nullptr) {
      reply.head.body = *gzipped;
    } else if (cached != nullptr) {
      reply.head.body.assign(cached->content, static_cast<std::size_t>(first),
                             static_cast<std::size_t>(length));
    } else {
      reply.file = std::move(file);
      reply.offset = first;
      reply.length = length;
    }
  }
  return reply;
}

struct file_cache {
  std::unordered_map<std::string, cached_file> entries;
  std::size_t bytes = 0;
  std::uint64_t tick = 0;

  // Drops the least recently used entries until the cache holds at most `target` bytes (a
  // batch at a time: the scan is linear, so it runs once per quarter of the cache refilled).
  void shrink_to(std::size_t target) {
    while (bytes > target && !entries.empty()) {
      auto oldest = entries.begin();
      for (auto it = entries.begin(); it != entries.end(); ++it) {
        if (it->second.used < oldest->second.used) oldest = it;
      }
      bytes -= oldest->second.bytes();
      entries.erase(oldest);
    }
  }
};

thread_local file_cache this_thread_cache;
std::atomic<std::uint64_t> next_cache_id{1};

// The key of a path under one static_files: its id's eight bytes, then the path as on the wire.
// Written into a buffer of the thread's, reused, so that a lookup allocates nothing.
const std::string& cache_key(std::uint64_t id, std::string_view path_in_root) {
  thread_local std::string key;
  key.assign(reinterpret_cast<const char*>(&id), sizeof id);
  key.append(path_in_root);
  return key;
}

// The thread's entry for the key while it is younger than `valid`; a stale one is dropped.
cached_file* fresh_entry(const std::string& key, std::chrono::nanoseconds now,
                         std::chrono::milliseconds valid) {
  file_cache& cache = this_thread_cache;
  auto hit = cache.entries.find(key);
  if (hit == cache.entries.end()) return nullptr;
  if (now - hit->second.checked < valid) {
    hit->second.used = ++cache.tick;
    return &hit->second;
  }
  cache.bytes -= hit->second.bytes();
  cache.entries.erase(hit);  // stale: looked up afresh by the caller
  return nullptr;
}

// Reads a whole small file into memory; false when it turned out shorter than st says (it is
// changing: not cached) or a read failed.
bool read_whole(int fd, const struct stat& st, std::string& out) {
  out.resize(static_cast<std::size_t>(st.st_size));
  std::size_t done = 0;
  while (done < out.size()) {
    ssize_t got = ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(done));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    done += static_cast<std::size_t>(got);
  }
  return true;
}

// Whether file `a` was modified before file `b`.
bool modified_before(const struct stat& a, const struct stat& b) noexcept {
  if (a.st_mtim.tv_sec != b.st_mtim.tv_sec) return a.st_mtim.tv_sec < b.st_mtim.tv_sec;
  return a.st_mtim.tv_nsec < b.st_mtim.tv_nsec;
}

// A file's precompressed sibling (static_options::precompressed), open; an empty file when there
// is none to use: missing or refused as a miss would be, not a regular file, or older than the
// file itself.
struct sibling_file {
  file_handle file;
  struct stat st {};
};

sibling_file open_sibling(int root_fd, bool use_openat2, const static_options& options,
                          const std::string& sibling_path, const struct stat& original) {
  sibling_file found;
  const int fd = detail::open_beneath(root_fd, sibling_path, use_openat2);
  if (fd < 0) {
    if (is_miss(-fd)) return found;
    throw_io_error(-fd, "open", options, sibling_path);
  }
  file_handle file(fd);
  if (::fstat(fd, &found.st) < 0) throw_io_error(errno, "fstat", options, sibling_path);
  if (S_ISREG(found.st.st_mode) && !modified_before(found.st, original)) {
    found.file = std::move(file);
  }
  return found;
}

// A cache entry's stat, age, validators, type and prepared fields (its bytes are read apart).
void describe_entry(cached_file& entry, const struct stat& st, std::chrono::nanoseconds now,
                    std::string_view type, const static_options& options,
                    std::string_view cache_control, representation rep) {
  entry.st = st;
  entry.checked = now;
  entry.made = validators_of(options, st);
  entry.type = type;
  headers fields;
  fields.add("Content-Type", type);
  add_file_fields(fields, options, cache_control, entry.made, rep);
  detail::append_fields(entry.wire_fields, fields);
}

// Whether server_options::compression gzips a cached file's 200 for a client that takes gzip.
bool gzips_on_the_fly(const cached_file& entry, const compression_options& options) noexcept {
  return entry.content.size() >= options.min_size && detail::compressible_type(entry.type, options);
}

// Makes a cached file's gzipped bytes and the fields of both of its answers at this level, once
// (see cached_file); leaves `gzipped` empty when gzip does not shrink the file.
void prepare_gzip(cached_file& entry, const compression_options& options) {
  if (entry.gzip_level == options.level) return;
  detail::gzip(entry.content, options.level, entry.gzipped);
  if (entry.gzipped.size() >= entry.content.size()) {
    entry.gzipped.clear();  // incompressible: always sent as it is
  }
  entry.vary_wire_fields = entry.wire_fields;
  entry.vary_wire_fields += vary_line;
  entry.gzip_wire_fields = entry.wire_fields;
  const std::size_t etag = entry.gzip_wire_fields.find("\r\nETag: \"");
  if (etag != std::string::npos) {
    entry.gzip_wire_fields.insert(etag + 8, "W/");
  }
  entry.gzip_wire_fields += vary_line;
  entry.gzip_wire_fields += "Content-Encoding: gzip\r\n";
  entry.gzip_level = options.level;
}

// The answer to `req` from a fresh cache entry: its precompressed sibling for a client that
// takes gzip, else the file's own bytes, with the Vary and the 304's ETag that the answer's
// dependence on Accept-Encoding calls for.
static_reply answer_from_entry(const request& req, const static_options& options,
                               std::string_view cache_control, cached_file& entry,
                               const compression_options* compression, int root_fd,
                               bool use_openat2) {
  using sibling_kind = cached_file::sibling_kind;
  if (entry.gz != sibling_kind::none && detail::request_accepts_gzip(req.headers)) {
    const representation gzipped{.gzip_file = true, .vary = true};
    if (entry.gz == sibling_kind::cached) {
      return serve_file(req, options, cache_control, file_handle(), entry.sibling->st, entry.type,
                        entry.sibling.get(), gzipped);
    }
    sibling_file sibling =
        open_sibling(root_fd, use_openat2, options, entry.sibling_path, entry.st);
    if (sibling.file) {
      return serve_file(req, options, cache_control, std::move(sibling.file), sibling.st,
                        entry.type, nullptr, gzipped);
    }
    // Gone or replaced since the entry was made: the file's own bytes, still varying.
  }
  representation rep{.vary = entry.gz != sibling_kind::none};
  if (!rep.vary && compression != nullptr && gzips_on_the_fly(entry, *compression)) {
    rep.vary = true;
    if (detail::request_accepts_gzip(req.headers)) {
      prepare_gzip(entry, *compression);
      rep.weak_tag = !entry.gzipped.empty();
    }
  }
  return serve_file(req, options, cache_control, file_handle(), entry.st, entry.type, &entry, rep);
}

}  // namespace

static_files::static_files(static_options options) : options_(std::move(options)) {
  const std::string& root = options_.root;
  if (root.empty()) {
    throw std::invalid_argument(
        "http::static_files: static_options::root is empty; name the directory to serve");
  }
  if (root.find('\0') != std::string::npos) {
    throw std::invalid_argument("http::static_files: static_options::root '" + root +
                                "' holds a NUL byte");
  }
  const std::string& index = options_.index;
  if (index.find_first_of(std::string_view("/\0", 2)) != std::string::npos || index == "." ||
      index == "..") {
    throw std::invalid_argument("http::static_files: static_options::index '" + index +
                                "' must be a plain file name (no '/', NUL, '.' or '..'), or "
                                "empty for none");
  }
  if (options_.max_ranges == 0) {
    throw std::invalid_argument(
        "http::static_files: static_options::max_ranges is 0; use 1 to answer a single range "
        "only");
  }
  if (options_.max_age.count() < 0) {
    throw std::invalid_argument("http::static_files: static_options::max_age is negative (" +
                                std::to_string(options_.max_age.count()) +
                                " s); use 0 for no-cache");
  }
  int fd = ::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) {
      throw std::invalid_argument("http::static_files: the root directory '" + root +
                                  "' does not exist");
    }
    if (err == ENOTDIR) {
      throw std::invalid_argument("http::static_files: the root '" + root + "' is not a directory");
    }
    throw io_error(-err, "open static root", root,
                   std::error_code(err, std::system_category()).message());
  }
  root_.reset(fd);
  openat2_ = detail::openat2_works(fd);
  cache_id_ = next_cache_id.fetch_add(1, std::memory_order_relaxed);
  cache_control_ = options_.max_age.count() > 0
                       ? "max-age=" + std::to_string(options_.max_age.count())
                       : std::string("no-cache");
}

static_reply static_files::resolve(const request& req, std::string_view path_in_root) const {
  return resolve_for(req, path_in_root, nullptr);
}

static_reply static_files::resolve_for(const request& req, std::string_view path_in_root,
                                       const compression_options* compression) const {
  if (req.method != method::get && req.method != method::head) {
    static_reply reply = generated(status::method_not_allowed,
                                   "Method Not Allowed: static files answer GET and HEAD\n");
    reply.head.headers.add("Allow", "GET, HEAD");
    return reply;
  }
  const bool use_openat2 =
      openat2_ && detail::get_confine_mode() == detail::confine_mode::automatic;
  // An empty path_in_root is never cached: what it names depends on the request's own path
  // (the root's index, or a redirect to it), not on the key alone.
  const bool caching = options_.cache_valid.count() > 0 && !path_in_root.empty();
  const std::chrono::nanoseconds now = caching ? cache_now() : std::chrono::nanoseconds{};
  if (caching) {
    if (cached_file* entry =
            fresh_entry(cache_key(cache_id_, path_in_root), now, options_.cache_valid)) {
      return answer_from_entry(req, options_, cache_control_, *entry, compression, root_.get(),
                               use_openat2);
    }
  }
  // A trailing '/' asks for the directory's index. An empty path_in_root (the route's prefix
  // is the whole path) takes it from the request's path: "/static" is the directory named
  // without its '/', "/static/" with it.
  bool slash = path_in_root.empty() ? req.raw_path().ends_with('/') : path_in_root.back() == '/';
  std::string_view rest = path_in_root;
  if (!rest.empty() && rest.front() == '/') rest.remove_prefix(1);
  if (slash && !rest.empty() && rest.back() == '/') rest.remove_suffix(1);

  std::string relative;
  relative.reserve(rest.size() + options_.index.size() + 1);
  std::size_t name_start = 0;
  while (!rest.empty()) {
    std::size_t cut = rest.find('/');
    if (!relative.empty()) relative.push_back('/');
    name_start = relative.size();
    switch (append_segment(relative, rest.substr(0, cut), options_.dotfiles)) {
      case segment_verdict::ok:
        break;
      case segment_verdict::refused:
        return not_found();
      case segment_verdict::malformed:
        return generated(status::bad_request,
                         "Bad Request: a '%' in the path is not followed by two hex digits\n");
    }
    if (cut == std::string_view::npos) break;
    rest.remove_prefix(cut + 1);
    if (rest.empty()) return not_found();  // "a//": an empty last segment
  }

  if (slash) {
    if (options_.index.empty()) return not_found();
    if (!relative.empty()) relative.push_back('/');
    name_start = relative.size();
    relative.append(options_.index);
  } else if (relative.empty()) {
    return redirect_to_directory(req);  // the root itself, named without its '/'
  }

  const std::string_view type = content_type_for(std::string_view(relative).substr(name_start));

  int fd = detail::open_beneath(root_.get(), relative, use_openat2);
  if (fd < 0) {
    if (is_miss(-fd)) return not_found();
    throw_io_error(-fd, "open", options_, relative);
  }
  file_handle file(fd);
  struct stat st {};
  if (::fstat(fd, &st) < 0) throw_io_error(errno, "fstat", options_, relative);
  if (S_ISDIR(st.st_mode)) return slash ? not_found() : redirect_to_directory(req);
  if (!S_ISREG(st.st_mode)) return not_found();  // FIFO, socket, device

  std::string sibling_path;
  sibling_file sibling;
  if (options_.precompressed) {
    sibling_path = relative + ".gz";
    sibling = open_sibling(root_.get(), use_openat2, options_, sibling_path, st);
  }
  const auto fits = [this](const struct stat& s, std::size_t beside) {
    const auto size = static_cast<std::uint64_t>(s.st_size);
    return size <= options_.cache_file_max && size + beside <= options_.cache_bytes;
  };
  if (caching && fits(st, 0)) {
    cached_file entry;
    describe_entry(entry, st, now, type, options_, cache_control_, {});
    if (read_whole(file.get(), st, entry.content)) {
      if (sibling.file) {
        entry.vary_wire_fields = entry.wire_fields;
        entry.vary_wire_fields += vary_line;
        entry.gz = cached_file::sibling_kind::on_disk;
        auto gz = std::make_unique<cached_file>();
        if (fits(sibling.st, entry.content.size())) {
          describe_entry(*gz, sibling.st, now, type, options_, cache_control_,
                         {.gzip_file = true, .vary = true});
          if (read_whole(sibling.file.get(), sibling.st, gz->content)) {
            entry.sibling = std::move(gz);
            entry.gz = cached_file::sibling_kind::cached;
          }
        }
        if (entry.gz == cached_file::sibling_kind::on_disk) entry.sibling_path = sibling_path;
      }
      file_cache& cache = this_thread_cache;
      const std::size_t size = entry.bytes();
      if (cache.bytes + size > options_.cache_bytes) {
        cache.shrink_to((options_.cache_bytes - size) / 4 * 3);
      }
      entry.used = ++cache.tick;
      auto [slot, inserted] =
          cache.entries.insert_or_assign(cache_key(cache_id_, path_in_root), std::move(entry));
      static_cast<void>(inserted);
      cache.bytes += size;
      return answer_from_entry(req, options_, cache_control_, slot->second, compression,
                               root_.get(), use_openat2);
    }
  }
  if (sibling.file) {
    if (detail::request_accepts_gzip(req.headers)) {
      return serve_file(req, options_, cache_control_, std::move(sibling.file), sibling.st, type,
                        nullptr, {.gzip_file = true, .vary = true});
    }
    return serve_file(req, options_, cache_control_, std::move(file), st, type, nullptr,
                      {.vary = true});
  }
  return serve_file(req, options_, cache_control_, std::move(file), st, type);
}

void static_files::serve(exchange& ex, std::string_view path_in_root) const {
  const request& req = ex.request();
  if (options_.cache_valid.count() > 0 && !path_in_root.empty() &&
      (req.method == method::get || req.method == method::head) && unconditional(req.headers)) {
    if (cached_file* entry =
            fresh_entry(cache_key(cache_id_, path_in_root), cache_now(), options_.cache_valid)) {
      if (entry->gz != cached_file::sibling_kind::none) [[unlikely]] {
        // A precompressed sibling: sent from the cache when it is there; one too big for it is
        // opened by resolve_for below.
        if (!detail::request_accepts_gzip(req.headers)) {
          ex.respond_prepared(status::ok, entry->vary_wire_fields, entry->content);
          return;
        }
        if (entry->gz == cached_file::sibling_kind::cached) {
          ex.respond_prepared(status::ok, entry->sibling->wire_fields, entry->sibling->content);
          return;
        }
      } else if (const compression_options* options = ex.compression();
                 options != nullptr && gzips_on_the_fly(*entry, *options)) [[unlikely]] {
        prepare_gzip(*entry, *options);
        if (!entry->gzipped.empty() && detail::request_accepts_gzip(req.headers)) {
          ex.respond_prepared(status::ok, entry->gzip_wire_fields, entry->gzipped);
        } else {
          ex.respond_prepared(status::ok, entry->vary_wire_fields, entry->content);
        }
        return;
      } else {
        ex.respond_prepared(status::ok, entry->wire_fields, entry->content);
        return;
      }
    }
  }
  static_reply reply = resolve_for(req, path_in_root, ex.compression());
  if (reply.has_file()) {
    ex.send_file(std::move(reply.head), std::move(reply.file), reply.offset, reply.length);
  } else {
    ex.respond(std::move(reply.head));
  }
}

}  // namespace weft::http

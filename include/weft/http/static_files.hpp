// weft::http::static_files: serving the files under one directory, as a value-level resolver.
// resolve() turns a GET or HEAD request into a response head and, when file bytes follow it,
// an open descriptor with the range to send; the server writes both (exchange::send_file), so
// this header holds every rule of static serving and no I/O scheduling.
//
// Contract:
//   - Blocking: the constructor and resolve() make plain system calls (openat2 or openat,
//     fstat, readlinkat, close, and pread of a small file the cache takes in) on the calling
//     thread. On a local file system they wait for the disk at most for a metadata lookup and
//     one read of at most cache_file_max bytes; bigger files are never read here.
//   - Threads: a static_files is immutable after construction; resolve() is const and may run
//     on several threads at once (it reads the root descriptor, and each thread's own cache).
//   - Ownership: static_files owns a descriptor of its root directory (O_PATH|O_DIRECTORY),
//     opened once by the constructor: renaming the root afterwards changes nothing, and every
//     open is relative to it. A static_reply owns the descriptor of the file it names
//     (file_handle) until the caller sends and drops it.
//   - Confinement: nothing outside the root is ever opened. A path segment that is "." or
//     "..", empty (but the last), or that decodes to something holding '/', '\' or NUL is
//     refused before any system call; the rest is opened with openat2(2)'s RESOLVE_BENEATH |
//     RESOLVE_NO_MAGICLINKS, so a symlink is followed only while it stays under the root.
//     A symlink with an absolute target is refused even when it names a file under the root
//     (RESOLVE_BENEATH judges the target, not where it lands); use relative links. On a kernel
//     without openat2 (before 5.6, or a seccomp filter that answers ENOSYS or EPERM to it) the
//     same rule is kept by opening one component at a time with O_NOFOLLOW and resolving each
//     symlink by hand (at most 40 per lookup, as the kernel does).
//   - Status codes: refusals and misses are 404 Not Found, never 403, so that a client cannot
//     tell a forbidden file from a missing one; that includes EACCES and EPERM on a file the
//     server may not read, dotfiles (unless static_options::dotfiles), FIFOs, sockets and
//     devices (opened O_NONBLOCK so that a FIFO cannot hang the lookup), and directories
//     without an index. A method other than GET and HEAD is 405 with "Allow: GET, HEAD". A
//     malformed percent escape in the path is 400. Failures that say nothing about the request
//     (EMFILE, ENFILE, ENOMEM, EIO, ...) throw weft::io_error naming the operation and the
//     path; the server answers them with 500.
//   - Directories: a directory named without a trailing '/' is 301 to the request's path plus
//     '/' (query kept); with the '/' it is its index file (static_options::index) or 404.
//     There are no directory listings.
//   - Validators: every file response carries a strong ETag ("inode-size-mtime", hex, mtime in
//     nanoseconds) and Last-Modified (a modification time in the future is given as now,
//     RFC 9110 8.8.2.1), unless switched off. If-Match and If-Unmodified-Since
//     give 412; If-None-Match (weak comparison, a list or "*") and, only without it,
//     If-Modified-Since give 304 with no content (RFC 9110 13.2.2's order). A date that does
//     not parse is ignored.
//   - Ranges (GET only; RFC 9110 14): one range "bytes=a-b", "bytes=a-" or "bytes=-n" is 206
//     with Content-Range; a range that starts past the end (or a suffix of 0 bytes) is 416
//     with "Content-Range: bytes */SIZE", and so is a list whose every range does. An empty
//     file has no range to give: it is its 200, whatever Range asks (as nginx answers the
//     bytes=0- that players ask of everything). Several ranges are one 206 of Content-Type
//     multipart/byteranges, a part per satisfiable range in the order asked (each with the file's
//     Content-Type and its Content-Range), its body in the reply's head and no file descriptor;
//     when only one of them can be satisfied it is answered as a single range. A Range that does
//     not parse, or that asks for more than static_options' max_ranges and multipart_max allow, is
//     ignored and the whole file sent with 200. If-Range that does not match the current ETag
//     (strongly) or Last-Modified also sends the whole file. Every file response says
//     "Accept-Ranges: bytes".
//   - The head: status, reason and fields; Content-Length is the number of file bytes that
//     follow, and the body is empty for a file (write the head with serialize_head()). Small
//     generated answers (400/404/405/416) carry a short text body; 301 and 304 carry none. A
//     HEAD request gets the head GET would get and no file descriptor.
//   - The file may change after resolve(): its size is fstat's at that moment, and a file
//     that shrank before it was sent is the sender's to report (exchange::send_file fails
//     with a short file rather than send fewer bytes than Content-Length said).
//   - Compression: under server_options::compression a cached file of a type it takes is
//     gzipped once per thread and kept beside its bytes (ETag made weak, Vary:
//     Accept-Encoding on both answers); files sent from their descriptor go as they are. A 304
//     or 206 for such a file carries the Vary its 200 would, and a 304 to a client its 200
//     would gzip carries that 200's weak ETag. With static_options::precompressed, a file's
//     gzipped sibling NAME.gz is sent in its place to a client that takes gzip (see the
//     option), whatever the file's size; that takes precedence over gzip on the fly.
//   - Small files are cached in memory (static_options::cache_valid, on by default for one
//     second, as h2o's file cache and nginx's open_file_cache): a file of at most
//     cache_file_max bytes is read once and kept, with its fstat, by the thread that resolved
//     it; for cache_valid afterwards that thread answers it from memory (the bytes go in the
//     head's body, no file descriptor) without opening the file again, so a file changed on
//     disk is served as it was for at most cache_valid. Each thread keeps at most
//     cache_bytes of files, dropping the least recently used first. Misses are never
//     cached. cache_valid of zero opens and stats the file for every request. Entries are
//     keyed by the path as it came on the wire, so a hit costs one lookup and no splitting or
//     decoding (two spellings of one file, "a.txt" and "a%2Etxt", are two entries).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>

#include "weft/http/file_handle.hpp"
#include "weft/http/message.hpp"

namespace weft::http {

class exchange;
struct compression_options;

// What static_files serves and how.
struct static_options {
  // The directory served. It must exist and be a directory: the constructor throws
  // std::invalid_argument naming it otherwise, and weft::io_error when it cannot open it.
  std::string root;
  // The file served for a path naming a directory with a trailing '/'; "" serves none (404).
  // A plain file name: no '/', NUL, "." or "..".
  std::string index = "index.html";
  // Whether file responses carry ETag (and honour If-None-Match, If-Match and If-Range with
  // entity tags).
  bool etag = true;
  // Whether file responses carry Last-Modified (and honour If-Modified-Since,
  // If-Unmodified-Since and If-Range with dates).
  bool last_modified = true;
  // Cache-Control: "max-age=N" when positive, "no-cache" (revalidate every time) when 0.
  // Negative is std::invalid_argument.
  std::chrono::seconds max_age{0};
  // Whether segments starting with '.' (".git", ".env") are served; refused with 404 if not.
  bool dotfiles = false;
  // How long a thread answers a small file from memory before it opens and stats the file
  // again (see the contract); zero switches the cache off.
  std::chrono::milliseconds cache_valid{1000};
  // The largest file the cache holds (bigger ones are always sent from their descriptor).
  std::size_t cache_file_max = std::size_t{64} << 10;
  // The most bytes of files the cache holds per thread.
  std::size_t cache_bytes = std::size_t{8} << 20;
  // Precompressed siblings, as nginx's gzip_static and h2o's file.send-compressed: a client
  // whose Accept-Encoding takes gzip is sent NAME.gz in place of NAME when that file exists
  // beside it, is a regular file under the root, and is not older than NAME (a stale sibling
  // left behind by a deploy is not served). The answer has Content-Encoding: gzip, NAME's
  // Content-Type, the .gz file's own ETag and Last-Modified (conditionals and ranges apply to
  // its bytes), and goes from the cache or with sendfile like any file. Every answer for a file
  // that has such a sibling, 200, 206 or 304, gzipped or not, carries Vary: Accept-Encoding.
  // weft does not check that NAME.gz holds NAME's content. The cost for a file without a
  // sibling is one failed open per lookup (once per cache_valid for a cached file).
  bool precompressed = false;
  // Several ranges in one request (RFC 9110 14.6, multipart/byteranges): at most max_ranges
  // of them, adding up to at most the file's size (ranges that overlap past that are an attack
  // or a confused client), and with their part heads at most multipart_max bytes, which the
  // answer holds in memory (read with pread when the file is not cached). A request past any of
  // these gets the whole file with 200, as RFC 9110 allows. max_ranges 1 turns multipart off;
  // 0 is std::invalid_argument.
  std::size_t max_ranges = 16;
  std::size_t multipart_max = std::size_t{1} << 20;
};

// A response head plus, when bytes of a file follow it, that file open and the range to send.
struct static_reply {
  // Status, reason and fields; body only for the small generated answers and for a cached
  // file's bytes (see the contract).
  http::response head;
  // The file to send after the head; empty when nothing follows (errors, redirects, 304, HEAD,
  // an empty file).
  file_handle file;
  // The first byte of the file to send; 0 without a file.
  std::uint64_t offset = 0;
  // How many bytes to send from offset: the head's Content-Length; 0 without a file.
  std::uint64_t length = 0;

  // Whether file bytes follow the head.
  bool has_file() const noexcept { return static_cast<bool>(file); }
};

class static_files {
 public:
  // Checks the options and opens the root directory (see static_options).
  explicit static_files(static_options options);
  // A moved-from static_files holds no root: it may only be assigned to or destroyed.
  static_files(static_files&&) noexcept = default;
  static_files& operator=(static_files&&) noexcept = default;
  static_files(const static_files&) = delete;
  static_files& operator=(const static_files&) = delete;
  ~static_files() = default;

  // Resolves `req` for `path_in_root`: the request's path with the route prefix removed, still
  // percent-encoded as on the wire ("css/site.css" or "/css/site.css": one leading '/' is
  // ignored; "" and "/" name the root itself). It is split on the '/' that were on the wire
  // and each segment decoded alone, so "%2F" never becomes a separator. The redirect for a
  // directory is built from req.raw_path() and req.raw_query(). Throws weft::io_error as the
  // contract says.
  static_reply resolve(const request& req, std::string_view path_in_root) const;

  // Resolves ex.request() as resolve() does and answers it through `ex` (respond, or send_file
  // for a file that follows its head): what router::files does. A GET or HEAD of a cached
  // file, without conditional fields or Range, is answered straight from the cache: its head
  // fields were built once with the entry and its bytes are copied once, into the connection's
  // output, rather than into a response first.
  void serve(exchange& ex, std::string_view path_in_root) const;

  // The options, as checked by the constructor.
  const static_options& options() const noexcept { return options_; }

 private:
  // resolve() with the server's compression settings (null: off), for serve(): the Vary and
  // the weak ETag that gzip on the fly gives a cached file's 200 are then on its 304 and 206.
  static_reply resolve_for(const request& req, std::string_view path_in_root,
                           const compression_options* compression) const;

  static_options options_;
  // The Cache-Control value every file response carries, formatted once.
  std::string cache_control_;
  file_handle root_;
  // Whether the kernel accepted openat2 when the root was opened (else the O_NOFOLLOW walk).
  bool openat2_ = true;
  // Names this instance in the threads' file caches (unique for the process's life, so a new
  // static_files at a dead one's address never sees its entries).
  std::uint64_t cache_id_ = 0;
};

// The media type for a file name, by its extension, compared case-insensitively ("a.HTML" ->
// "text/html; charset=utf-8"); application/octet-stream for an unknown or missing extension.
// Text types carry "; charset=utf-8". Static storage.
std::string_view content_type_for(std::string_view file_name) noexcept;

// The time an HTTP-date names (RFC 9110 5.6.7): IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT")
// and, as recipients must accept them, the obsolete RFC 850 ("Sunday, 06-Nov-94 08:49:37 GMT")
// and asctime ("Sun Nov  6 08:49:37 1994") forms; RFC 850's two-digit year is taken within 50
// years of now (RFC 9110 5.6.7). Nothing for anything else or for a day that does not exist;
// the weekday must be a weekday's name but is not checked against the date (the date is what
// counts). The inverse of format_http_date().
std::optional<std::time_t> parse_http_date(std::string_view text) noexcept;

}  // namespace weft::http

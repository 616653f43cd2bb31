// weft::http forms: multipart/form-data (RFC 7578, framed as RFC 2046 5.1 says), the body of a
// form with a file input. The other body forms send, application/x-www-form-urlencoded, is
// message.hpp's parse_urlencoded (the query string's encoding).
//
//   routes.post("/upload", [](http::exchange& ex) {
//     http::multipart_reader form(ex);
//     while (std::optional<http::form_part> part = form.next_part()) {
//       if (part->filename) {
//         while (std::optional<std::string_view> piece = form.read()) save(*part, *piece);
//       } else {
//         fields[part->name] = form.read_all(64 << 10);
//       }
//     }
//     ex.respond(http::status::ok, "stored\n");
//   });
//
// Contract (multipart_reader):
//   - Streaming: a part's bytes are handed out as they arrive, through a buffer of about one
//     source piece plus one delimiter, so an upload of any size passes in bounded memory (the
//     server's limits.max_body_size still bounds the whole body). Views from read() are valid
//     until the next call on the reader.
//   - Blocking as its source is: on an exchange it reads with read_body_chunk(), which suspends
//     the handler's coroutine while the body arrives (its body_error passes through). Not
//     synchronised: one coroutine at a time.
//   - Framing (RFC 2046 5.1.1): bytes before the first delimiter (the preamble) and after the
//     closing one (the epilogue) are ignored; a delimiter line may end in spaces or tabs before
//     its CRLF. A part's head is field lines as in HTTP/1.1 (no obs-fold) ending in an empty
//     line, at most limits.max_head_size bytes, and must have a Content-Disposition of type
//     form-data with a name parameter (RFC 7578 4.2). Parameter values are tokens or quoted
//     strings (a backslash escapes the next byte).
//   - A file part's filename is its base name: what follows the last '/' or '\' of the value
//     sent (a browser sends only the base name, a hostile client "../../etc/passwd"); the
//     value exactly as sent is in the part's fields. An empty file input sends filename="":
//     a filename of "" then, and no bytes.
//   - Errors are form_error, naming the part and what is wrong, with the status to answer: 415
//     for a request that is not multipart/form-data, 400 for a body that does not frame as
//     one (no boundary, a broken delimiter line or head, the body ending inside a part), 413
//     past a limit (limits.max_parts, max_head_size, read_all's max). The server answers a
//     form_error a handler lets escape with its status and message, as it answers 413 for a
//     body that is too large; after one the reader is done (next_part() returns nothing).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "weft/error.hpp"
#include "weft/http/headers.hpp"
#include "weft/http/message.hpp"
#include "weft/http/status.hpp"

namespace weft::http {

class exchange;

// What is wrong with a form body, and the status to answer it with (400, 413 or 415).
class form_error : public weft::error {
 public:
  // reason: what is wrong, naming the part; s: the status to answer.
  form_error(const std::string& reason, http::status s) : weft::error(reason), status_(s) {}
  // The status to answer the request with: 400, 413 or 415.
  http::status status() const noexcept { return status_; }

 private:
  http::status status_;
};

// What multipart_reader takes from one body before it answers 413.
struct multipart_limits {
  std::size_t max_parts = 1000;          // parts in one body
  std::size_t max_head_size = 16 << 10;  // bytes of one part's head (its field lines)
};

// A part's head.
struct form_part {
  std::string name{};                     // Content-Disposition's name
  std::optional<std::string> filename{};  // its filename's base name; nothing for a plain field
  std::string content_type{};             // the part's Content-Type; "text/plain" when absent
  headers fields{};                       // every field of the part's head, as sent
};

// Reads a multipart/form-data body part by part as it arrives (see the contract above).
class multipart_reader {
 public:
  // The body's next piece (a view valid until the next call), or nothing at its end.
  using source = std::function<std::optional<std::string_view>()>;

  // A reader of the body that `next` yields, for the request's Content-Type value (from which
  // it takes the boundary). form_error (415 or 400) for a Content-Type that is not
  // multipart/form-data with a valid boundary.
  multipart_reader(std::string_view content_type, source next, multipart_limits limits = {});
  // The same for an exchange's request: its Content-Type, and read_body_chunk() as the source
  // (form_error 415 for a request without a Content-Type).
  explicit multipart_reader(exchange& ex, multipart_limits limits = {});

  multipart_reader(multipart_reader&&) noexcept = default;
  multipart_reader& operator=(multipart_reader&&) noexcept = default;
  multipart_reader(const multipart_reader&) = delete;
  multipart_reader& operator=(const multipart_reader&) = delete;
  ~multipart_reader() = default;

  // The next part's head, skipping what is left of the current part's bytes; nothing after the
  // closing delimiter.
  std::optional<form_part> next_part();
  // The next piece of the current part's bytes; nothing at the part's end (and before the
  // first next_part()).
  std::optional<std::string_view> read();
  // The rest of the current part's bytes; form_error 413 naming the part past max_size bytes.
  std::string read_all(std::size_t max_size);
  // The parts whose heads next_part() has returned.
  std::size_t parts() const noexcept { return parts_; }

 private:
  enum class state : std::uint8_t { preamble, in_part, between, done };
  bool fill();
  void compact();
  [[noreturn]] void fail(const std::string& what, http::status s);
  bool at_delimiter();
  form_part read_head();

  source next_;
  multipart_limits limits_;
  std::string delimiter_;  // CRLF "--" boundary
  std::string buffer_;
  std::size_t start_ = 0;  // the bytes of buffer_ before start_ were handed out or skipped
  state state_ = state::preamble;
  std::size_t parts_ = 0;
  std::string part_name_;  // the current part's name, for messages
};

// A multipart/form-data body to send (http::client::post(url, form.body(),
// form.content_type())), as a browser encodes a form with a file input: a part per field or
// file, in the order added, held in memory.
//
//   http::multipart_form form;
//   form.field("title", "holiday").file("photo", "beach.jpg", jpeg_bytes, "image/jpeg");
//   web.post(url, form.body(), form.content_type());
//
// Names and file names are written as browsers write them (the WHATWG encoding of
// multipart/form-data): '"' as %22, CR as %0D, LF as %0A. The boundary is random (24 hex
// digits from arc4random) unless given, and never appears in a part: body() chooses another when
// a random one does, and a given one that does is std::invalid_argument naming the part.
class multipart_form {
 public:
  // A random boundary, chosen when body() is made.
  multipart_form() = default;
  // This boundary: std::invalid_argument if it is not 1 to 70 of RFC 2046's bchars.
  explicit multipart_form(std::string boundary);

  // Adds a plain field.
  multipart_form& field(std::string_view name, std::string_view value);
  // Adds a file: its name in the form, its file name, its bytes and their type.
  multipart_form& file(std::string_view name, std::string_view filename, std::string_view data,
                       std::string_view content_type = "application/octet-stream");

  // The body: every part, then the closing delimiter. Its boundary is content_type()'s from the
  // first call on.
  std::string body();
  // "multipart/form-data; boundary=..." (chooses the boundary as body() does).
  std::string content_type();
  // How many parts were added.
  std::size_t parts() const noexcept { return parts_.size(); }

 private:
  struct part {
    std::string head;  // the part's field lines, each ending in CRLF, without the empty line
    std::string data;
  };
  const std::string& boundary();

  std::vector<part> parts_;
  std::string boundary_;
  bool given_ = false;
};

}  // namespace weft::http

// The state and the steps the request and response parsers share (parser.hpp): finding the end
// of a field section, parsing field lines, the framing fields, and the body (Content-Length,
// chunked with extensions and trailers, or until the connection closes). Not for users: the
// public API is request_parser and response_parser.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "weft/http/headers.hpp"
#include "weft/http/status.hpp"

namespace weft::http {

// Bounds on what a parser accepts; each violation is an error with the status given.
struct parser_limits {
  // The request target; longer: 414 URI Too Long.
  std::size_t max_target_size = 8 * 1024;
  // The start line and the header fields together, and the trailer section; larger: 431
  // Request Header Fields Too Large. Sections must stay far below 4 GiB (the field index
  // keeps 32-bit offsets): larger values are clamped to 64 MiB.
  std::size_t max_header_size = 16 * 1024;
  // Header (or trailer) field lines; more: 431.
  std::size_t max_header_fields = 100;
  // The body, however framed; larger: 413 Content Too Large (as soon as Content-Length says
  // so, or when the chunks add up past it). Default as nginx's client_max_body_size.
  std::uint64_t max_body_size = 1024 * 1024;
  // A chunk-size line with its extensions; longer: 400.
  std::size_t max_chunk_line_size = 1024;
  // The framing of a chunked body past what its chunks carry; more: 400. Each chunk's framing
  // (its chunk-size line with any extensions, and the CRLF after its data) is free up to 16
  // bytes plus the chunk's size; only what goes past that adds up here. One-byte chunks cost
  // nothing, and neither do extensions beside chunks larger than them; without this bound, a
  // peer sending one-byte chunks with long extensions would make a receiver read
  // max_chunk_line_size bytes for each byte of max_body_size (a GiB for a MiB of body), the
  // reading Go (CVE-2023-39326) and Node (CVE-2024-22019) bounded the same way.
  std::size_t max_chunk_overhead = 16 * 1024;
};

// What one parse() call found.
enum class parse_event : std::uint8_t {
  need_more,         // every byte given is consumed or must be given again with more after it
  headers_complete,  // the start line and the header fields are in message()
  body,              // result.body is the next piece of the body (a view into the input)
  message_complete,  // the message (body and trailers included) is complete
  error,             // error_status() and error_reason() say why; the parser stays failed
};

struct parse_result {
  parse_event event = parse_event::need_more;
  // How many bytes at the start of the input this call consumed; the caller drops them and
  // passes the rest (with any new bytes appended) to the next call. Never more than the input.
  std::size_t consumed = 0;
  // The body piece of a parse_event::body, pointing into the input given to this call.
  std::string_view body;
};

namespace detail {

class parser_core {
 public:
  status error_status() const noexcept { return error_status_; }
  const std::string& error_reason() const noexcept { return error_reason_; }
  bool failed() const noexcept { return phase_ == phase::failed; }
  const parser_limits& limits() const noexcept { return limits_; }

 protected:
  enum class phase : std::uint8_t {
    start,         // before (or inside) the start line and header fields
    headers_done,  // headers_complete was returned; the body (or the end) comes next
    body_length,   // Content-Length bytes left: remaining_
    chunk_size,    // a chunk-size line is next
    chunk_data,    // remaining_ bytes of the current chunk are next
    chunk_crlf,    // the CRLF after a chunk's data is next
    trailers,      // the trailer section is next
    until_close,   // a response body that ends when the connection does
    complete,      // message_complete is next
    idle,          // message_complete was returned; the next byte starts a new message
    failed,
  };
  enum class body_kind : std::uint8_t { none, length, chunked, until_close };

  explicit parser_core(const parser_limits& limits) noexcept;

  // Starts a new message: forgets everything of the last one (keeps capacities).
  void begin_message() noexcept;
  // The framing fields of the header section (Content-Length, Transfer-Encoding, Host,
  // Connection) back to none seen.
  void forget_framing() noexcept;
  // Looks for the empty line that ends a field section starting at input[0]. Resumable: it
  // remembers how far it looked, so bytes arriving one at a time cost linear time in all.
  // Returns the section's size (past the empty line), 0 when it needs more, or npos after
  // fail(). first_line_limit: the most the first line may take before it is complete
  // (0: no separate bound), with the status to fail with when it does.
  std::size_t find_section_end(std::string_view input, std::size_t first_line_limit,
                               status first_line_status);
  // Where a head that arrives whole (nearly every request a server gets) can be parsed in one
  // pass: the input itself when it ends in CR LF CR LF and is within max_header_size (the
  // section's end is then found by parse_fields), else the input up to its first CR LF CR LF
  // if that is within max_header_size, else empty (find_section_end's walk takes it). A parse
  // of what this returns that refuses it starts over with restart_section() and
  // find_section_end, whose walk line by line gives every refusal the status and reason a head
  // arriving in pieces gets (bench/http/README.md, "One pass over a head").
  std::string_view whole_head(std::string_view input) const noexcept;
  // Forgets what a refused whole-section parse left: the framing fields, the fields indexed
  // into `fields` and the failure.
  void restart_section(headers& fields) noexcept;
  [[gnu::cold, gnu::noinline]] std::size_t fail_first_line(std::size_t first_line_limit,
                                                           status first_line_status);
  [[gnu::cold, gnu::noinline]] std::size_t fail_section_size();
  // Parses the field lines of a complete section from offset `from` (a line start) to its
  // empty line into fields. framing: whether these are header fields whose framing fields
  // (Content-Length, Transfer-Encoding, Host, Connection) must be noted. False after fail().
  // With section_end, `section` may go on past the empty line (it must end in CR LF CR LF,
  // which bounds every scan): the first line that is CRLF alone ends the section, and
  // *section_end is the offset just past it.
  bool parse_fields(std::string_view section, std::size_t from, headers& fields, bool framing,
                    std::size_t* section_end = nullptr);
  // Checks the framing fields (RFC 9112 6.1-6.3) and picks how the body is framed.
  bool choose_request_body(int version_minor);
  // Keeps why a Host value is refused (cold: only for a bad value).
  [[gnu::cold, gnu::noinline]] void note_host_fault(std::string_view value, std::size_t at);
  bool choose_response_body(int version_minor, std::uint16_t code, bool head_request,
                            bool connect_request);
  // Shared by both: the 501 for a transfer coding other than chunked (te_unknown_), and the
  // body framed by Content-Length (checked against max_body_size).
  bool refuse_unknown_coding();
  bool choose_length_body();
  // After headers_complete: the body events and message_complete.
  parse_result parse_body(std::string_view input, headers& trailers);
  // The end of the input: completes a close-delimited body, else fails a partial message.
  parse_result finish_input();
  // Records the error and turns the parser failed.
  parse_result fail(status s, std::string reason);
  // fail() with the reason made by reason() on the cold path: the scans call this, so that the
  // strings of their twenty-odd refusals do not give each scan a large frame and six saved
  // registers on every request (find_section_end, parse_fields, parse_request_line).
  template <class Reason>
  [[gnu::cold, gnu::noinline]] parse_result fail_with(status s, const Reason& reason) {
    return fail(s, reason());
  }
  bool keep_alive_of(int version_minor) const noexcept;

  parser_limits limits_;
  phase phase_ = phase::idle;
  body_kind body_ = body_kind::none;
  // find_section_end's resume points: the start of the line it is in, how far it looked, and
  // how many lines it passed.
  std::size_t line_start_ = 0;
  std::size_t scanned_ = 0;
  std::size_t lines_ = 0;
  bool started_ = false;  // a byte of the current message has been seen
  std::uint64_t remaining_ = 0;
  std::uint64_t body_total_ = 0;
  // Chunk framing bytes past each chunk's allowance (parser_limits::max_chunk_overhead).
  std::uint64_t chunk_overhead_ = 0;
  // Framing fields seen in the header section.
  std::uint32_t content_length_fields_ = 0;
  std::uint32_t host_fields_ = 0;
  std::uint64_t content_length_ = 0;
  bool transfer_encoding_ = false;
  bool te_chunked_ = false;       // chunked is among the codings
  bool te_chunked_last_ = false;  // and is the last one so far
  bool connection_close_ = false;
  bool connection_keep_alive_ = false;
  bool expect_ = false;     // an Expect field came (request heads)
  std::string te_unknown_;  // the first coding weft does not implement
  std::string host_fault_;  // why the Host value is not a host[:port]; empty when it is
  status error_status_ = status::ok;
  std::string error_reason_;
};

}  // namespace detail
}  // namespace weft::http

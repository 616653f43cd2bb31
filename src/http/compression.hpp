// gzip for response bodies (server_options::compression, whose comment is the contract): which
// requests take gzip, which responses qualify, and the compression itself. Internal to http.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include "weft/http/message.hpp"
#include "weft/http/server.hpp"

namespace weft::http::detail {

// std::invalid_argument for settings out of range (a level outside 1-9, an empty type).
void check_compression_options(const compression_options& options);

// Whether an Accept-Encoding value (all its fields joined by ',') takes gzip: "gzip" or
// "x-gzip" with a q above 0, or else "*" with a q above 0 (RFC 9110 12.5.3). An absent field
// takes nothing here: a server may send any coding then, but clients that do not say they
// decode gzip mostly do not.
bool accepts_gzip(std::string_view accept_encoding) noexcept;

// Whether a Content-Type value names one of options.types.
bool compressible_type(std::string_view content_type, const compression_options& options) noexcept;

// Whether a request's Accept-Encoding fields (all of them, as one list) take gzip.
bool request_accepts_gzip(const headers& request_fields);

// Applies the rules to a response about to be serialized for a request with these fields:
// adds Vary, and compresses the body and sets Content-Encoding and the weakened ETag where
// gzip is taken and the body shrinks. Returns whether it compressed.
bool compress_response(http::response& r, const headers& request_fields,
                       const compression_options& options);

// The gzip member (RFC 1952) of data, with the thread's zlib stream at that level.
void gzip(std::string_view data, int level, std::string& out);

// What gunzip_stream throws: data that is not one gzip member, or (too_large) more decoded
// bytes than its limit.
class gunzip_error : public std::runtime_error {
 public:
  gunzip_error(const std::string& what, bool too_large)
      : std::runtime_error(what), too_large_(too_large) {}
  bool too_large() const noexcept { return too_large_; }

 private:
  bool too_large_;
};

// Decodes a gzip body as its pieces arrive (the client's side of Content-Encoding: gzip):
// feed() hands each decoded piece to a sink (views valid during the call) and throws
// gunzip_error naming what is wrong with data that is not gzip or that goes on after the
// member ends, or once more than `limit` bytes were decoded; finish() throws gunzip_error when
// a member began and has not ended. No bytes at all is an empty body, not a cut one: a
// Content-Length: 0 (or an empty chunked body, or a 404's) labelled gzip is what servers send,
// and curl and Go's client take it as empty.
class gunzip_stream {
 public:
  explicit gunzip_stream(std::uint64_t limit);
  ~gunzip_stream();
  gunzip_stream(const gunzip_stream&) = delete;
  gunzip_stream& operator=(const gunzip_stream&) = delete;

  template <class Sink>
  void feed(std::string_view data, Sink&& sink) {
    began_ = began_ || !data.empty();
    bool full = true;  // while the window fills, zlib may hold more output
    while (!data.empty() || full) {
      const std::string_view piece = step(data, full);
      if (!piece.empty()) {
        sink(piece);
      }
    }
  }
  void finish() const;

 private:
  // Decodes from the front of data (consuming what it took) into the window; returns what it
  // produced, and in full whether it filled the window.
  std::string_view step(std::string_view& data, bool& full);

  struct state;
  std::unique_ptr<state> state_;
  std::uint64_t limit_;
  std::uint64_t produced_ = 0;
  bool ended_ = false;
  bool began_ = false;  // feed() was given a byte
};

}  // namespace weft::http::detail

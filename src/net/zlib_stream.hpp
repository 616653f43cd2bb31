// zlib's deflate and inflate streams as owned objects, and the thread's shared ones, for every
// user of zlib in weft: WebSocket's permessage-deflate (src/net/protocols/websocket_deflate.cpp)
// and HTTP's gzip (src/http/compression.cpp). Internal.
//
// window_bits is zlib's own parameter: 9..15 for a zlib stream, negative for raw DEFLATE
// (RFC 7692), plus 16 for gzip (RFC 1952).
//
// Threads: a stream belongs to its user. The shared ones are the calling thread's (thread_local,
// one per setting, made at first use and freed when the thread ends); a user of a shared stream
// must leave it reset (deflateReset / inflateReset) before anything else on the thread uses it,
// which, since none of them suspends while holding one, means before it returns.
#pragma once

#include <zlib.h>

namespace weft::net::detail {

class zlib_deflater {
 public:
  // std::bad_alloc when zlib has no memory; std::logic_error for settings it refuses.
  zlib_deflater(int level, int window_bits, int mem_level);
  ~zlib_deflater() { deflateEnd(&z); }
  zlib_deflater(const zlib_deflater&) = delete;
  zlib_deflater& operator=(const zlib_deflater&) = delete;

  z_stream z;
  const int level;
  const int window_bits;
  const int mem_level;
};

class zlib_inflater {
 public:
  explicit zlib_inflater(int window_bits);
  ~zlib_inflater() { inflateEnd(&z); }
  zlib_inflater(const zlib_inflater&) = delete;
  zlib_inflater& operator=(const zlib_inflater&) = delete;

  z_stream z;
  const int window_bits;
};

// The calling thread's stream of that setting (see the threads rule above).
zlib_deflater& thread_deflater(int level, int window_bits, int mem_level);
zlib_inflater& thread_inflater(int window_bits);

// Resets a stream when the scope ends, however it ends (null: leaves it), so that a shared one
// is clean for its next user even after an error.
template <int (*reset)(z_streamp)>
class reset_on_exit {
 public:
  explicit reset_on_exit(z_stream* stream) noexcept : stream_(stream) {}
  ~reset_on_exit() {
    if (stream_ != nullptr) {
      reset(stream_);
    }
  }
  reset_on_exit(const reset_on_exit&) = delete;
  reset_on_exit& operator=(const reset_on_exit&) = delete;

 private:
  z_stream* stream_;
};
using deflate_reset_on_exit = reset_on_exit<deflateReset>;
using inflate_reset_on_exit = reset_on_exit<inflateReset>;

}  // namespace weft::net::detail

// weft::tty: a weft::stream over a terminal file descriptor (uv_tty_t), with raw mode and the
// window size.
//
// Reads and writes are the weft::stream ones (blocking the calling coroutine only, with
// timeouts, cancellable). Raw mode is undone when the tty is closed or destroyed, so a program
// that ends (or throws) never leaves the terminal raw. The fd stays owned by the caller: libuv
// reopens the terminal for its own use when it can, and closing the weft::tty does not close fd.
// Threads and lifetimes: as for weft::stream (see stream.hpp).
#pragma once

#include "weft/io/stream.hpp"

namespace weft {
namespace detail {
struct stream_access;
}

class tty : public weft::stream {
 public:
  // The terminal's size in characters.
  struct window_size {
    int columns = 0;  // characters per line
    int rows = 0;     // lines
  };

  tty() noexcept = default;
  // io_error "open tty fd 5: inappropriate ioctl for device" when fd is not a terminal.
  static tty open(int fd);

  // Raw mode: input byte by byte, no echo, no line editing or signal keys. set_raw(false)
  // restores the mode the terminal had before.
  void set_raw(bool raw);
  bool raw() const noexcept;  // whether raw mode is on

  // The terminal's current size (io_error when the fd is not a terminal).
  window_size size() const;

 private:
  friend struct detail::stream_access;
  explicit tty(detail::stream_state* state) noexcept : weft::stream(state) {}
};

}  // namespace weft

// weft::http::file_handle (file_handle.hpp): closing the descriptor it owns.
#include "weft/http/file_handle.hpp"

#include <unistd.h>

namespace weft::http {

void file_handle::reset(int fd) noexcept {
  if (fd_ >= 0 && fd_ != fd) {
    // Linux releases the descriptor even when close reports an error (EINTR included), so a
    // retry could close a descriptor another thread has just been given; there is nothing
    // useful to do with the error of closing a file that was only read.
    ::close(fd_);
  }
  fd_ = fd;
}

}  // namespace weft::http

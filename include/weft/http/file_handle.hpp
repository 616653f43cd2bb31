// weft::http::file_handle: the owner of one open file descriptor, handed from the static-file
// resolver (static_files.hpp) to whoever sends the file.
//
// Contract:
//   - Move-only; the descriptor is closed exactly once, by the destructor, reset() or the
//     assignment that replaces it, unless release() gave it away. A moved-from handle is empty.
//   - Closing is close(2) on the calling thread: it does not block for a regular file. A close
//     error is not reported (the descriptor is gone either way, and the file was only read).
//   - Not synchronised: one thread at a time, like any value type. Nothing here allocates.
#pragma once

namespace weft::http {

class file_handle {
 public:
  // An empty handle (get() == -1).
  file_handle() noexcept = default;
  // Takes ownership of `fd` (-1 for none).
  explicit file_handle(int fd) noexcept : fd_(fd) {}
  file_handle(file_handle&& other) noexcept : fd_(other.release()) {}
  file_handle& operator=(file_handle&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  file_handle(const file_handle&) = delete;
  file_handle& operator=(const file_handle&) = delete;
  ~file_handle() { reset(); }

  // The descriptor, still owned by this handle; -1 when empty.
  int get() const noexcept { return fd_; }
  // Whether a descriptor is held.
  explicit operator bool() const noexcept { return fd_ >= 0; }
  // Gives the descriptor up without closing it (the caller now owns it); -1 when empty.
  int release() noexcept {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  // Closes the held descriptor, if any, and takes `fd` instead.
  void reset(int fd = -1) noexcept;

 private:
  int fd_ = -1;
};

}  // namespace weft::http

// weft::file: an open file, read and written from coroutines.
//
// Each call is a uv_fs_* request on libuv's thread pool: the calling coroutine suspends, the
// others keep running. Every call takes an optional weft::timeout and is a cancellation point
// (cancelled_error / timeout_error wake the caller at once). Because the waiter may leave before
// the worker is done, a request never touches the caller's memory: reads land in a buffer the
// request owns and are copied out on completion, writes copy the data in first. An abandoned
// request completes in the background and its result is discarded (an abandoned write may or
// may not have reached the file; an abandoned open closes the descriptor it got).
//
// Ownership: a file owns its descriptor. close() is idempotent; the destructor closes a file
// that is still open synchronously (uv_fs_close without a callback, on the calling thread),
// because a destructor cannot suspend: call close() first where a slow close (NFS) matters.
// One file is used by one coroutine at a time: the sequential read()/write() share a position.
//
// Thread: call from a coroutine on the scheduler's thread (std::logic_error elsewhere).
#pragma once

#include <fcntl.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "weft/io/fs.hpp"
#include "weft/sched/timeout.hpp"

// libuv's loop type, declared here so that this header need not include <uv.h>.
typedef struct uv_loop_s uv_loop_t;

namespace weft {
namespace detail {
struct fd_guard;
}

class file {
 public:
  // Opens path with open(2) flags (O_RDONLY, O_WRONLY | O_CREAT | O_TRUNC, ...) and the mode
  // for a created file. io_error "open PATH: ..." on failure.
  static file open(const std::string& path, int flags = O_RDONLY, int mode = 0666,
                   const timeout& limit = timeout::never());

  file() noexcept = default;
  file(file&& other) noexcept;
  file& operator=(file&& other) noexcept;
  file(const file&) = delete;
  file& operator=(const file&) = delete;
  ~file();

  // A zero-length read or write (empty buffer or data) does nothing and returns at once (a
  // read returns 0); it still needs an open file.
  //
  // Reads up to buffer.size() bytes at offset; returns how many (0 at end of file).
  std::size_t read_at(std::uint64_t offset, std::span<char> buffer,
                      const timeout& limit = timeout::never());
  // Writes all of data at offset (repeating short writes).
  void write_at(std::uint64_t offset, std::string_view data,
                const timeout& limit = timeout::never());

  // The same at the file's own position, which they advance (it starts at 0; with O_APPEND
  // the kernel writes at the end whatever the position says). On a file that cannot seek (a
  // FIFO, a character device: read_at/write_at fail there with ESPIPE) they read and write in
  // sequence instead, and position() counts the bytes moved.
  std::size_t read(std::span<char> buffer, const timeout& limit = timeout::never());
  void write(std::string_view data, const timeout& limit = timeout::never());
  std::uint64_t position() const noexcept { return position_; }
  void seek(std::uint64_t position) noexcept { position_ = position; }

  // The open file's size, mode and type (fstat).
  fs::file_status stat(const timeout& limit = timeout::never());
  // fsync(2): the data and metadata are on the device when it returns.
  void sync(const timeout& limit = timeout::never());
  // Closes the descriptor. Idempotent. Even when it fails (io_error) or the caller is
  // cancelled, the file counts as closed afterwards: the descriptor is not to be reused.
  void close(const timeout& limit = timeout::never());

  // Whether the file is open; its descriptor (-1 once closed); the path it was opened with.
  bool is_open() const noexcept { return fd_ >= 0; }
  int fd() const noexcept { return fd_; }                     // the descriptor; -1 once closed
  const std::string& path() const noexcept { return path_; }  // the path the file was opened with

 private:
  file(int fd, std::string path, uv_loop_t* loop);
  int checked_fd(const char* operation) const;
  // offset -1: at the descriptor's current position (a file that cannot seek).
  std::size_t read_from(std::int64_t offset, std::span<char> buffer, const timeout& limit);
  void write_from(std::int64_t offset, std::string_view data, const timeout& limit);
  void close_now() noexcept;

  int fd_ = -1;
  std::string path_;
  std::uint64_t position_ = 0;
  bool sequential_ = false;    // read/write found it cannot seek (ESPIPE)
  uv_loop_t* loop_ = nullptr;  // the loop it was opened on
  // Shares fd_ with requests abandoned while in flight, which keep it open
  // (src/io/file_request.hpp).
  detail::fd_guard* guard_ = nullptr;
};

}  // namespace weft

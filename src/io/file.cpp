// weft::file: each call is one fs_request (file_request.hpp) awaited by the caller.
#include "weft/io/file.hpp"

#include <uv.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#include "io/c_string.hpp"
#include "io/file_request.hpp"
#include "weft/error.hpp"
#include "weft/reactor/detail/operation.hpp"

namespace weft {

using detail::fs_request;
using detail::run_fs_request;

file file::open(const std::string& path, int flags, int mode, const timeout& limit) {
  detail::refuse_nul(path, "open", "path");
  auto done = run_fs_request(
      "open", path, limit, [&](uv_loop_t& loop, fs_request& request, uv_fs_cb callback) {
        return uv_fs_open(&loop, request.request(), path.c_str(), flags, mode, callback);
      });
  return file(static_cast<int>(done->result()), path, done->request()->loop);
}

file::file(int fd, std::string path, uv_loop_t* loop)
    : fd_(fd), path_(std::move(path)), loop_(loop), guard_(new detail::fd_guard(fd)) {}

file::file(file&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      path_(std::move(other.path_)),
      position_(std::exchange(other.position_, 0)),
      sequential_(std::exchange(other.sequential_, false)),
      loop_(other.loop_),
      guard_(std::exchange(other.guard_, nullptr)) {}

file& file::operator=(file&& other) noexcept {
  if (this != &other) {
    close_now();  // the descriptor this file held must not leak
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
    position_ = std::exchange(other.position_, 0);
    sequential_ = std::exchange(other.sequential_, false);
    loop_ = other.loop_;
    guard_ = std::exchange(other.guard_, nullptr);
  }
  return *this;
}

file::~file() { close_now(); }

void file::close_now() noexcept {
  if (fd_ >= 0) {
    // A destructor cannot suspend, so this close is a plain close(2) on the calling thread
    // (errors have nowhere to go; call close() to see them), or, while an abandoned request
    // still uses the descriptor, the close happens when that request is done.
    fd_ = -1;
    std::exchange(guard_, nullptr)->release();
  }
}

int file::checked_fd(const char* operation) const {
  if (fd_ < 0) {
    throw std::logic_error(std::string("weft::file::") + operation + " on a closed file" +
                           (path_.empty() ? "" : " (" + path_ + ")") +
                           "; open it with weft::file::open first");
  }
  return fd_;
}

std::size_t file::read_at(std::uint64_t offset, std::span<char> buffer, const timeout& limit) {
  checked_fd("read_at");
  return read_from(static_cast<std::int64_t>(offset), buffer, limit);
}

std::size_t file::read_from(std::int64_t offset, std::span<char> buffer, const timeout& limit) {
  int fd = fd_;
  if (buffer.empty()) {
    return 0;
  }
  auto done = run_fs_request(
      "read", path_, limit,
      [&](uv_loop_t& loop, fs_request& request, uv_fs_cb callback) {
        uv_buf_t chunk =
            uv_buf_init(request.buffer.data(), static_cast<unsigned int>(request.buffer.size()));
        return uv_fs_read(&loop, request.request(), fd, &chunk, 1, offset, callback);
      },
      std::string(std::min<std::size_t>(buffer.size(), 1u << 30), '\0'), guard_);
  auto count = static_cast<std::size_t>(done->result());
  std::memcpy(buffer.data(), done->buffer.data(), count);
  return count;
}

void file::write_at(std::uint64_t offset, std::string_view data, const timeout& limit) {
  checked_fd("write_at");
  write_from(static_cast<std::int64_t>(offset), data, limit);
}

void file::write_from(std::int64_t offset, std::string_view data, const timeout& limit) {
  int fd = fd_;
  while (!data.empty()) {
    std::string_view chunk = data.substr(0, std::size_t{1} << 30);
    auto done = run_fs_request(
        "write", path_, limit,
        [&](uv_loop_t& loop, fs_request& request, uv_fs_cb callback) {
          uv_buf_t owned =
              uv_buf_init(request.buffer.data(), static_cast<unsigned int>(request.buffer.size()));
          return uv_fs_write(&loop, request.request(), fd, &owned, 1, offset, callback);
        },
        std::string(chunk), guard_);
    auto written = static_cast<std::size_t>(done->result());
    data.remove_prefix(written);
    if (offset >= 0) {
      offset += static_cast<std::int64_t>(written);
    }
  }
}

std::size_t file::read(std::span<char> buffer, const timeout& limit) {
  checked_fd("read");
  std::size_t count = 0;
  if (!sequential_) {
    try {
      count = read_from(static_cast<std::int64_t>(position_), buffer, limit);
      position_ += count;
      return count;
    } catch (const io_error& failure) {
      if (failure.uv_code() != UV_ESPIPE) {
        throw;
      }
    }
    sequential_ = true;  // a pipe or a device: no offsets from now on
  }
  count = read_from(-1, buffer, limit);
  position_ += count;
  return count;
}

void file::write(std::string_view data, const timeout& limit) {
  checked_fd("write");
  if (!sequential_) {
    try {
      write_from(static_cast<std::int64_t>(position_), data, limit);
      position_ += data.size();
      return;
    } catch (const io_error& failure) {
      if (failure.uv_code() != UV_ESPIPE) {
        throw;
      }
    }
    sequential_ = true;
  }
  write_from(-1, data, limit);
  position_ += data.size();
}

fs::file_status file::stat(const timeout& limit) {
  int fd = checked_fd("stat");
  auto done = run_fs_request(
      "stat", path_, limit,
      [&](uv_loop_t& loop, fs_request& request, uv_fs_cb callback) {
        return uv_fs_fstat(&loop, request.request(), fd, callback);
      },
      {}, guard_);
  return detail::status_of(done->request()->statbuf);
}

void file::sync(const timeout& limit) {
  int fd = checked_fd("sync");
  run_fs_request(
      "fsync", path_, limit,
      [&](uv_loop_t& loop, fs_request& request, uv_fs_cb callback) {
        return uv_fs_fsync(&loop, request.request(), fd, callback);
      },
      {}, guard_);
}

void file::close(const timeout& limit) {
  if (fd_ < 0) {
    return;
  }
  // Closed from here on whatever happens: after close(2) fails the descriptor state is
  // unspecified, and an abandoned close still completes on its worker.
  int fd = std::exchange(fd_, -1);
  detail::fd_guard* guard = std::exchange(guard_, nullptr);
  if (guard->holders > 1) {
    // An abandoned read or write still runs on this descriptor: the last of them closes it
    // (closing it now could hand its number to the next open while they still use it).
    guard->release();
    return;
  }
  delete guard;  // the only holder: the descriptor is closed right below
  run_fs_request("close", path_, limit,
                 [&](uv_loop_t& loop, fs_request& request, uv_fs_cb callback) {
                   return uv_fs_close(&loop, request.request(), fd, callback);
                 });
}

}  // namespace weft

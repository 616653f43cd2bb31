// weft::file: each call is one fs_request (file_request.hpp) awaited by the caller.
#include "weft/io/file.hpp"

#include <uv.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#include "io/file_request.hpp"
#include "weft/reactor/operation.hpp"

namespace weft {

using detail::fs_request;
using detail::run_fs_request;

file file::open(const std::string& path, int flags, int mode, const timeout& limit) {
  auto done = run_fs_request(
      "open", path, limit, [&](uv_loop_t& loop, fs_request& request, uv_fs_cb callback) {
        return uv_fs_open(&loop, request.request(), path.c_str(), flags, mode, callback);
      });
  return file(static_cast<int>(done->result()), path, done->request()->loop);
}

file::file(file&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      path_(std::move(other.path_)),
      position_(std::exchange(other.position_, 0)),
      loop_(other.loop_) {}

file& file::operator=(file&& other) noexcept {
  if (this != &other) {
    close_now();  // the descriptor this file held must not leak
    fd_ = std::exchange(other.fd_, -1);
    path_ = std::move(other.path_);
    position_ = std::exchange(other.position_, 0);
    loop_ = other.loop_;
  }
  return *this;
}

file::~file() { close_now(); }

void file::close_now() noexcept {
  if (fd_ >= 0) {
    // A destructor cannot suspend, so this close runs synchronously on the calling thread: a
    // uv_fs_close without a callback is a plain close(2) that does not use the loop beyond
    // recording it in the request. Errors have nowhere to go; call close() to see them.
    uv_fs_t request;
    uv_fs_close(loop_, &request, std::exchange(fd_, -1), nullptr);
    uv_fs_req_cleanup(&request);
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
  int fd = checked_fd("read_at");
  if (buffer.empty()) {
    return 0;
  }
  auto done = run_fs_request(
      "read", path_, limit,
      [&](uv_loop_t& loop, fs_request& request, uv_fs_cb callback) {
        uv_buf_t chunk =
            uv_buf_init(request.buffer.data(), static_cast<unsigned int>(request.buffer.size()));
        return uv_fs_read(&loop, request.request(), fd, &chunk, 1,
                          static_cast<std::int64_t>(offset), callback);
      },
      std::string(std::min<std::size_t>(buffer.size(), 1u << 30), '\0'));
  auto count = static_cast<std::size_t>(done->result());
  std::memcpy(buffer.data(), done->buffer.data(), count);
  return count;
}

void file::write_at(std::uint64_t offset, std::string_view data, const timeout& limit) {
  int fd = checked_fd("write_at");
  while (!data.empty()) {
    std::string_view chunk = data.substr(0, std::size_t{1} << 30);
    auto done = run_fs_request(
        "write", path_, limit,
        [&](uv_loop_t& loop, fs_request& request, uv_fs_cb callback) {
          uv_buf_t owned =
              uv_buf_init(request.buffer.data(), static_cast<unsigned int>(request.buffer.size()));
          return uv_fs_write(&loop, request.request(), fd, &owned, 1,
                             static_cast<std::int64_t>(offset), callback);
        },
        std::string(chunk));
    auto written = static_cast<std::size_t>(done->result());
    data.remove_prefix(written);
    offset += written;
  }
}

std::size_t file::read(std::span<char> buffer, const timeout& limit) {
  checked_fd("read");
  std::size_t count = read_at(position_, buffer, limit);
  position_ += count;
  return count;
}

void file::write(std::string_view data, const timeout& limit) {
  checked_fd("write");
  write_at(position_, data, limit);
  position_ += data.size();
}

fs::file_status file::stat(const timeout& limit) {
  int fd = checked_fd("stat");
  auto done = run_fs_request("stat", path_, limit,
                             [&](uv_loop_t& loop, fs_request& request, uv_fs_cb callback) {
                               return uv_fs_fstat(&loop, request.request(), fd, callback);
                             });
  return detail::status_of(done->request()->statbuf);
}

void file::sync(const timeout& limit) {
  int fd = checked_fd("sync");
  run_fs_request("fsync", path_, limit,
                 [&](uv_loop_t& loop, fs_request& request, uv_fs_cb callback) {
                   return uv_fs_fsync(&loop, request.request(), fd, callback);
                 });
}

void file::close(const timeout& limit) {
  if (fd_ < 0) {
    return;
  }
  // Closed from here on whatever happens: after close(2) fails the descriptor state is
  // unspecified, and an abandoned close still completes on its worker.
  int fd = std::exchange(fd_, -1);
  run_fs_request("close", path_, limit,
                 [&](uv_loop_t& loop, fs_request& request, uv_fs_cb callback) {
                   return uv_fs_close(&loop, request.request(), fd, callback);
                 });
}

}  // namespace weft

// weft::fs: path-level calls, each one fs_request (file_request.hpp) awaited by the caller.
#include <sys/stat.h>
#include <uv.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "io/c_string.hpp"
#include "io/file_request.hpp"
#include "weft/io/file.hpp"
#include "weft/io/fs.hpp"

namespace weft {
namespace detail {

fs::file_status status_of(const uv_stat_t& stat) noexcept {
  fs::file_status status;
  status.size = stat.st_size;
  status.mode = static_cast<std::uint32_t>(stat.st_mode);
  auto mode = static_cast<mode_t>(stat.st_mode);
  status.type = S_ISREG(mode)    ? fs::entry_type::file
                : S_ISDIR(mode)  ? fs::entry_type::directory
                : S_ISLNK(mode)  ? fs::entry_type::symlink
                : S_ISFIFO(mode) ? fs::entry_type::fifo
                : S_ISSOCK(mode) ? fs::entry_type::socket
                : S_ISCHR(mode)  ? fs::entry_type::character_device
                : S_ISBLK(mode)  ? fs::entry_type::block_device
                                 : fs::entry_type::unknown;
  status.modified = std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::seconds(stat.st_mtim.tv_sec) +
          std::chrono::nanoseconds(stat.st_mtim.tv_nsec)));
  return status;
}

namespace {

fs::entry_type type_of(uv_dirent_type_t type) noexcept {
  switch (type) {
    case UV_DIRENT_FILE:
      return fs::entry_type::file;
    case UV_DIRENT_DIR:
      return fs::entry_type::directory;
    case UV_DIRENT_LINK:
      return fs::entry_type::symlink;
    case UV_DIRENT_FIFO:
      return fs::entry_type::fifo;
    case UV_DIRENT_SOCKET:
      return fs::entry_type::socket;
    case UV_DIRENT_CHAR:
      return fs::entry_type::character_device;
    case UV_DIRENT_BLOCK:
      return fs::entry_type::block_device;
    default:
      return fs::entry_type::unknown;
  }
}

}  // namespace
}  // namespace detail

namespace fs {

using detail::fs_request;
using detail::run_fs_request;

file_status stat(const std::string& path, const timeout& limit) {
  detail::refuse_nul(path, "stat", "path");
  auto done = run_fs_request("stat", path, limit,
                             [&](uv_loop_t& loop, fs_request& request, uv_fs_cb callback) {
                               return uv_fs_stat(&loop, request.request(), path.c_str(), callback);
                             });
  return detail::status_of(done->request()->statbuf);
}

void rename(const std::string& from, const std::string& to, const timeout& limit) {
  detail::refuse_nul(from, "rename", "source path");
  detail::refuse_nul(to, "rename", "target path");
  run_fs_request("rename", from + " -> " + to, limit,
                 [&](uv_loop_t& loop, fs_request& request, uv_fs_cb callback) {
                   return uv_fs_rename(&loop, request.request(), from.c_str(), to.c_str(),
                                       callback);
                 });
}

void unlink(const std::string& path, const timeout& limit) {
  detail::refuse_nul(path, "unlink", "path");
  run_fs_request("unlink", path, limit,
                 [&](uv_loop_t& loop, fs_request& request, uv_fs_cb callback) {
                   return uv_fs_unlink(&loop, request.request(), path.c_str(), callback);
                 });
}

void mkdir(const std::string& path, int mode, const timeout& limit) {
  detail::refuse_nul(path, "mkdir", "path");
  run_fs_request("mkdir", path, limit,
                 [&](uv_loop_t& loop, fs_request& request, uv_fs_cb callback) {
                   return uv_fs_mkdir(&loop, request.request(), path.c_str(), mode, callback);
                 });
}

void rmdir(const std::string& path, const timeout& limit) {
  detail::refuse_nul(path, "rmdir", "path");
  run_fs_request("rmdir", path, limit,
                 [&](uv_loop_t& loop, fs_request& request, uv_fs_cb callback) {
                   return uv_fs_rmdir(&loop, request.request(), path.c_str(), callback);
                 });
}

std::vector<directory_entry> readdir(const std::string& path, const timeout& limit) {
  detail::refuse_nul(path, "readdir", "path");
  auto done = run_fs_request(
      "readdir", path, limit, [&](uv_loop_t& loop, fs_request& request, uv_fs_cb callback) {
        return uv_fs_scandir(&loop, request.request(), path.c_str(), 0, callback);
      });
  std::vector<directory_entry> entries;
  entries.reserve(static_cast<std::size_t>(done->result()));
  uv_dirent_t entry;
  while (uv_fs_scandir_next(done->request(), &entry) != UV_EOF) {
    entries.push_back({entry.name, detail::type_of(entry.type)});
  }
  return entries;
}

std::string read_file(const std::string& path, const timeout& limit) {
  weft::file input = weft::file::open(path, O_RDONLY, 0, limit);
  // The size is a hint only (the file may grow, /proc files report 0): read until end of file.
  std::uint64_t expected = input.stat(limit).size;
  std::string content;
  std::size_t chunk =
      static_cast<std::size_t>(std::clamp<std::uint64_t>(expected + 1, 4096, 1u << 22));
  for (;;) {
    std::size_t used = content.size();
    content.resize(used + chunk);
    std::size_t count = input.read(std::span<char>(content.data() + used, chunk), limit);
    content.resize(used + count);
    if (count == 0) {
      break;
    }
  }
  input.close(limit);
  return content;
}

void write_file(const std::string& path, std::string_view data, const timeout& limit) {
  weft::file output = weft::file::open(path, O_WRONLY | O_CREAT | O_TRUNC, 0666, limit);
  output.write(data, limit);
  output.close(limit);
}

}  // namespace fs
}  // namespace weft

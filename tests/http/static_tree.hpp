// A scratch directory tree for the static-file tests: a root to serve and a sibling outside it,
// made under a fresh mkdtemp directory and removed with everything in it at the end; and the
// helpers those tests share (requests, reading back the range a reply names, counting open
// descriptors, giving up root's right to read anything).
#pragma once

#include <fcntl.h>
#include <linux/capability.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>

#include "weft/http/static_files.hpp"

namespace weft_static_test {

namespace fs = std::filesystem;
namespace http = weft::http;

// mkdtemp's directory with "root/" (served) and "outside/secret.txt" (never to be served).
class tree {
 public:
  tree() {
    std::string pattern = (fs::temp_directory_path() / "weft-static-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("mkdtemp " + pattern + ": " + std::strerror(errno));
    }
    base_ = pattern;
    fs::create_directory(root());
    fs::create_directory(base_ / "outside");
    write(base_ / "outside" / "secret.txt", "secret\n");
  }
  tree(const tree&) = delete;
  tree& operator=(const tree&) = delete;
  ~tree() {
    // Directories a test made unreadable are opened up again so that removal can enter them.
    std::error_code ignored;
    for (auto it = fs::recursive_directory_iterator(base_, ignored);
         it != fs::recursive_directory_iterator(); it.increment(ignored)) {
      if (it->is_directory(ignored) && !it->is_symlink(ignored)) {
        fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ignored);
      }
    }
    fs::permissions(base_, fs::perms::owner_all, fs::perm_options::add, ignored);
    fs::remove_all(base_, ignored);
  }

  const fs::path& base() const noexcept { return base_; }
  fs::path root() const { return base_ / "root"; }

  // Writes `content` to root/relative (making its directories).
  fs::path file(const std::string& relative, std::string_view content) const {
    fs::path path = root() / relative;
    fs::create_directories(path.parent_path());
    write(path, content);
    return path;
  }
  fs::path directory(const std::string& relative) const {
    fs::path path = root() / relative;
    fs::create_directories(path);
    return path;
  }
  // A symlink root/relative -> target (as given: relative or absolute).
  void symlink(const std::string& relative, const std::string& target) const {
    fs::path path = root() / relative;
    fs::create_directories(path.parent_path());
    fs::create_symlink(target, path);
  }
  // Sets a file's modification time (and access time) to `seconds` since the epoch.
  static void set_mtime(const fs::path& path, std::time_t seconds) {
    timespec times[2] = {{seconds, 0}, {seconds, 0}};
    if (::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW) != 0) {
      throw std::runtime_error("utimensat " + path.string() + ": " + std::strerror(errno));
    }
  }

 private:
  static void write(const fs::path& path, std::string_view content) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw std::runtime_error("open " + path.string() + ": " + std::strerror(errno));
    ssize_t n = ::write(fd, content.data(), content.size());
    ::close(fd);
    if (n != static_cast<ssize_t>(content.size())) {
      throw std::runtime_error("write " + path.string() + " came short");
    }
  }

  fs::path base_;
};

// The descriptors this process has open (every test checks it ends with as many as it began
// with: a reply's file closes with the reply).
inline std::size_t open_descriptors() {
  std::size_t n = 0;
  for (auto& entry : fs::directory_iterator("/proc/self/fd")) {
    static_cast<void>(entry);
    ++n;
  }
  return n - 1;  // the iterator's own
}

// A GET (or other) request for `target`.
inline http::request request_for(std::string target, http::method m = http::method::get) {
  http::request req;
  req.method = m;
  req.target = std::move(target);
  req.headers.add("Host", "example.test");
  return req;
}

// The bytes a reply says to send after its head, read from its descriptor.
inline std::string sent_bytes(const http::static_reply& reply) {
  if (!reply.has_file()) return {};
  std::string data(reply.length, '\0');
  ssize_t n = ::pread(reply.file.get(), data.data(), data.size(), static_cast<off_t>(reply.offset));
  if (n < 0) return "<pread failed: " + std::string(std::strerror(errno)) + ">";
  data.resize(static_cast<std::size_t>(n));
  return data;
}

inline std::string field(const http::static_reply& reply, std::string_view name) {
  auto value = reply.head.headers.get(name);
  return value ? std::string(*value) : std::string("<absent>");
}

// Drops CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from this thread's effective set while it
// lives, so that permission bits count even when the tests run as root (as in a container);
// the permitted set keeps them, so the destructor can raise them again. Without root this
// changes nothing: the permission bits count anyway.
class permission_bits_enforced {
 public:
  permission_bits_enforced() {
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    if (::syscall(SYS_capget, &header, saved_) != 0) {
      throw std::runtime_error(std::string("capget: ") + std::strerror(errno));
    }
    __user_cap_data_struct lowered[2] = {saved_[0], saved_[1]};
    lowered[0].effective &= ~((1u << CAP_DAC_OVERRIDE) | (1u << CAP_DAC_READ_SEARCH));
    if (::syscall(SYS_capset, &header, lowered) != 0) {
      throw std::runtime_error(std::string("capset: ") + std::strerror(errno));
    }
  }
  permission_bits_enforced(const permission_bits_enforced&) = delete;
  permission_bits_enforced& operator=(const permission_bits_enforced&) = delete;
  ~permission_bits_enforced() {
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    ::syscall(SYS_capset, &header, saved_);
  }

 private:
  __user_cap_data_struct saved_[2] = {};
};

}  // namespace weft_static_test

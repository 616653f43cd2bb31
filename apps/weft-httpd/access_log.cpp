// The file behind --access-log (access_log.hpp).
#include "access_log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <utility>

namespace weft_httpd {

access_log_file::access_log_file(std::string path) : path_(std::move(path)) {
  fd_ = path_ == "-" ? STDOUT_FILENO : open_file();
}

access_log_file::~access_log_file() {
  if (fd_ > STDERR_FILENO) {
    ::close(fd_);
  }
}

int access_log_file::open_file() const {
  const int fd = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw std::runtime_error("--access-log " + path_ + ": " + std::strerror(errno));
  }
  return fd;
}

void access_log_file::write(std::string_view line) noexcept {
  // One buffer per thread, so that a line goes out in one write(2) without an allocation per
  // request once it has grown.
  thread_local std::string buffer;
  buffer.assign(line);
  buffer += '\n';
  std::lock_guard lock(mutex_);
  std::size_t done = 0;
  while (done < buffer.size()) {
    const ssize_t wrote = ::write(fd_, buffer.data() + done, buffer.size() - done);
    if (wrote < 0 && errno == EINTR) {
      continue;
    }
    if (wrote <= 0) {
      ++failed_;
      return;
    }
    done += static_cast<std::size_t>(wrote);
  }
}

void access_log_file::reopen() {
  if (path_ == "-") {
    return;
  }
  const int fresh = open_file();
  int old = fresh;
  {
    std::lock_guard lock(mutex_);
    std::swap(old, fd_);
  }
  ::close(old);
}

unsigned long long access_log_file::failed_writes() const {
  std::lock_guard lock(mutex_);
  return failed_;
}

}  // namespace weft_httpd

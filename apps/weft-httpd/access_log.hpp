// weft-httpd --access-log FILE: nginx's combined format (http::combined_log_line), a line per
// response, appended to FILE by every worker, reopened on SIGHUP for logrotate.
#pragma once

#include <mutex>
#include <string>
#include <string_view>

namespace weft_httpd {

class access_log_file {
 public:
  // Opens path for appending (created 0644 when absent); "-" is standard output. Throws
  // std::runtime_error naming the path and the reason when it cannot be opened.
  explicit access_log_file(std::string path);
  access_log_file(const access_log_file&) = delete;
  access_log_file& operator=(const access_log_file&) = delete;
  ~access_log_file();

  // Appends line and a newline in one write(2) (O_APPEND: whole lines even beside another
  // process writing the file). Any thread. A failed write is counted, not thrown (a full disk
  // must not fail the requests it logs).
  void write(std::string_view line) noexcept;
  // Opens the path again (after logrotate moved the file) and writes to the new file from now
  // on; the old one is closed. Throws std::runtime_error as the constructor, keeping the old.
  // Nothing to do for standard output.
  void reopen();
  const std::string& path() const noexcept { return path_; }
  // Lines that could not be written whole.
  unsigned long long failed_writes() const;

 private:
  int open_file() const;

  std::string path_;
  mutable std::mutex mutex_;
  int fd_ = -1;
  unsigned long long failed_ = 0;
};

}  // namespace weft_httpd

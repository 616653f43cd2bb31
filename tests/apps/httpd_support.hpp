// weft-httpd (apps/weft-httpd) as a child process for the tests: started on an ephemeral
// loopback port, its startup line read for the port, stopped by a signal like a user's Ctrl-C.
// Header-only and scheduler-free, so the driver-independent browser test can use it too.
#pragma once
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace httpd_test {

using namespace std::chrono_literals;

// Reads what fd has until `until` appears or limit passes; returns everything read.
inline std::string read_until(int fd, std::string_view until, std::chrono::milliseconds limit) {
  std::string text;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (text.find(until) == std::string::npos) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      break;
    }
    pollfd watch{fd, POLLIN, 0};
    if (::poll(&watch, 1, static_cast<int>(left.count())) <= 0) {
      continue;
    }
    char buffer[4096];
    const ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got <= 0) {
      break;
    }
    text.append(buffer, static_cast<std::size_t>(got));
  }
  return text;
}

// Lifts this process's soft descriptor limit to the hard one (children inherit it), for tests
// that open thousands of connections.
inline void raise_descriptor_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
  }
}

class httpd {
 public:
  // Starts WEFT_TEST_HTTPD --listen 127.0.0.1:0 --workers 2 ARGS (the driver comes from the
  // WEFT_DRIVER the test runs under) and waits up to 10 s for its startup line.
  explicit httpd(const std::vector<std::string>& args = {}) {
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) {
      throw std::runtime_error("pipe2 failed");
    }
    std::vector<std::string> argv = {WEFT_TEST_HTTPD, "--listen", "127.0.0.1:0", "--workers", "2"};
    argv.insert(argv.end(), args.begin(), args.end());
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], STDOUT_FILENO);
      std::vector<char*> raw;
      for (std::string& arg : argv) {
        raw.push_back(arg.data());
      }
      raw.push_back(nullptr);
      ::execv(raw[0], raw.data());
      ::_exit(127);
    }
    ::close(out[1]);
    out_ = out[0];
    output_ = read_until(out_, "Ctrl-C stops it\n", 10s);
    // "serving http://127.0.0.1:PORT/" or, with --tls-cert, "serving https://...".
    const std::string marker = "://127.0.0.1:";
    const std::size_t at = output_.find(marker);
    if (output_.find("serving http") == std::string::npos || at == std::string::npos) {
      throw std::runtime_error("weft-httpd did not print its startup line; it printed: " + output_);
    }
    port_ = static_cast<std::uint16_t>(std::atoi(output_.c_str() + at + marker.size()));
  }
  httpd(const httpd&) = delete;
  httpd& operator=(const httpd&) = delete;
  ~httpd() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (out_ >= 0) {
      ::close(out_);
    }
  }

  std::uint16_t port() const noexcept { return port_; }
  std::string url(std::string_view path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + std::string(path);
  }
  const std::string& output() const noexcept { return output_; }
  // Sends signal and waits up to limit for `until` in what the server prints; returns what it
  // printed meanwhile (also added to output()).
  std::string signal_until(int signal, std::string_view until,
                           std::chrono::milliseconds limit = 10s) {
    ::kill(pid_, signal);
    std::string printed = read_until(out_, until, limit);
    output_ += printed;
    return printed;
  }

  // Sends signal (a Ctrl-C by default) and waits up to limit for the process to exit; returns
  // its exit status (-1 when it did not exit in time and had to be killed, 128+N for a signal).
  int stop(int signal = SIGINT, std::chrono::milliseconds limit = 10s) {
    ::kill(pid_, signal);
    output_ += read_until(out_, "stopped after", limit);
    output_ += read_until(out_, "\n", 1s);
    const auto deadline = std::chrono::steady_clock::now() + limit;
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
        pid_ = -1;
        return -1;
      }
      ::usleep(10000);  // polling a child's exit (no timed waitpid): not synchronisation
    }
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  std::uint16_t port_ = 0;
  std::string output_;
};

}  // namespace httpd_test

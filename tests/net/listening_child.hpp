// A real server program (HAProxy, tinyproxy) run by a test as a child process on a loopback
// port: started, waited for until it listens, and stopped when the test is done.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

extern char** environ;

namespace net_test {

// A port on 127.0.0.1 that was free a moment ago (a port taken meanwhile fails the test that
// gives it to a child loudly: the child does not listen).
inline std::uint16_t free_loopback_port() {
  const int probe = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  ::bind(probe, reinterpret_cast<sockaddr*>(&address), sizeof address);
  ::getsockname(probe, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(probe);
  return ntohs(address.sin_port);
}

// args[0] run from `installed` when that is executable (Debian puts some programs in
// /usr/sbin, which a user's PATH may lack), else looked up in PATH; ready once a socket listens
// on 127.0.0.1:port, read from /proc/net/tcp rather than by connecting (a connection could
// reach what the program stands in front of). SIGTERM and waited for on destruction.
class listening_child {
 public:
  listening_child(std::vector<std::string> args, const char* installed, std::uint16_t port) {
    std::vector<char*> argv;
    for (std::string& arg : args) {
      argv.push_back(arg.data());
    }
    argv.push_back(nullptr);
    const char* program = ::access(installed, X_OK) == 0 ? installed : args[0].c_str();
    if (::posix_spawnp(&pid_, program, nullptr, nullptr, argv.data(), environ) != 0) {
      pid_ = -1;
      throw std::runtime_error(args[0] + " did not start (scripts/install-deps installs it)");
    }
    // Polling a child's state: not synchronisation. "  sl  local_address rem_address   st ...":
    // st 0A is LISTEN.
    char wanted[40];
    std::snprintf(wanted, sizeof wanted, "0100007F:%04X 00000000:0000 0A", port);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      std::ifstream table("/proc/net/tcp");
      std::string line;
      while (std::getline(table, line)) {
        if (line.find(wanted) != std::string::npos) {
          return;
        }
      }
      ::usleep(20000);
    }
    stop();
    throw std::runtime_error(args[0] + " did not listen on 127.0.0.1:" + std::to_string(port));
  }
  listening_child(const listening_child&) = delete;
  listening_child& operator=(const listening_child&) = delete;
  ~listening_child() { stop(); }

 private:
  void stop() noexcept {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
  pid_t pid_ = -1;
};

}  // namespace net_test

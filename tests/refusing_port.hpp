// weft_test::refusing_port: a loopback TCP port that refuses connections for as long as it lives.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <stdexcept>

namespace weft_test {

// A socket bound to a loopback port and never listening: a connect to the port is refused. A
// port freed by closing a listener is not enough for that: a test running alongside may be given
// the same number by the kernel for its own listener, and a connect meant to be refused then
// reaches it (seen in CI: IoError.ARefusedConnectIsConnectionRefusedInTheSystemCategory and
// IoError.EndOfStreamIsInTheLibuvCategoryWithLibuvsMessage failing together). The bound socket
// keeps the number taken, without SO_REUSEPORT, so no listener can share it meanwhile.
class refusing_port {
 public:
  refusing_port() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof address;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &size) != 0) {
      if (fd_ >= 0) {
        ::close(fd_);
      }
      throw std::runtime_error("refusing_port: could not bind a loopback port");
    }
    port_ = ntohs(address.sin_port);
  }
  ~refusing_port() { ::close(fd_); }
  refusing_port(const refusing_port&) = delete;
  refusing_port& operator=(const refusing_port&) = delete;

  std::uint16_t port() const noexcept { return port_; }

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

}  // namespace weft_test

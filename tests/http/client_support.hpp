// Helpers for the HTTP client tests: a scripted server in the test's own scheduler (weft's
// io-layer TCP listener, raw bytes), so that each test writes exactly the bytes an edge case
// needs, and sees exactly what the client sent.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "test_support.hpp"
#include "weft/weft.hpp"

namespace http_client_test {

using namespace std::chrono_literals;

// One request as the server read it.
struct received {
  int connection = 0;     // which accepted connection (0, 1, ...)
  int on_connection = 0;  // which request on that connection (0, 1, ...)
  std::string method;
  std::string target;
  std::string head;  // the request line and fields, up to and with the empty line
  std::string body;  // as on the wire (chunked framing kept)
  std::string field(std::string_view name) const;
};

// Accepts connections on 127.0.0.1 (or host) and gives each request to the script, which
// writes raw bytes to the stream, closes it, or waits. After the script returns the
// connection's next request is read, until the client closes it or the script closed it.
class script_server {
 public:
  using script = std::function<void(weft::tcp::stream& stream, const received& request)>;

  explicit script_server(script handler, const std::string& host = "127.0.0.1");
  script_server(const script_server&) = delete;
  script_server& operator=(const script_server&) = delete;
  ~script_server() { close(); }

  std::uint16_t port() const { return port_; }
  // "http://127.0.0.1:PORT" + path.
  std::string url(std::string_view path) const;
  const std::vector<received>& requests() const { return state_->requests; }
  int connections() const { return state_->connections; }
  // Connections the client closed (the server read end of stream), and an event set at each.
  int ended() const { return state_->ended; }
  weft::event& ended_event() { return state_->ended_event; }
  // Stops accepting and ends every connection coroutine (waiting for them).
  void close();

 private:
  struct state {
    script handler;
    weft::tcp::listener listener;
    std::vector<received> requests;
    std::vector<weft::task<void>> tasks;
    int connections = 0;
    int ended = 0;
    weft::event ended_event;
  };
  static void serve(std::shared_ptr<state> self, weft::tcp::stream stream, int index);

  std::shared_ptr<state> state_;
  std::string host_;
  std::uint16_t port_ = 0;
  weft::task<void> acceptor_;
  bool closed_ = false;
};

// A plain response with a Content-Length body.
std::string ok(std::string_view body, std::string_view extra_fields = {});

}  // namespace http_client_test

// The scripted server of the HTTP client tests (client_support.hpp).
#include "http/client_support.hpp"

#include <cctype>
#include <string>

namespace http_client_test {

namespace {

bool same_name(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::string received::field(std::string_view name) const {
  std::size_t line = head.find("\r\n") + 2;
  while (line < head.size()) {
    const std::size_t end = head.find("\r\n", line);
    if (end == line) {
      break;
    }
    std::string_view text(head.data() + line, end - line);
    const std::size_t colon = text.find(':');
    if (colon != std::string_view::npos && same_name(text.substr(0, colon), name)) {
      std::string_view value = text.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') {
        value.remove_prefix(1);
      }
      return std::string(value);
    }
    line = end + 2;
  }
  return {};
}

script_server::script_server(script handler, const std::string& host)
    : state_(std::make_shared<state>()), host_(host) {
  state_->handler = std::move(handler);
  state_->listener = weft::tcp::listener::listen(host, 0);
  port_ = state_->listener.port();
  acceptor_ = weft::spawn([self = state_] {
    for (;;) {
      weft::tcp::stream stream;
      try {
        stream = self->listener.accept();
      } catch (const weft::io_error&) {
        return;  // closed
      }
      const int index = self->connections++;
      self->tasks.push_back(weft::spawn(
          [self, s = std::move(stream), index]() mutable { serve(self, std::move(s), index); }));
    }
  });
}

std::string script_server::url(std::string_view path) const {
  const std::string host = host_.find(':') != std::string::npos ? "[" + host_ + "]" : host_;
  return "http://" + host + ":" + std::to_string(port_) + std::string(path);
}

void script_server::serve(std::shared_ptr<state> self, weft::tcp::stream stream, int index) {
  int on_connection = 0;
  try {
    for (;;) {
      received request;
      request.connection = index;
      request.on_connection = on_connection++;
      if (stream.read_until(request.head, "\r\n\r\n") == 0) {
        break;  // the client closed the connection
      }
      const std::size_t space = request.head.find(' ');
      request.method = request.head.substr(0, space);
      request.target =
          request.head.substr(space + 1, request.head.find(' ', space + 1) - space - 1);
      const std::string length = request.field("Content-Length");
      if (!length.empty()) {
        request.body.resize(std::stoul(length));
        stream.read_exactly(request.body);
      } else if (request.field("Transfer-Encoding") == "chunked") {
        stream.read_until(request.body, "0\r\n\r\n");
      }
      self->requests.push_back(request);
      self->handler(stream, request);
      if (!stream.is_open()) {
        return;
      }
    }
  } catch (const weft::io_error&) {
    // A reset by the client, or the stream closed by close(): the connection is over.
  }
  ++self->ended;
  self->ended_event.set();
}

void script_server::close() {
  if (closed_) {
    return;
  }
  closed_ = true;
  state_->listener.close();
  acceptor_.await();
  for (weft::task<void>& task : state_->tasks) {
    task.cancel("test server closed");
    try {
      task.await();
    } catch (const weft::cancelled_error&) {
    }
  }
  // Each finished task keeps its coroutine's captures (a reference to the state) alive: drop
  // them, or state and tasks would hold each other forever.
  state_->tasks.clear();
}

std::string ok(std::string_view body, std::string_view extra_fields) {
  return "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" +
         std::string(extra_fields) + "\r\n" + std::string(body);
}

}  // namespace http_client_test

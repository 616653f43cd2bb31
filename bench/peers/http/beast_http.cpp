// Peer: Boost.Beast HTTP/1.1 server with stackful coroutines (boost::asio::spawn on Boost 1.74's
// Boost.Coroutine over Boost.Context), one io_context on one thread: straight-line code per
// connection that suspends on I/O, the design closest to weft's.
//
//   bench_http_beast --port N --mode hello|static --root DIR
//
// Contract (READY line, stdin EOF): bench/http/README.md. Listens on 127.0.0.1:N (backlog
// 4096), one coroutine accepts, one coroutine per connection (TCP_NODELAY) runs Beast's own
// loop: http::async_read of one request into a flat_buffer (Beast parses every header), then
// http::async_write of its response, until the client closes or sends Connection: close.
// Pipelined requests are answered one write per response (Beast has no batching of its own).
// hello: a string_body "hello\n" (text/plain). static: GET /4k.txt is served with a file_body
// opened per request from DIR (what Beast's own file-server example does); any other path is
// 404. Responses carry Server, Content-Type and Content-Length.
#define BOOST_COROUTINES_NO_DEPRECATION_WARNING 1  // Boost 1.74: spawn is built on it
#define BOOST_ALLOW_DEPRECATED_HEADERS 1           // Boost 1.74 Asio includes some itself
#include <unistd.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/spawn.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;

namespace {

bool static_mode = false;
std::string root;

[[noreturn]] void usage() {
  std::fprintf(stderr, "usage: bench_http_beast --port N --mode hello|static --root DIR\n");
  std::exit(2);
}

// Writes one response; false when the connection is to be closed.
template <class Body>
bool send(tcp::socket& socket, http::response<Body>& response, asio::yield_context yield) {
  beast::error_code error;
  response.set(http::field::server, "beast");
  response.prepare_payload();
  http::async_write(socket, response, yield[error]);
  return !error && response.keep_alive();
}

bool answer(tcp::socket& socket, const http::request<http::empty_body>& request,
            asio::yield_context yield) {
  if (!static_mode) {
    http::response<http::string_body> response{http::status::ok, request.version()};
    response.set(http::field::content_type, "text/plain");
    response.keep_alive(request.keep_alive());
    response.body() = "hello\n";
    return send(socket, response, yield);
  }
  beast::error_code error;
  http::file_body::value_type file;
  if (request.target() == "/4k.txt") {
    file.open((root + "/4k.txt").c_str(), beast::file_mode::scan, error);
  }
  if (request.target() != "/4k.txt" || error) {
    http::response<http::string_body> response{http::status::not_found, request.version()};
    response.set(http::field::content_type, "text/plain");
    response.keep_alive(request.keep_alive());
    response.body() = "not found\n";
    return send(socket, response, yield);
  }
  http::response<http::file_body> response{http::status::ok, request.version()};
  response.set(http::field::content_type, "text/plain");
  response.keep_alive(request.keep_alive());
  response.body() = std::move(file);
  return send(socket, response, yield);
}

void serve_connection(tcp::socket socket, asio::yield_context yield) {
  beast::error_code error;
  socket.set_option(tcp::no_delay(true), error);
  beast::flat_buffer buffer;
  for (;;) {
    http::request<http::empty_body> request;
    http::async_read(socket, buffer, request, yield[error]);
    if (error || !answer(socket, request, yield)) {
      break;
    }
  }
  socket.shutdown(tcp::socket::shutdown_send, error);
  socket.close(error);
}

}  // namespace

int main(int argc, char** argv) {
  int port = -1;
  bool mode_given = false;
  for (int index = 1; index < argc; ++index) {
    if (std::strcmp(argv[index], "--port") == 0 && index + 1 < argc) {
      port = std::atoi(argv[++index]);
    } else if (std::strcmp(argv[index], "--mode") == 0 && index + 1 < argc) {
      std::string mode = argv[++index];
      if (mode != "hello" && mode != "static") {
        usage();
      }
      static_mode = mode == "static";
      mode_given = true;
    } else if (std::strcmp(argv[index], "--root") == 0 && index + 1 < argc) {
      root = argv[++index];
    } else {
      usage();
    }
  }
  if (port < 0 || port > 65535 || !mode_given || (static_mode && root.empty())) {
    usage();
  }

  asio::io_context context(1);  // one thread: Asio may skip its internal locking
  tcp::acceptor acceptor(context);
  try {
    tcp::endpoint endpoint(asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port));
    acceptor.open(endpoint.protocol());
    acceptor.set_option(tcp::acceptor::reuse_address(true));
    acceptor.bind(endpoint);
    acceptor.listen(4096);
  } catch (const boost::system::system_error& error) {
    std::fprintf(stderr, "bench_http_beast: listen on 127.0.0.1:%d: %s\n", port, error.what());
    return 1;
  }

  asio::spawn(context, [&](asio::yield_context yield) {
    for (;;) {
      beast::error_code error;
      tcp::socket socket(context);
      acceptor.async_accept(socket, yield[error]);
      if (error) {
        continue;
      }
      asio::spawn(context, [socket = std::move(socket)](asio::yield_context inner) mutable {
        serve_connection(std::move(socket), inner);
      });
    }
  });

  // Standard input's end stops the server (Asio treats a file or /dev/null as always readable,
  // whose read then returns end of file at once).
  asio::posix::stream_descriptor input(context, ::dup(0));
  std::vector<char> discard(256);
  asio::spawn(context, [&](asio::yield_context yield) {
    beast::error_code error;
    for (;;) {
      input.async_read_some(asio::buffer(discard), yield[error]);
      if (error) {
        std::exit(0);
      }
    }
  });

  std::printf("READY %d\n", acceptor.local_endpoint().port());
  std::fflush(stdout);
  context.run();
  return 0;
}

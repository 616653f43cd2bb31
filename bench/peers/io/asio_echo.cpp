// Peer: Boost.Asio with stackful coroutines (boost::asio::spawn; Boost 1.74 builds them on
// Boost.Coroutine over Boost.Context), one io_context on one thread — the closest existing
// design to weft's: straight-line code per connection that suspends on I/O.
//
//   bench_io_asio --port N [--mode echo|sink]
//
// Listens on 127.0.0.1:N (backlog 511), prints "READY N" once listening and serves until
// killed or until its standard input reaches end of file. One coroutine accepts; one coroutine
// per connection, with a 64 KiB buffer on the heap, TCP_NODELAY set.
// echo: async_read_some, then async_write of exactly what was read, in a loop.
// sink: async_read_some and discard, counting bytes (the total goes to stderr at exit).
// At end of stream (or an error) the connection is closed.
#define BOOST_COROUTINES_NO_DEPRECATION_WARNING 1  // Boost 1.74: spawn is built on it
#define BOOST_ALLOW_DEPRECATED_HEADERS 1           // Boost 1.74 Asio includes some itself
#include <unistd.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/spawn.hpp>
#include <boost/asio/write.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

std::uint64_t sunk_bytes = 0;
bool sink_mode = false;

[[noreturn]] void usage() {
  std::fprintf(stderr, "usage: bench_io_asio --port N [--mode echo|sink]\n");
  std::exit(2);
}

[[noreturn]] void finish() {
  if (sink_mode) {
    std::fprintf(stderr, "bench_io_asio: sink read %llu bytes\n",
                 static_cast<unsigned long long>(sunk_bytes));
  }
  std::exit(0);
}

void serve_connection(tcp::socket socket, asio::yield_context yield) {
  boost::system::error_code error;
  socket.set_option(tcp::no_delay(true), error);
  std::vector<char> buffer(64 * 1024);
  for (;;) {
    std::size_t got = socket.async_read_some(asio::buffer(buffer), yield[error]);
    if (error) {
      break;
    }
    if (sink_mode) {
      sunk_bytes += got;
      continue;
    }
    asio::async_write(socket, asio::buffer(buffer.data(), got), yield[error]);
    if (error) {
      break;
    }
  }
  socket.close(error);
}

}  // namespace

int main(int argc, char** argv) {
  int port = -1;
  for (int index = 1; index < argc; ++index) {
    if (std::strcmp(argv[index], "--port") == 0 && index + 1 < argc) {
      port = std::atoi(argv[++index]);
    } else if (std::strcmp(argv[index], "--mode") == 0 && index + 1 < argc) {
      std::string mode = argv[++index];
      if (mode == "sink") {
        sink_mode = true;
      } else if (mode != "echo") {
        usage();
      }
    } else {
      usage();
    }
  }
  if (port < 0 || port > 65535) {
    usage();
  }

  asio::io_context context(1);  // one thread: Asio may skip its internal locking
  tcp::acceptor acceptor(context);
  try {
    tcp::endpoint endpoint(asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port));
    acceptor.open(endpoint.protocol());
    acceptor.bind(endpoint);
    acceptor.listen(511);
  } catch (const boost::system::system_error& error) {
    std::fprintf(stderr, "bench_io_asio: listen on 127.0.0.1:%d: %s\n", port, error.what());
    return 1;
  }

  asio::spawn(context, [&](asio::yield_context yield) {
    for (;;) {
      boost::system::error_code error;
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
    boost::system::error_code error;
    for (;;) {
      input.async_read_some(asio::buffer(discard), yield[error]);
      if (error) {
        finish();
      }
    }
  });

  std::printf("READY %d\n", acceptor.local_endpoint().port());
  std::fflush(stdout);
  context.run();
  finish();
}

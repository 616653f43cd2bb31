// Guide, page 3: a TCP echo server, one coroutine per connection, stopped by Ctrl-C.
//
//   ./echo-server [port]      (default 7000; 0 picks a free port)
#include <weft/weft.hpp>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

// Sends back whatever the client sends, until the client closes its side.
std::size_t echo(weft::tcp::stream& client) {
  std::size_t echoed = 0;
  char buffer[4096];
  for (;;) {
    // Every wait of a server wants a limit: a client that says nothing for 30 s, or does not
    // read what it is sent for 30 s, is dropped.
    std::size_t got = client.read_some(buffer, weft::timeout(std::chrono::seconds(30)));
    if (got == 0) {
      return echoed;  // the client closed its side
    }
    client.write_all(std::string_view(buffer, got), weft::timeout(std::chrono::seconds(30)));
    echoed += got;
  }
}

}  // namespace

int main(int argc, char** argv) {
  auto port = static_cast<std::uint16_t>(argc > 1 ? std::atoi(argv[1]) : 7000);
  weft::run([port] {
    auto listener = weft::tcp::listener::listen("127.0.0.1", port);
    std::printf("echo server listening on %s\n", listener.local_address().c_str());
    std::fflush(stdout);  // whoever reads our output sees the address at once

    std::size_t served = 0;
    std::size_t bytes = 0;
    weft::scope connections;  // every connection's coroutine belongs to it
    auto acceptor = weft::spawn([&] {
      for (;;) {
        weft::tcp::stream client = listener.accept();
        connections.spawn([&, client = std::move(client)]() mutable {
          try {
            bytes += echo(client);
            ++served;
          } catch (const weft::io_error& error) {  // a reset, a timeout: this client only
            std::printf("client dropped: %s\n", error.what());
          } catch (const weft::timeout_error& error) {
            std::printf("client dropped: %s\n", error.what());
          }
        });
      }
    });

    int signal = weft::signals::wait({SIGINT, SIGTERM});
    std::printf("caught %s: stopping\n", signal == SIGINT ? "SIGINT" : "SIGTERM");
    acceptor.cancel("server stopping");  // no new connections
    listener.close();
    try {
      // The clients being served get 10 s to finish; then they are cancelled where they wait.
      connections.join_or_cancel(weft::timeout(std::chrono::seconds(10)), "server stopping");
    } catch (const weft::timeout_error&) {
      std::printf("some clients were cut off\n");
    }
    std::printf("served %zu connections, echoed %zu bytes\n", served, bytes);
  });
  return 0;
}

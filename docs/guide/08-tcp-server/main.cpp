// Guide, page 8: weft::net::tcp_server with the line-based text protocol: workers on their own
// threads, a coroutine per connection, timeouts, graceful stop on Ctrl-C.
//
//   ./tcp-server [port]      (default 8000; 0 picks a free port)
#include <weft/weft.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>

using namespace std::chrono_literals;

int main(int argc, char** argv) {
  auto port = static_cast<std::uint16_t>(argc > 1 ? std::atoi(argv[1]) : 8000);
  weft::net::tcp_server server({.host = "127.0.0.1",
                                .port = port,
                                .workers = 2,  // threads; 0 means one per core
                                .protocol = weft::net::text(),
                                .idle_timeout = 30s,
                                .handle_signals = true});  // SIGINT/SIGTERM stop gracefully
  server.listen();
  std::printf("line server listening on 127.0.0.1:%u\n", server.port());
  std::fflush(stdout);

  // Runs in the connection's own coroutine, on one of the workers' threads.
  server.serve([](weft::net::connection& client) {
    client.send("welcome: say something, or quit");
    while (auto line = client.receive()) {  // nullopt once the client is gone
      if (line->data == "quit") {
        client.send("bye");
        return;  // the connection closes gracefully: "bye" is flushed first
      }
      client.send("you said: " + line->data);
    }
  });  // returns once the server has stopped

  weft::net::worker_stats total = server.stats().total;
  std::printf("stopped: %llu connections, %llu lines received\n",
              static_cast<unsigned long long>(total.accepted),
              static_cast<unsigned long long>(total.messages_in));
  return 0;
}

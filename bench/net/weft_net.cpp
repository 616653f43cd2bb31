// bench_net_weft: weft's program of suite net (contract: bench/net/README.md).
//
// `--port N --mode echo|ws|pipe [--target Q] --style coroutine|callback`: a weft::net::tcp_server
// on 127.0.0.1:N with one worker (run.py pins the process to one core), backlog 1024,
// TCP_NODELAY on the accepted sockets. Once listening it prints `READY <port>`; the main thread
// then blocks reading its standard input and, at end of file, exits 0 (no graceful close is
// needed), so watching stdin adds nothing to the worker's I/O path.
//
// Modes:
//   echo: no protocol (raw bytes: each read is one message); every message is sent back as it
//     came, in order.
//   ws: weft::net::websocket; every message is sent back as one frame of the same opcode.
//   pipe: for every accepted connection, a connection to 127.0.0.1:Q (the sink), and
//     net::pipe both ways: the client's bytes go to the sink in order, each side's full/drain
//     pausing and resuming the other's reading, each end of stream passed on.
// Styles (everything else identical):
//   coroutine: server.serve(handler), the handler looping receive(message&) / send() as
//     straight-line code over one message it keeps (pipe: the handler connects and runs
//     pipe(client, upstream), a coroutine it spawns runs pipe(upstream, client)).
//   callback: server.serve(connection_events) with on_message sending the reply (try_send, which
//     never waits: at the send limit it refuses and the refusal is reported by on_error, which
//     closes the connection; the load client has one message in flight so it never happens);
//     pipe: on_connect connects and spawns the upstream-to-client pipe, on_message forwards to
//     the upstream, whose on_buffer_full / on_buffer_drain pause and resume the client.
// `--hibernate-above N` (not used by run.py) sets tcp_server_options::hibernate_above, where the
// callback style's connections start hibernating between messages (default 512), to compare
// hibernating and waiting read loops at one connection count. `--reactor-poll-interval US` sets
// tcp_server_options::reactor_poll_interval (default 2000): under valgrind a batch of woken
// connections outlasts the default and each poll reports the woken fds again, which a native run
// does not do, so a profile needs a longer one.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <weft/weft.hpp>

#include "bench_util.hpp"

namespace {

enum class mode { echo, ws, pipe };
enum class style { coroutine, callback };

struct settings {
  int port = -1;
  int target = -1;
  mode serving = mode::echo;
  style written = style::coroutine;
  long hibernate_above = -1;   // -1: the server's default
  long poll_interval_us = -1;  // -1: the server's default
};

[[noreturn]] void usage(const char* program, const char* problem) {
  std::fprintf(stderr,
               "%s: %s\nusage: %s --port N --mode echo|ws|pipe [--target Q] "
               "--style coroutine|callback [--hibernate-above N] [--reactor-poll-interval US]\n",
               program, problem, program);
  std::exit(2);
}

// A whole decimal number from 0 to max, or the usage with problem.
long parse_number(const char* program, const char* text, long max, const char* problem) {
  long value = 0;
  if (!bench::parse_count(text, max, value)) {
    usage(program, problem);
  }
  return value;
}

int parse_port(const char* program, const char* text) {
  return static_cast<int>(parse_number(program, text, 65535, "a port is a number from 0 to 65535"));
}

settings parse(int argc, char** argv) {
  settings parsed;
  bool style_given = false;
  bool mode_given = false;
  for (int index = 1; index < argc; ++index) {
    std::string_view flag = argv[index];
    if (index + 1 >= argc) {
      usage(argv[0], "every flag takes a value");
    }
    std::string_view value = argv[++index];
    if (flag == "--port") {
      parsed.port = parse_port(argv[0], argv[index]);
    } else if (flag == "--target") {
      parsed.target = parse_port(argv[0], argv[index]);
    } else if (flag == "--mode") {
      mode_given = true;
      if (value == "echo") {
        parsed.serving = mode::echo;
      } else if (value == "ws") {
        parsed.serving = mode::ws;
      } else if (value == "pipe") {
        parsed.serving = mode::pipe;
      } else {
        usage(argv[0], "unknown --mode");
      }
    } else if (flag == "--style") {
      style_given = true;
      if (value == "coroutine") {
        parsed.written = style::coroutine;
      } else if (value == "callback") {
        parsed.written = style::callback;
      } else {
        usage(argv[0], "unknown --style");
      }
    } else if (flag == "--hibernate-above") {
      parsed.hibernate_above = parse_number(argv[0], argv[index], LONG_MAX,
                                            "--hibernate-above takes a count of connections");
    } else if (flag == "--reactor-poll-interval") {
      parsed.poll_interval_us = parse_number(argv[0], argv[index], LONG_MAX,
                                             "--reactor-poll-interval takes microseconds");
    } else {
      usage(argv[0], "unknown flag");
    }
  }
  if (parsed.port < 0 || !mode_given || !style_given) {
    usage(argv[0], "--port, --mode and --style are required");
  }
  if ((parsed.serving == mode::pipe) != (parsed.target >= 0)) {
    usage(argv[0], "--target goes with --mode pipe, and only with it");
  }
  return parsed;
}

// Blocks until standard input reaches end of file (at once if it is not a pipe, socket or tty).
void wait_for_stdin_end() {
  struct stat info {};
  if (fstat(0, &info) != 0 || !(S_ISFIFO(info.st_mode) || S_ISSOCK(info.st_mode) || isatty(0))) {
    return;
  }
  char buffer[256];
  for (;;) {
    ssize_t got = read(0, buffer, sizeof buffer);
    if (got == 0 || (got < 0 && errno != EINTR)) {
      return;
    }
  }
}

std::shared_ptr<weft::net::connection> connect_upstream(int target) {
  return weft::net::connect("127.0.0.1", static_cast<std::uint16_t>(target));
}

void serve_coroutine(weft::net::tcp_server& server, const settings& chosen) {
  if (chosen.serving == mode::pipe) {
    server.serve([target = chosen.target](weft::net::connection& client) {
      std::shared_ptr<weft::net::connection> upstream = connect_upstream(target);
      std::shared_ptr<weft::net::connection> held = client.handle();
      weft::task<std::uint64_t> back =
          weft::spawn([upstream, held] { return weft::net::pipe(*upstream, *held); });
      weft::net::pipe(client, *upstream);
      back.await();
    });
    return;
  }
  server.serve([](weft::net::connection& client) {
    // One message reused for the connection's life (receive's documented loop form): no
    // allocation per message, as Go's echo reuses its buffer.
    weft::net::message received;
    while (client.receive(received)) {
      client.send(received.data, received.kind);
    }
  });
}

void serve_callback(weft::net::tcp_server& server, const settings& chosen) {
  weft::net::connection_events events;
  events.on_error = [](weft::net::connection& client, const std::exception&) { client.destroy(); };
  if (chosen.serving == mode::pipe) {
    events.on_connect = [target = chosen.target](weft::net::connection& client) {
      std::shared_ptr<weft::net::connection> upstream = connect_upstream(target);
      std::shared_ptr<weft::net::connection> held = client.handle();
      upstream->events().on_buffer_full = [held](weft::net::connection&) { held->pause_recv(); };
      upstream->events().on_buffer_drain = [held](weft::net::connection&) { held->resume_recv(); };
      client.context() = upstream;
      weft::spawn([upstream, held] { weft::net::pipe(*upstream, *held); });
    };
    events.on_message = [](weft::net::connection& client, weft::net::message& received) {
      auto& upstream = std::any_cast<std::shared_ptr<weft::net::connection>&>(client.context());
      upstream->try_send(received.data, received.kind);
    };
    events.on_close = [](weft::net::connection& client, weft::net::close_reason) {
      if (auto* upstream =
              std::any_cast<std::shared_ptr<weft::net::connection>>(&client.context())) {
        (*upstream)->close();
      }
    };
  } else {
    events.on_message = [](weft::net::connection& client, weft::net::message& received) {
      client.try_send(received.data, received.kind);
    };
  }
  server.serve(std::move(events));
}

}  // namespace

int main(int argc, char** argv) {
  settings chosen = parse(argc, argv);
  weft::net::tcp_server_options options;
  options.host = "127.0.0.1";
  options.port = static_cast<std::uint16_t>(chosen.port);
  options.workers = 1;
  options.backlog = 1024;
  options.no_delay = true;
  if (chosen.hibernate_above >= 0) {
    options.hibernate_above = static_cast<std::size_t>(chosen.hibernate_above);
  }
  if (chosen.poll_interval_us >= 0) {
    options.reactor_poll_interval = std::chrono::microseconds(chosen.poll_interval_us);
  }
  if (chosen.serving == mode::ws) {
    options.protocol = std::make_shared<weft::net::websocket>();
  }
  weft::net::tcp_server server(options);
  try {
    server.listen();
  } catch (const std::exception& failure) {
    std::fprintf(stderr, "bench_net_weft: %s\n", failure.what());
    return 1;
  }
  std::printf("READY %u\n", static_cast<unsigned>(server.port()));
  std::fflush(stdout);
  std::thread watcher([] {
    wait_for_stdin_end();
    std::fflush(nullptr);
    std::_Exit(0);
  });
  watcher.detach();
  if (chosen.written == style::coroutine) {
    serve_coroutine(server, chosen);
  } else {
    serve_callback(server, chosen);
  }
  return 0;
}

// weft::net::tcp_server speaking WebSocket to clients no one here wrote: Node's ws and Go's
// gorilla/websocket run their scripted echo sessions (tests/net/clients/) against a server in
// each style, and a raw socket checks that broken or oversized frames close that connection with
// the right code and close reason, and that nothing of them reaches the handler.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <sys/wait.h>
#include <array>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "net/net_support.hpp"
#include "net/websocket_wire.hpp"

namespace {

using namespace std::chrono_literals;
using net_test::running_server;
using weft::net::close_reason;
using weft::net::connection;
using weft::net::websocket;

struct client_run {
  int exit_status = -1;
  std::string output;  // standard output and standard error together
};

// Runs a shell command (a client program) to its end; the server runs on its own thread.
client_run run_command(const std::string& command) {
  client_run run;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) {
    ADD_FAILURE() << "popen failed for " << command;
    return run;
  }
  std::array<char, 4096> chunk{};
  while (std::size_t got = std::fread(chunk.data(), 1, chunk.size(), pipe)) {
    run.output.append(chunk.data(), got);
  }
  const int status = ::pclose(pipe);
  run.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

weft::net::tcp_server_options websocket_server_options() {
  weft::net::tcp_server_options options = net_test::local_options();
  weft::net::websocket_options protocol;
  protocol.path = "/echo";
  options.protocol = std::make_shared<websocket>(protocol);
  return options;
}

void serve_echo(weft::net::tcp_server& server, bool callbacks) {
  if (callbacks) {
    weft::net::connection_events events;
    events.on_message = [](connection& c, weft::net::message& m) {
      EXPECT_TRUE(c.try_send(m.data, m.kind));
    };
    server.serve(std::move(events));
    return;
  }
  server.serve([](connection& c) {
    weft::net::message m;
    while (c.receive(m)) {
      c.send(m.data, m.kind);
    }
  });
}

std::string expected_lines(std::initializer_list<const char*> checks) {
  std::string expected;
  for (const char* check : checks) {
    expected += std::string("ok ") + check + "\n";
  }
  return expected;
}

// The session ended with the client's close frame: the server counted the messages both ways
// and closed the connection as ended by the peer, and nothing else.
void expect_clean_session(running_server& running, std::uint64_t messages) {
  ASSERT_TRUE(net_test::eventually([&] {
    return running.server().stats().total.closed_by(close_reason::peer) == 1;
  })) << "the close handshake did not end the connection";
  const weft::net::worker_stats total = running.server().stats().total;
  EXPECT_EQ(total.accepted, 1u);
  EXPECT_EQ(total.messages_in, messages);
  EXPECT_EQ(total.messages_out, messages);
  EXPECT_EQ(total.closed_by(close_reason::protocol_error), 0u);
  EXPECT_EQ(total.closed_by(close_reason::too_big), 0u);
}

std::string node_client(std::uint16_t port) {
  return "env NODE_PATH=/usr/share/nodejs node " + std::string(WEFT_TEST_SOURCE_DIR) +
         "/net/clients/ws_client.js ws://127.0.0.1:" + std::to_string(port) + "/echo";
}

std::string gorilla_client(std::uint16_t port) {
  return std::string(WEFT_TEST_WS_CLIENT_GO) + " ws://127.0.0.1:" + std::to_string(port) + "/echo";
}

TEST(WebsocketServer, NodeWsSessionPassesAgainstTheCoroutineStyle) {
  ASSERT_EQ(::access("/usr/share/nodejs/ws/package.json", R_OK), 0)
      << "Node's ws package is missing: install node-ws (scripts/install-deps)";
  running_server running(websocket_server_options(),
                         [](weft::net::tcp_server& server) { serve_echo(server, false); });
  const client_run client = run_command(node_client(running.port()));
  EXPECT_EQ(client.exit_status, 0) << client.output;
  EXPECT_EQ(client.output, expected_lines({"handshake", "text", "binary", "empty", "fragmented",
                                           "1MiB", "ping", "close"}));
  expect_clean_session(running, 5);
}

TEST(WebsocketServer, GorillaSessionPassesAgainstTheCallbackStyle) {
  ASSERT_EQ(::access(WEFT_TEST_WS_CLIENT_GO, X_OK), 0)
      << "the gorilla/websocket client was not built: install golang-go and "
         "golang-github-gorilla-websocket-dev (scripts/install-deps), then re-run cmake";
  running_server running(websocket_server_options(),
                         [](weft::net::tcp_server& server) { serve_echo(server, true); });
  const client_run client = run_command(gorilla_client(running.port()));
  EXPECT_EQ(client.exit_status, 0) << client.output;
  EXPECT_EQ(client.output, expected_lines({"handshake", "text", "binary", "empty", "fragmented",
                                           "1MiB", "after-ping", "ping", "close"}));
  expect_clean_session(running, 6);
}

// Sends the handshake for /echo and reads the server's answer head, byte by byte so that no
// frame after it is taken: true when it is a 101.
bool opened_session(int fd) {
  net_test::send_all(fd, weft_ws_test::handshake_request({}, "/echo"));
  std::string head;
  while (head.find("\r\n\r\n") == std::string::npos) {
    const std::string byte = net_test::read_bytes(fd, 1);
    if (byte.size() != 1) {
      ADD_FAILURE() << "the reply head ended early: " << head;
      return false;
    }
    head += byte;
  }
  if (head.rfind("HTTP/1.1 101 ", 0) != 0) {
    ADD_FAILURE() << "no 101: " << head;
    return false;
  }
  return true;
}

// Sends the handshake, then bytes; returns the frames the server sent after its 101, up to its
// close of the connection.
std::vector<weft_ws_test::server_frame> answer_to(std::uint16_t port, const std::string& bytes) {
  const int fd = net_test::connect_to(port);
  if (fd < 0) {
    return {};
  }
  net_test::send_all(fd, weft_ws_test::handshake_request({}, "/echo"));
  net_test::send_all(fd, bytes);
  const std::string reply = net_test::read_to_end(fd);
  ::close(fd);
  const std::size_t head_end = reply.find("\r\n\r\n");
  EXPECT_EQ(reply.rfind("HTTP/1.1 101 ", 0), 0u) << reply.substr(0, 200);
  if (head_end == std::string::npos) {
    return {};
  }
  return weft_ws_test::parse_server_frames(std::string_view(reply).substr(head_end + 4));
}

TEST(WebsocketServer, BrokenAndOversizedFramesCloseOnlyTheirConnection) {
  weft::net::tcp_server_options options = websocket_server_options();
  options.max_message_size = 1000;
  std::atomic<int> handled{0};
  running_server running(options, [&](weft::net::tcp_server& server) {
    server.serve([&](connection& c) {
      weft::net::message m;
      while (c.receive(m)) {
        handled.fetch_add(1);
        c.send(m.data, m.kind);
      }
    });
  });
  // A well-behaved client keeps being served across the others' failures.
  const int good = net_test::connect_to(running.port());
  ASSERT_GE(good, 0);
  ASSERT_TRUE(opened_session(good));

  weft_ws_test::frame_bits unmasked;
  unmasked.masked = false;
  auto frames = answer_to(running.port(), weft_ws_test::client_frame(0x1, "plain", unmasked));
  ASSERT_FALSE(frames.empty());
  EXPECT_EQ(frames.back().opcode, 0x8);
  EXPECT_EQ(weft_ws_test::close_code_of(frames.back()), websocket::protocol_violation);

  frames = answer_to(running.port(), weft_ws_test::client_frame(0x2, std::string(1001, 'x')));
  ASSERT_FALSE(frames.empty());
  EXPECT_EQ(weft_ws_test::close_code_of(frames.back()), websocket::message_too_big);

  net_test::send_all(good, weft_ws_test::client_frame(0x1, "still here"));
  const std::string echo = net_test::read_bytes(good, 12);
  EXPECT_EQ(echo, std::string("\x81\x0astill here", 12));
  ::close(good);

  ASSERT_TRUE(net_test::eventually([&] {
    const auto total = running.server().stats().total;
    return total.closed_by(close_reason::protocol_error) == 1 &&
           total.closed_by(close_reason::too_big) == 1;
  })) << "the broken and the oversized connection were not counted by their reasons";
  EXPECT_EQ(handled.load(), 1) << "only the good client's message may reach the handler";
}

// A client that floods pings and reads nothing: the server's pongs stay within its send buffer
// limit (it stops taking the client's input until they drain: TCP backpressure), and once the
// client reads, every ping has had its pong and the session closes cleanly. Before, the pongs
// were queued without limit (3.3 GB in 8 s against weft-httpd's /ws/echo).
void ping_flood(bool callbacks) {
  constexpr std::size_t limit = 64 * 1024;
  weft::net::tcp_server_options options = websocket_server_options();
  options.send_buffer_limit = limit;
  running_server running(options,
                         [&](weft::net::tcp_server& server) { serve_echo(server, callbacks); });
  const int fd = net_test::connect_to(running.port(), 16384);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(opened_session(fd));
  const std::string ping = weft_ws_test::client_frame(0x9, std::string(125, 'p'));
  constexpr std::size_t pings = 120000;  // 15.7 MB of pings, 15.4 MB of pongs
  // Phase 1: send without reading until the server stops taking input (no progress for
  // 300 ms: its queue is at the limit and the kernel's buffers are full) or all is sent.
  const int flags = ::fcntl(fd, F_GETFL);
  ASSERT_EQ(::fcntl(fd, F_SETFL, flags | O_NONBLOCK), 0);
  std::size_t sent = 0;  // bytes of the ping stream
  const std::size_t total = pings * ping.size();
  auto send_some = [&] {
    while (sent < total) {
      const std::size_t at = sent % ping.size();
      const ssize_t wrote = ::send(fd, ping.data() + at, ping.size() - at, MSG_NOSIGNAL);
      if (wrote <= 0) {
        return;
      }
      sent += static_cast<std::size_t>(wrote);
    }
  };
  for (;;) {
    send_some();
    pollfd out{.fd = fd, .events = POLLOUT, .revents = 0};
    if (sent == total || ::poll(&out, 1, 300) == 0) {
      break;
    }
  }
  const std::uint64_t high = running.server().stats().total.send_buffer_high;
  EXPECT_LE(high, limit + 127) << "pongs queued past the send buffer limit";
  // Phase 2: read the pongs while sending the rest, then close.
  std::size_t pongs = 0;
  std::string input;
  char chunk[65536];
  bool close_sent = false;
  bool close_seen = false;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (!close_seen && std::chrono::steady_clock::now() < deadline) {
    if (sent == total && pongs == pings && !close_sent) {
      net_test::send_all(fd, weft_ws_test::client_frame(0x8, weft_ws_test::close_payload(1000)));
      close_sent = true;
    }
    pollfd both{.fd = fd,
                .events = static_cast<short>(POLLIN | (sent < total ? POLLOUT : 0)),
                .revents = 0};
    ::poll(&both, 1, 1000);
    if ((both.revents & POLLOUT) != 0) {
      send_some();
    }
    if ((both.revents & (POLLIN | POLLHUP)) != 0) {
      const ssize_t got = ::recv(fd, chunk, sizeof chunk, 0);
      if (got <= 0) {
        break;
      }
      input.append(chunk, static_cast<std::size_t>(got));
      std::size_t at = 0;
      while (input.size() - at >= 2) {
        const auto opcode = static_cast<unsigned char>(input[at]) & 0x0f;
        const std::size_t length = static_cast<unsigned char>(input[at + 1]) & 0x7f;
        ASSERT_LT(length, 126u);
        if (input.size() - at < 2 + length) {
          break;
        }
        if (opcode == 0xA) {
          ++pongs;
        } else if (opcode == 0x8) {
          close_seen = true;
        } else {
          ADD_FAILURE() << "unexpected frame, opcode " << opcode;
        }
        at += 2 + length;
      }
      input.erase(0, at);
    }
  }
  EXPECT_EQ(sent, total);
  EXPECT_EQ(pongs, pings) << "a ping went unanswered";
  EXPECT_TRUE(close_seen) << "the close handshake did not finish";
  ::close(fd);
  ASSERT_TRUE(net_test::eventually(
      [&] { return running.server().stats().total.closed_by(close_reason::peer) == 1; }));
  EXPECT_LE(running.server().stats().total.send_buffer_high, limit + 127);
}

TEST(WebsocketServer, APingFloodThatReadsNothingStaysWithinTheSendLimit) { ping_flood(false); }

TEST(WebsocketServer, APingFloodStaysWithinTheSendLimitInTheCallbackStyle) { ping_flood(true); }

// connection::peer_close: the client's close frame, its code and reason, as a browser's
// CloseEvent would give them to the server's side; none for a TCP close without one (1006).
TEST(WebsocketServer, TheClientsCloseFrameIsKeptAndATransportCloseHasNone) {
  std::mutex mutex;
  std::vector<std::optional<weft::net::close_message>> seen;
  running_server running(websocket_server_options(), [&](weft::net::tcp_server& server) {
    server.serve([&](connection& c) {
      while (c.receive()) {
      }
      std::lock_guard lock(mutex);
      seen.emplace_back(c.peer_close() != nullptr ? std::optional(*c.peer_close()) : std::nullopt);
    });
  });
  for (const bool with_frame : {true, false}) {
    const int fd = net_test::connect_to(running.port());
    ASSERT_GE(fd, 0);
    std::string bytes = weft_ws_test::handshake_request({}, "/echo");
    if (with_frame) {
      bytes += weft_ws_test::client_frame(0x8, weft_ws_test::close_payload(4001, "done here"));
    }
    net_test::send_all(fd, bytes);
    if (!with_frame) {
      net_test::read_bytes(fd, 4);  // the 101 began: the handshake is through
    }
    ::shutdown(fd, SHUT_WR);
    net_test::read_to_end(fd);
    ::close(fd);
    ASSERT_TRUE(net_test::eventually([&] {
      std::lock_guard lock(mutex);
      return seen.size() == (with_frame ? 1u : 2u);
    }));
  }
  std::lock_guard lock(mutex);
  ASSERT_TRUE(seen[0].has_value());
  EXPECT_EQ(seen[0]->code, 4001);
  EXPECT_EQ(seen[0]->reason, "done here");
  EXPECT_FALSE(seen[1].has_value());
}

// receive(limit) ends at its limit however busy the peer keeps the input with what is no
// message: a wait whose deadline passed still returns when bytes are ready, so a ping flood
// once held the call until it stopped.
TEST(WebsocketServer, APingFloodDoesNotHoldAReceivePastItsLimit) {
  std::atomic<bool> timed_out{false};
  std::atomic<long> took_ms{-1};
  running_server running(websocket_server_options(), [&](weft::net::tcp_server& server) {
    server.serve([&](connection& c) {
      const auto started = std::chrono::steady_clock::now();
      try {
        c.receive(weft::timeout(300ms));
      } catch (const weft::timeout_error& e) {
        timed_out = std::string(e.what()).find("no message") != std::string::npos;
      }
      took_ms = static_cast<long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::chrono::steady_clock::now() - started)
                                      .count());
    });
  });
  const int fd = net_test::connect_to(running.port());
  ASSERT_GE(fd, 0);
  net_test::send_all(fd, weft_ws_test::handshake_request({}, "/echo"));
  // Pings for up to 10 s, as fast as the server takes them; its pongs are read and dropped.
  std::string pings;
  for (int i = 0; i < 4096; ++i) pings += weft_ws_test::client_frame(0x9, "");
  const auto flood_end = std::chrono::steady_clock::now() + 10s;
  char sink[65536];
  while (took_ms < 0 && std::chrono::steady_clock::now() < flood_end) {
    pollfd both{.fd = fd, .events = POLLIN | POLLOUT, .revents = 0};
    ::poll(&both, 1, 100);
    if ((both.revents & POLLOUT) != 0 &&
        ::send(fd, pings.data(), pings.size(), MSG_NOSIGNAL | MSG_DONTWAIT) < 0 &&
        errno != EAGAIN) {
      break;
    }
    if ((both.revents & POLLIN) != 0 && ::recv(fd, sink, sizeof sink, MSG_DONTWAIT) == 0) {
      break;
    }
  }
  ::close(fd);
  ASSERT_TRUE(net_test::eventually([&] { return took_ms >= 0; }, 15000ms));
  EXPECT_TRUE(timed_out.load());
  EXPECT_LT(took_ms.load(), 5000) << "the receive outlasted its 300 ms limit by seconds";
}

// A graceful stop tells an idle WebSocket client why its connection ends: a close frame with
// 1001 (going away, RFC 6455 7.4.1) before the FIN, in either style.
void stop_says_going_away(bool callbacks) {
  running_server running(websocket_server_options(),
                         [&](weft::net::tcp_server& server) { serve_echo(server, callbacks); });
  const int fd = net_test::connect_to(running.port());
  ASSERT_GE(fd, 0);
  net_test::send_all(
      fd, weft_ws_test::handshake_request({}, "/echo") + weft_ws_test::client_frame(0x1, "before"));
  std::string seen;
  while (seen.find("before") == std::string::npos) {
    const std::string byte = net_test::read_bytes(fd, 1);
    ASSERT_EQ(byte.size(), 1u) << "the session ended early: " << seen;
    seen += byte;
  }
  running.stop(std::chrono::milliseconds(5000));
  const std::string rest = net_test::read_to_end(fd);
  ::close(fd);
  running.wait();
  const auto frames = weft_ws_test::parse_server_frames(rest);
  ASSERT_EQ(frames.size(), 1u) << rest;
  EXPECT_EQ(frames[0].opcode, 0x8);
  EXPECT_EQ(weft_ws_test::close_code_of(frames[0]), websocket::going_away);
  EXPECT_EQ(running.server().stats().total.closed_by(close_reason::server_stop), 1u);
}

// Keep-alive pings (websocket_options::ping_interval): a quiet client that answers them keeps its
// connection; when it stops answering, the server closes the connection with
// close_reason::ping_timeout, in either style.
void pings_find_a_silent_client(bool callbacks) {
  weft::net::tcp_server_options options = net_test::local_options();
  weft::net::websocket_options protocol;
  protocol.path = "/echo";
  protocol.ping_interval = 100ms;
  protocol.ping_timeout = 300ms;
  options.protocol = std::make_shared<websocket>(protocol);
  running_server running(options,
                         [&](weft::net::tcp_server& server) { serve_echo(server, callbacks); });
  const int fd = net_test::connect_to(running.port());
  ASSERT_GE(fd, 0);
  net_test::send_all(fd, weft_ws_test::handshake_request({}, "/echo"));
  std::string head;
  while (head.find("\r\n\r\n") == std::string::npos) {
    const std::string byte = net_test::read_bytes(fd, 1);
    ASSERT_EQ(byte.size(), 1u) << "the handshake ended early: " << head;
    head += byte;
  }
  // The first ping (unmasked, empty), answered with a pong.
  EXPECT_EQ(net_test::read_bytes(fd, 2), std::string("\x89\x00", 2));
  net_test::send_all(fd, weft_ws_test::client_frame(0xA, ""));
  // The answer counted: the next ping comes a quiet interval later. It is not answered.
  EXPECT_EQ(net_test::read_bytes(fd, 2), std::string("\x89\x00", 2));
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(net_test::read_to_end(fd), "");  // the server's FIN, nothing more
  const auto took = std::chrono::steady_clock::now() - start;
  ::close(fd);
  EXPECT_GE(took, 250ms);
  EXPECT_LT(took, 5s);
  ASSERT_TRUE(net_test::eventually(
      [&] { return running.server().stats().total.closed_by(close_reason::ping_timeout) == 1; }));
  EXPECT_EQ(running.server().stats().total.closed_by(close_reason::peer), 0u);
}

TEST(WebsocketServer, PingsKeepAnAnsweringClientAndCloseASilentOne) {
  pings_find_a_silent_client(false);
}

TEST(WebsocketServer, PingsCloseASilentClientInTheCallbackStyle) {
  pings_find_a_silent_client(true);
}

TEST(WebsocketServer, AGracefulStopSendsGoingAway) { stop_says_going_away(false); }

TEST(WebsocketServer, AGracefulStopSendsGoingAwayInTheCallbackStyle) { stop_says_going_away(true); }

}  // namespace

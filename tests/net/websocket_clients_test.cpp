// weft's WebSocket protocol against clients no one here wrote, over real loopback sockets: Node's
// ws and Go's gorilla/websocket each run a scripted echo session (tests/net/clients/), and a
// raw socket sends malformed frames and checks the close code that comes back. The server is
// tests/net/framer_harness.hpp until the connection engine serves protocols.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "net/framer_harness.hpp"
#include "net/websocket_wire.hpp"
#include "test_support.hpp"
#include "weft/io/subprocess.hpp"
#include "weft/io/tcp.hpp"
#include "weft/net/websocket.hpp"
#include "weft/sched/task.hpp"

namespace {

using namespace std::chrono_literals;
using weft::net::websocket;
using weft_net_test::served;
using weft_ws_test::client_frame;
using weft_ws_test::close_code_of;
using weft_ws_test::close_payload;
using weft_ws_test::frame_bits;
using weft_ws_test::parse_server_frames;

struct client_session {
  weft::subprocess::result client;
  served server;
};

// Serves one connection with a WebSocket echo on an ephemeral port and runs the client program
// (argv, then the URL) against it.
client_session run_client(std::vector<std::string> argv,
                          const weft::net::websocket_deflate_options& deflate = {}) {
  client_session session;
  weft_test::run_clean([&] {
    weft::net::websocket_options options;
    options.path = "/echo";
    options.deflate = deflate;
    const websocket protocol(options);
    auto listener = weft::tcp::listener::listen("127.0.0.1", 0);
    auto server =
        weft::spawn([&] { return weft_net_test::serve_with_framer(listener.accept(), protocol); });
    argv.push_back("ws://127.0.0.1:" + std::to_string(listener.port()) + "/echo");
    weft::subprocess::options run;
    run.limit = weft::timeout(20s);
    session.client = weft::subprocess::exec(argv, run);
    // A client that failed before connecting leaves the accept waiting: closing the listener
    // ends it (io_error), and the session's output says what went wrong.
    listener.close();
    try {
      session.server = server.await();
    } catch (const weft::io_error& error) {
      session.server.error = error.what();
    }
  });
  return session;
}

void expect_lines(const client_session& session, const std::vector<std::string>& checks) {
  std::string expected;
  for (const std::string& check : checks) {
    expected += "ok " + check + "\n";
  }
  EXPECT_EQ(session.client.exit_status, 0) << session.client.standard_error;
  EXPECT_EQ(session.client.standard_output, expected) << session.client.standard_error;
  EXPECT_TRUE(session.server.finished) << "the close frame did not end the conversation";
  EXPECT_EQ(session.server.close_code, 0) << session.server.error;
  EXPECT_EQ(session.server.error, "");
}

TEST(WebsocketClients, NodeWsEchoSessionPassesEveryCheck) {
  const std::string script = std::string(WEFT_TEST_SOURCE_DIR) + "/net/clients/ws_client.js";
  ASSERT_EQ(::access("/usr/share/nodejs/ws/package.json", R_OK), 0)
      << "Node's ws package is missing: install node-ws (scripts/install-deps)";
  const client_session session = run_client({"env", "NODE_PATH=/usr/share/nodejs", "node", script});
  expect_lines(session,
               {"handshake", "text", "binary", "empty", "fragmented", "1MiB", "ping", "close"});
  EXPECT_EQ(session.server.messages, 5);
}

TEST(WebsocketClients, GorillaWebsocketEchoSessionPassesEveryCheck) {
  ASSERT_EQ(::access(WEFT_TEST_WS_CLIENT_GO, X_OK), 0)
      << "the gorilla/websocket client " << WEFT_TEST_WS_CLIENT_GO
      << " was not built: install golang-go and golang-github-gorilla-websocket-dev "
         "(scripts/install-deps), then re-run cmake";
  const client_session session = run_client({WEFT_TEST_WS_CLIENT_GO});
  expect_lines(session, {"handshake", "text", "binary", "empty", "fragmented", "1MiB", "after-ping",
                         "ping", "close"});
  EXPECT_EQ(session.server.messages, 6);
}

// permessage-deflate with the same clients: every check again, compressed both ways. The 1 MiB
// message alone is 1 MiB uncompressed (its 512-byte blocks repeat their first half), so fewer
// bytes than that on the wire each way say both ends compressed.
weft::net::websocket_deflate_options deflate_on(bool takeover) {
  weft::net::websocket_deflate_options deflate;
  deflate.enabled = true;
  deflate.server_context_takeover = takeover;
  deflate.client_context_takeover = takeover;
  return deflate;
}

void expect_compressed_both_ways(const client_session& session) {
  EXPECT_LT(session.server.bytes_in, std::size_t{900} << 10) << "the client did not compress";
  EXPECT_LT(session.server.bytes_out, std::size_t{900} << 10) << "the server did not compress";
}

TEST(WebsocketClients, NodeWsDeflateSessionPassesEveryCheck) {
  const std::string script = std::string(WEFT_TEST_SOURCE_DIR) + "/net/clients/ws_client.js";
  ASSERT_EQ(::access("/usr/share/nodejs/ws/package.json", R_OK), 0)
      << "Node's ws package is missing: install node-ws (scripts/install-deps)";
  for (const bool takeover : {false, true}) {
    SCOPED_TRACE(takeover ? "context takeover" : "no context takeover");
    const client_session session = run_client(
        {"env", "NODE_PATH=/usr/share/nodejs", "node", script, "--deflate"}, deflate_on(takeover));
    expect_lines(session, {"handshake", "deflate", "text", "binary", "empty", "fragmented", "1MiB",
                           "ping", "close"});
    EXPECT_EQ(session.server.messages, 5);
    expect_compressed_both_ways(session);
  }
}

TEST(WebsocketClients, GorillaWebsocketDeflateSessionPassesEveryCheck) {
  ASSERT_EQ(::access(WEFT_TEST_WS_CLIENT_GO, X_OK), 0)
      << "the gorilla/websocket client " << WEFT_TEST_WS_CLIENT_GO
      << " was not built: install golang-go and golang-github-gorilla-websocket-dev "
         "(scripts/install-deps), then re-run cmake";
  const client_session session =
      run_client({WEFT_TEST_WS_CLIENT_GO, "--deflate"}, deflate_on(true));
  expect_lines(session, {"handshake", "deflate", "text", "binary", "empty", "fragmented", "1MiB",
                         "after-ping", "ping", "close"});
  EXPECT_EQ(session.server.messages, 6);
  expect_compressed_both_ways(session);
}

TEST(WebsocketClients, DeflateOffersAreDeclinedWhenTheServerHasItOff) {
  const std::string script = std::string(WEFT_TEST_SOURCE_DIR) + "/net/clients/ws_client.js";
  const client_session session =
      run_client({"env", "NODE_PATH=/usr/share/nodejs", "node", script, "--deflate"});
  EXPECT_EQ(session.client.exit_status, 1);
  EXPECT_NE(session.client.standard_output.find("FAIL deflate: the server's answer named ''"),
            std::string::npos)
      << session.client.standard_output;
}

struct raw_exchange {
  std::string reply_head;  // the server's HTTP reply head
  std::string after_head;  // every byte the server sent after it, until it closed
  served server;
};

// Connects a raw socket, sends the handshake request, reads the reply head, sends bytes, then
// reads until the server ends the stream.
raw_exchange raw_session(const std::string& request, const std::string& bytes,
                         std::size_t max_message_size = 1 << 20) {
  raw_exchange result;
  weft_test::run_clean([&] {
    const websocket protocol;
    auto listener = weft::tcp::listener::listen("127.0.0.1", 0);
    auto server = weft::spawn([&] {
      return weft_net_test::serve_with_framer(listener.accept(), protocol, max_message_size);
    });
    auto client = weft::tcp::connect("127.0.0.1", listener.port(), weft::timeout(5s));
    client.write_all(request);
    client.read_until(result.reply_head, "\r\n\r\n", 64 * 1024, weft::timeout(5s));
    if (!bytes.empty() && result.reply_head.rfind("HTTP/1.1 101 ", 0) == 0) {
      client.write_all(bytes);
    }
    std::vector<char> chunk(64 * 1024);
    while (const std::size_t got = client.read_some(chunk, weft::timeout(5s))) {
      result.after_head.append(chunk.data(), got);
    }
    client.close();
    result.server = server.await();
    listener.close();
  });
  return result;
}

// The close code of the one close frame the server sent in answer to bytes.
std::uint16_t close_code_answering(const std::string& bytes, std::size_t limit = 1 << 20) {
  const raw_exchange result = raw_session(weft_ws_test::handshake_request(), bytes, limit);
  EXPECT_EQ(result.reply_head.rfind("HTTP/1.1 101 Switching Protocols\r\n", 0), 0u)
      << result.reply_head;
  const auto frames = parse_server_frames(result.after_head);
  if (frames.empty() || frames.back().opcode != 0x8) {
    ADD_FAILURE() << "no close frame came back";
    return 0;
  }
  EXPECT_EQ(result.server.close_code, close_code_of(frames.back())) << result.server.error;
  EXPECT_EQ(result.server.messages, 0) << "a message before the error was counted";
  return close_code_of(frames.back());
}

TEST(WebsocketClients, MalformedFramesFromARawSocketGetTheirCloseCode) {
  frame_bits unmasked;
  unmasked.masked = false;
  EXPECT_EQ(close_code_answering(client_frame(0x1, "plain", unmasked)),
            websocket::protocol_violation);
  EXPECT_EQ(close_code_answering(client_frame(0x3, "reserved")), websocket::protocol_violation);
  frame_bits rsv;
  rsv.rsv = 4;
  EXPECT_EQ(close_code_answering(client_frame(0x2, "deflated?", rsv)),
            websocket::protocol_violation);
  frame_bits unfinished;
  unfinished.fin = false;
  EXPECT_EQ(close_code_answering(client_frame(0x9, "ping", unfinished)),
            websocket::protocol_violation);
  EXPECT_EQ(close_code_answering(client_frame(0x0, "orphan")), websocket::protocol_violation);
  EXPECT_EQ(close_code_answering(client_frame(0x8, close_payload(1005))),
            websocket::protocol_violation);
  EXPECT_EQ(close_code_answering(client_frame(0x1, "bad \xC0\xAF utf-8")),
            websocket::invalid_payload);
  // Over the limit: refused from the header, the payload never sent.
  EXPECT_EQ(close_code_answering(client_frame(0x2, std::string(5000, 'x')).substr(0, 8), 4096),
            websocket::message_too_big);
}

TEST(WebsocketClients, RawCloseFrameIsEchoedAndTheServerEndsTheStream) {
  const raw_exchange result =
      raw_session(weft_ws_test::handshake_request(),
                  client_frame(0x1, "hi") + client_frame(0x8, close_payload(4000, "done")));
  const auto frames = parse_server_frames(result.after_head);
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].opcode, 0x1);
  EXPECT_EQ(frames[0].payload, "hi");
  EXPECT_EQ(frames[1].opcode, 0x8);
  EXPECT_EQ(close_code_of(frames[1]), 4000);
  EXPECT_EQ(frames[1].payload.substr(2), "done");
  EXPECT_TRUE(result.server.finished);
  EXPECT_EQ(result.server.messages, 1);
}

TEST(WebsocketClients, RawBadHandshakeIsAnsweredWithAnHttpErrorAndClosed) {
  std::string request = weft_ws_test::handshake_request();
  request.replace(request.find("Version: 13"), 11, "Version: 8");
  const raw_exchange result = raw_session(request, {});
  EXPECT_EQ(result.reply_head.rfind("HTTP/1.1 426 Upgrade Required\r\n", 0), 0u)
      << result.reply_head;
  EXPECT_NE(result.reply_head.find("Sec-WebSocket-Version: 13\r\n"), std::string::npos);
  // The body names the reason; then the stream ends with no frame.
  EXPECT_NE(result.after_head.find("not supported"), std::string::npos) << result.after_head;
  EXPECT_EQ(result.server.close_code, 0);
  EXPECT_NE(result.server.error.find("426"), std::string::npos) << result.server.error;
}

}  // namespace

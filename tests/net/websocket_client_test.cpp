// weft's WebSocket client (net::connect_websocket) against servers: weft's own (which refuses an
// unmasked client frame, so every message it echoes proves the client masked it), Node's ws (a
// server no one here wrote: tests/net/servers/ws_server.js), and scripted raw servers for the
// handshake's failures and the frame rules a client must enforce.
#include <nettle/base64.h>
#include <nettle/sha1.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "net/net_support.hpp"
#include "net/websocket_wire.hpp"
#include "test_support.hpp"
#include "weft/io/subprocess.hpp"
#include "weft/io/tcp.hpp"
#include "weft/net/websocket.hpp"
#include "weft/sched/task.hpp"

namespace {

using namespace std::chrono_literals;
using net_test::running_server;
using weft::net::close_reason;
using weft::net::connect_websocket;
using weft::net::message_kind;
using weft::net::websocket;
using weft::net::websocket_client_options;
using weft::net::websocket_handshake_error;

// --- a raw server, scripted per test -------------------------------------------------------------

std::string accept_of(std::string_view key) {
  sha1_ctx context;
  sha1_init(&context);
  sha1_update(&context, key.size(), reinterpret_cast<const std::uint8_t*>(key.data()));
  constexpr std::string_view guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
  sha1_update(&context, guid.size(), reinterpret_cast<const std::uint8_t*>(guid.data()));
  std::array<std::uint8_t, SHA1_DIGEST_SIZE> digest{};
  sha1_digest(&context, digest.size(), digest.data());
  std::string encoded(BASE64_ENCODE_RAW_LENGTH(SHA1_DIGEST_SIZE), '\0');
  base64_encode_raw(encoded.data(), digest.size(), digest.data());
  return encoded;
}

// The value of a header line of the request head (names compared as the client writes them).
std::string header_of(const std::string& head, const std::string& name) {
  const std::size_t at = head.find("\r\n" + name + ": ");
  if (at == std::string::npos) {
    return {};
  }
  const std::size_t start = at + 4 + name.size();
  return head.substr(start, head.find("\r\n", start) - start);
}

std::string switching_reply(const std::string& key, std::string_view extra = {}) {
  std::string reply =
      "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Accept: " +
      accept_of(key) + "\r\n";
  reply.append(extra);
  reply += "\r\n";
  return reply;
}

// A frame as a server sends it: unmasked (bits.masked false) unless a test breaks the rule.
std::string server_frame(std::uint8_t opcode, std::string_view payload, bool masked = false) {
  weft_ws_test::frame_bits bits;
  bits.masked = masked;
  return weft_ws_test::client_frame(opcode, payload, bits);
}

struct client_frame_seen {
  std::uint8_t opcode = 0;
  bool masked = false;
  std::string payload;  // unmasked
};

// Reads one whole frame the client sent.
client_frame_seen read_client_frame(weft::tcp::stream& s) {
  std::array<char, 14> header{};
  s.read_exactly(std::span<char>(header.data(), 2), 2, weft::timeout(5s));
  client_frame_seen frame;
  frame.opcode = static_cast<std::uint8_t>(header[0] & 0x0F);
  frame.masked = (static_cast<unsigned char>(header[1]) & 0x80) != 0;
  std::uint64_t size = static_cast<unsigned char>(header[1]) & 0x7F;
  if (size >= 126) {
    const std::size_t extended = size == 126 ? 2 : 8;
    s.read_exactly(std::span<char>(header.data() + 2, extended), extended, weft::timeout(5s));
    size = 0;
    for (std::size_t i = 0; i < extended; ++i) {
      size = (size << 8) | static_cast<unsigned char>(header[2 + i]);
    }
  }
  std::array<char, 4> key{};
  if (frame.masked) {
    s.read_exactly(std::span<char>(key.data(), 4), 4, weft::timeout(5s));
  }
  frame.payload.resize(size);
  if (size != 0) {
    s.read_exactly(std::span<char>(frame.payload.data(), size), size, weft::timeout(5s));
  }
  for (std::size_t i = 0; frame.masked && i < frame.payload.size(); ++i) {
    frame.payload[i] = static_cast<char>(frame.payload[i] ^ key[i % 4]);
  }
  return frame;
}

// Reads until the client ends the connection: its FIN, with nothing before it.
void expect_client_ends(weft::tcp::stream& s) {
  std::array<char, 64> rest{};
  EXPECT_EQ(s.read_some(rest, weft::timeout(10s)), 0u);
}

// Runs client(port) against a raw server that accepts one connection, reads the request head
// and hands the stream and the head to script. Both run in one scheduler, which must end clean.
template <class Script, class Client>
void with_raw_server(Script script, Client client) {
  weft_test::run_clean([&] {
    auto listener = weft::tcp::listener::listen("127.0.0.1", 0);
    weft::task<void> server = weft::spawn([&] {
      weft::tcp::stream s = listener.accept(weft::timeout(10s));
      std::string head;
      s.read_until(head, "\r\n\r\n", 8192, weft::timeout(5s));
      script(s, head);
    });
    client(listener.port());
    server.await();
  });
}

// --- weft's own server --------------------------------------------------------------------------

weft::net::tcp_server_options echo_server_options() {
  weft::net::tcp_server_options options = net_test::local_options();
  weft::net::websocket_options ws;
  ws.path = "/echo";
  ws.subprotocols = {"chat"};
  options.protocol = std::make_shared<websocket>(ws);
  options.max_message_size = 2u << 20;
  return options;
}

void serve_echo(weft::net::tcp_server& server) {
  server.serve([](weft::net::connection& c) {
    weft::net::message m;
    while (c.receive(m)) {
      c.send(m.data, m.kind);
    }
  });
}

TEST(WebsocketClient, EchoesTextBinaryAndEmptyThroughWeftsServerWhichTakesOnlyMaskedFrames) {
  running_server running(echo_server_options(), serve_echo);
  std::string big(1u << 20, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) {
    big[i] = static_cast<char>((i * 131) >> 3);
  }
  weft_test::run_clean([&] {
    websocket_client_options options;
    options.path = "/echo?room=1";
    options.subprotocols = {"superchat", "chat"};
    options.connection.max_message_size = 2u << 20;
    auto made = connect_websocket("127.0.0.1", running.port(), options, weft::timeout(10s));
    EXPECT_EQ(made.subprotocol, "chat");
    auto& c = *made.connection;
    c.send("hello", message_kind::text);
    auto text = c.receive(weft::timeout(10s));
    ASSERT_TRUE(text.has_value());
    EXPECT_EQ(text->data, "hello");
    EXPECT_EQ(text->kind, message_kind::text);
    c.send(big, message_kind::binary);
    auto binary = c.receive(weft::timeout(10s));
    ASSERT_TRUE(binary.has_value());
    EXPECT_EQ(binary->kind, message_kind::binary);
    EXPECT_TRUE(binary->data == big) << "the 1 MiB message came back changed";
    c.send("", message_kind::binary);
    auto empty = c.receive(weft::timeout(10s));
    ASSERT_TRUE(empty.has_value());
    EXPECT_EQ(empty->data, "");
    c.close(websocket::normal_closure, "done");
    c.wait_closed(weft::timeout(10s));
  });
  // The server took every frame (an unmasked one would have been a protocol error) and the
  // close frame ended the connection from the client's side.
  ASSERT_TRUE(net_test::eventually([&] {
    return running.server().stats().total.closed_by(close_reason::peer) == 1;
  })) << "the client's close frame did not end the connection";
  const weft::net::worker_stats total = running.server().stats().total;
  EXPECT_EQ(total.messages_in, 3u);
  EXPECT_EQ(total.messages_out, 3u);
  EXPECT_EQ(total.closed_by(close_reason::protocol_error), 0u);
}

// permessage-deflate between weft's two ends through the connection engine, with each side's
// context kept or not: every kind of message comes back intact, compressible ones compressed.
TEST(WebsocketClient, DeflateBetweenWeftsClientAndServerKeepsEveryMessageIntact) {
  for (const bool takeover : {false, true}) {
    SCOPED_TRACE(takeover ? "context takeover" : "no context takeover");
    weft::net::tcp_server_options server_options = echo_server_options();
    weft::net::websocket_options ws;
    ws.path = "/echo";
    ws.deflate.enabled = true;
    ws.deflate.server_context_takeover = takeover;
    ws.deflate.client_context_takeover = takeover;
    server_options.protocol = std::make_shared<websocket>(ws);
    running_server running(server_options, serve_echo);
    std::string noise(100000, '\0');
    std::uint32_t state = 12345;
    for (char& c : noise) {
      state = state * 1103515245u + 12345u;
      c = static_cast<char>(state >> 24);
    }
    std::string prose;
    for (int i = 0; prose.size() < 300000; ++i) {
      prose += "line " + std::to_string(i % 97) + " of a text that repeats itself\n";
    }
    weft_test::run_clean([&] {
      websocket_client_options options;
      options.path = "/echo";
      options.deflate.enabled = true;
      options.deflate.server_context_takeover = takeover;
      options.deflate.client_context_takeover = takeover;
      options.connection.max_message_size = 2u << 20;
      auto made = connect_websocket("127.0.0.1", running.port(), options, weft::timeout(10s));
      EXPECT_EQ(made.extensions, takeover ? "permessage-deflate"
                                          : "permessage-deflate; server_no_context_takeover; "
                                            "client_no_context_takeover");
      auto& c = *made.connection;
      const std::vector<std::pair<std::string, message_kind>> sent = {
          {"short", message_kind::text}, {prose, message_kind::text},
          {noise, message_kind::binary}, {"", message_kind::binary},
          {prose, message_kind::text},   {std::string(1u << 20, 'q'), message_kind::binary}};
      for (const auto& [payload, kind] : sent) {
        c.send(payload, kind);
        auto echoed = c.receive(weft::timeout(10s));
        ASSERT_TRUE(echoed.has_value());
        EXPECT_EQ(echoed->kind, kind);
        EXPECT_TRUE(echoed->data == payload)
            << payload.size() << " bytes came back as " << echoed->data.size();
      }
      // Uncompressed, the messages are 2.1 MB each way; the noise (100 KB) does not compress.
      EXPECT_LT(c.counters().bytes_out, std::size_t{250} << 10);
      EXPECT_LT(c.counters().bytes_in, std::size_t{250} << 10);
      c.close(websocket::normal_closure, "done");
      c.wait_closed(weft::timeout(10s));
    });
    ASSERT_TRUE(net_test::eventually(
        [&] { return running.server().stats().total.closed_by(close_reason::peer) == 1; }));
    EXPECT_EQ(running.server().stats().total.closed_by(close_reason::protocol_error), 0u);
  }
}

// A client that offers permessage-deflate to a server without it gets plain frames.
TEST(WebsocketClient, ADeclinedDeflateOfferLeavesThePlainProtocol) {
  running_server running(echo_server_options(), serve_echo);
  weft_test::run_clean([&] {
    websocket_client_options options;
    options.path = "/echo";
    options.deflate.enabled = true;
    auto made = connect_websocket("127.0.0.1", running.port(), options, weft::timeout(10s));
    EXPECT_EQ(made.extensions, "");
    auto& c = *made.connection;
    const std::string text(5000, 'p');
    c.send(text, message_kind::text);
    auto echoed = c.receive(weft::timeout(10s));
    ASSERT_TRUE(echoed.has_value());
    EXPECT_EQ(echoed->data, text);
    EXPECT_GT(c.counters().bytes_out, 5000u);
    c.close(websocket::normal_closure, "done");
    c.wait_closed(weft::timeout(10s));
  });
}

TEST(WebsocketClient, APathTheServerDoesNotServeIsAHandshakeErrorWithItsStatus) {
  running_server running(echo_server_options(), serve_echo);
  weft_test::run_clean([&] {
    websocket_client_options options;
    options.path = "/elsewhere";
    try {
      connect_websocket("127.0.0.1", running.port(), options, weft::timeout(10s));
      ADD_FAILURE() << "the handshake for a path not served succeeded";
    } catch (const websocket_handshake_error& failure) {
      EXPECT_EQ(failure.status(), 404u);
      EXPECT_NE(std::string(failure.what()).find("404 Not Found"), std::string::npos)
          << failure.what();
    }
  });
}

// --- Node's ws ----------------------------------------------------------------------------------

// tests/net/servers/ws_server.js on a port the kernel picks, from a coroutine.
class node_ws_server {
 public:
  // Starts it and reads its port (0, with a test failure, when it did not print one).
  std::uint16_t start(bool deflate = false) {
    if (::access("/usr/share/nodejs/ws/package.json", R_OK) != 0) {
      ADD_FAILURE() << "Node's ws package is missing: install node-ws (scripts/install-deps)";
      return 0;
    }
    weft::subprocess::options run;
    run.stderr_mode = weft::subprocess::stdio::inherit;
    std::vector<std::string> argv = {
        "env", "NODE_PATH=/usr/share/nodejs", "node",
        std::string(WEFT_TEST_SOURCE_DIR) + "/net/servers/ws_server.js"};
    if (deflate) {
      argv.emplace_back("--deflate");
    }
    node_ = weft::subprocess::spawn(argv, run);
    std::string line;
    while (line.find('\n') == std::string::npos) {
      const std::size_t got = node_.read_stdout(chunk_, weft::timeout(15s));
      if (got == 0) {
        ADD_FAILURE() << "the Node server ended before printing its port: " << line;
        return 0;
      }
      line.append(chunk_.data(), got);
    }
    if (line.rfind("port ", 0) != 0) {
      ADD_FAILURE() << "the Node server printed " << line;
      return 0;
    }
    return static_cast<std::uint16_t>(std::stoi(line.substr(5)));
  }
  // What it printed after its port, once it has exited (with status 0, or a test failure).
  std::string finish() {
    std::string output;
    for (;;) {
      const std::size_t got = node_.read_stdout(chunk_, weft::timeout(15s));
      if (got == 0) {
        break;
      }
      output.append(chunk_.data(), got);
    }
    EXPECT_EQ(node_.wait(weft::timeout(15s)).exit_status, 0) << output;
    return output;
  }

 private:
  weft::child node_;
  std::array<char, 4096> chunk_{};
};

TEST(WebsocketClient, NodeWsServerSessionPingsFragmentsAndClosesWithTheClientsCode) {
  std::string output;
  weft_test::run_clean([&] {
    node_ws_server node;
    const std::uint16_t port = node.start();
    ASSERT_NE(port, 0);

    websocket_client_options options;
    options.path = "/echo";
    options.subprotocols = {"v2.chat", "v1.chat"};
    auto made = connect_websocket("127.0.0.1", port, options, weft::timeout(10s));
    EXPECT_EQ(made.subprotocol, "v2.chat");
    auto& c = *made.connection;
    c.send("hello", message_kind::text);
    auto text = c.receive(weft::timeout(10s));  // the server's ping is answered on the way
    ASSERT_TRUE(text.has_value());
    EXPECT_EQ(text->data, "hello");
    EXPECT_EQ(text->kind, message_kind::text);
    std::string payload(70000, 'x');  // a 16-bit length
    payload[69999] = 'y';
    c.send(payload, message_kind::binary);
    auto binary = c.receive(weft::timeout(10s));
    ASSERT_TRUE(binary.has_value());
    EXPECT_EQ(binary->kind, message_kind::binary);
    EXPECT_TRUE(binary->data == payload);
    c.send("fragments", message_kind::text);
    auto joined = c.receive(weft::timeout(10s));
    ASSERT_TRUE(joined.has_value());
    EXPECT_EQ(joined->data, "fragments");
    EXPECT_EQ(joined->kind, message_kind::text);
    c.close(4001, "client-bye");
    c.wait_closed(weft::timeout(10s));
    EXPECT_EQ(c.closed_by(), close_reason::local);
    // The close waited for ws's answer, which repeats the code and reason.
    ASSERT_NE(c.peer_close(), nullptr);
    EXPECT_EQ(c.peer_close()->code, 4001);
    EXPECT_EQ(c.peer_close()->reason, "client-bye");
    output = node.finish();
  });
  // The client's first message reaches the server before the client reads (and answers) the ping
  // that came with the 101.
  EXPECT_EQ(output, "ok masked\nok pong\nclosed 4001 client-bye\n");
}

// permessage-deflate against ws's compressor and decompressor: a client with context takeover
// both ways (ws's own default) and one without, each message compressed by both ends.
TEST(WebsocketClient, NodeWsServerDeflateSessionEchoesCompressedMessages) {
  for (const bool takeover : {true, false}) {
    SCOPED_TRACE(takeover ? "context takeover" : "no context takeover");
    std::string output;
    weft_test::run_clean([&] {
      node_ws_server node;
      const std::uint16_t port = node.start(true);
      ASSERT_NE(port, 0);
      websocket_client_options options;
      options.path = "/echo";
      options.deflate.enabled = true;
      options.deflate.min_size = 0;
      options.deflate.server_context_takeover = takeover;
      options.deflate.client_context_takeover = takeover;
      options.connection.max_message_size = 2u << 20;
      auto made = connect_websocket("127.0.0.1", port, options, weft::timeout(10s));
      // ws answers with the offer's own parameters, less client_max_window_bits (no limit).
      EXPECT_EQ(made.extensions, takeover ? "permessage-deflate"
                                          : "permessage-deflate; server_no_context_takeover; "
                                            "client_no_context_takeover");
      auto& c = *made.connection;
      std::string repeated;
      for (int i = 0; i < 2000; ++i) {
        repeated += "message " + std::to_string(i % 17) + "; ";
      }
      // Each twice: with a context kept, the second is sent as references to the first.
      for (const std::string& payload :
           {std::string("hello"), repeated, repeated, std::string(), std::string(1u << 20, 'z')}) {
        c.send(payload, message_kind::text);
        auto echoed = c.receive(weft::timeout(10s));
        ASSERT_TRUE(echoed.has_value());
        EXPECT_EQ(echoed->kind, message_kind::text);
        EXPECT_TRUE(echoed->data == payload)
            << "a message of " << payload.size() << " bytes came back as " << echoed->data.size();
      }
      c.send("fragments", message_kind::text);  // ws compresses the two frames as one message
      auto joined = c.receive(weft::timeout(10s));
      ASSERT_TRUE(joined.has_value());
      EXPECT_EQ(joined->data, "fragments");
      EXPECT_LT(c.counters().bytes_in, std::size_t{200} << 10) << "ws did not compress";
      EXPECT_LT(c.counters().bytes_out, std::size_t{200} << 10) << "weft did not compress";
      c.close(4001, "client-bye");
      c.wait_closed(weft::timeout(10s));
      output = node.finish();
    });
    EXPECT_EQ(output, "deflate permessage-deflate\nok masked\nok pong\nclosed 4001 client-bye\n");
  }
}

TEST(WebsocketClient, NodeWsServersCloseFrameIsAnsweredAndEndsTheInput) {
  std::string output;
  weft_test::run_clean([&] {
    node_ws_server node;
    const std::uint16_t port = node.start();
    ASSERT_NE(port, 0);
    websocket_client_options options;
    options.path = "/echo";
    auto made = connect_websocket("127.0.0.1", port, options, weft::timeout(10s));
    EXPECT_EQ(made.subprotocol, "");
    auto& c = *made.connection;
    c.send("close-me", message_kind::text);
    // The server's close frame: answered with the same code, and the input ends.
    EXPECT_FALSE(c.receive(weft::timeout(10s)).has_value());
    c.wait_closed(weft::timeout(10s));
    EXPECT_EQ(c.closed_by(), close_reason::peer);
    // What the server said, as a browser's CloseEvent has it.
    ASSERT_NE(c.peer_close(), nullptr);
    EXPECT_EQ(c.peer_close()->code, 4002);
    EXPECT_EQ(c.peer_close()->reason, "server-bye");
    output = node.finish();
  });
  // (Whether ws still reports the pong that follows its own close frame is its business.)
  EXPECT_EQ(output.rfind("ok masked\n", 0), 0u) << output;
  EXPECT_NE(output.find("closed 4002 server-bye\n"), std::string::npos) << output;
}

// --- the handshake's rules, from scripted servers ------------------------------------------------

TEST(WebsocketClient, TheRequestIsAValidOpeningHandshake) {
  std::string head;
  with_raw_server(
      [&](weft::tcp::stream& s, const std::string& request) {
        head = request;
        s.write_all(switching_reply(header_of(request, "Sec-WebSocket-Key")));
        const client_frame_seen close = read_client_frame(s);
        EXPECT_EQ(close.opcode, 0x8);
        EXPECT_TRUE(close.masked);
        EXPECT_EQ(close.payload, weft_ws_test::close_payload(1001));
      },
      [&](std::uint16_t port) {
        websocket_client_options options;
        options.path = "/chat?x=1";
        options.origin = "https://example.com";
        options.headers = {{"Authorization", "Bearer abc"}};
        auto made = connect_websocket("127.0.0.1", port, options, weft::timeout(10s));
        made.connection->close(websocket::going_away);
        made.connection->wait_closed(weft::timeout(10s));
      });
  EXPECT_EQ(head.rfind("GET /chat?x=1 HTTP/1.1\r\n", 0), 0u) << head;
  EXPECT_EQ(header_of(head, "Host").rfind("127.0.0.1:", 0), 0u);
  EXPECT_EQ(header_of(head, "Upgrade"), "websocket");
  EXPECT_EQ(header_of(head, "Connection"), "Upgrade");
  EXPECT_EQ(header_of(head, "Sec-WebSocket-Version"), "13");
  const std::string key = header_of(head, "Sec-WebSocket-Key");
  ASSERT_EQ(key.size(), 24u);
  EXPECT_EQ(key.substr(22), "==");
  EXPECT_EQ(header_of(head, "Origin"), "https://example.com");
  EXPECT_EQ(header_of(head, "Authorization"), "Bearer abc");
  EXPECT_EQ(header_of(head, "Sec-WebSocket-Extensions"), "");
}

// Each bad answer and the words the error must hold.
struct bad_answer {
  const char* name;
  bool right_accept;         // the reply's Sec-WebSocket-Accept answers the key
  std::string extra;         // further header lines
  const char* replace_from;  // a piece of the reply to change, and what to
  const char* replace_to;
  const char* expected;
};

TEST(WebsocketClient, AnAnswerThatIsNotAValidHandshakeIsRefusedAndNamed) {
  const std::vector<bad_answer> answers = {
      {"wrong accept", false, "", "", "", "does not answer the key"},
      {"no upgrade", true, "", "Upgrade: websocket\r\n", "", "Upgrade header"},
      {"no connection", true, "", "Connection: Upgrade\r\n", "Connection: keep-alive\r\n",
       "Connection header"},
      {"extension", true, "Sec-WebSocket-Extensions: permessage-deflate\r\n", "", "",
       "none was offered"},
      {"subprotocol", true, "Sec-WebSocket-Protocol: other\r\n", "", "", "was not offered"},
      {"not http", true, "", "HTTP/1.1 101 Switching Protocols", "SSH-2.0-OpenSSH_9.2 hello",
       "not an HTTP response"},
      // Four digits are no status 101.
      {"status 1010", true, "", "HTTP/1.1 101 Switching", "HTTP/1.1 1010 Switching",
       "not an HTTP response"},
      // RFC 6455 4.1: the handshake is HTTP/1.1's.
      {"http/1.0", true, "", "HTTP/1.1 101", "HTTP/1.0 101", "is not HTTP/1.1"},
  };
  for (const bad_answer& answer : answers) {
    SCOPED_TRACE(answer.name);
    std::string error;
    with_raw_server(
        [&](weft::tcp::stream& s, const std::string& request) {
          std::string key = header_of(request, "Sec-WebSocket-Key");
          std::string reply =
              switching_reply(answer.right_accept ? key : "AAAAAAAAAAAAAAAAAAAAAA==", answer.extra);
          if (answer.replace_from[0] != '\0') {
            const std::size_t at = reply.find(answer.replace_from);
            ASSERT_NE(at, std::string::npos);
            reply.replace(at, std::string_view(answer.replace_from).size(), answer.replace_to);
          }
          s.write_all(reply);
          // The client closes without sending a frame.
          expect_client_ends(s);
        },
        [&](std::uint16_t port) {
          try {
            connect_websocket("127.0.0.1", port, {}, weft::timeout(10s));
            ADD_FAILURE() << "the bad answer was taken";
          } catch (const websocket_handshake_error& failure) {
            error = failure.what();
            // A 101 that breaks the rules keeps its status; what is not HTTP has none.
            const std::string_view name = answer.name;
            EXPECT_EQ(failure.status(), name == "not http" || name == "status 1010" ? 0u : 101u);
          }
        });
    EXPECT_NE(error.find(answer.expected), std::string::npos) << error;
  }
}

// RFC 7692 5 and 7.1: an answer to the permessage-deflate offer that the client must refuse.
TEST(WebsocketClient, ADeflateAnswerBreakingRfc7692IsRefusedAndNamed) {
  const std::vector<std::pair<std::string, std::string>> answers = {
      {"permessage-deflate; server_no_context_takeover; foo", "'foo', which permessage-deflate"},
      {"permessage-deflate; server_no_context_takeover; client_max_window_bits",
       "client_max_window_bits without a value"},
      {"x-webkit-deflate-frame", "'x-webkit-deflate-frame', which was not offered"},
      {"permessage-deflate; server_no_context_takeover, permessage-deflate", "more than one"},
      {"permessage-deflate", "no server_no_context_takeover, which the offer asked for"},
      {"permessage-deflate; server_no_context_takeover; server_max_window_bits=16",
       "a window is 8 to 15 bits"},
      {"permessage-deflate; server_no_context_takeover; server_no_context_takeover", "twice"},
  };
  for (const auto& [answer, expected] : answers) {
    SCOPED_TRACE(answer);
    std::string error;
    std::string offer;
    with_raw_server(
        [&](weft::tcp::stream& s, const std::string& request) {
          offer = header_of(request, "Sec-WebSocket-Extensions");
          s.write_all(switching_reply(header_of(request, "Sec-WebSocket-Key"),
                                      "Sec-WebSocket-Extensions: " + answer + "\r\n"));
          expect_client_ends(s);  // closed without a frame
        },
        [&](std::uint16_t port) {
          websocket_client_options options;
          options.deflate.enabled = true;
          try {
            connect_websocket("127.0.0.1", port, options, weft::timeout(10s));
            ADD_FAILURE() << "the bad answer was taken";
          } catch (const websocket_handshake_error& failure) {
            error = failure.what();
            EXPECT_EQ(failure.status(), 101u);
          }
        });
    EXPECT_EQ(offer,
              "permessage-deflate; client_max_window_bits; server_no_context_takeover; "
              "client_no_context_takeover");
    EXPECT_NE(error.find(expected), std::string::npos) << error;
  }
}

TEST(WebsocketClient, AServerThatClosesOrAnswersTooMuchIsAHandshakeError) {
  std::string error;
  with_raw_server([](weft::tcp::stream& s, const std::string&) { s.close(); },
                  [&](std::uint16_t port) {
                    try {
                      connect_websocket("127.0.0.1", port, {}, weft::timeout(10s));
                    } catch (const websocket_handshake_error& failure) {
                      error = failure.what();
                    }
                  });
  EXPECT_NE(error.find("closed the connection without answering"), std::string::npos) << error;
  error.clear();
  with_raw_server(
      [](weft::tcp::stream& s, const std::string&) {
        s.write_all("HTTP/1.1 101 Switching Protocols\r\nX-Pad: " + std::string(300, 'p'));
        expect_client_ends(s);
      },
      [&](std::uint16_t port) {
        websocket_client_options options;
        options.max_handshake_size = 128;
        try {
          connect_websocket("127.0.0.1", port, options, weft::timeout(10s));
        } catch (const websocket_handshake_error& failure) {
          error = failure.what();
        }
      });
  EXPECT_NE(error.find("larger than 128 bytes"), std::string::npos) << error;
  // A head whose lines end in a bare LF (RFC 9112 2.2: CRLF) is named at once, where the client
  // waited for a CRLF CRLF that never comes until the server closed or its limits passed.
  error.clear();
  with_raw_server(
      [](weft::tcp::stream& s, const std::string& request) {
        std::string reply = switching_reply(header_of(request, "Sec-WebSocket-Key"));
        for (std::size_t at = reply.find("\r\n"); at != std::string::npos;
             at = reply.find("\r\n", at)) {
          reply.erase(at, 1);
        }
        s.write_all(reply);
        expect_client_ends(s);
      },
      [&](std::uint16_t port) {
        try {
          connect_websocket("127.0.0.1", port, {}, weft::timeout(10s));
        } catch (const websocket_handshake_error& failure) {
          error = failure.what();
          EXPECT_EQ(failure.status(), 0u);
        }
      });
  EXPECT_NE(error.find("bare LF"), std::string::npos) << error;
}

// --- frames: what a client must do and refuse ------------------------------------------------

TEST(WebsocketClient, FramesSentRightAfterThe101AreReadAndAPingIsAnsweredMasked) {
  with_raw_server(
      [](weft::tcp::stream& s, const std::string& request) {
        // The 101, a message and a ping in one write.
        s.write_all(switching_reply(header_of(request, "Sec-WebSocket-Key")) +
                    server_frame(0x1, "welcome") + server_frame(0x9, "ping-data"));
        // The client sends "thanks" before its next receive reads the ping and answers it.
        const client_frame_seen text = read_client_frame(s);
        EXPECT_EQ(text.opcode, 0x1);
        EXPECT_TRUE(text.masked);
        EXPECT_EQ(text.payload, "thanks");
        const client_frame_seen pong = read_client_frame(s);
        EXPECT_EQ(pong.opcode, 0xA);
        EXPECT_TRUE(pong.masked);
        EXPECT_EQ(pong.payload, "ping-data");
        s.write_all(server_frame(0x8, weft_ws_test::close_payload(1000)));
        const client_frame_seen echo = read_client_frame(s);
        EXPECT_EQ(echo.opcode, 0x8);
        EXPECT_TRUE(echo.masked);
        EXPECT_EQ(echo.payload, weft_ws_test::close_payload(1000));
      },
      [](std::uint16_t port) {
        auto made = connect_websocket("127.0.0.1", port, {}, weft::timeout(10s));
        auto& c = *made.connection;
        auto welcome = c.receive(weft::timeout(10s));
        ASSERT_TRUE(welcome.has_value());
        EXPECT_EQ(welcome->data, "welcome");
        c.send("thanks", message_kind::text);
        EXPECT_FALSE(c.receive(weft::timeout(10s)).has_value());
        c.wait_closed(weft::timeout(10s));
        EXPECT_EQ(c.closed_by(), close_reason::peer);
      });
}

TEST(WebsocketClient, AMaskedFrameFromTheServerClosesWith1002AndIsNotDelivered) {
  with_raw_server(
      [](weft::tcp::stream& s, const std::string& request) {
        s.write_all(switching_reply(header_of(request, "Sec-WebSocket-Key")) +
                    server_frame(0x1, "sneaky", true));
        const client_frame_seen close = read_client_frame(s);
        EXPECT_EQ(close.opcode, 0x8);
        EXPECT_TRUE(close.masked);
        ASSERT_GE(close.payload.size(), 2u);
        EXPECT_EQ((static_cast<unsigned char>(close.payload[0]) << 8) |
                      static_cast<unsigned char>(close.payload[1]),
                  1002);
        EXPECT_NE(close.payload.find("servers must not mask"), std::string::npos);
      },
      [](std::uint16_t port) {
        auto made = connect_websocket("127.0.0.1", port, {}, weft::timeout(10s));
        auto& c = *made.connection;
        EXPECT_FALSE(c.receive(weft::timeout(10s)).has_value());
        c.wait_closed(weft::timeout(10s));
        EXPECT_EQ(c.closed_by(), close_reason::protocol_error);
      });
}

TEST(WebsocketClient, OptionsThatCannotMakeAValidRequestAreRefusedBeforeConnecting) {
  struct bad_options {
    websocket_client_options options;
    const char* expected;
  };
  std::vector<bad_options> cases(8);
  cases[0].options.path = "chat";
  cases[0].expected = "must start with '/'";
  cases[1].options.path = "/a b";
  cases[1].expected = "holds the byte 32";
  cases[2].options.origin = "https://x\r\nInjected: yes";
  cases[2].expected = "control character 13";
  cases[3].options.headers = {{"Sec-WebSocket-Key", "x"}};
  cases[3].expected = "the handshake's own";
  cases[4].options.headers = {{"Bad Name", "x"}};
  cases[4].expected = "not a token";
  cases[5].options.subprotocols = {"a,b"};
  cases[5].expected = "not a token";
  cases[6].options.handshake_timeout = -1ms;
  cases[6].expected = "handshake_timeout may not be negative";
  cases[7].options.ping_interval = -5ms;
  cases[7].expected = "ping_interval and ping_timeout may not be negative";
  weft_test::run_clean([&] {
    for (const bad_options& bad : cases) {
      try {
        // Port 1 would refuse the connection: an invalid_argument shows nothing was tried.
        connect_websocket("127.0.0.1", 1, bad.options, weft::timeout(10s));
        ADD_FAILURE() << "accepted: " << bad.expected;
      } catch (const std::invalid_argument& failure) {
        EXPECT_NE(std::string(failure.what()).find(bad.expected), std::string::npos)
            << failure.what();
      }
    }
  });
}

// A server that accepts and never answers the handshake: without a limit of the caller's,
// handshake_timeout ends the wait, as a timeout_error, and the connection is closed.
TEST(WebsocketClient, AServerThatNeverAnswersTheHandshakeTimesOutWithoutALimit) {
  with_raw_server(
      [](weft::tcp::stream& s, const std::string& request) {
        EXPECT_NE(request.find("Sec-WebSocket-Key: "), std::string::npos);
        expect_client_ends(s);  // the client's close
      },
      [](std::uint16_t port) {
        websocket_client_options options;
        options.handshake_timeout = 300ms;
        const auto start = std::chrono::steady_clock::now();
        EXPECT_THROW(connect_websocket("127.0.0.1", port, options), weft::timeout_error);
        EXPECT_GE(std::chrono::steady_clock::now() - start, 250ms);
      });
}

// Keep-alive pings from the client (ping_interval): masked, and a server that stops answering
// them is left with close_reason::ping_timeout.
TEST(WebsocketClient, KeepAlivePingsFindAServerThatStoppedAnswering) {
  with_raw_server(
      [](weft::tcp::stream& s, const std::string& request) {
        s.write_all(switching_reply(header_of(request, "Sec-WebSocket-Key")));
        const client_frame_seen ping = read_client_frame(s);
        EXPECT_EQ(ping.opcode, 0x9);
        EXPECT_TRUE(ping.masked);
        s.write_all(server_frame(0xA, ping.payload));  // answered once
        EXPECT_EQ(read_client_frame(s).opcode, 0x9);   // a quiet interval later: not answered
        expect_client_ends(s);                         // the client's FIN
      },
      [](std::uint16_t port) {
        websocket_client_options options;
        options.ping_interval = 100ms;
        options.ping_timeout = 300ms;
        auto made = connect_websocket("127.0.0.1", port, options, weft::timeout(10s));
        auto& c = *made.connection;
        EXPECT_FALSE(c.receive(weft::timeout(10s)).has_value());
        c.wait_closed(weft::timeout(10s));
        EXPECT_EQ(c.closed_by(), close_reason::ping_timeout);
        EXPECT_EQ(c.counters().messages_in, 0u);
      });
}

// Both sides pinging every 50 ms: a conversation quiet for half a second stays open (each
// answers the other's pings as it receives), and goes on.
TEST(WebsocketClient, PingsBothWaysKeepAQuietConnectionOpen) {
  auto server_options = echo_server_options();
  weft::net::websocket_options ws;
  ws.path = "/echo";
  ws.ping_interval = 50ms;
  ws.ping_timeout = 2000ms;
  server_options.protocol = std::make_shared<websocket>(ws);
  running_server running(server_options, serve_echo);
  weft_test::run_clean([&] {
    websocket_client_options options;
    options.path = "/echo";
    options.ping_interval = 50ms;
    options.ping_timeout = 2000ms;
    auto made = connect_websocket("127.0.0.1", running.port(), options, weft::timeout(10s));
    auto& c = *made.connection;
    EXPECT_THROW(c.receive(weft::timeout(500ms)), weft::timeout_error);
    EXPECT_TRUE(c.is_open());
    EXPECT_GE(c.counters().bytes_in, 2u) << "no ping came from the server";
    c.send("still here", message_kind::text);
    auto back = c.receive(weft::timeout(10s));
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(back->data, "still here");
    c.close(websocket::normal_closure);
    c.wait_closed(weft::timeout(10s));
  });
  EXPECT_EQ(running.server().stats().total.closed_by(close_reason::ping_timeout), 0u);
}

// RFC 6455 7.1: the closing handshake. The client's close waits for the server's close frame
// (messages before it are dropped) and leaves the end of the TCP connection to the server
// (7.1.1), so that the answer meets no reset and the TIME_WAIT is the server's.
TEST(WebsocketClient, ACloseWaitsForTheServersCloseFrameAndLetsTheServerEndFirst) {
  with_raw_server(
      [](weft::tcp::stream& s, const std::string& request) {
        s.write_all(switching_reply(header_of(request, "Sec-WebSocket-Key")));
        const client_frame_seen close = read_client_frame(s);
        EXPECT_EQ(close.opcode, 0x8);
        EXPECT_TRUE(close.masked);
        EXPECT_EQ(close.payload, weft_ws_test::close_payload(4001, "client-bye"));
        // No FIN behind the close frame: the client waits for the server to end first. (Its
        // flusher runs in this scheduler while this read waits.)
        std::array<char, 64> rest{};
        EXPECT_THROW(s.read_some(rest, weft::timeout(300ms)), weft::timeout_error);
        // A message that crossed the client's close frame, then the answer, then the end.
        s.write_all(server_frame(0x1, "crossed") +
                    server_frame(0x8, weft_ws_test::close_payload(4001, "server-ok")));
        s.shutdown(weft::timeout(5s));
        // The client's FIN, and nothing else: no reset.
        EXPECT_EQ(s.read_some(rest, weft::timeout(10s)), 0u);
      },
      [](std::uint16_t port) {
        auto made = connect_websocket("127.0.0.1", port, {}, weft::timeout(10s));
        auto& c = *made.connection;
        c.close(4001, "client-bye");
        EXPECT_FALSE(c.receive(weft::timeout(10s)).has_value());
        c.wait_closed(weft::timeout(10s));
        EXPECT_EQ(c.closed_by(), close_reason::local);
        ASSERT_NE(c.peer_close(), nullptr);
        EXPECT_EQ(c.peer_close()->code, 4001);
        EXPECT_EQ(c.peer_close()->reason, "server-ok");
        EXPECT_EQ(c.counters().messages_in, 0u);  // "crossed" was dropped
      });
}

// A server that never answers the close frame, nor ends the connection, holds the client's
// close for close_timeout only; then the client closes without its answer.
TEST(WebsocketClient, ACloseTheServerNeverAnswersEndsAfterCloseTimeout) {
  with_raw_server(
      [](weft::tcp::stream& s, const std::string& request) {
        s.write_all(switching_reply(header_of(request, "Sec-WebSocket-Key")));
        EXPECT_EQ(read_client_frame(s).opcode, 0x8);
        expect_client_ends(s);  // the client gave up: its FIN
      },
      [](std::uint16_t port) {
        websocket_client_options options;
        options.connection.close_timeout = 300ms;
        auto made = connect_websocket("127.0.0.1", port, options, weft::timeout(10s));
        auto& c = *made.connection;
        const auto start = std::chrono::steady_clock::now();
        c.close(websocket::normal_closure);
        c.wait_closed(weft::timeout(10s));
        EXPECT_GE(std::chrono::steady_clock::now() - start, 250ms);
        EXPECT_EQ(c.closed_by(), close_reason::local);
        EXPECT_EQ(c.peer_close(), nullptr);
      });
}

// Both ends weft's: a server's close(code) gets the client's answer (peer_close() on the
// server), and a client's close gets the server's, each side ending as RFC 6455 7.1.1 has it.
TEST(WebsocketClient, WeftsServerAndClientCompleteTheClosingHandshakeEitherWay) {
  std::atomic<int> server_heard{0};
  std::atomic<int> server_reasons{0};
  running_server running(echo_server_options(), [&](weft::net::tcp_server& server) {
    server.serve([&](weft::net::connection& c) {
      weft::net::message m;
      while (c.receive(m)) {
        if (m.data == "close-me") {
          c.close(4003, "server-done");
          break;
        }
        c.send(m.data, m.kind);
      }
      c.wait_closed(weft::timeout(10s));
      if (c.peer_close() != nullptr) {
        server_heard.fetch_add(c.peer_close()->code);
      }
      server_reasons.fetch_add(c.closed_by() == close_reason::local ? 1 : 100);
    });
  });
  weft_test::run_clean([&] {
    websocket_client_options options;
    options.path = "/echo";
    {
      auto made = connect_websocket("127.0.0.1", running.port(), options, weft::timeout(10s));
      auto& c = *made.connection;
      c.send("close-me", message_kind::text);
      EXPECT_FALSE(c.receive(weft::timeout(10s)).has_value());
      c.wait_closed(weft::timeout(10s));
      EXPECT_EQ(c.closed_by(), close_reason::peer);
      ASSERT_NE(c.peer_close(), nullptr);
      EXPECT_EQ(c.peer_close()->code, 4003);
    }
    ASSERT_TRUE(net_test::eventually([&] { return server_reasons.load() == 1; }));
    EXPECT_EQ(server_heard.load(), 4003);  // the client's echo, read by the server's close
    {
      auto made = connect_websocket("127.0.0.1", running.port(), options, weft::timeout(10s));
      auto& c = *made.connection;
      c.send("hello", message_kind::text);
      ASSERT_TRUE(c.receive(weft::timeout(10s)).has_value());
      c.close(4004, "client-done");
      c.wait_closed(weft::timeout(10s));
      EXPECT_EQ(c.closed_by(), close_reason::local);
      ASSERT_NE(c.peer_close(), nullptr);
      EXPECT_EQ(c.peer_close()->code, 4004);
      EXPECT_EQ(c.peer_close()->reason, "client-done");
    }
    ASSERT_TRUE(net_test::eventually([&] { return server_reasons.load() == 101; }));
    EXPECT_EQ(server_heard.load(), 4003 + 4004);
  });
  EXPECT_EQ(running.server().stats().total.closed_by(close_reason::error), 0u);
}

TEST(WebsocketClient, CloseWithACodeTheProtocolMayNotSendThrowsAndKeepsTheConnection) {
  running_server running(echo_server_options(), serve_echo);
  weft_test::run_clean([&] {
    websocket_client_options options;
    options.path = "/echo";
    auto made = connect_websocket("127.0.0.1", running.port(), options, weft::timeout(10s));
    auto& c = *made.connection;
    EXPECT_THROW(c.close(1005), std::invalid_argument);
    EXPECT_TRUE(c.is_open());
    c.send("still here", message_kind::text);
    auto back = c.receive(weft::timeout(10s));
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(back->data, "still here");
    c.close(websocket::normal_closure);
    c.wait_closed(weft::timeout(10s));
  });
}

}  // namespace

namespace {

// The server's side of close(code, reason): its close frame goes out behind the replies sent
// before it, unmasked, with the code and reason, and then the connection closes.
TEST(WebsocketServerClose, CloseWithACodeSendsTheCloseFrameAfterWhatWasSent) {
  running_server running(echo_server_options(), [](weft::net::tcp_server& server) {
    server.serve([](weft::net::connection& c) {
      weft::net::message m;
      while (c.receive(m)) {
        c.send(m.data, m.kind);
        if (m.data == "bye") {
          c.close(4003, "server-done");
          return;
        }
      }
    });
  });
  const int fd = net_test::connect_to(running.port());
  ASSERT_GE(fd, 0);
  net_test::send_all(fd, weft_ws_test::handshake_request({}, "/echo"));
  net_test::send_all(
      fd, weft_ws_test::client_frame(0x1, "first") + weft_ws_test::client_frame(0x1, "bye"));
  const std::string reply = net_test::read_to_end(fd);
  ::close(fd);
  const std::size_t head_end = reply.find("\r\n\r\n");
  ASSERT_NE(head_end, std::string::npos) << reply;
  const auto frames =
      weft_ws_test::parse_server_frames(std::string_view(reply).substr(head_end + 4));
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[0].payload, "first");
  EXPECT_EQ(frames[1].payload, "bye");
  EXPECT_EQ(frames[2].opcode, 0x8);
  EXPECT_EQ(weft_ws_test::close_code_of(frames[2]), 4003);
  EXPECT_EQ(frames[2].payload.substr(2), "server-done");
  ASSERT_TRUE(net_test::eventually(
      [&] { return running.server().stats().total.closed_by(close_reason::local) == 1; }));
}

}  // namespace

// TLS on the TCP server framework's connections (weft/net/tls.hpp): weft's own client, Python's
// ssl module, Node's ws and Go's gorilla/websocket (over wss) against a TLS server; refused
// certificates, names and ALPN protocols; a plaintext peer, a silent one, big streams through a
// small send buffer, file ranges, hibernation; the contexts' refusals of bad files.
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <string>

#include "net/net_support.hpp"
#include "net/tls_support.hpp"

namespace {

using namespace net_test;
using weft::net::close_reason;
using weft::net::connection;
using weft::net::tls_error;

weft::net::tcp_server_options tls_options(weft::net::tls_server_options tls = {}) {
  auto options = local_options();
  options.tls = tls_test::server_context(std::move(tls));
  return options;
}

weft::net::connection_options client_options(weft::net::tls_client_options tls = {}) {
  weft::net::connection_options options;
  options.protocol = weft::net::frame();
  options.tls = tls_test::client_context(std::move(tls));
  return options;
}

// Runs a shell command to its end; its standard output and error together.
std::pair<int, std::string> run_command(const std::string& command) {
  std::string output;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) {
    return {-1, "popen failed"};
  }
  std::array<char, 4096> chunk{};
  while (std::size_t got = std::fread(chunk.data(), 1, chunk.size(), pipe)) {
    output.append(chunk.data(), got);
  }
  const int status = ::pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

// A WebSocket echo at /echo over TLS (wss), and its handler: every message back as it came.
weft::net::tcp_server_options wss_echo_options() {
  auto options = local_options();
  options.tls = tls_test::server_context();
  weft::net::websocket_options ws;
  ws.path = "/echo";
  options.protocol = std::make_shared<weft::net::websocket>(ws);
  return options;
}

void serve_echo_keeping_kinds(weft::net::tcp_server& s) {
  s.serve([](connection& c) {
    while (auto m = c.receive()) {
      c.send(m->data, m->kind);
    }
  });
}

TEST(NetTls, FramesEchoInOrderAndBothEndsKnowTheSession) {
  weft::net::tls_server_options tls;
  tls.alpn = {"x-weft", "x-other"};
  auto options = tls_options(tls);
  options.protocol = weft::net::frame();
  std::atomic<bool> server_saw{false};
  running_server server(options, [&](weft::net::tcp_server& s) {
    s.serve([&](connection& c) {
      server_saw = c.secure() && c.tls_version() == "TLSv1.3" && c.alpn_protocol() == "x-weft";
      while (auto m = c.receive()) {
        c.send(m->data);
      }
    });
  });
  weft::net::tls_client_options client;
  client.alpn = {"x-other", "x-weft"};  // the server's preference decides
  weft::run([&] {
    auto c =
        weft::net::connect("127.0.0.1", server.port(), client_options(client), weft::timeout(5s));
    EXPECT_TRUE(c->secure());
    EXPECT_EQ(c->tls_version(), "TLSv1.3");
    EXPECT_EQ(c->alpn_protocol(), "x-weft");
    EXPECT_FALSE(c->tls_cipher().empty());
    std::string big(1 << 20, 'b');
    for (std::size_t i = 0; i < big.size(); ++i) {
      big[i] = static_cast<char>(i * 7 % 251);
    }
    const std::vector<std::string> sent = {"first", "", big, "last"};
    for (const std::string& payload : sent) {
      c->send(payload);
    }
    for (const std::string& payload : sent) {
      auto m = c->receive(weft::timeout(10s));
      ASSERT_TRUE(m.has_value());
      EXPECT_EQ(m->data, payload);
    }
    // On the wire: records, a little more than the plaintext each way.
    EXPECT_GT(c->counters().bytes_out, big.size());
    c->close();
    c->wait_closed(weft::timeout(5s));
  });
  EXPECT_TRUE(server_saw);
}

TEST(NetTls, ALargeStreamThroughASmallSendBufferArrivesWhole) {
  auto options = tls_options();
  options.send_buffer_limit = 128 * 1024;
  constexpr std::size_t total = 8u << 20;
  std::atomic<std::size_t> high{0};
  running_server server(options, [&](weft::net::tcp_server& s) {
    s.serve([&](connection& c) {
      small_send_buffer(c.native_handle());  // so that the send buffer fills
      if (!c.receive()) {                    // the client's go-ahead
        return;
      }
      std::string piece(32 * 1024, '\0');
      for (std::size_t at = 0; at < total; at += piece.size()) {
        for (std::size_t i = 0; i < piece.size(); ++i) {
          piece[i] = static_cast<char>((at + i) * 13 % 253);
        }
        c.send(piece);
      }
      high = c.counters().send_buffer_high;
    });
  });
  weft::run([&] {
    weft::net::connection_options raw = client_options();
    raw.protocol = nullptr;  // raw bytes: each read is a message
    auto c = weft::net::connect("localhost", server.port(), raw, weft::timeout(5s));
    c->send("go");
    std::size_t got = 0;
    bool same = true;
    while (auto m = c->receive(weft::timeout(20s))) {
      for (std::size_t i = 0; i < m->data.size() && same; ++i) {
        same = m->data[i] == static_cast<char>((got + i) * 13 % 253);
      }
      got += m->data.size();
    }
    EXPECT_EQ(got, total);
    EXPECT_TRUE(same) << "the bytes differ from what was sent";
    EXPECT_EQ(c->closed_by(), close_reason::peer);
  });
  // The limit, one send, and one encrypted piece (64 KiB of plaintext in records).
  EXPECT_LE(high.load(), options.send_buffer_limit + 32 * 1024 + 80 * 1024);
  EXPECT_GT(high.load(), 0u);
}

// Half-close over TLS: the client's close_notify and FIN end the server's input only, and the
// server's answer still comes back through the same session.
TEST(NetTls, AHalfClosedClientGetsItsAnswer) {
  auto options = tls_options();
  options.half_close = true;
  running_server server(options, [&](weft::net::tcp_server& s) {
    s.serve([&](connection& c) {
      std::uint64_t got = 0;
      while (auto m = c.receive()) {
        got += m->data.size();
      }
      EXPECT_TRUE(c.is_open());
      c.send("got " + std::to_string(got));
    });
  });
  weft::run([&] {
    weft::net::connection_options raw = client_options();
    raw.protocol = nullptr;
    raw.half_close = true;
    auto c = weft::net::connect("localhost", server.port(), raw, weft::timeout(5s));
    c->send(std::string(100000, 't'));
    c->shutdown_write();
    std::string answer;
    while (auto m = c->receive(weft::timeout(10s))) {
      answer += m->data;
    }
    EXPECT_EQ(answer, "got 100000");
    EXPECT_EQ(c->closed_by(), close_reason::peer);
  });
}

TEST(NetTls, FileRangesGoOutEncryptedInOrderWithMemorySends) {
  char name[] = "/tmp/weft-tls-file-XXXXXX";
  const int fd = ::mkstemp(name);
  ASSERT_GE(fd, 0);
  std::string content(300000, '\0');
  for (std::size_t i = 0; i < content.size(); ++i) {
    content[i] = static_cast<char>('a' + i % 26);
  }
  ASSERT_EQ(::write(fd, content.data(), content.size()), static_cast<ssize_t>(content.size()));
  std::string got;
  {  // the server stops before fd is closed: the fd is the handler's until then
    running_server server(tls_options(), [&](weft::net::tcp_server& s) {
      s.serve([&](connection& c) {
        if (!c.receive()) {
          return;
        }
        c.send("head:");
        c.send_file(fd, 7, 250000);
        c.send(":middle:");
        c.send_file(fd, 0, 100);
        c.send(":tail");
      });
    });
    weft::run([&] {
      weft::net::connection_options raw = client_options();
      raw.protocol = nullptr;
      auto c = weft::net::connect("127.0.0.1", server.port(), raw, weft::timeout(5s));
      c->send("go");
      while (auto m = c->receive(weft::timeout(10s))) {
        got += m->data;
      }
    });
  }
  ::close(fd);
  ::unlink(name);
  EXPECT_EQ(got,
            "head:" + content.substr(7, 250000) + ":middle:" + content.substr(0, 100) + ":tail");
}

TEST(NetTls, AClientRefusesAnAuthorityItDoesNotTrustAndTheHandlerNeverRuns) {
  log_lines log;
  auto options = tls_options();
  options.log = log.sink();
  std::atomic<int> handled{0};
  running_server server(
      options, [&](weft::net::tcp_server& s) { s.serve([&](connection&) { ++handled; }); });
  weft::net::tls_client_options other;
  other.ca_file = tls_test::certs().other_ca;
  weft::run([&] {
    try {
      weft::net::connect("127.0.0.1", server.port(), client_options(other), weft::timeout(5s));
      ADD_FAILURE() << "connected to a server whose authority the client does not trust";
    } catch (const tls_error& refused) {
      EXPECT_NE(std::string(refused.what()).find("certificate verify failed"), std::string::npos)
          << refused.what();
      EXPECT_NE(std::string(refused.what()).find("127.0.0.1:"), std::string::npos)
          << refused.what();
    }
  });
  EXPECT_TRUE(eventually([&] {
    return server.server().stats().total.closed_by(close_reason::protocol_error) == 1;
  })) << log.all();
  EXPECT_TRUE(log.contains("TLS handshake failed")) << log.all();
  EXPECT_EQ(handled.load(), 0);
}

TEST(NetTls, AClientRefusesACertificateForAnotherName) {
  running_server server(tls_options(),
                        [&](weft::net::tcp_server& s) { s.serve([&](connection&) {}); });
  weft::net::tls_client_options named;
  named.server_name = "example.com";
  weft::run([&] {
    try {
      weft::net::connect("127.0.0.1", server.port(), client_options(named), weft::timeout(5s));
      ADD_FAILURE() << "connected to a server whose certificate names another host";
    } catch (const tls_error& refused) {
      EXPECT_NE(std::string(refused.what()).find("hostname mismatch"), std::string::npos)
          << refused.what();
    }
    // Without verification (a test's choice, never a default) the same server is reached.
    weft::net::tls_client_options unchecked;
    unchecked.verify = false;
    unchecked.server_name = "example.com";
    auto c = weft::net::connect("127.0.0.1", server.port(), client_options(unchecked),
                                weft::timeout(5s));
    EXPECT_TRUE(c->secure());
    c->close();
  });
}

TEST(NetTls, OnlyAProtocolBothSidesOfferIsAgreed) {
  weft::net::tls_server_options tls;
  tls.alpn = {"http/1.1"};
  running_server server(tls_options(tls),
                        [&](weft::net::tcp_server& s) { s.serve([&](connection&) {}); });
  weft::net::tls_client_options h2_only;
  h2_only.alpn = {"h2"};
  weft::run([&] {
    try {
      weft::net::connect("127.0.0.1", server.port(), client_options(h2_only), weft::timeout(5s));
      ADD_FAILURE() << "agreed on a protocol the server does not speak";
    } catch (const tls_error& refused) {
      EXPECT_NE(std::string(refused.what()).find("no application protocol"), std::string::npos)
          << refused.what();
    }
    // A client that offers no ALPN at all is served (ALPN is the client's option).
    auto c = weft::net::connect("127.0.0.1", server.port(), client_options(), weft::timeout(5s));
    EXPECT_EQ(c->alpn_protocol(), "");
    c->close();
  });
}

TEST(NetTls, APlaintextPeerGetsTheReplyAndIsClosedUnserved) {
  log_lines log;
  weft::net::tls_server_options tls;
  tls.plaintext_reply =
      "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
  auto options = tls_options(tls);
  options.log = log.sink();
  std::atomic<int> handled{0};
  running_server server(
      options, [&](weft::net::tcp_server& s) { s.serve([&](connection&) { ++handled; }); });
  const int fd = connect_to(server.port());
  send_all(fd, "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
  EXPECT_EQ(read_to_end(fd), tls.plaintext_reply);
  ::close(fd);
  EXPECT_TRUE(eventually(
      [&] { return server.server().stats().total.closed_by(close_reason::protocol_error) == 1; }));
  EXPECT_TRUE(log.contains("does not speak TLS (its first byte is 0x47")) << log.all();
  EXPECT_EQ(handled.load(), 0);
}

TEST(NetTls, ASilentPeerIsCutAtTheHandshakeTimeoutWhileOthersAreServed) {
  auto options = tls_options();
  options.protocol = weft::net::frame();
  options.handshake_timeout = 300ms;
  running_server server(options, [&](weft::net::tcp_server& s) {
    s.serve([&](connection& c) {
      while (auto m = c.receive()) {
        c.send(m->data);
      }
    });
  });
  const auto started = std::chrono::steady_clock::now();
  const int slow = connect_to(server.port());
  send_all(slow, std::string("\x16\x03\x01\x02\x00", 5));  // a record header, then nothing
  weft::run([&] {
    auto c = weft::net::connect("127.0.0.1", server.port(), client_options(), weft::timeout(5s));
    c->send("served");
    auto m = c->receive(weft::timeout(5s));
    ASSERT_TRUE(m.has_value());
    EXPECT_EQ(m->data, "served");
    c->close();
  });
  EXPECT_EQ(read_to_end(slow), "");
  EXPECT_GE(std::chrono::steady_clock::now() - started, 250ms);
  ::close(slow);
  EXPECT_TRUE(eventually([&] {
    return server.server().stats().total.closed_by(close_reason::handshake_timeout) == 1;
  }));
}

TEST(NetTls, CallbackStyleDecryptsWhatArrivedTogetherBeforeHibernating) {
  auto options = tls_options();
  options.protocol = weft::net::frame();
  options.hibernate_above = 0;  // every connection hibernates between messages
  running_server server(options, [&](weft::net::tcp_server& s) {
    weft::net::connection_events events;
    events.on_message = [](connection& c, weft::net::message& m) { c.send(m.data); };
    s.serve(events);
  });
  weft::run([&] {
    weft::net::connection_options raw = client_options();
    raw.protocol = nullptr;
    auto c = weft::net::connect("127.0.0.1", server.port(), raw, weft::timeout(5s));
    // Fifty frames in one send: one TLS write, records the server decrypts in one read.
    std::string batch;
    std::string expected;
    for (int i = 0; i < 50; ++i) {
      batch += frame_of("message " + std::to_string(i));
    }
    c->send(batch);
    std::string got;
    while (got.size() < batch.size()) {
      auto m = c->receive(weft::timeout(5s));
      ASSERT_TRUE(m.has_value()) << got.size() << " of " << batch.size();
      got += m->data;
    }
    EXPECT_EQ(got, batch);
    c->close();
  });
}

TEST(NetTls, PythonsSslClientEchoesLinesOverTls12And13AndSeesCloseNotify) {
  auto options = tls_options();
  options.protocol = weft::net::text();
  running_server server(options, [&](weft::net::tcp_server& s) {
    s.serve([&](connection& c) {
      while (auto m = c.receive()) {
        c.send(m->data);
        if (m->data == "bye") {
          return;  // the graceful close: close_notify after the echo
        }
      }
    });
  });
  const std::string script = std::string(WEFT_TEST_SOURCE_DIR) + "/net/clients/tls_client.py";
  for (const char* version : {"1.2", "1.3"}) {
    SCOPED_TRACE(version);
    auto [status, output] = run_command("python3 " + script + " " + std::to_string(server.port()) +
                                        " " + tls_test::certs().ca + " " + version);
    EXPECT_EQ(status, 0) << output;
    EXPECT_EQ(output.rfind(std::string("ok TLSv") + version, 0), 0u) << output;
  }
}

TEST(NetTls, WebsocketOverTlsPassesNodeWsAndGorillaSessions) {
  running_server server(wss_echo_options(), serve_echo_keeping_kinds);
  const std::string url = "wss://localhost:" + std::to_string(server.port()) + "/echo";
  {
    ASSERT_EQ(::access("/usr/share/nodejs/ws/package.json", R_OK), 0)
        << "Node's ws package is missing: install node-ws (scripts/install-deps)";
    auto [status, output] = run_command(
        "NODE_PATH=/usr/share/nodejs NODE_EXTRA_CA_CERTS=" + tls_test::certs().ca + " node " +
        std::string(WEFT_TEST_SOURCE_DIR) + "/net/clients/ws_client.js " + url);
    EXPECT_EQ(status, 0) << output;
    EXPECT_NE(output.find("ok 1MiB"), std::string::npos) << output;
    EXPECT_NE(output.find("ok close"), std::string::npos) << output;
  }
  {
    ASSERT_EQ(::access(WEFT_TEST_WS_CLIENT_GO, X_OK), 0)
        << "the gorilla/websocket client was not built (scripts/install-deps, then cmake)";
    // Go reads its trusted authorities from SSL_CERT_FILE.
    auto [status, output] = run_command("SSL_CERT_FILE=" + tls_test::certs().ca + " " +
                                        WEFT_TEST_WS_CLIENT_GO + " " + url);
    EXPECT_EQ(status, 0) << output;
    EXPECT_NE(output.find("ok 1MiB"), std::string::npos) << output;
    EXPECT_NE(output.find("ok close"), std::string::npos) << output;
  }
}

// weft's own WebSocket client over TLS (wss): connect_websocket with a client context in its
// connection options, against the same server.
TEST(NetTls, ConnectWebsocketSpeaksWssWithTheConnectionsContext) {
  running_server server(wss_echo_options(), serve_echo_keeping_kinds);
  weft::run([&] {
    weft::net::websocket_client_options client;
    client.path = "/echo";
    client.connection.tls = tls_test::client_context();
    auto made = weft::net::connect_websocket("localhost", server.port(), client, weft::timeout(5s));
    ASSERT_TRUE(made.connection->secure());
    made.connection->send("over wss", weft::net::message_kind::text);
    auto m = made.connection->receive(weft::timeout(5s));
    ASSERT_TRUE(m.has_value());
    EXPECT_EQ(m->data, "over wss");
    EXPECT_EQ(m->kind, weft::net::message_kind::text);
    // The closing handshake through TLS: the server's answering close frame is decrypted and
    // kept, and the server ends the connection first.
    made.connection->close(4005, "wss-bye");
    made.connection->wait_closed(weft::timeout(5s));
    EXPECT_EQ(made.connection->closed_by(), weft::net::close_reason::local);
    ASSERT_NE(made.connection->peer_close(), nullptr);
    EXPECT_EQ(made.connection->peer_close()->code, 4005);
    EXPECT_EQ(made.connection->peer_close()->reason, "wss-bye");
  });
  ASSERT_TRUE(net_test::eventually(
      [&] { return server.server().stats().total.closed_by(weft::net::close_reason::peer) == 1; }));
  EXPECT_EQ(server.server().stats().total.closed_by(weft::net::close_reason::error), 0u);
}

// One context serves every worker: OpenSSL's context is shared by their threads (and by the
// sessions of the clients here, all of one context), each connection's session is its thread's.
TEST(NetTls, TwoWorkersShareOneContextUnderConcurrentHandshakes) {
  auto options = tls_options();
  options.protocol = weft::net::frame();
  options.workers = 2;
  running_server server(options, [&](weft::net::tcp_server& s) {
    s.serve([](connection& c) {
      while (auto m = c.receive()) {
        c.send(m->data);
      }
    });
  });
  constexpr int clients = 40;
  const weft::net::connection_options shared = client_options();  // one client context too
  std::atomic<int> echoed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      weft::run([&] {
        std::vector<weft::task<void>> running;
        for (int i = 0; i < clients / 2; ++i) {
          running.push_back(weft::spawn([&, i] {
            if (echoes(server.port(), shared,
                       "client " + std::to_string(t) + "/" + std::to_string(i))) {
              ++echoed;
            }
          }));
        }
        for (auto& task : running) {
          task.await();
        }
      });
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(echoed.load(), clients);
  EXPECT_TRUE(eventually([&] {
    return server.server().stats().total.closed_by(close_reason::peer) +
               server.server().stats().total.closed_by(close_reason::local) ==
           static_cast<std::uint64_t>(clients);
  }));
}

// Mutual TLS: a server that requires a client certificate names the subject of the one it
// verified; a client without one is refused by an alert (in TLS 1.3 after its own side of the
// handshake: its first read ends), and never reaches the handler.
TEST(NetTls, MutualTlsNamesTheClientAndRefusesOneWithoutACertificate) {
  weft::net::tls_server_options tls;
  tls.client_ca_file = tls_test::certs().ca;
  tls.require_client_certificate = true;
  auto options = tls_options(tls);
  options.protocol = weft::net::frame();
  std::atomic<int> handled{0};
  running_server server(options, [&](weft::net::tcp_server& s) {
    s.serve([&](connection& c) {
      ++handled;
      while (auto m = c.receive()) {
        c.send(c.peer_certificate());
      }
    });
  });
  weft::run([&] {
    weft::net::tls_client_options with;
    with.certificate_file = tls_test::certs().client_cert;
    with.private_key_file = tls_test::certs().client_key;
    auto c =
        weft::net::connect("127.0.0.1", server.port(), client_options(with), weft::timeout(5s));
    c->send("who am I");
    auto m = c->receive(weft::timeout(5s));
    ASSERT_TRUE(m.has_value());
    EXPECT_EQ(m->data, "CN=weft test client");
    EXPECT_EQ(c->peer_certificate(), "CN=localhost");  // the server's, as the client verified it
    c->close();

    bool refused = false;
    try {
      auto without =
          weft::net::connect("127.0.0.1", server.port(), client_options(), weft::timeout(5s));
      without->send("no certificate");
      refused = !without->receive(weft::timeout(5s)).has_value() &&
                without->closed_by() == close_reason::protocol_error;
    } catch (const tls_error& failure) {
      refused = std::string(failure.what()).find("certificate required") != std::string::npos;
    }
    EXPECT_TRUE(refused);
  });
  EXPECT_TRUE(eventually(
      [&] { return server.server().stats().total.closed_by(close_reason::protocol_error) == 1; }));
  EXPECT_EQ(handled.load(), 1);
}

TEST(NetTls, ContextsRefuseBadFilesAndMisuseByName) {
  using weft::net::tls_context;
  weft::net::tls_server_options missing;
  missing.certificate_file = "/nonexistent/cert.pem";
  missing.private_key_file = tls_test::certs().key;
  try {
    tls_context::server(missing);
    ADD_FAILURE() << "a missing certificate file was accepted";
  } catch (const tls_error& refused) {
    EXPECT_NE(std::string(refused.what()).find("/nonexistent/cert.pem"), std::string::npos)
        << refused.what();
  }
  weft::net::tls_server_options mismatched;
  mismatched.certificate_file = tls_test::certs().cert;
  mismatched.private_key_file = tls_test::certs().dir + "/other_ca.key";
  try {
    tls_context::server(mismatched);
    ADD_FAILURE() << "a key of another certificate was accepted";
  } catch (const tls_error& refused) {
    EXPECT_NE(std::string(refused.what()).find("key values mismatch"), std::string::npos)
        << refused.what();
  }
  EXPECT_THROW(tls_context::server({}), std::invalid_argument);
  weft::net::tls_server_options empty_alpn;
  empty_alpn.certificate_file = tls_test::certs().cert;
  empty_alpn.private_key_file = tls_test::certs().key;
  empty_alpn.alpn = {""};
  EXPECT_THROW(tls_context::server(empty_alpn), std::invalid_argument);
  weft::net::tls_client_options no_ca;
  no_ca.ca_file = "/nonexistent/ca.pem";
  EXPECT_THROW(tls_context::client(no_ca), tls_error);
  weft::net::tls_client_options half;
  half.certificate_file = tls_test::certs().client_cert;
  EXPECT_THROW(tls_context::client(half), std::invalid_argument);
  weft::net::tls_server_options no_client_ca;
  no_client_ca.certificate_file = tls_test::certs().cert;
  no_client_ca.private_key_file = tls_test::certs().key;
  no_client_ca.require_client_certificate = true;
  EXPECT_THROW(tls_context::server(no_client_ca), std::invalid_argument);
  // A side's context on the other side's API.
  auto options = local_options();
  options.tls = tls_test::client_context();
  EXPECT_THROW(weft::net::tcp_server{options}, std::invalid_argument);
  weft::run([&] {
    weft::net::connection_options wrong;
    wrong.tls = tls_test::server_context();
    EXPECT_THROW(weft::net::connect("127.0.0.1", 1, wrong), std::invalid_argument);
  });
}

}  // namespace

// TLS contexts over a server's life (weft/net/tls.hpp): certificates chosen by the name a client
// sends (SNI, tls_server_options::more_certificates), a context replaced on a running server
// (tcp_server::set_tls) while its open connections keep theirs, and sessions a client resumes
// (tls_client_options::resume_sessions), seen from both ends.
#include <atomic>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "net/net_support.hpp"
#include "net/tls_support.hpp"

namespace {

using namespace net_test;
using weft::net::connection;
using weft::net::tls_error;

// What a server's handler saw of each connection's session.
struct seen_session {
  std::string server_name;
  bool resumed = false;
};

class session_log {
 public:
  void add(const connection& c) {
    std::lock_guard lock(mutex_);
    sessions_.push_back({c.tls_server_name(), c.tls_resumed()});
  }
  std::vector<seen_session> all() {
    std::lock_guard lock(mutex_);
    return sessions_;
  }
  std::size_t size() {
    std::lock_guard lock(mutex_);
    return sessions_.size();
  }

 private:
  std::mutex mutex_;
  std::vector<seen_session> sessions_;
};

// A frame echo over TLS that logs each connection's session before echoing.
void serve_logged_echo(weft::net::tcp_server& s, session_log& log) {
  s.serve([&](connection& c) {
    log.add(c);
    while (auto m = c.receive()) {
      c.send(m->data);
    }
  });
}

weft::net::tcp_server_options echo_options(std::shared_ptr<const weft::net::tls_context> tls) {
  auto options = local_options();
  options.protocol = weft::net::frame();
  options.tls = std::move(tls);
  return options;
}

weft::net::connection_options with_context(std::shared_ptr<const weft::net::tls_context> tls) {
  weft::net::connection_options options;
  options.protocol = weft::net::frame();
  options.tls = std::move(tls);
  return options;
}

// One round trip on c, then a graceful close: a TLS 1.3 client has its tickets once it read.
void echo_once_and_close(connection& c, const std::string& text) {
  c.send(text);
  auto m = c.receive(weft::timeout(5s));
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->data, text);
  c.close();
  c.wait_closed(weft::timeout(5s));
}

std::string refusal(std::uint16_t port, const weft::net::connection_options& options) {
  try {
    weft::net::connect("127.0.0.1", port, options, weft::timeout(5s));
  } catch (const tls_error& refused) {
    return refused.what();
  }
  return "connected";
}

std::shared_ptr<const weft::net::tls_context> virtual_hosts() {
  const auto& files = tls_test::certs();
  weft::net::tls_server_options tls;
  tls.more_certificates = {{files.wild_cert, files.wild_key}, {files.named_cert, files.named_key}};
  return tls_test::server_context(tls);
}

TEST(NetTlsHosts, TheNameAClientSendsPicksTheCertificateThatCoversIt) {
  session_log seen;
  running_server server(echo_options(virtual_hosts()),
                        [&](weft::net::tcp_server& s) { serve_logged_echo(s, seen); });
  weft::run([&] {
    // name sent -> the subject of the certificate the client verified
    const std::vector<std::pair<std::string, std::string>> served = {
        {"other.example", "CN=other.example"},
        {"a.wild.example", "CN=wild.example"},  // the wildcard covers one label
        {"localhost", "CN=localhost"},
        {"", "CN=localhost"},  // 127.0.0.1: an address, sent in no SNI
    };
    for (const auto& [name, subject] : served) {
      weft::net::tls_client_options tls;
      tls.server_name = name;
      auto c = weft::net::connect("127.0.0.1", server.port(),
                                  with_context(tls_test::client_context(tls)), weft::timeout(5s));
      EXPECT_EQ(c->peer_certificate(), subject) << name;
      EXPECT_EQ(c->tls_server_name(), name);
      echo_once_and_close(*c, "to " + name);
    }
    // Names no extra chain covers get the first chain, which does not name them either: the
    // client refuses it, as it must.
    for (const std::string name : {"unknown.example", "deep.a.wild.example", "wild.example"}) {
      weft::net::tls_client_options tls;
      tls.server_name = name;
      const std::string why = refusal(server.port(), with_context(tls_test::client_context(tls)));
      EXPECT_NE(why.find("hostname mismatch"), std::string::npos) << name << ": " << why;
    }
  });
  const auto sessions = seen.all();
  ASSERT_EQ(sessions.size(), 4u);
  EXPECT_EQ(sessions[0].server_name, "other.example");
  EXPECT_EQ(sessions[1].server_name, "a.wild.example");
  EXPECT_EQ(sessions[2].server_name, "localhost");
  EXPECT_EQ(sessions[3].server_name, "");
}

TEST(NetTlsHosts, AnExactNameWinsOverAWildcardListedBeforeIt) {
  // exact.wild.example: the wildcard chain (listed first) covers it, and the "named" chain names
  // it exactly; the exact one is served. Its neighbour b.wild.example gets the wildcard.
  running_server server(echo_options(virtual_hosts()),
                        [&](weft::net::tcp_server& s) { s.serve([](connection&) {}); });
  weft::run([&] {
    for (const auto& [name, subject] : std::vector<std::pair<std::string, std::string>>{
             {"exact.wild.example", "CN=other.example"}, {"b.wild.example", "CN=wild.example"}}) {
      weft::net::tls_client_options client;
      client.server_name = name;
      auto c =
          weft::net::connect("127.0.0.1", server.port(),
                             with_context(tls_test::client_context(client)), weft::timeout(5s));
      EXPECT_EQ(c->peer_certificate(), subject) << name;
      c->close();
    }
  });
}

TEST(NetTlsHosts, ASessionResumesWithTheChainItsNamePicked) {
  session_log seen;
  running_server server(echo_options(virtual_hosts()),
                        [&](weft::net::tcp_server& s) { serve_logged_echo(s, seen); });
  weft::net::tls_client_options tls;
  tls.server_name = "other.example";
  const auto client = with_context(tls_test::client_context(tls));
  std::vector<bool> resumed;
  weft::run([&] {
    for (int i = 0; i < 2; ++i) {
      auto c = weft::net::connect("127.0.0.1", server.port(), client, weft::timeout(5s));
      resumed.push_back(c->tls_resumed());
      EXPECT_EQ(c->tls_server_name(), "other.example");
      echo_once_and_close(*c, "named " + std::to_string(i));
    }
  });
  EXPECT_EQ(resumed, (std::vector<bool>{false, true}));
  const auto sessions = seen.all();
  ASSERT_EQ(sessions.size(), 2u);
  EXPECT_EQ(sessions[1].server_name, "other.example");
  EXPECT_TRUE(sessions[1].resumed);
}

TEST(NetTlsHosts, ABadExtraChainIsRefusedByName) {
  const auto& files = tls_test::certs();
  weft::net::tls_server_options missing_key;
  missing_key.more_certificates = {{files.named_cert, ""}};
  EXPECT_THROW(tls_test::server_context(missing_key), std::invalid_argument);
  weft::net::tls_server_options absent;
  absent.more_certificates = {{files.dir + "/absent.pem", files.named_key}};
  try {
    tls_test::server_context(absent);
    ADD_FAILURE() << "a chain that does not exist was accepted";
  } catch (const tls_error& refused) {
    EXPECT_NE(std::string(refused.what()).find("absent.pem"), std::string::npos) << refused.what();
  }
  weft::net::tls_server_options mismatched;
  mismatched.more_certificates = {{files.named_cert, files.wild_key}};
  EXPECT_THROW(tls_test::server_context(mismatched), tls_error);
}

TEST(NetTlsHosts, SetTlsServesNewConnectionsWithTheNewCertificateAndKeepsOpenOnes) {
  const auto& files = tls_test::certs();
  auto options = echo_options(tls_test::server_context());
  options.workers = 2;  // both workers take the new context
  session_log seen;
  running_server server(options, [&](weft::net::tcp_server& s) { serve_logged_echo(s, seen); });
  const auto trusts_ca = with_context(tls_test::client_context());
  weft::net::tls_client_options other;
  other.ca_file = files.other_ca;
  const auto trusts_other = with_context(tls_test::client_context(other));
  weft::run([&] {
    auto before = weft::net::connect("127.0.0.1", server.port(), trusts_ca, weft::timeout(5s));
    before->send("before");
    ASSERT_EQ(before->receive(weft::timeout(5s))->data, "before");

    weft::net::tls_server_options renewed;
    renewed.certificate_file = files.renewed_cert;
    renewed.private_key_file = files.renewed_key;
    auto next = weft::net::tls_context::server(renewed);
    server.server().set_tls(next);
    EXPECT_EQ(server.server().tls(), next);

    for (int i = 0; i < 8; ++i) {  // enough to land on both workers
      const std::string why = refusal(server.port(), trusts_ca);
      EXPECT_NE(why.find("certificate verify failed"), std::string::npos) << why;
      auto c = weft::net::connect("127.0.0.1", server.port(), trusts_other, weft::timeout(5s));
      echo_once_and_close(*c, "after " + std::to_string(i));
    }
    // The connection made before keeps its session and certificate.
    before->send("still here");
    auto m = before->receive(weft::timeout(5s));
    ASSERT_TRUE(m.has_value());
    EXPECT_EQ(m->data, "still here");
    before->close();
    before->wait_closed(weft::timeout(5s));
  });
  EXPECT_GE(server.server().stats().workers[0].accepted, 1u);
  EXPECT_GE(server.server().stats().workers[1].accepted, 1u);
}

TEST(NetTlsHosts, SetTlsRefusesMisuseByName) {
  running_server tls_server(echo_options(tls_test::server_context()),
                            [&](weft::net::tcp_server& s) { s.serve([](connection&) {}); });
  EXPECT_THROW(tls_server.server().set_tls(nullptr), std::invalid_argument);
  try {
    tls_server.server().set_tls(tls_test::client_context());
    ADD_FAILURE() << "a client's context was taken by a server";
  } catch (const std::invalid_argument& refused) {
    EXPECT_NE(std::string(refused.what()).find("client"), std::string::npos) << refused.what();
  }
  running_server plain(local_options(),
                       [&](weft::net::tcp_server& s) { s.serve([](connection&) {}); });
  EXPECT_THROW(plain.server().set_tls(tls_test::server_context()), std::logic_error);
  EXPECT_EQ(plain.server().tls(), nullptr);
}

TEST(NetTlsHosts, AClientResumesItsSessionOnEveryNextConnection) {
  session_log seen;
  running_server server(echo_options(tls_test::server_context()),
                        [&](weft::net::tcp_server& s) { serve_logged_echo(s, seen); });
  const auto resuming = with_context(tls_test::client_context());
  weft::net::tls_client_options fresh;
  fresh.resume_sessions = false;
  const auto never = with_context(tls_test::client_context(fresh));
  std::vector<bool> client_saw;
  weft::run([&] {
    for (int i = 0; i < 3; ++i) {
      auto c = weft::net::connect("127.0.0.1", server.port(), resuming, weft::timeout(5s));
      client_saw.push_back(c->tls_resumed());
      EXPECT_EQ(c->peer_certificate(), "CN=localhost");  // what the session was verified for
      echo_once_and_close(*c, "resuming " + std::to_string(i));
    }
    for (int i = 0; i < 2; ++i) {
      auto c = weft::net::connect("127.0.0.1", server.port(), never, weft::timeout(5s));
      client_saw.push_back(c->tls_resumed());
      echo_once_and_close(*c, "never " + std::to_string(i));
    }
  });
  EXPECT_EQ(client_saw, (std::vector<bool>{false, true, true, false, false}));
  const auto sessions = seen.all();
  ASSERT_EQ(sessions.size(), 5u);
  for (std::size_t i = 0; i < sessions.size(); ++i) {
    EXPECT_EQ(sessions[i].resumed, client_saw[i]) << i;
  }
}

TEST(NetTlsHosts, ASessionIsOfferedOnlyForTheNameItWasVerifiedFor) {
  running_server server(echo_options(tls_test::server_context()), [&](weft::net::tcp_server& s) {
    s.serve([](connection& c) {
      while (auto m = c.receive()) {
        c.send(m->data);
      }
    });
  });
  // One context, connected as "localhost" and as 127.0.0.1: the certificate covers both, but
  // each name resumes only its own session.
  const auto client = tls_test::client_context();
  std::vector<bool> resumed;
  weft::run([&] {
    for (const char* host : {"localhost", "127.0.0.1", "localhost", "127.0.0.1"}) {
      auto c = weft::net::connect(host, server.port(), with_context(client), weft::timeout(5s));
      resumed.push_back(c->tls_resumed());
      echo_once_and_close(*c, host);
    }
  });
  EXPECT_EQ(resumed, (std::vector<bool>{false, false, true, true}));
}

TEST(NetTlsHosts, AfterSetTlsAKeptSessionGivesWayToAFullHandshake) {
  session_log seen;
  running_server server(echo_options(tls_test::server_context()),
                        [&](weft::net::tcp_server& s) { serve_logged_echo(s, seen); });
  const auto client = with_context(tls_test::client_context());
  std::vector<bool> resumed;
  weft::run([&] {
    auto connect_once = [&](const std::string& text) {
      auto c = weft::net::connect("127.0.0.1", server.port(), client, weft::timeout(5s));
      resumed.push_back(c->tls_resumed());
      echo_once_and_close(*c, text);
    };
    connect_once("first");
    connect_once("resumed");
    // The same files again (a reload): a new context, new ticket keys. The client's kept
    // ticket cannot be read there; the handshake falls back to a full one and succeeds.
    server.server().set_tls(tls_test::server_context());
    connect_once("full again");
    connect_once("resumed again");
  });
  EXPECT_EQ(resumed, (std::vector<bool>{false, true, false, true}));
  EXPECT_EQ(seen.size(), 4u);
}

// set_tls from one thread while two client threads connect through one client context (its
// session cache shared) to a two-worker server: every connection is served, by one context or
// the other, whichever a worker had when it accepted. Run under TSan too (make tsan).
TEST(NetTlsHosts, ContextsSwappedUnderConcurrentHandshakesServeEveryClient) {
  auto options = echo_options(tls_test::server_context());
  options.workers = 2;
  session_log seen;
  running_server server(options, [&](weft::net::tcp_server& s) { serve_logged_echo(s, seen); });
  const std::vector<std::shared_ptr<const weft::net::tls_context>> contexts = {
      tls_test::server_context(), tls_test::server_context()};
  const auto client = with_context(tls_test::client_context());
  constexpr int per_thread = 30;
  std::atomic<int> echoed{0};
  std::atomic<bool> done{false};
  std::thread swapper([&] {
    for (std::size_t i = 0; !done.load(std::memory_order_relaxed); ++i) {
      server.server().set_tls(contexts[i % contexts.size()]);
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> clients;
  for (int t = 0; t < 2; ++t) {
    clients.emplace_back([&, t] {
      weft::run([&] {
        for (int i = 0; i < per_thread; ++i) {
          if (echoes(server.port(), client, std::to_string(t) + "/" + std::to_string(i))) {
            ++echoed;
          }
        }
      });
    });
  }
  for (std::thread& thread : clients) {
    thread.join();
  }
  done = true;
  swapper.join();
  EXPECT_EQ(echoed.load(), 2 * per_thread);
  EXPECT_EQ(seen.size(), static_cast<std::size_t>(2 * per_thread));
}

}  // namespace

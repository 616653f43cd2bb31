// weft::net TLS: connections of the TCP server framework (and of net::connect) encrypted with TLS
// 1.2 or 1.3, through OpenSSL (Debian's libssl3).
//
// A tls_context holds what every connection of one side shares: the certificate and key (a
// server), the trusted authorities (a client), the versions and the ALPN protocols. It is
// immutable once made and thread-safe: one context serves every worker of a server, and their
// connections resume each other's sessions (TLS 1.3 tickets are stateless: no session cache and
// no lock between workers). Made on any thread; making one reads files and may block.
//
// A connection with a context (tcp_server_options::tls, connection_options::tls) speaks TLS over
// the same engine as a plain one: its protocol, send buffer, limits, timeouts, hibernation and
// graceful close are the same, and everything it is handed or sends is plaintext. What changes:
//   - The handshake comes first. A server's connection completes it before on_connect and the
//     handler see the connection, within handshake_timeout (close_reason::handshake_timeout),
//     and a failed one (bad record, no shared version or cipher, an unknown ALPN protocol) is
//     closed and logged (close_reason::protocol_error) and never reaches the handler. A peer
//     that speaks plaintext to a TLS port gets the context's plaintext_reply, if it has one
//     (weft::http's server answers "400 Bad Request: plain HTTP to an HTTPS port", as nginx
//     and Go do). net::connect returns once the handshake is done, or throws tls_error naming
//     why the peer was refused ("certificate verify failed: self-signed certificate").
//   - Bytes are encrypted in order when they are written, so a send_file range goes through
//     memory (read in 64 KiB pieces, as it is sent) instead of sendfile(2).
//   - counters().bytes_in and bytes_out count the bytes on the wire (records), not plaintext.
//   - A graceful close sends close_notify before its FIN; a peer's close_notify ends the input
//     as a FIN does. A FIN without close_notify also ends it (most HTTPS peers send none), and
//     a message cut short by it is logged as dropped, as on a plain connection.
// Renegotiation is refused (TLS 1.2 clients asking for it get a no_renegotiation alert).
// A running server takes a new context for the connections it accepts next (tcp_server::set_tls,
// http::server::set_tls): a renewed certificate without a restart, as nginx's reload.
// Mutual TLS: a server with client_ca_file verifies the certificates clients present (in TLS
// 1.3 the client finishes its side of the handshake first, so a client the server refuses
// learns it from an alert on its first read: its connection closes as protocol_error).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "weft/error.hpp"

namespace weft::net {

// A context that cannot be made (a file that does not load, a key that does not match its
// certificate, a bad option) or a client handshake that failed; the message names the file or
// the peer and says why, in OpenSSL's words.
class tls_error : public error {
 public:
  using error::error;
};

// The lowest TLS version a context accepts.
enum class tls_version : unsigned char { tls1_2, tls1_3 };

// A certificate chain and its private key, both PEM files (the key unencrypted): the server's
// own certificate first in the chain, then the intermediates.
struct tls_certificate {
  std::string certificate_file{};  // the chain, the server's own certificate first
  std::string private_key_file{};  // the key of certificate_file
};

// A server's settings.
struct tls_server_options {
  // PEM files: the certificate chain (the server's own certificate first, then the
  // intermediates) and its private key (unencrypted). Both are required.
  std::string certificate_file{};
  std::string private_key_file{};
  // Virtual hosting: more chains, one chosen per connection by the host name the client sends
  // (SNI). A chain is a candidate when its certificate is valid for that name (its DNS
  // subjectAltNames, or its common name without them; OpenSSL's X509_check_host). A candidate
  // naming it exactly wins over one covering it with a wildcard ("*.example.com"), then the
  // order decides, certificate_file's chain first. A client that sends no name, or one that
  // no chain covers, gets certificate_file's. connection::tls_server_name() is the name sent.
  std::vector<tls_certificate> more_certificates{};
  tls_version min_version = tls_version::tls1_2;  // the lowest version accepted
  // The ALPN protocols the server speaks ("http/1.1"), in its order of preference; a client
  // offering ALPN with none of them is refused (no_application_protocol, RFC 7301). Empty: no
  // ALPN (a client's offer is ignored).
  std::vector<std::string> alpn{};
  // TLS 1.2 cipher suites in OpenSSL's syntax ("" keeps OpenSSL's default, which has no
  // suite without forward secrecy or with CBC-SHA1 at security level 2).
  std::string ciphers{};
  // Written as it is, before the close, to a peer whose first bytes are not a TLS record (a
  // plaintext request on a TLS port). Empty: the connection is only closed.
  std::string plaintext_reply{};
  // Mutual TLS: a PEM file of the authorities whose certificates clients may present. A client
  // that presents one they did not sign is refused in the handshake; connection::
  // peer_certificate() names the subject of one that was verified. Empty: clients are not
  // asked for a certificate.
  std::string client_ca_file{};
  // With client_ca_file: a client without a certificate is refused (certificate_required)
  // instead of served without one.
  bool require_client_certificate = false;
};

// A client's settings.
struct tls_client_options {
  // Verify the server's certificate chain and its name (the name the client connects to, or
  // server_name). Off only for tests against a server without a real certificate.
  bool verify = true;
  // PEM file of the authorities to trust; "" uses the system's (/etc/ssl/certs).
  std::string ca_file{};
  // The name sent in SNI and verified against the certificate; "" uses the host passed to
  // net::connect (an IP address is then verified as one, and no SNI is sent for it).
  std::string server_name{};
  tls_version min_version = tls_version::tls1_2;  // the lowest version accepted
  std::vector<std::string> alpn{};  // offered in this order; the server's pick: alpn_protocol()
  // Mutual TLS: the client's own certificate chain and key (PEM), sent to a server that asks
  // for one. Both or neither.
  std::string certificate_file{};
  std::string private_key_file{};  // the key of certificate_file
  // Resume sessions: the context keeps the last session ticket each server name gave (at most
  // 256 names, the oldest forgotten first) and offers it on the next connection to that name,
  // which then skips the certificate exchange and its verification (connection::
  // tls_resumed()). A ticket is offered once (RFC 8446 C.4: a reused ticket links the
  // connections); the server sends fresh ones on every connection. Keyed by the name verified
  // (server_name or the host), so a session is only resumed with a server that proved that
  // name.
  bool resume_sessions = true;
};

namespace detail {
struct tls_context_access;
}

// The shared, immutable configuration of one side (see the file comment).
class tls_context {
 public:
  // A server's context: tls_error naming the file and OpenSSL's reason when a file does not
  // load or the key does not match; std::invalid_argument for a missing file name or an ALPN
  // name that is empty or longer than 255 bytes.
  static std::shared_ptr<const tls_context> server(const tls_server_options& options);
  // A client's context: tls_error when the authorities do not load; std::invalid_argument for
  // a bad ALPN name.
  static std::shared_ptr<const tls_context> client(const tls_client_options& options = {});

  ~tls_context();
  tls_context(const tls_context&) = delete;
  tls_context& operator=(const tls_context&) = delete;

  bool is_server() const noexcept;  // made by server() (not client())
  // The plaintext reply of a server's options ("" for a client).
  const std::string& plaintext_reply() const noexcept;
  // The client's server_name ("" for a server).
  const std::string& server_name() const noexcept;
  // A context that is this one with another plaintext_reply (weft::http's server gives one
  // without a reply its 400); the OpenSSL context, its certificate and its ticket keys are
  // shared, so sessions resume across the two.
  std::shared_ptr<const tls_context> with_plaintext_reply(std::string reply) const;

 private:
  friend struct detail::tls_context_access;
  struct state;
  explicit tls_context(std::unique_ptr<state> made) noexcept;
  std::unique_ptr<state> state_;
};

}  // namespace weft::net

// One connection's TLS state over OpenSSL, with no socket of its own: the connection reads and
// writes the socket as it does for a plain connection, and the session sits between its bytes
// and the user's. Ciphertext comes in through supply() (the connection's recv), plaintext out of
// read(); plaintext goes in through encrypt() and records come out in outgoing(), which the
// connection writes to the socket before anything encrypted after them. So OpenSSL never waits
// on the socket, and the order of the records on the wire is the order of the calls: a send
// queued behind a file range is encrypted after the range, not when it was queued.
//
// The BIO between the SSL object and the session is a small one of weft's own (not a memory BIO,
// which would copy every record once more): its read serves the bytes not yet consumed (the
// stash, then what supply() just handed over), its write appends to outgoing().
//
// One thread: the connection's. A client's session comes from and goes back to its context's
// session cache (tls_client_options::resume_sessions), which is shared between threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "weft/net/tls.hpp"

using SSL = struct ssl_st;
using SSL_CTX = struct ssl_ctx_st;

namespace weft::net::detail {

class session_cache;

struct tls_context_access {
  static SSL_CTX* native(const tls_context& context) noexcept;
  static bool verifies(const tls_context& context) noexcept;
  // A client context's session cache (nullptr without resume_sessions).
  static std::shared_ptr<session_cache> sessions(const tls_context& context);
};

class tls_session {
 public:
  // A server's session (accept state), or a client's for host (the name sent in SNI and
  // verified, unless the context names its own). Throws tls_error when OpenSSL cannot make one.
  tls_session(const tls_context& context, std::string_view host);
  ~tls_session();
  tls_session(const tls_session&) = delete;
  tls_session& operator=(const tls_session&) = delete;

  enum class status : std::uint8_t {
    data,       // plaintext came
    want_read,  // more ciphertext is needed (supply() it)
    closed,     // the peer sent close_notify
    failed,     // a fatal error: failure() says which; an alert may be in outgoing()
  };

  // Ciphertext just received. The bytes must stay valid until keep_rest(), which copies what
  // the session did not consume.
  void supply(const char* bytes, std::size_t size) noexcept {
    fresh_ = bytes;
    fresh_size_ = size;
  }
  void keep_rest();
  // Decrypts into [into, into + room): the number of plaintext bytes (status data), or 0 with
  // the status. Drives the handshake while it is not complete.
  std::size_t read(char* into, std::size_t room, status& result);
  // Starts or advances the handshake (a client's first flight); false on failure.
  bool handshake_step();
  // Encrypts size bytes into outgoing(); false on failure (failure() says why).
  bool encrypt(const char* bytes, std::size_t size);
  // close_notify into outgoing() (once; nothing on a session that failed or never finished).
  void close_notify() noexcept;

  bool established() const noexcept;
  bool failed() const noexcept { return failed_; }
  // Received bytes that read() has not turned into plaintext yet, or plaintext decrypted and
  // not yet read: the connection must read again before it waits for the socket.
  bool buffered() const noexcept;
  // The first byte a server received was not a TLS handshake record (a plaintext peer).
  bool plaintext_peer() const noexcept { return plaintext_peer_; }
  // Why the session failed, in OpenSSL's words (and the certificate's verification result).
  const std::string& failure() const noexcept { return failure_; }

  // Records waiting for the socket: [outgoing_head, outgoing().size()).
  std::string& outgoing() noexcept { return outgoing_; }
  std::size_t& outgoing_head() noexcept { return outgoing_head_; }
  std::size_t outgoing_size() const noexcept { return outgoing_.size() - outgoing_head_; }
  // Everything written: drops the buffer's bytes (and its memory past a record's worth).
  void outgoing_sent() noexcept;

  // "TLSv1.3", the cipher suite, the ALPN protocol agreed ("" for none).
  std::string version() const;
  std::string cipher() const;
  std::string alpn() const;
  // Whether the handshake resumed a session (no certificate exchanged).
  bool resumed() const noexcept;
  // The name the client sent in SNI ("" for none).
  std::string server_name() const;
  // The verified peer certificate's subject (RFC 2253), "" for none.
  std::string peer_subject() const;

 private:
  friend struct bio_calls;
  void fail(const char* during) noexcept;

  SSL* ssl_ = nullptr;
  // Ciphertext not yet consumed: [stash_head_, stash_.size()) of stash_, then the fresh bytes.
  std::string stash_;
  std::size_t stash_head_ = 0;
  const char* fresh_ = nullptr;
  std::size_t fresh_size_ = 0;
  std::string outgoing_;
  std::size_t outgoing_head_ = 0;
  std::string failure_;
  // A client resuming sessions: its context's cache and the name its sessions are kept under.
  std::shared_ptr<session_cache> sessions_;
  std::string session_key_;
  bool server_ = false;
  bool first_byte_seen_ = false;
  bool plaintext_peer_ = false;
  bool failed_ = false;
  bool notified_ = false;
};

}  // namespace weft::net::detail

// TLS contexts and sessions over OpenSSL (tls.hpp, tls_session.hpp).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <cstring>
#include <limits>
#include <list>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>

#include "net/address.hpp"
#include "net/tls_session.hpp"

namespace weft::net {

namespace detail {

// A server's chains for SNI (tls_server_options::more_certificates): one OpenSSL context per
// chain, the first being the tls_context's own, each holding a reference of its own. The
// servername callback of the first reads it; every tls_context sharing that OpenSSL context
// (with_plaintext_reply) shares the table, so it outlives every session that calls back.
struct sni_table {
  std::vector<SSL_CTX*> contexts;
  sni_table() = default;
  sni_table(const sni_table&) = delete;
  sni_table& operator=(const sni_table&) = delete;
  ~sni_table() {
    for (SSL_CTX* ctx : contexts) {
      SSL_CTX_free(ctx);
    }
  }
};

// A client context's resumable sessions, one per server name (tls_client_options::
// resume_sessions). Sessions of every thread's connections come and go through it (OpenSSL's
// new-session callback, a session's constructor), hence the mutex; both are once per
// connection, never per record.
class session_cache {
 public:
  static constexpr std::size_t capacity = 256;

  session_cache() = default;
  session_cache(const session_cache&) = delete;
  session_cache& operator=(const session_cache&) = delete;
  ~session_cache() {
    for (auto& [name, entry] : by_name_) {
      SSL_SESSION_free(entry.first);
    }
  }

  // The session kept for name, taken out (one use), with its reference; nullptr for none.
  SSL_SESSION* take(const std::string& name) {
    std::lock_guard lock(mutex_);
    auto found = by_name_.find(name);
    if (found == by_name_.end()) {
      return nullptr;
    }
    SSL_SESSION* session = found->second.first;
    order_.erase(found->second.second);
    by_name_.erase(found);
    return session;
  }

  // Keeps session (its reference becomes the cache's) for name, in place of an older one;
  // false when it could not be kept (out of memory), the reference still the caller's.
  bool put(const std::string& name, SSL_SESSION* session) noexcept {
    SSL_SESSION* replaced = nullptr;
    SSL_SESSION* forgotten = nullptr;
    try {
      std::lock_guard lock(mutex_);
      auto found = by_name_.find(name);
      if (found != by_name_.end()) {
        replaced = std::exchange(found->second.first, session);
        order_.splice(order_.end(), order_, found->second.second);
      } else {
        if (by_name_.size() >= capacity) {
          auto oldest = by_name_.find(order_.front());
          forgotten = oldest->second.first;
          by_name_.erase(oldest);
          order_.pop_front();
        }
        order_.push_back(name);
        try {
          by_name_.emplace(name, std::pair{session, std::prev(order_.end())});
        } catch (...) {
          order_.pop_back();
          throw;
        }
      }
    } catch (...) {
      SSL_SESSION_free(forgotten);
      return false;
    }
    SSL_SESSION_free(replaced);  // freed outside the lock; null is ignored
    SSL_SESSION_free(forgotten);
    return true;
  }

 private:
  std::mutex mutex_;
  std::list<std::string> order_;  // oldest first
  std::unordered_map<std::string, std::pair<SSL_SESSION*, std::list<std::string>::iterator>>
      by_name_;
};

// OpenSSL's new-session callback of a client context that resumes sessions (defined below).
int remember_session(SSL* ssl, SSL_SESSION* made);

}  // namespace detail

struct tls_context::state {
  SSL_CTX* ctx = nullptr;
  bool server = false;
  bool verify = true;
  std::string plaintext_reply;
  std::string server_name;
  // Length-prefixed names (RFC 7301's ProtocolNameList); shared with the OpenSSL context's
  // callback, which every tls_context made from it (with_plaintext_reply) shares too.
  std::shared_ptr<const std::string> alpn_wire;
  std::shared_ptr<const detail::sni_table> sni;     // a server with more_certificates
  std::shared_ptr<detail::session_cache> sessions;  // a client that resumes sessions
  ~state() { SSL_CTX_free(ctx); }
};

namespace {

// OpenSSL's error queue as one line ("no such file; PEM lib"), emptied. Only the reasons: the
// codes and library names of ERR_error_string add nothing a user can act on.
std::string drain_errors() {
  std::string text;
  while (unsigned long code = ERR_get_error()) {
    const char* reason = ERR_reason_error_string(code);
    if (!text.empty()) {
      text += "; ";
    }
    text += reason != nullptr ? reason : "error " + std::to_string(code);
  }
  return text.empty() ? std::string("no reason given") : text;
}

std::string alpn_wire_of(const std::vector<std::string>& names, const char* who) {
  std::string wire;
  for (const std::string& name : names) {
    if (name.empty() || name.size() > 255) {
      throw std::invalid_argument(std::string(who) + ": the ALPN protocol name '" + name + "' is " +
                                  (name.empty() ? "empty" : "longer than 255 bytes") +
                                  " (RFC 7301)");
    }
    wire += static_cast<char>(name.size());
    wire += name;
  }
  return wire;
}

SSL_CTX* new_context(const SSL_METHOD* method, tls_version min_version, const char* who) {
  ERR_clear_error();
  SSL_CTX* ctx = SSL_CTX_new(method);
  if (ctx == nullptr) {
    throw tls_error(std::string(who) + ": OpenSSL could not make a context: " + drain_errors());
  }
  SSL_CTX_set_min_proto_version(
      ctx, min_version == tls_version::tls1_3 ? TLS1_3_VERSION : TLS1_2_VERSION);
  // No renegotiation (TLS 1.2: a peer asking gets an alert), no compression (CRIME). The
  // released buffers: an idle connection keeps no 16 KiB record buffers (a thousand idle
  // keep-alive connections would hold 34 MiB of them otherwise).
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
  SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
  return ctx;
}

// Loads a certificate chain and its key into ctx (a server's, or a client's for mutual TLS).
void use_certificate(SSL_CTX* ctx, const std::string& certificate_file,
                     const std::string& private_key_file, const char* who) {
  if (SSL_CTX_use_certificate_chain_file(ctx, certificate_file.c_str()) != 1) {
    throw tls_error(std::string(who) + ": the certificate chain " + certificate_file +
                    " does not load: " + drain_errors());
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, private_key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    throw tls_error(std::string(who) + ": the private key " + private_key_file +
                    " does not load, or is not the key of the certificate in " + certificate_file +
                    ": " + drain_errors());
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    throw tls_error(std::string(who) + ": the private key " + private_key_file +
                    " does not match the certificate in " + certificate_file + ": " +
                    drain_errors());
  }
}

int select_alpn(SSL* /*ssl*/, const unsigned char** out, unsigned char* out_size,
                const unsigned char* offered, unsigned int offered_size, void* arg) {
  const auto* wire = static_cast<const std::string*>(arg);
  unsigned char* chosen = nullptr;
  unsigned char chosen_size = 0;
  // The server's order decides (its list first), as RFC 7301 3.2 leaves to the server.
  if (SSL_select_next_proto(&chosen, &chosen_size,
                            reinterpret_cast<const unsigned char*>(wire->data()),
                            static_cast<unsigned int>(wire->size()), offered,
                            offered_size) != OPENSSL_NPN_NEGOTIATED) {
    return SSL_TLSEXT_ERR_ALERT_FATAL;  // no_application_protocol
  }
  *out = chosen;
  *out_size = chosen_size;
  return SSL_TLSEXT_ERR_OK;
}

// The servername callback of a server with more certificates (tls_server_options::
// more_certificates says which chain a name gets). Switching the session to another OpenSSL
// context takes that one's certificate; everything else is configured alike in every context of
// the table, and session tickets stay the first one's (OpenSSL keeps the session context).
int choose_certificate(SSL* ssl, int* /*alert*/, void* arg) {
  const auto* table = static_cast<const detail::sni_table*>(arg);
  const char* name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
  if (name == nullptr || *name == '\0') {
    return SSL_TLSEXT_ERR_OK;  // the first chain
  }
  for (const unsigned flags :
       {unsigned{X509_CHECK_FLAG_NO_WILDCARDS}, unsigned{X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS}}) {
    for (SSL_CTX* candidate : table->contexts) {
      X509* leaf = SSL_CTX_get0_certificate(candidate);
      if (leaf != nullptr && X509_check_host(leaf, name, 0, flags, nullptr) == 1) {
        if (candidate != SSL_get_SSL_CTX(ssl)) {
          SSL_set_SSL_CTX(ssl, candidate);
        }
        return SSL_TLSEXT_ERR_OK;
      }
    }
  }
  return SSL_TLSEXT_ERR_OK;
}

}  // namespace

// Opaque to the public header: its members are OpenSSL's.
tls_context::tls_context(std::unique_ptr<state> made) noexcept : state_(std::move(made)) {}
tls_context::~tls_context() = default;

bool tls_context::is_server() const noexcept { return state_->server; }
const std::string& tls_context::plaintext_reply() const noexcept { return state_->plaintext_reply; }
const std::string& tls_context::server_name() const noexcept { return state_->server_name; }

std::shared_ptr<const tls_context> tls_context::with_plaintext_reply(std::string reply) const {
  auto made = std::make_unique<state>();
  SSL_CTX_up_ref(state_->ctx);  // the same OpenSSL context: certificate, tickets, callbacks
  made->ctx = state_->ctx;
  made->server = state_->server;
  made->verify = state_->verify;
  made->server_name = state_->server_name;
  made->alpn_wire = state_->alpn_wire;
  made->sni = state_->sni;
  made->sessions = state_->sessions;
  made->plaintext_reply = std::move(reply);
  return std::shared_ptr<const tls_context>(new tls_context(std::move(made)));
}

namespace {

// One OpenSSL context of a server: chain and key, then everything else options say. Every chain
// of a server with more_certificates gets one made alike (choose_certificate switches among
// them), so its settings hold whichever chain the client's name picks.
SSL_CTX* server_context(const tls_server_options& options, const tls_certificate& chain,
                        const std::string* alpn_wire, const char* who) {
  if (chain.certificate_file.empty() || chain.private_key_file.empty()) {
    throw std::invalid_argument(
        std::string(who) + ": " +
        (chain.certificate_file.empty() ? "certificate_file" : "private_key_file") +
        " is empty; a server needs a certificate chain and its key");
  }
  SSL_CTX* ctx = new_context(TLS_server_method(), options.min_version, who);
  try {
    use_certificate(ctx, chain.certificate_file, chain.private_key_file, who);
    if (!options.ciphers.empty() && SSL_CTX_set_cipher_list(ctx, options.ciphers.c_str()) != 1) {
      throw tls_error(std::string(who) + ": the cipher list '" + options.ciphers +
                      "' names no suite OpenSSL has: " + drain_errors());
    }
    if (!options.client_ca_file.empty()) {
      STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(options.client_ca_file.c_str());
      if (names == nullptr ||
          SSL_CTX_load_verify_locations(ctx, options.client_ca_file.c_str(), nullptr) != 1) {
        if (names != nullptr) {
          sk_X509_NAME_pop_free(names, X509_NAME_free);
        }
        throw tls_error(std::string(who) + ": the client authorities in " + options.client_ca_file +
                        " do not load: " + drain_errors());
      }
      SSL_CTX_set_client_CA_list(ctx, names);  // named in the CertificateRequest
      SSL_CTX_set_verify(
          ctx,
          SSL_VERIFY_PEER |
              (options.require_client_certificate ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0),
          nullptr);
    }
  } catch (...) {
    SSL_CTX_free(ctx);
    throw;
  }
  SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
  // Tickets only: a session cache is a locked table shared by every worker, and stateless
  // tickets resume a session on whichever worker the client lands on.
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  if (!alpn_wire->empty()) {
    SSL_CTX_set_alpn_select_cb(ctx, &select_alpn, const_cast<std::string*>(alpn_wire));
  }
  return ctx;
}

}  // namespace

std::shared_ptr<const tls_context> tls_context::server(const tls_server_options& options) {
  constexpr const char* who = "weft::net::tls_context::server";
  if (options.require_client_certificate && options.client_ca_file.empty()) {
    throw std::invalid_argument(std::string(who) +
                                ": require_client_certificate without client_ca_file: no "
                                "authority to verify the clients' certificates against");
  }
  auto made = std::make_unique<state>();
  made->server = true;
  made->plaintext_reply = options.plaintext_reply;
  made->alpn_wire = std::make_shared<const std::string>(alpn_wire_of(options.alpn, who));
  made->ctx =
      server_context(options, tls_certificate{options.certificate_file, options.private_key_file},
                     made->alpn_wire.get(), who);
  if (!options.more_certificates.empty()) {
    auto table = std::make_shared<detail::sni_table>();
    table->contexts.reserve(1 + options.more_certificates.size());
    SSL_CTX_up_ref(made->ctx);
    table->contexts.push_back(made->ctx);
    for (const tls_certificate& chain : options.more_certificates) {
      table->contexts.push_back(server_context(options, chain, made->alpn_wire.get(), who));
    }
    SSL_CTX_set_tlsext_servername_callback(made->ctx, &choose_certificate);
    SSL_CTX_set_tlsext_servername_arg(made->ctx, const_cast<detail::sni_table*>(table.get()));
    made->sni = std::move(table);
  }
  return std::shared_ptr<const tls_context>(new tls_context(std::move(made)));
}

std::shared_ptr<const tls_context> tls_context::client(const tls_client_options& options) {
  constexpr const char* who = "weft::net::tls_context::client";
  if (options.certificate_file.empty() != options.private_key_file.empty()) {
    throw std::invalid_argument(
        std::string(who) + ": " +
        (options.certificate_file.empty() ? "private_key_file" : "certificate_file") +
        " without the other; a client certificate needs both");
  }
  auto made = std::make_unique<state>();
  made->server = false;
  made->verify = options.verify;
  made->server_name = options.server_name;
  made->alpn_wire = std::make_shared<const std::string>(alpn_wire_of(options.alpn, who));
  made->ctx = new_context(TLS_client_method(), options.min_version, who);
  SSL_CTX* ctx = made->ctx;
  if (options.verify) {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    const int loaded = options.ca_file.empty()
                           ? SSL_CTX_set_default_verify_paths(ctx)
                           : SSL_CTX_load_verify_locations(ctx, options.ca_file.c_str(), nullptr);
    if (loaded != 1) {
      throw tls_error(
          std::string(who) + ": the authorities " +
          (options.ca_file.empty() ? std::string("of the system") : "in " + options.ca_file) +
          " do not load: " + drain_errors());
    }
  } else {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
  }
  if (!options.certificate_file.empty()) {
    use_certificate(ctx, options.certificate_file, options.private_key_file, who);
  }
  if (!made->alpn_wire->empty() &&
      SSL_CTX_set_alpn_protos(ctx, reinterpret_cast<const unsigned char*>(made->alpn_wire->data()),
                              static_cast<unsigned int>(made->alpn_wire->size())) != 0) {
    throw tls_error(std::string(who) + ": the ALPN list was refused: " + drain_errors());
  }
  if (options.resume_sessions) {
    made->sessions = std::make_shared<detail::session_cache>();
    // Every new session goes to the callback, none to OpenSSL's own cache (a client's would
    // only be read by hand).
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(ctx, &detail::remember_session);
  }
  return std::shared_ptr<const tls_context>(new tls_context(std::move(made)));
}

namespace detail {

SSL_CTX* tls_context_access::native(const tls_context& context) noexcept {
  return context.state_->ctx;
}
bool tls_context_access::verifies(const tls_context& context) noexcept {
  return context.state_->verify;
}
std::shared_ptr<session_cache> tls_context_access::sessions(const tls_context& context) {
  return context.state_->sessions;
}

// The BIO's calls (see tls_session.hpp): reads serve the stash, then the fresh bytes; writes
// append to outgoing. Never an EOF: the connection sees the socket's end itself. And OpenSSL's
// new-session callback of a client context that resumes sessions.
struct bio_calls {
  // A session the server gave (a TLS 1.3 ticket after the handshake, or a TLS 1.2 one in it):
  // kept for the session's name. 1: the reference is the cache's now.
  static int remember_session(SSL* ssl, SSL_SESSION* made) {
    auto* session = static_cast<tls_session*>(SSL_get_app_data(ssl));
    if (session == nullptr || session->sessions_ == nullptr || session->session_key_.empty() ||
        SSL_SESSION_is_resumable(made) != 1) {
      return 0;
    }
    return session->sessions_->put(session->session_key_, made) ? 1 : 0;
  }
  static int write(BIO* bio, const char* bytes, int size) {
    auto* session = static_cast<tls_session*>(BIO_get_data(bio));
    BIO_clear_retry_flags(bio);
    try {
      session->outgoing_.append(bytes, static_cast<std::size_t>(size));
    } catch (...) {
      return -1;  // out of memory: OpenSSL fails the call
    }
    return size;
  }
  static int read(BIO* bio, char* into, int size) {
    auto* session = static_cast<tls_session*>(BIO_get_data(bio));
    BIO_clear_retry_flags(bio);
    auto want = static_cast<std::size_t>(size);
    std::size_t given = 0;
    const std::size_t stashed = session->stash_.size() - session->stash_head_;
    if (stashed > 0) {
      given = want < stashed ? want : stashed;
      std::memcpy(into, session->stash_.data() + session->stash_head_, given);
      session->stash_head_ += given;
      if (session->stash_head_ == session->stash_.size()) {
        session->stash_.clear();
        session->stash_head_ = 0;
      }
    }
    if (given < want && session->fresh_size_ > 0) {
      const std::size_t more =
          want - given < session->fresh_size_ ? want - given : session->fresh_size_;
      std::memcpy(into + given, session->fresh_, more);
      session->fresh_ += more;
      session->fresh_size_ -= more;
      given += more;
    }
    if (given == 0) {
      BIO_set_retry_read(bio);
      return -1;
    }
    return static_cast<int>(given);
  }
  static long control(BIO* /*bio*/, int command, long /*number*/, void* /*pointer*/) {
    return command == BIO_CTRL_FLUSH ? 1 : 0;
  }
  static int create(BIO* bio) {
    BIO_set_init(bio, 1);
    return 1;
  }
  static const BIO_METHOD* method() {
    static const BIO_METHOD* made = [] {
      BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "weft.net");
      if (m == nullptr) {
        return static_cast<BIO_METHOD*>(nullptr);
      }
      BIO_meth_set_write(m, &bio_calls::write);
      BIO_meth_set_read(m, &bio_calls::read);
      BIO_meth_set_ctrl(m, &bio_calls::control);
      BIO_meth_set_create(m, &bio_calls::create);
      return m;
    }();
    return made;
  }
};

int remember_session(SSL* ssl, SSL_SESSION* made) { return bio_calls::remember_session(ssl, made); }

tls_session::tls_session(const tls_context& context, std::string_view host) {
  ERR_clear_error();
  server_ = context.is_server();
  const BIO_METHOD* method = bio_calls::method();
  ssl_ = SSL_new(tls_context_access::native(context));
  BIO* bio = method != nullptr ? BIO_new(method) : nullptr;
  if (ssl_ == nullptr || bio == nullptr) {
    BIO_free(bio);
    SSL_free(ssl_);
    throw tls_error("weft::net TLS: OpenSSL could not make a session: " + drain_errors());
  }
  BIO_set_data(bio, this);
  SSL_set_bio(ssl_, bio, bio);  // one reference, owned by the SSL object
  if (server_) {
    SSL_set_accept_state(ssl_);
    return;
  }
  SSL_set_connect_state(ssl_);
  const std::string name =
      context.server_name().empty() ? std::string(host) : context.server_name();
  in6_addr any{};
  const bool literal = net::detail::parse_ip_literal(AF_INET, name, &any) ||
                       net::detail::parse_ip_literal(AF_INET6, name, &any);
  bool ok = true;
  if (!literal && !name.empty()) {
    ok = SSL_set_tlsext_host_name(ssl_, name.c_str()) == 1;  // SNI is for names only (RFC 6066)
  }
  if (ok && tls_context_access::verifies(context)) {
    ok = literal ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl_), name.c_str()) == 1
                 : SSL_set1_host(ssl_, name.c_str()) == 1;
  }
  if (!ok) {
    SSL_free(ssl_);
    throw tls_error("weft::net TLS: the server name '" + name +
                    "' cannot be used: " + drain_errors());
  }
  sessions_ = tls_context_access::sessions(context);
  if (sessions_ != nullptr && !name.empty()) {
    session_key_ = name;
    SSL_set_app_data(ssl_, this);
    if (SSL_SESSION* kept = sessions_->take(name)) {
      SSL_set_session(ssl_, kept);  // offered; a server that refuses it makes a full handshake
      SSL_SESSION_free(kept);       // the SSL object holds its own reference
    }
  }
}

tls_session::~tls_session() { SSL_free(ssl_); }

void tls_session::keep_rest() {
  if (fresh_size_ > 0) {
    stash_.append(fresh_, fresh_size_);
  }
  fresh_ = nullptr;
  fresh_size_ = 0;
}

void tls_session::fail(const char* during) noexcept {
  failed_ = true;
  try {
    failure_ = std::string("TLS ") + during + " failed: " + drain_errors();
    if (!server_) {
      const long verified = SSL_get_verify_result(ssl_);
      if (verified != X509_V_OK) {
        failure_ += " (";
        failure_ += X509_verify_cert_error_string(verified);
        failure_ += ")";
      }
    }
  } catch (...) {
    ERR_clear_error();
  }
}

std::size_t tls_session::read(char* into, std::size_t room, status& result) {
  if (failed_) {
    result = status::failed;
    return 0;
  }
  if (server_ && !first_byte_seen_) {
    const char* first = stash_.size() > stash_head_ ? stash_.data() + stash_head_ : fresh_;
    const bool any = stash_.size() > stash_head_ || fresh_size_ > 0;
    if (any) {
      first_byte_seen_ = true;
      if (*first != 0x16) {  // a TLS record of type handshake starts every client's first flight
        plaintext_peer_ = true;
        failed_ = true;
        failure_ = "TLS handshake failed: the peer does not speak TLS (its first byte is 0x" +
                   std::string(1, "0123456789abcdef"[(*first >> 4) & 0xf]) +
                   std::string(1, "0123456789abcdef"[*first & 0xf]) + ", not a handshake record)";
        result = status::failed;
        return 0;
      }
    }
  }
  ERR_clear_error();
  const int size = room > static_cast<std::size_t>(std::numeric_limits<int>::max())
                       ? std::numeric_limits<int>::max()
                       : static_cast<int>(room);
  const int got = SSL_read(ssl_, into, size);
  if (got > 0) {
    result = status::data;
    return static_cast<std::size_t>(got);
  }
  switch (SSL_get_error(ssl_, got)) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:  // never from this BIO; read on, which retries
      result = status::want_read;
      return 0;
    case SSL_ERROR_ZERO_RETURN:
      result = status::closed;
      return 0;
    default:
      fail(SSL_is_init_finished(ssl_) ? "read" : "handshake");
      result = status::failed;
      return 0;
  }
}

bool tls_session::handshake_step() {
  ERR_clear_error();
  const int done = SSL_do_handshake(ssl_);
  if (done == 1) {
    return true;
  }
  const int error = SSL_get_error(ssl_, done);
  if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
    return true;
  }
  fail("handshake");
  return false;
}

bool tls_session::encrypt(const char* bytes, std::size_t size) {
  if (failed_) {
    return false;
  }
  while (size > 0) {
    ERR_clear_error();
    const int piece =
        size > (1u << 30) ? (1 << 30) : static_cast<int>(size);  // SSL_write takes an int
    const int wrote = SSL_write(ssl_, bytes, piece);
    if (wrote <= 0) {
      fail("write");
      return false;
    }
    bytes += wrote;
    size -= static_cast<std::size_t>(wrote);
  }
  return true;
}

void tls_session::close_notify() noexcept {
  if (notified_ || failed_ || !SSL_is_init_finished(ssl_)) {
    return;
  }
  notified_ = true;
  ERR_clear_error();
  SSL_shutdown(ssl_);  // writes close_notify; the peer's answer is not waited for
  ERR_clear_error();
}

bool tls_session::established() const noexcept { return SSL_is_init_finished(ssl_) == 1; }

bool tls_session::buffered() const noexcept {
  return stash_.size() > stash_head_ || SSL_pending(ssl_) > 0 || SSL_has_pending(ssl_) == 1;
}

void tls_session::outgoing_sent() noexcept {
  if (outgoing_.capacity() > 16 * 1024) {
    std::string().swap(outgoing_);
  } else {
    outgoing_.clear();
  }
  outgoing_head_ = 0;
}

std::string tls_session::version() const { return SSL_get_version(ssl_); }

std::string tls_session::cipher() const {
  const char* name = SSL_get_cipher_name(ssl_);
  return name != nullptr ? name : "";
}

std::string tls_session::peer_subject() const {
  X509* peer = SSL_get0_peer_certificate(ssl_);
  if (peer == nullptr || SSL_get_verify_result(ssl_) != X509_V_OK) {
    return {};
  }
  BIO* text = BIO_new(BIO_s_mem());
  if (text == nullptr) {
    return {};
  }
  std::string subject;
  if (X509_NAME_print_ex(text, X509_get_subject_name(peer), 0, XN_FLAG_RFC2253) >= 0) {
    char* data = nullptr;
    const long size = BIO_get_mem_data(text, &data);
    if (size > 0) {
      subject.assign(data, static_cast<std::size_t>(size));
    }
  }
  BIO_free(text);
  return subject;
}

bool tls_session::resumed() const noexcept { return SSL_session_reused(ssl_) == 1; }

std::string tls_session::server_name() const {
  const char* name = SSL_get_servername(ssl_, TLSEXT_NAMETYPE_host_name);
  return name != nullptr ? name : "";
}

std::string tls_session::alpn() const {
  const unsigned char* name = nullptr;
  unsigned int size = 0;
  SSL_get0_alpn_selected(ssl_, &name, &size);
  return name != nullptr ? std::string(reinterpret_cast<const char*>(name), size) : std::string();
}

}  // namespace detail
}  // namespace weft::net

// TLS contexts and sessions over OpenSSL (tls.hpp, tls_session.hpp).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <cstring>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <string>

#include "net/address.hpp"
#include "net/tls_session.hpp"

namespace weft::net {

struct tls_context::state {
  SSL_CTX* ctx = nullptr;
  bool server = false;
  bool verify = true;
  std::string plaintext_reply;
  std::string server_name;
  // Length-prefixed names (RFC 7301's ProtocolNameList); shared with the OpenSSL context's
  // callback, which every tls_context made from it (with_plaintext_reply) shares too.
  std::shared_ptr<const std::string> alpn_wire;
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
  made->plaintext_reply = std::move(reply);
  return std::shared_ptr<const tls_context>(new tls_context(std::move(made)));
}

std::shared_ptr<const tls_context> tls_context::server(const tls_server_options& options) {
  constexpr const char* who = "weft::net::tls_context::server";
  if (options.require_client_certificate && options.client_ca_file.empty()) {
    throw std::invalid_argument(std::string(who) +
                                ": require_client_certificate without client_ca_file: no "
                                "authority to verify the clients' certificates against");
  }
  if (options.certificate_file.empty() || options.private_key_file.empty()) {
    throw std::invalid_argument(
        std::string(who) + ": " +
        (options.certificate_file.empty() ? "certificate_file" : "private_key_file") +
        " is empty; a server needs a certificate chain and its key");
  }
  auto made = std::make_unique<state>();
  made->server = true;
  made->plaintext_reply = options.plaintext_reply;
  made->alpn_wire = std::make_shared<const std::string>(alpn_wire_of(options.alpn, who));
  made->ctx = new_context(TLS_server_method(), options.min_version, who);
  SSL_CTX* ctx = made->ctx;
  use_certificate(ctx, options.certificate_file, options.private_key_file, who);
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
  SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
  // Tickets only: a session cache is a locked table shared by every worker, and stateless
  // tickets resume a session on whichever worker the client lands on.
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  if (!made->alpn_wire->empty()) {
    SSL_CTX_set_alpn_select_cb(ctx, &select_alpn, const_cast<std::string*>(made->alpn_wire.get()));
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
  return std::shared_ptr<const tls_context>(new tls_context(std::move(made)));
}

namespace detail {

SSL_CTX* tls_context_access::native(const tls_context& context) noexcept {
  return context.state_->ctx;
}
bool tls_context_access::verifies(const tls_context& context) noexcept {
  return context.state_->verify;
}

// The BIO's calls (see tls_session.hpp): reads serve the stash, then the fresh bytes; writes
// append to outgoing. Never an EOF: the connection sees the socket's end itself.
struct bio_calls {
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

std::string tls_session::alpn() const {
  const unsigned char* name = nullptr;
  unsigned int size = 0;
  SSL_get0_alpn_selected(ssl_, &name, &size);
  return name != nullptr ? std::string(reinterpret_cast<const char*>(name), size) : std::string();
}

}  // namespace detail
}  // namespace weft::net

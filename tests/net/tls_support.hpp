// Certificates for the TLS tests, made by Debian's openssl program (a tool no one here wrote) in
// a directory of the test's own, once per test process:
//   - ca.pem, ca.key: a test authority ("weft test CA");
//   - cert.pem, key.pem: a server certificate it signed for localhost and 127.0.0.1 (P-256);
//   - other_ca.pem: a second authority that signed nothing the server has;
//   - client.pem, client-key.pem: a client certificate the test authority signed
//     ("CN=weft test client", for mutual TLS);
//   - named.pem, wild.pem (and their -key.pem): server certificates the test authority signed
//     for other.example and exact.wild.example, and for *.wild.example (SNI);
//   - renewed.pem, renewed-key.pem: a certificate for localhost and 127.0.0.1 that other_ca
//     signed (a certificate replaced on a running server).
// The directory is removed when the process exits.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>

#include "weft/net/tls.hpp"

namespace tls_test {

struct certificates {
  std::string dir;
  std::string ca;
  std::string cert;
  std::string key;
  std::string other_ca;
  std::string client_cert;
  std::string client_key;
  std::string named_cert;  // other.example, exact.wild.example
  std::string named_key;
  std::string wild_cert;  // *.wild.example
  std::string wild_key;
  std::string renewed_cert;  // localhost, 127.0.0.1, by other_ca
  std::string renewed_key;
};

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream all;
  all << in.rdbuf();
  return all.str();
}

namespace detail {
inline void run(const std::string& command) {
  const std::string quiet = command + " >/dev/null 2>&1";
  if (std::system(quiet.c_str()) != 0) {
    throw std::runtime_error(
        "tls_support: this failed (is Debian's openssl installed? "
        "scripts/install-deps): " +
        command);
  }
}

struct made_certificates {
  certificates files;
  made_certificates() {
    char pattern[] = "/tmp/weft-tls-test-XXXXXX";
    const char* made = ::mkdtemp(pattern);
    if (made == nullptr) {
      throw std::runtime_error("tls_support: mkdtemp failed");
    }
    files.dir = made;
    const std::string d = files.dir + "/";
    const std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    run("openssl req -x509" + ec + " -keyout " + d + "ca.key -out " + d +
        "ca.pem -days 2 -subj '/CN=weft test CA'");
    run("openssl req -x509" + ec + " -keyout " + d + "other_ca.key -out " + d +
        "other_ca.pem -days 2 -subj '/CN=weft other CA'");
    run("openssl req" + ec + " -keyout " + d + "key.pem -out " + d +
        "server.csr -subj '/CN=localhost'");
    std::ofstream(d + "server.ext")
        << "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
           "keyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n";
    run("openssl x509 -req -in " + d + "server.csr -CA " + d + "ca.pem -CAkey " + d +
        "ca.key -CAcreateserial -days 2 -out " + d + "cert.pem -extfile " + d + "server.ext");
    run("openssl req" + ec + " -keyout " + d + "client-key.pem -out " + d +
        "client.csr -subj '/CN=weft test client'");
    std::ofstream(d + "client.ext") << "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\n"
                                       "extendedKeyUsage=clientAuth\n";
    run("openssl x509 -req -in " + d + "client.csr -CA " + d + "ca.pem -CAkey " + d +
        "ca.key -CAcreateserial -days 2 -out " + d + "client.pem -extfile " + d + "client.ext");
    // A server certificate for subject_alt_name, signed by the authority `ca` (ca or other_ca):
    // NAME.pem and NAME-key.pem.
    const auto server_certificate = [&](const std::string& name, const std::string& common_name,
                                        const std::string& subject_alt_name,
                                        const std::string& ca) {
      run("openssl req" + ec + " -keyout " + d + name + "-key.pem -out " + d + name +
          ".csr -subj '/CN=" + common_name + "'");
      std::ofstream(d + name + ".ext") << "subjectAltName=" << subject_alt_name
                                       << "\nbasicConstraints=CA:FALSE\nkeyUsage="
                                          "digitalSignature\nextendedKeyUsage=serverAuth\n";
      run("openssl x509 -req -in " + d + name + ".csr -CA " + d + ca + ".pem -CAkey " + d + ca +
          ".key -CAcreateserial -days 2 -out " + d + name + ".pem -extfile " + d + name + ".ext");
    };
    server_certificate("named", "other.example", "DNS:other.example,DNS:exact.wild.example", "ca");
    server_certificate("wild", "wild.example", "DNS:*.wild.example", "ca");
    server_certificate("renewed", "localhost", "DNS:localhost,IP:127.0.0.1", "other_ca");
    files.named_cert = d + "named.pem";
    files.named_key = d + "named-key.pem";
    files.wild_cert = d + "wild.pem";
    files.wild_key = d + "wild-key.pem";
    files.renewed_cert = d + "renewed.pem";
    files.renewed_key = d + "renewed-key.pem";
    files.client_cert = d + "client.pem";
    files.client_key = d + "client-key.pem";
    files.ca = d + "ca.pem";
    files.cert = d + "cert.pem";
    files.key = d + "key.pem";
    files.other_ca = d + "other_ca.pem";
  }
  ~made_certificates() {
    std::error_code ignored;
    std::filesystem::remove_all(files.dir, ignored);
  }
};
}  // namespace detail

inline const certificates& certs() {
  static detail::made_certificates made;
  return made.files;
}

inline std::shared_ptr<const weft::net::tls_context> server_context(
    weft::net::tls_server_options options = {}) {
  options.certificate_file = certs().cert;
  options.private_key_file = certs().key;
  return weft::net::tls_context::server(options);
}

inline std::shared_ptr<const weft::net::tls_context> client_context(
    weft::net::tls_client_options options = {}) {
  if (options.ca_file.empty()) {
    options.ca_file = certs().ca;
  }
  return weft::net::tls_context::client(options);
}

}  // namespace tls_test

// libFuzzer target over the PROXY protocol header's parser (src/net/proxy_header.hpp), which reads
// the first bytes of every connection of a server with tcp_server_options::proxy_protocol: bytes
// from whoever reaches the port.
//
// Each input is parsed from an exact-size heap copy (a read past it is a heap-buffer-overflow
// under ASan). Invariants (a violation aborts):
//   - a complete header is at most the bytes given, at least 15 ("PROXY UNKNOWN\r\n"), at most
//     107 for v1 and 4096 for v2; its addresses, when known, are both IPv4 or both IPv6 with
//     lengths to match;
//   - a refusal says why;
//   - the decision does not depend on where reads end: every prefix of a complete header asks
//     for more, and a decision (complete or refused) made on some bytes stands, with the same
//     size and addresses, when more bytes follow them (the input parsed again with itself
//     appended).
//
// Build and run (clang 14; `make test-fuzz` does the short run of `make test`):
//   cmake -S tests/net/fuzz -B build/fuzz-net -G Ninja -DCMAKE_CXX_COMPILER=clang++
//   cmake --build build/fuzz-net
//   mkdir -p build/fuzz-net/proxy-corpus
//   build/fuzz-net/net_proxy_header_fuzz -dict=tests/net/fuzz/proxy.dict \
//       -max_total_time=3600 -print_final_stats=1 build/fuzz-net/proxy-corpus \
//       tests/net/fuzz/proxy-corpus
// New inputs go to the first directory, never to the committed seeds.
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "net/proxy_header.hpp"

namespace {

using weft::net::detail::parse_proxy_header;
using weft::net::detail::proxy_header;
using outcome = proxy_header::outcome;

[[noreturn]] void broken(const char* what) {
  std::fprintf(stderr, "proxy_header_fuzz: invariant broken: %s\n", what);
  std::abort();
}

proxy_header parse_copy(const std::uint8_t* data, std::size_t size) {
  auto copy = std::make_unique<char[]>(size == 0 ? 1 : size);
  if (size > 0) {
    std::memcpy(copy.get(), data, size);
  }
  return parse_proxy_header(copy.get(), size);
}

bool same_addresses(const proxy_header& a, const proxy_header& b) {
  return a.addresses == b.addresses && a.source_length == b.source_length &&
         a.destination_length == b.destination_length &&
         std::memcmp(&a.source, &b.source, a.source_length) == 0 &&
         std::memcmp(&a.destination, &b.destination, a.destination_length) == 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 8192) {
    return 0;
  }
  const proxy_header header = parse_copy(data, size);
  if (header.result == outcome::complete) {
    if (header.size > size || header.size < 15) {
      broken("a complete header's size is outside [15, the bytes given]");
    }
    const bool v1 = data[0] == 'P';
    if (header.size > (v1 ? 107u : weft::net::detail::max_proxy_header_v2)) {
      broken("a complete header longer than its version allows");
    }
    if (header.addresses) {
      const auto family = header.source.ss_family;
      const socklen_t want = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
      if ((family != AF_INET && family != AF_INET6) || header.destination.ss_family != family ||
          header.source_length != want || header.destination_length != want) {
        broken("addresses of mixed or unknown families");
      }
    }
    for (std::size_t shorter : {header.size - 1, header.size / 2, std::size_t{1}}) {
      if (shorter < header.size && parse_copy(data, shorter).result != outcome::incomplete) {
        broken("a prefix of a complete header was decided");
      }
    }
  }
  if (header.result == outcome::invalid && header.why.empty()) {
    broken("a refusal without a reason");
  }
  if (header.result != outcome::incomplete) {
    std::string doubled(reinterpret_cast<const char*>(data), size);
    doubled.append(reinterpret_cast<const char*>(data), size);
    const proxy_header again =
        parse_copy(reinterpret_cast<const std::uint8_t*>(doubled.data()), doubled.size());
    if (again.result != header.result || again.size != header.size ||
        !same_addresses(again, header)) {
      broken("more bytes after a decided header changed the decision");
    }
  }
  return 0;
}

// weft::dns over uv_getaddrinfo / uv_getnameinfo, each request a pending_operation (see
// weft/reactor/operation.hpp): it lives on the heap, owns everything the worker writes (the
// addrinfo list, the name buffers) and is freed by its waiter or, when the waiter left, by its
// own callback.
#include "weft/io/dns.hpp"

#include <netdb.h>
#include <sys/socket.h>
#include <uv.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "io/c_string.hpp"
#include "weft/reactor/detail/operation.hpp"

namespace weft::dns {
namespace {

class address_lookup final : public detail::pending_operation {
 public:
  address_lookup(std::string host, std::string service)
      : host_(std::move(host)), service_(std::move(service)) {
    request_.data = this;
  }
  // Also frees the list of a lookup that completed after its waiter left.
  ~address_lookup() override { uv_freeaddrinfo(result_); }

  void describe(std::string& out) const override { out += "getaddrinfo " + subject(); }
  std::string subject() const { return service_.empty() ? host_ : host_ + ":" + service_; }

  void start(uv_loop_t& loop) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    // One socket type, or every address comes back once per type (stream, datagram, raw).
    hints.ai_socktype = SOCK_STREAM;
    int status = uv_getaddrinfo(&loop, &request_, &address_lookup::on_done, host_.c_str(),
                                service_.empty() ? nullptr : service_.c_str(), &hints);
    if (status < 0) {
      detail::throw_uv_error(status, "getaddrinfo", subject());
    }
  }

  int status() const noexcept { return status_; }
  const addrinfo* result() const noexcept { return result_; }

 protected:
  void abandon() noexcept override { uv_cancel(reinterpret_cast<uv_req_t*>(&request_)); }

 private:
  static void on_done(uv_getaddrinfo_t* request, int status, addrinfo* result) {
    auto* self = static_cast<address_lookup*>(request->data);
    self->status_ = status;
    self->result_ = result;
    self->complete();  // last: may free self
  }

  uv_getaddrinfo_t request_{};
  std::string host_;
  std::string service_;
  int status_ = 0;
  addrinfo* result_ = nullptr;
};

class name_lookup final : public detail::pending_operation {
 public:
  explicit name_lookup(std::string ip) : ip_(std::move(ip)) { request_.data = this; }

  void describe(std::string& out) const override { out += "getnameinfo " + ip_; }

  void start(uv_loop_t& loop) {
    sockaddr_storage address{};
    int status = uv_ip4_addr(ip_.c_str(), 0, reinterpret_cast<sockaddr_in*>(&address));
    if (status < 0) {
      status = uv_ip6_addr(ip_.c_str(), 0, reinterpret_cast<sockaddr_in6*>(&address));
    }
    if (status < 0) {
      detail::throw_uv_error(status, "reverse", ip_);
    }
    // NI_NAMEREQD: an address without a name is an error, not its own numeric form echoed back.
    // libuv copies the address, so the local sockaddr may go.
    status = uv_getnameinfo(&loop, &request_, &name_lookup::on_done,
                            reinterpret_cast<const sockaddr*>(&address), NI_NAMEREQD);
    if (status < 0) {
      detail::throw_uv_error(status, "reverse", ip_);
    }
  }

  int status() const noexcept { return status_; }
  std::string host() const { return request_.host; }

 protected:
  void abandon() noexcept override { uv_cancel(reinterpret_cast<uv_req_t*>(&request_)); }

 private:
  static void on_done(uv_getnameinfo_t* request, int status, const char*, const char*) {
    auto* self = static_cast<name_lookup*>(request->data);
    self->status_ = status;
    self->complete();  // last: may free self
  }

  uv_getnameinfo_t request_{};  // its host/service arrays receive the answer
  std::string ip_;
  int status_ = 0;
};

}  // namespace

std::vector<address> resolve(const std::string& host, const std::string& service,
                             const timeout& limit) {
  uv_loop_t& loop = detail::current_uv_loop("weft::dns::resolve");
  detail::refuse_nul(host, "getaddrinfo", "host");
  detail::refuse_nul(service, "getaddrinfo", "service");
  auto lookup = std::make_unique<address_lookup>(host, service);
  lookup->start(loop);
  std::unique_ptr<detail::pending_operation> pending(std::move(lookup));
  detail::await_operation(pending, limit);
  auto& done = static_cast<address_lookup&>(*pending);
  if (done.status() < 0) {
    detail::throw_uv_error(done.status(), "getaddrinfo", done.subject());
  }
  std::vector<address> addresses;
  for (const addrinfo* entry = done.result(); entry != nullptr; entry = entry->ai_next) {
    address found;
    found.family = entry->ai_family;
    char text[INET6_ADDRSTRLEN] = {};
    if (entry->ai_family == AF_INET) {
      const auto* ipv4 = reinterpret_cast<const sockaddr_in*>(entry->ai_addr);
      uv_ip4_name(ipv4, text, sizeof text);
      found.port = ntohs(ipv4->sin_port);
    } else if (entry->ai_family == AF_INET6) {
      const auto* ipv6 = reinterpret_cast<const sockaddr_in6*>(entry->ai_addr);
      uv_ip6_name(ipv6, text, sizeof text);
      found.port = ntohs(ipv6->sin6_port);
    } else {
      continue;
    }
    found.ip = text;
    if (std::find(addresses.begin(), addresses.end(), found) == addresses.end()) {
      addresses.push_back(std::move(found));
    }
  }
  return addresses;
}

std::vector<address> resolve(const std::string& host, std::uint16_t port, const timeout& limit) {
  return resolve(host, std::to_string(port), limit);
}

std::string reverse(const std::string& ip, const timeout& limit) {
  uv_loop_t& loop = detail::current_uv_loop("weft::dns::reverse");
  detail::refuse_nul(ip, "reverse", "address");
  auto lookup = std::make_unique<name_lookup>(ip);
  lookup->start(loop);
  std::unique_ptr<detail::pending_operation> pending(std::move(lookup));
  detail::await_operation(pending, limit);
  auto& done = static_cast<name_lookup&>(*pending);
  if (done.status() < 0) {
    detail::throw_uv_error(done.status(), "reverse", ip);
  }
  return done.host();
}

}  // namespace weft::dns

// The heap block behind every weft I/O object that owns a libuv handle (streams, listeners, UDP
// sockets), and the helpers they share.
//
// Lifetime: libuv keeps a pointer to a handle from init until its close callback, and a
// coroutine woken by close() may still look at the block after the handle is gone. So the block
// has two owners, and whichever lets go last frees it:
//   - libuv, from uv_close until the close callback (handle_closed);
//   - the weft object (weft::stream, a listener, a socket), until it is destroyed (owner_gone);
//     it holds the block in a handle_owner (weft/io/detail/handle_owner.hpp), as does the setup
//     code before the object exists.
// A handle being closed counts as an operation the reactor waits for before closing the loop
// (reactor::operation_abandoned), so the loop never closes with a close callback still due.
//
// Liveness: a handle is unreferenced (uv_unref) unless a coroutine waits on it (hold/release),
// so read-ahead or an idle listener does not keep the loop alive and deadlock detection still
// sees coroutines that wait on nothing that can happen.
//
// Thread: the scheduler's thread only.
#pragma once

#include <uv.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "sched/deadline_wait.hpp"
#include "sched/scheduler_core.hpp"
#include "weft/error.hpp"
#include "weft/io/detail/handle_owner.hpp"
#include "weft/reactor/detail/operation.hpp"
#include "weft/sched/timeout.hpp"

namespace weft::detail {

class handle_state {
 public:
  handle_state(const handle_state&) = delete;
  handle_state& operator=(const handle_state&) = delete;

  virtual uv_handle_t* handle() noexcept = 0;

  // Starts closing the handle (idempotent): wakes a waiting coroutine (it then sees closing()),
  // restores what needs restoring (on_close_requested), and hands the handle to uv_close.
  void close() noexcept;
  bool closing() const noexcept { return closing_; }

  // The weft object lets go; frees the block if libuv is done with the handle.
  void release_owner() noexcept;

  // What the owning weft object does when it is destroyed or assigned over: closes the handle
  // and lets go. Once its run() has ended the loop is gone (and reported the open handle), so
  // touching libuv would be a use after free: the block is leaked instead.
  void close_and_release_owner() noexcept;

  // A coroutine starts/stops waiting on the handle: it keeps the loop alive meanwhile.
  void hold() noexcept;
  void release() noexcept;

  scheduler_core& core() const noexcept { return *core_; }
  const std::string& subject() const noexcept { return subject_; }
  void set_subject(std::string subject) { subject_ = std::move(subject); }

  // The one coroutine waiting on this handle (a reader, an acceptor, a receiver) and how.
  coroutine* waiter = nullptr;
  wait_source* waiting_on = nullptr;
  bool busy = false;  // a read/accept/receive call is in progress (the single-waiter check)

  // Wakes the waiting coroutine, if any.
  void wake_waiter() noexcept {
    if (waiter != nullptr) {
      core_->wake(*waiter, waiting_on);
    }
  }

 protected:
  explicit handle_state(std::string subject);
  virtual ~handle_state() = default;
  // Runs once, before the handle is closed (e.g. a TTY restores its mode).
  virtual void on_close_requested() noexcept {}
  // Hands the handle to libuv for closing (uv_close; a TCP reset uses uv_tcp_close_reset).
  virtual void close_handle(uv_close_cb on_closed) noexcept { uv_close(handle(), on_closed); }
  // Call once the handle is initialized: from then on only close() may end it.
  void initialized() noexcept;

 private:
  static void on_closed(uv_handle_t* handle) noexcept;

  scheduler_core* core_;
  std::string subject_;
  int holds_ = 0;
  bool initialized_ = false;
  bool closing_ = false;
  bool handle_closed_ = false;
  bool owner_gone_ = false;
};

// The one coroutine waiting on a handle (a reader, an acceptor, a receiver): while armed it is
// the handle's waiter (woken by handle_state::wake_waiter) and keeps the loop alive. ready()
// says there is no need to wait; what ("read from") names the wait in deadlock reports.
template <class Ready>
class single_waiter final : public wait_source {
 public:
  single_waiter(handle_state& state, const char* what, Ready ready)
      : state_(state), what_(what), ready_(std::move(ready)) {}
  bool arm(coroutine& waiter) override {
    if (ready_()) {
      return false;
    }
    state_.waiter = &waiter;
    state_.waiting_on = this;
    state_.hold();
    return true;
  }
  void disarm() noexcept override {
    state_.waiter = nullptr;
    state_.waiting_on = nullptr;
    state_.release();
  }
  void describe(std::string& out) const override {
    out += what_;
    out += ' ';
    out += state_.subject();
  }

 private:
  handle_state& state_;
  const char* what_;
  Ready ready_;
};

// Marks handle_state::busy for the duration of one waiting call, or throws std::logic_error
// ("weft: stream 127.0.0.1:80 already has a reader ...") if another call holds it.
class busy_guard {
 public:
  busy_guard(handle_state& state, const char* what, const char* role);
  ~busy_guard() { state_.busy = false; }
  busy_guard(const busy_guard&) = delete;
  busy_guard& operator=(const busy_guard&) = delete;

 private:
  handle_state& state_;
};

// Waits on one handle with an optional time limit: suspends until ready_source fires, the
// deadline passes (timeout_error "weft: OPERATION SUBJECT timed out after N ms") or the
// coroutine is cancelled (cancelled_error). Returns normally only when ready_source fired.
void wait_on_handle(handle_state& state, wait_source& ready_source, const timeout& limit,
                    const char* operation);

// "127.0.0.1:8080" / "[::1]:8080"; "" for an address of another family.
std::string format_address(const sockaddr* address);

// Ignores SIGPIPE once per process (see stream_handle.cpp).
void ignore_sigpipe_once() noexcept;

// The addresses of host:port: a numeric IPv4/IPv6 address ("[::1]" too) directly, a name
// through uv_getaddrinfo (awaited as a pending operation, so abandoning it is safe). io_error
// "OPERATION HOST: unknown node or service" when the name does not resolve.
std::vector<sockaddr_storage> resolve_host(const std::string& host, std::uint16_t port,
                                           int socket_type, const timeout& limit,
                                           const char* operation);
// Whether host is a numeric address (then errors name the address alone).
bool is_numeric_host(const std::string& host);

// A libuv request awaited by one coroutine (connect, shutdown, write): the request is a member,
// so it lives on the heap with the operation (see weft/reactor/operation.hpp).
template <class Request>
class request_operation : public pending_operation {
 public:
  request_operation(std::string operation, std::string subject)
      : operation_(std::move(operation)), subject_(std::move(subject)) {
    request.data = this;
  }
  void describe(std::string& out) const override { out += operation_ + " " + subject_; }

  // The libuv callback for requests of this kind: records the status and completes.
  template <class Req = Request>
  static void on_done(Req* done, int status) noexcept {
    auto* self = static_cast<request_operation*>(done->data);
    self->status = status;
    self->complete();  // last: frees self if its waiter left
  }

  Request request{};
  int status = 0;

 protected:
  // Writes, shutdowns and connects cannot be cancelled by libuv one by one; they end when they
  // are done or when their handle is closed (with UV_ECANCELED).
  void abandon() noexcept override {}

  std::string operation_;
  std::string subject_;
};

}  // namespace weft::detail

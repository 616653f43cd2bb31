// One uv_fs_* request awaited by a coroutine (internal to file.cpp and file_system.cpp).
//
// The request lives on the heap as a pending_operation (see weft/reactor/operation.hpp): a
// waiter that leaves early (cancelled, timed out) abandons it, uv_cancel stops it if no worker
// has picked it up yet, and otherwise it runs to completion and frees itself in its callback.
// That is why the request owns every byte a worker touches (buffer below) and why an abandoned
// open closes the descriptor it obtained: nobody is left to own it.
#pragma once

#include <unistd.h>
#include <uv.h>

#include <memory>
#include <string>
#include <utility>

#include "weft/io/fs.hpp"
#include "weft/reactor/detail/operation.hpp"
#include "weft/sched/timeout.hpp"

namespace weft::detail {

// A weft::file's descriptor, shared with the requests on it that were abandoned while a worker
// was running them. Closing the file while such a request is still in flight must not close(2)
// the descriptor: its number could be reused by the next open, and the late read or write would
// then land in an unrelated file. So the descriptor is closed when its last holder lets go: the
// file, or the last abandoned request once its worker is done. Loop thread only.
struct fd_guard {
  explicit fd_guard(int descriptor) noexcept : fd(descriptor) {}
  int fd;
  int holders = 1;           // the file, plus each abandoned request still in flight
  bool release() noexcept {  // true when this released the descriptor (it is closed)
    if (--holders > 0) {
      return false;
    }
    ::close(fd);
    delete this;
    return true;
  }
};

class fs_request final : public pending_operation {
 public:
  fs_request(const char* operation, const std::string& subject)
      : operation_(operation), subject_(subject) {
    request_.data = this;
  }
  ~fs_request() override {
    if (guard_held_) {
      guard_->release();
    }
    if (abandoned_ && request_.fs_type == UV_FS_OPEN && request_.result >= 0) {
      uv_fs_t close_request;
      uv_fs_close(request_.loop, &close_request, static_cast<uv_file>(request_.result), nullptr);
      uv_fs_req_cleanup(&close_request);
    }
    uv_fs_req_cleanup(&request_);
  }

  void describe(std::string& out) const override {
    out += operation_;
    out += ' ';
    out += subject_;
  }

  uv_fs_t* request() noexcept { return &request_; }
  // The request works on the descriptor guard keeps (see fd_guard).
  void use_descriptor(fd_guard* guard) noexcept { guard_ = guard; }
  ssize_t result() const noexcept { return request_.result; }
  // Memory the worker reads from (write) or into (read); owned here, not by the caller.
  std::string buffer;

  static void on_done(uv_fs_t* request) {
    static_cast<fs_request*>(request->data)->complete();  // last: may free the request
  }

 protected:
  void abandon() noexcept override {
    abandoned_ = true;
    // Succeeds only while no worker has started it; a running request completes normally, and
    // until then it holds the file's descriptor open.
    if (uv_cancel(reinterpret_cast<uv_req_t*>(&request_)) != 0 && guard_ != nullptr) {
      ++guard_->holders;
      guard_held_ = true;
    }
  }

 private:
  uv_fs_t request_{};
  const char* operation_;
  std::string subject_;
  bool abandoned_ = false;
  fd_guard* guard_ = nullptr;
  bool guard_held_ = false;
};

// Starts one request with start(loop, request, callback) (a uv_fs_* call), waits for it and
// returns it completed with result() >= 0; a libuv error is io_error "operation subject: ...".
template <class Start>
std::unique_ptr<fs_request> run_fs_request(const char* operation, const std::string& subject,
                                           const timeout& limit, Start&& start,
                                           std::string buffer = {}, fd_guard* guard = nullptr) {
  uv_loop_t& loop = current_uv_loop(operation);
  auto request = std::make_unique<fs_request>(operation, subject);
  request->buffer = std::move(buffer);
  request->use_descriptor(guard);
  int status = start(loop, *request, &fs_request::on_done);
  if (status < 0) {
    throw_uv_error(status, operation, subject);  // never queued: no callback will come
  }
  std::unique_ptr<pending_operation> pending(std::move(request));
  await_operation(pending, limit);
  std::unique_ptr<fs_request> done(static_cast<fs_request*>(pending.release()));
  if (done->result() < 0) {
    throw_uv_error(static_cast<int>(done->result()), operation, subject);
  }
  return done;
}

// The file_status of a completed stat/fstat request.
fs::file_status status_of(const uv_stat_t& stat) noexcept;

}  // namespace weft::detail

// weft error model.
//
// Every runtime failure weft raises derives from weft::error (a std::runtime_error); misuse of
// the API (a blocking call outside a coroutine, awaiting yourself, ...) is a std::logic_error.
// Messages say what failed, on what, and what to do about it.
#pragma once

#include <cstddef>
#include <exception>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

namespace weft {

class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Thrown at a suspension point of a cancelled coroutine, and stored as the result of a coroutine
// that was cancelled before it started. reason() is what the canceller passed.
class cancelled_error : public error {
 public:
  // reason: why the coroutine or the wait was cancelled ("deadline passed", "scope cancelled").
  explicit cancelled_error(std::string reason);
  const std::string& reason() const noexcept { return reason_; }

 private:
  std::string reason_;
};

// A wait ended by its cancel token (weft::cancel_on, see timeout.hpp): the wait is over, the
// coroutine itself was not cancelled and may go on (it is a cancelled_error so that code written
// for cancellation unwinds the same way).
class wait_cancelled_error : public cancelled_error {
 public:
  // The same constructor: reason says what the token was and why it completed.
  using cancelled_error::cancelled_error;
};

class timeout_error : public error {
 public:
  using error::error;
};

// The std::error_category of the error codes libuv has of its own, with no errno behind them
// (UV_EOF, UV_EAI_* from getaddrinfo, UV_ECHARSET, UV_EFTYPE, UV_UNKNOWN): name() is "libuv",
// message(code) is libuv's uv_strerror(code) ("end of file"); the values are libuv's own,
// negative. One object for the whole program, so categories compare by address as usual.
const std::error_category& libuv_category() noexcept;

// A failed I/O operation: the error, the operation and what it was applied to
// ("connect 127.0.0.1:1: connection refused", where what() is "OPERATION SUBJECT: MESSAGE").
//
// The error comes two ways:
//   - error_code(), a std::error_code to compare with the standard conditions. A libuv code
//     that stands for an errno value (on Linux libuv's UV_E* codes are the negated errno) is
//     that errno in std::system_category(), so error_code() == std::errc::connection_refused
//     holds for a refused connect, and .value() is ECONNREFUSED. A code libuv has of its own
//     (UV_EOF at the end of a stream, UV_EAI_NONAME from DNS) is in libuv_category(), its
//     value the libuv code.
//   - uv_code(), the raw libuv code (negative: UV_ECONNREFUSED, UV_EOF), for code that already
//     speaks libuv.
// Cheap to copy and to ask: error_code() is computed from the libuv code on each call.
// Text that an I/O call passes on as a C string (a path, a host, a service, a program's
// arguments, environment and working directory) and that holds a NUL byte is refused with
// UV_EINVAL before anything is done ("open /tmp/a\0b: the path contains a NUL byte at offset
// 6; ..."), rather than acted on up to the NUL.
class io_error : public error {
 public:
  // uv_code: a libuv error code (negative); message: what libuv (or weft) says of it.
  io_error(int uv_code, std::string operation, std::string subject, const std::string& message);
  // The code as std::error_code (generic_category's errno value).
  std::error_code error_code() const noexcept;
  int uv_code() const noexcept { return uv_code_; }  // the raw libuv code (negative)
  // The failed call: "connect", "read", "open".
  const std::string& operation() const noexcept { return operation_; }
  // What it was applied to: a peer address or a path.
  const std::string& subject() const noexcept { return subject_; }

 private:
  int uv_code_;
  std::string operation_;
  std::string subject_;
};

// A channel was closed: thrown by send() after close, and by recv() once the buffered values
// are drained. reason() is the reason given to the first close().
class channel_closed_error : public error {
 public:
  // reason: the reason given to the channel's first close().
  explicit channel_closed_error(std::string reason);
  const std::string& reason() const noexcept { return reason_; }

 private:
  std::string reason_;
};

// Every one of several alternatives failed: await_first_success and await_any_of (once too few
// inputs can still succeed) and task_group::any. errors() holds the failures; indexes() says
// where each came from (the input's position for the combinators, the order the tasks ended in
// for task_group::any). The message quotes the first one. Also the outcome of a coroutine that
// ended with several errors (its own and its finish handlers', see task::on_finish; indexes: the
// order they were raised in).
class all_failed_error : public error {
 public:
  // errors: the failures; indexes: where each came from (see above).
  all_failed_error(const std::string& message, std::vector<std::exception_ptr> errors,
                   std::vector<std::size_t> indexes);
  const std::vector<std::exception_ptr>& errors() const noexcept { return errors_; }
  const std::vector<std::size_t>& indexes() const noexcept { return indexes_; }

 private:
  std::vector<std::exception_ptr> errors_;
  std::vector<std::size_t> indexes_;
};

// spawn() into a weft::scope or task_group that no longer accepts work. reason() is the reason
// the scope was closed with ("scope 'x' failed: ...", "scope cancelled", ...).
class scope_closed_error : public error {
 public:
  // message: the full what(); reason: why the scope closed.
  scope_closed_error(const std::string& message, std::string reason);
  const std::string& reason() const noexcept { return reason_; }

 private:
  std::string reason_;
};

// acquire() on a pool that was closed (or close() while waiting for a resource).
class pool_closed_error : public error {
 public:
  using error::error;
};

// acquire() refused at once because the pool's circuit breaker is open (or half-open with its
// probe in flight): the backend is considered down; retry later.
class service_unavailable_error : public error {
 public:
  using error::error;
};

// close() found that resource destructors threw. errors() holds every one (those of idle
// resources destroyed by close, and of resources destroyed earlier where nobody could be told:
// a lease's destructor, a healthcheck replacement). The message quotes the first.
class resource_destroy_error : public error {
 public:
  // errors: what each resource's destructor threw.
  resource_destroy_error(const std::string& message, std::vector<std::exception_ptr> errors);
  const std::vector<std::exception_ptr>& errors() const noexcept { return errors_; }

 private:
  std::vector<std::exception_ptr> errors_;
};

// Thrown by run() when the scheduler found coroutines waiting on each other with nothing left
// that could wake them. report() holds the full "who waits on what" report.
class deadlock_error : public error {
 public:
  // waiting: how many coroutines were found waiting; report: who waits on what.
  deadlock_error(std::size_t waiting, std::string report);
  std::size_t waiting() const noexcept { return waiting_; }
  const std::string& report() const noexcept { return report_; }

 private:
  std::size_t waiting_;
  std::string report_;
};

namespace detail {
// The what() of the exception `error` holds, or "a non-std exception" (for messages).
std::string what_of(const std::exception_ptr& error);
// Whether `error` holds a cancelled_error.
bool is_cancellation(const std::exception_ptr& error);
}  // namespace detail

}  // namespace weft

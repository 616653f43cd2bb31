// weft::thread_pool::run(fn): blocking or CPU-bound work off the scheduler's thread.
//
// fn runs on libuv's worker pool (UV_THREADPOOL_SIZE threads, 4 by default); the calling
// coroutine suspends meanwhile, so the scheduler keeps running the others, and gets fn's value
// back or its exception rethrown. Cancelling the caller (or its timeout passing) before fn has
// started means fn never runs; once fn runs it cannot be interrupted: it completes on its
// worker and its result is discarded. fn must not call weft functions (it runs on another
// thread, outside any scheduler).
#pragma once

#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "weft/reactor/detail/operation.hpp"
#include "weft/sched/timeout.hpp"

namespace weft {
namespace detail {

// One job on the pool; the uv_work_t request lives inside (see thread_pool.cpp).
class pool_job : public pending_operation {
 public:
  pool_job();
  ~pool_job() override;
  void describe(std::string& out) const override { out += "thread-pool job"; }
  // Queues the job on loop. Throws io_error if libuv refuses.
  void queue(uv_loop_t& loop);
  bool cancelled() const noexcept { return cancelled_; }

  // Runs on a worker thread.
  virtual void execute() noexcept = 0;

 protected:
  void abandon() noexcept override;

 private:
  struct request;
  std::unique_ptr<request> request_;
  bool cancelled_ = false;
  friend struct pool_job_callbacks;
};

template <class Function, class Result>
class pool_job_for final : public pool_job {
 public:
  explicit pool_job_for(Function&& function) : function_(std::move(function)) {}
  void execute() noexcept override {
    try {
      if constexpr (std::is_void_v<Result>) {
        function_();
        value_.emplace(true);
      } else {
        value_.emplace(function_());
      }
    } catch (...) {
      error_ = std::current_exception();
    }
  }
  Result take() {
    if (error_) {
      std::rethrow_exception(error_);
    }
    if constexpr (!std::is_void_v<Result>) {
      return std::move(*value_);
    }
  }

 private:
  using stored = std::conditional_t<std::is_void_v<Result>, bool, Result>;
  Function function_;
  std::optional<stored> value_;
  std::exception_ptr error_;
};

}  // namespace detail

namespace thread_pool {

// Runs fn on the pool and returns its value or rethrows its exception (see above).
template <class Function>
auto run(Function&& fn, const timeout& limit = timeout::never())
    -> std::invoke_result_t<std::decay_t<Function>&> {
  using result = std::invoke_result_t<std::decay_t<Function>&>;
  using job_type = detail::pool_job_for<std::decay_t<Function>, result>;
  uv_loop_t& loop = detail::current_uv_loop("weft::thread_pool::run");
  auto job = std::make_unique<job_type>(std::decay_t<Function>(std::forward<Function>(fn)));
  job->queue(loop);
  std::unique_ptr<detail::pending_operation> operation(std::move(job));
  detail::await_operation(operation, limit);
  return static_cast<job_type&>(*operation).take();
}

}  // namespace thread_pool
}  // namespace weft

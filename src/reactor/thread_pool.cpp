#include "weft/reactor/thread_pool.hpp"

#include <uv.h>

namespace weft::detail {

struct pool_job::request {
  uv_work_t work{};
};

struct pool_job_callbacks {
  static void on_work(uv_work_t* work) { static_cast<pool_job*>(work->data)->execute(); }
  static void on_after_work(uv_work_t* work, int status) {
    auto* job = static_cast<pool_job*>(work->data);
    job->cancelled_ = status == UV_ECANCELED;
    job->complete();  // last: may free the job
  }
};

pool_job::pool_job() : request_(std::make_unique<request>()) { request_->work.data = this; }

pool_job::~pool_job() = default;

void pool_job::queue(uv_loop_t& loop) {
  // libuv's pool hands the job to a worker under its own mutex and back to the loop thread
  // through uv_async, so execute()'s writes happen before on_after_work reads them.
  int status = uv_queue_work(&loop, &request_->work, &pool_job_callbacks::on_work,
                             &pool_job_callbacks::on_after_work);
  if (status < 0) {
    throw_uv_error(status, "weft::thread_pool::run", "");
  }
}

void pool_job::abandon() noexcept {
  // Succeeds only while the job is still queued; a running job completes normally.
  uv_cancel(reinterpret_cast<uv_req_t*>(&request_->work));
}

}  // namespace weft::detail

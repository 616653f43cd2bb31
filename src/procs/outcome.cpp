// weft::procs: step_output, completions, and process handles (waiting from threads and from
// weft coroutines).
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <ctime>
#include <mutex>
#include <utility>

#include "procs/engine.hpp"
#include "weft/error.hpp"
#include "weft/reactor/trigger.hpp"

namespace weft::procs {

// --- step_output ------------------------------------------------------------------------------

void step_output::done(std::string_view result) {
  status_ = step_status::done;
  if (result.empty()) {
    result_.clear();  // most processes finish with no result: no assign (and memcpy) of nothing
  } else {
    result_.assign(result);
  }
}

void step_output::fail(std::string_view reason) {
  fail(std::make_exception_ptr(weft::error(std::string(reason))));
}

void step_output::fail(std::exception_ptr error) {
  status_ = step_status::failed;
  error_ = std::move(error);
}

void step_output::yield(std::string_view type, std::uint64_t tag, std::string_view payload) {
  if (used_ == commands_.size()) {
    commands_.emplace_back();
  }
  command& slot = commands_[used_++];
  slot.type.assign(type);  // assign: the spare command's buffers are reused
  slot.tag = tag;
  slot.payload.assign(payload);
}

void step_output::clear() noexcept {
  status_ = step_status::wait;
  used_ = 0;
  result_.clear();
  if (error_) {
    error_ = nullptr;  // an exception_ptr assignment is a call even when both are null
  }
}

// --- outcome ----------------------------------------------------------------------------------

namespace detail {

void outcome_state::settle(std::string value, std::exception_ptr failure) noexcept {
  result = std::move(value);
  error = std::move(failure);
  // seq_cst store, then seq_cst load of thread_waiters; a waiter does the mirror image
  // (increment, then load finished). In the total order one of them sees the other: the
  // waiter sees 1 and does not sleep, or we see it and wake it (the futex call itself
  // re-checks the word, so a waiter between its load and its sleep is not missed either).
  finished.store(1, std::memory_order_seq_cst);
  if (thread_waiters.load(std::memory_order_seq_cst) != 0) {
    ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&finished), FUTEX_WAKE_PRIVATE, INT_MAX,
              nullptr, nullptr, 0);
  }
  if (!has_coroutine_waiters.load(std::memory_order_seq_cst)) {
    return;  // an awaiter registering now sees finished == 1 before it waits
  }
  // Under the lock: an awaiting coroutine unregisters its trigger under it before the trigger
  // goes away, so none is notified after its end.
  std::lock_guard<spin_lock> guard(waiters_lock);
  for (weft::trigger* waiter : coroutine_waiters) {
    waiter->notify();
  }
  coroutine_waiters.clear();
}

bool outcome_state::wait_until(const std::chrono::steady_clock::time_point* deadline) noexcept {
  thread_waiters.fetch_add(1, std::memory_order_seq_cst);
  bool settled = true;
  while (finished.load(std::memory_order_seq_cst) == 0) {
    timespec relative{};
    timespec* limit = nullptr;
    if (deadline != nullptr) {
      // Saturated: a deadline near time_point::min() minus now would overflow.
      auto left = weft::detail::saturating_remaining(*deadline, std::chrono::steady_clock::now());
      if (left <= std::chrono::steady_clock::duration::zero()) {
        settled = false;
        break;
      }
      auto seconds = std::chrono::duration_cast<std::chrono::seconds>(left);
      relative.tv_sec = static_cast<time_t>(seconds.count());
      relative.tv_nsec = static_cast<long>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(left - seconds).count());
      limit = &relative;
    }
    ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&finished), FUTEX_WAIT_PRIVATE, 0, limit,
              nullptr, 0);
  }
  thread_waiters.fetch_sub(1, std::memory_order_relaxed);
  // Acquire: the result written before the settling store is visible.
  return settled && finished.load(std::memory_order_acquire) != 0;
}

}  // namespace detail

namespace {

std::string take_result(detail::outcome_state& state) {
  // Called once finished is 1 (acquire): result and error are no longer written.
  if (state.error) {
    std::rethrow_exception(state.error);
  }
  return state.result;
}

void require_state(const std::shared_ptr<detail::outcome_state>& state, const char* operation) {
  if (state == nullptr) {
    throw std::logic_error(std::string("weft::procs::process_handle::") + operation +
                           ": the handle is empty (default-constructed); use the one submit "
                           "returned");
  }
}

}  // namespace

bool process_handle::done() const noexcept { return state_ != nullptr && state_->is_finished(); }

std::string process_handle::wait() const {
  require_state(state_, "wait");
  state_->wait_until(nullptr);
  return take_result(*state_);
}

std::string process_handle::wait_for(std::chrono::steady_clock::duration limit) const {
  require_state(state_, "wait_for");
  // Saturated both ways: past the clock's end means no deadline; before its start (a limit
  // near duration::min()), a deadline that has passed.
  const auto deadline = weft::detail::saturating_add(std::chrono::steady_clock::now(), limit);
  if (deadline == std::chrono::steady_clock::time_point::max()) {
    state_->wait_until(nullptr);
    return take_result(*state_);
  }
  if (!state_->wait_until(&deadline)) {
    std::string within =
        limit > std::chrono::steady_clock::duration::zero()
            ? "within " +
                  std::to_string(
                      std::chrono::duration_cast<std::chrono::milliseconds>(limit).count()) +
                  " ms"
            : "before its deadline, which had already passed";
    throw timeout_error("weft::procs: process " + std::to_string(id_ & 0xffffffffu) +
                        " did not finish " + within + "; it keeps running");
  }
  return take_result(*state_);
}

std::string process_handle::await(const weft::timeout& limit) const {
  require_state(state_, "await");
  if (state_->is_finished()) {
    return take_result(*state_);
  }
  weft::trigger finished;  // throws std::logic_error outside a weft coroutine
  {
    std::lock_guard<detail::spin_lock> guard(state_->waiters_lock);
    if (state_->is_finished()) {
      return take_result(*state_);
    }
    state_->coroutine_waiters.push_back(&finished);
    state_->has_coroutine_waiters.store(true, std::memory_order_seq_cst);
  }
  auto unregister = [this, &finished] {
    std::lock_guard<detail::spin_lock> guard(state_->waiters_lock);
    std::erase(state_->coroutine_waiters, &finished);
  };
  try {
    // seq_cst: pairs with settle() (store finished, load has_coroutine_waiters).
    while (state_->finished.load(std::memory_order_seq_cst) == 0) {
      finished.wait(limit);
    }
  } catch (...) {
    unregister();
    throw;
  }
  unregister();
  return take_result(*state_);
}

// --- completion -------------------------------------------------------------------------------

completion::completion(std::shared_ptr<detail::engine> engine, pid target, std::uint64_t tag,
                       const std::string& type)
    : engine_(std::move(engine)), target_(target), tag_(tag), type_(&type) {}

completion::completion(completion&& other) noexcept
    : engine_(std::move(other.engine_)),
      target_(other.target_),
      tag_(other.tag_),
      type_(other.type_) {}

completion& completion::operator=(completion&& other) noexcept {
  if (this != &other) {
    if (pending()) {
      deliver({}, std::make_exception_ptr(
                      weft::error("weft::procs: the completion of command \"" + *type_ +
                                  "\" was overwritten by another before it completed")));
    }
    engine_ = std::move(other.engine_);
    target_ = other.target_;
    tag_ = other.tag_;
    type_ = other.type_;
  }
  return *this;
}

completion::~completion() {
  if (!pending()) {
    return;
  }
  detail::dispatch_frame* frame = detail::current_dispatch;
  if (frame != nullptr && frame->owner == engine_.get() && frame->target == target_ &&
      frame->tag == tag_ && !frame->held.pending()) {
    // Destroyed while its handler runs: dispatch decides between the handler's exception and
    // "dropped" once the handler has returned or thrown.
    frame->held = std::move(*this);
    return;
  }
  deliver({},
          std::make_exception_ptr(weft::error("weft::procs: the handler for command \"" + *type_ +
                                              "\" dropped its completion without completing it")));
}

void completion::complete(std::string data) {
  if (!pending()) {
    throw std::logic_error(
        "weft::procs::completion::complete: already completed (or empty); a "
        "yield is completed once");
  }
  deliver(std::move(data), nullptr);
}

void completion::fail(std::exception_ptr error) {
  if (!pending()) {
    throw std::logic_error(
        "weft::procs::completion::fail: already completed (or empty); a "
        "yield is completed once");
  }
  if (error == nullptr) {
    throw std::invalid_argument("weft::procs::completion::fail needs an exception, got nullptr");
  }
  deliver({}, std::move(error));
}

void completion::fail(std::string_view reason) {
  fail(std::make_exception_ptr(weft::error(std::string(reason))));
}

void completion::deliver(std::string data, std::exception_ptr error) {
  std::shared_ptr<detail::engine> engine = std::move(engine_);
  engine->complete_yield(target_, tag_, std::move(data), std::move(error));
}

}  // namespace weft::procs

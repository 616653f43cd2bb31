// A future as a cancel token (see weft/sched/timeout.hpp): the waits it limits end when it
// settles.
#include <exception>
#include <new>
#include <string>

#include "weft/error.hpp"
#include "weft/sync/detail/waiter_queue.hpp"
#include "weft/sync/future.hpp"

namespace weft::detail {

namespace {

// A watch on a future that had already settled when the wait began: fires at arm().
class settled_already final : public wait_source {
 public:
  explicit settled_already(const future_state_base& state) noexcept : state_(state) {}
  bool arm(coroutine&) override { return false; }
  void disarm() noexcept override {}
  void describe(std::string& out) const override { state_.describe(out); }

 private:
  const future_state_base& state_;
};

class future_token final : public cancel_token {
 public:
  explicit future_token(future_state_base& state) noexcept : state_(state) { state_.add_ref(); }

  // A pending future's watch waits in its awaiters queue, which the settle grants all at once.
  // It is the queued_waiter itself (not a wrapper): the grant wakes the wait with the queued
  // waiter as the source that fired, and the wait compares that with what watch() returned.
  wait_source* watch(void* storage) const override {
    static_assert(sizeof(queued_waiter) <= watch_storage);
    static_assert(sizeof(settled_already) <= watch_storage);
    if (state_.settled()) {
      return new (storage) settled_already(state_);
    }
    return new (storage) queued_waiter(state_.awaiters());
  }
  void unwatch(wait_source* source) const noexcept override {
    if (auto* already = dynamic_cast<settled_already*>(source); already != nullptr) {
      already->~settled_already();
    } else {
      static_cast<queued_waiter*>(source)->~queued_waiter();
    }
  }
  std::string reason() const override {
    std::string what;
    state_.describe(what);
    if (state_.error()) {
      try {
        std::rethrow_exception(state_.error());
      } catch (const cancelled_error& cancelled) {
        return cancelled.reason();
      } catch (const std::exception& failure) {
        return what + " failed: " + failure.what();
      } catch (...) {
        return what + " failed";
      }
    }
    return what + " completed";
  }

 private:
  ~future_token() override { state_.release(); }

  future_state_base& state_;
};

}  // namespace

const cancel_token* make_future_cancel_token(future_state_base& state) {
  return new future_token(state);
}

}  // namespace weft::detail

// A task as a cancel token (see weft/sched/timeout.hpp): the waits it limits end when the task
// does.
#include <exception>
#include <new>
#include <stdexcept>
#include <string>

#include "sched/scheduler_core.hpp"
#include "weft/error.hpp"
#include "weft/sched/task.hpp"

namespace weft::detail {

namespace {

class task_token final : public cancel_token {
 public:
  explicit task_token(coroutine& target) noexcept : target_(target) { target_.add_ref(); }

  wait_source* watch(void* storage) const override {
    if (current_scheduler_or_null() != &target_.owner()) {
      std::string what;
      describe(what);
      throw std::logic_error("weft: a wait was given " + what +
                             " of another thread's scheduler as its cancel token; a task can "
                             "only cancel waits of coroutines of the scheduler that spawned it");
    }
    static_assert(sizeof(scheduler_core::task_wait) <= watch_storage);
    return new (storage) scheduler_core::task_wait(target_);
  }
  void unwatch(wait_source* source) const noexcept override {
    static_cast<scheduler_core::task_wait*>(source)->~task_wait();
  }
  std::string reason() const override {
    std::string what;
    describe(what);
    if (target_.error()) {
      // Looking at the error does not observe it: the task's failure stays its own business.
      try {
        std::rethrow_exception(target_.error());
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
  ~task_token() override { target_.release(); }

  void describe(std::string& out) const {
    out += "task " + std::to_string(target_.id());
    if (!target_.name().empty()) {
      out += " '" + target_.name() + "'";
    }
  }

  coroutine& target_;
};

}  // namespace

const cancel_token* make_task_cancel_token(coroutine& target) { return new task_token(target); }

}  // namespace weft::detail

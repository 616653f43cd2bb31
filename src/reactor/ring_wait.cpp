// ring_receive (src/reactor/ring.hpp): a coroutine waiting for one ring operation.
#include <cerrno>
#include <string>

#include "reactor/ring.hpp"
#include "sched/deadline_wait.hpp"
#include "sched/scheduler_core.hpp"
#include "weft/error.hpp"
#include "weft/sched/this_coroutine.hpp"

namespace weft::detail {
namespace {

// The operation's completion and the wait source its waiter suspends on, in the waiter's frame:
// ring_receive does not return before the completion came.
class ring_waiter final : public ring_completion, public wait_source {
 public:
  ring_waiter(scheduler_core& core, int fd) noexcept : core_(core), fd_(fd) {}

  void ring_completed(int result) noexcept override {
    result_ = result;
    done_ = true;
    if (waiter_ != nullptr) {
      core_.wake(*waiter_, this);
    }
  }
  bool arm(coroutine& waiter) override {
    if (done_) {
      return false;
    }
    waiter_ = &waiter;
    return true;
  }
  void disarm() noexcept override { waiter_ = nullptr; }
  void describe(std::string& out) const override {
    out += "a receive on fd " + std::to_string(fd_) + " (io_uring)";
  }

  bool done() const noexcept { return done_; }
  int result() const noexcept { return result_; }

 private:
  scheduler_core& core_;
  coroutine* waiter_ = nullptr;
  int fd_;
  int result_ = 0;
  bool done_ = false;
};

// A recv that completed wins over the deadline that ended its wait: forgets a timeout_error,
// keeps a cancellation.
void drop_deadline(std::exception_ptr& early) noexcept {
  if (early == nullptr) {
    return;
  }
  try {
    std::rethrow_exception(early);
  } catch (const timeout_error&) {
    early = nullptr;
  } catch (...) {
  }
}

}  // namespace

int ring_receive(ring_io& ring, int fd, void* data, std::size_t size, const timeout& limit,
                 std::exception_ptr& early) {
  scheduler_core* core = current_core();
  if (core == nullptr) {
    throw std::logic_error("weft: a ring receive called outside a coroutine");
  }
  coroutine& self = core->waiter_or_throw("weft::net::connection::receive");
  ring_waiter op(*core, fd);
  ring.submit_recv(fd, data, size, op);  // (throws with nothing in flight)
  wait_source* sources[] = {&op};
  try {
    wait_with_limit(*core, self, sources, limit,
                    [&] { return "a receive on fd " + std::to_string(fd); });
  } catch (...) {
    early = std::current_exception();
  }
  if (op.done()) {
    // Completed: what it brought wins over a deadline that passed with it; a cancellation
    // is the caller's to rethrow after taking the bytes.
    drop_deadline(early);
    return op.result();
  }
  try {
    ring.cancel(op);
  } catch (...) {
    // The ring refused the cancellation: the recv still completes when bytes or the end come.
  }
  protect([&] {
    while (!op.done()) {
      try {
        core->wait_as(self, sources, 1);
      } catch (const cancelled_error&) {
        // (a forced cancellation goes through protect: raised once, then waited through)
      }
    }
  });
  if (op.result() != -ECANCELED) {
    drop_deadline(early);
  }
  return op.result();
}

}  // namespace weft::detail

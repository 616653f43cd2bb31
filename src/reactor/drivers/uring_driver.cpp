// The io_uring driver: the scheduler blocks in io_uring_enter, and fd readiness is a one-shot
// IORING_OP_POLL_ADD per watch, armed again after each report. Built when CMake found liburing
// and the build machine's kernel let a ring be set up (WEFT_HAVE_LIBURING); Linux 5.11 or later
// (one enter both submits and waits with a timeout).
//
// Why a fifth driver: every other driver makes one epoll_ctl (or a poll(2) entry) per change of
// what a fd is polled for and one epoll_wait per turn; here the changes of a whole turn go to
// the kernel in the one io_uring_enter that also waits. It is also the ring that completion-
// based I/O (a recv or a send queued in the ring, no system call per message) is submitted to.
//
// Level-triggered, as every driver: a one-shot poll completes at once when the fd is already
// ready, so a watch re-armed after a report that its callback did not consume reports again at
// the next turn, like epoll's level mode. Multishot polls are edge-like and would break that.
//
// The native part (embedding_driver.hpp):
// - native_watch records what the watch wants (armed) and queues it to be armed; nothing goes to
//   the kernel until native_wait, which writes the queued polls into the submission queue and
//   enters once. A watch already polled for a superset of what it wants now stays as it is (a
//   report outside `armed` is dropped); one that wants more is cancelled and armed again with
//   the new mask when the cancellation completes.
// - native_unwatch forgets the watch at once; its poll, if one is in flight, is cancelled at the
//   next enter, and its slot is reused only once the poll's completion came back. An in-flight
//   poll holds a reference to the file: a socket closed by the caller right after unwatching is
//   released (its FIN sent) by that enter, which comes before the scheduler sleeps.
// - A report: POLLERR or POLLNVAL stop the watch (ready both ways, `stopped`; the caller looks at
//   the fd and watches it again), as the poll driver does; POLLHUP is ready both ways; an error
//   completion (-EBADF) stops it too.
//
// The ring: single issuer with deferred task work where the kernel has them (6.1), created
// disabled and enabled by the scheduler's thread at its first wait, since a scheduler may be
// constructed on another thread than the one it runs on. 1024 submission entries (a turn with
// more queued polls submits in chunks) and 8192 completion entries (the kernel keeps overflow).
//
// Signals (libuv's, on the embedded loop) end a wait early with EINTR, as on every driver.
//
// Ring operations (src/reactor/ring.hpp): a recv or a send goes into the submission queue at
// once and to the kernel with the next enter; its completion runs the caller's ring_completion
// from reap(), in order with the polls'. user_data tells them apart: a poll's is (slot index +
// 1) << 1, even; an operation's is its completion's address | 1, odd (the objects are aligned);
// 0 marks completions nobody reads (the cancellations). Each operation in flight counts in
// alive() (native_busy_), so the scheduler polls until it completes.
#include <liburing.h>
#include <poll.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "reactor/drivers/drivers.hpp"
#include "reactor/drivers/embedding_driver.hpp"
#include "reactor/drivers/libuv_loop.hpp"
#include "reactor/ring.hpp"

namespace weft::detail {
namespace {

constexpr unsigned submission_entries = 1024;
constexpr unsigned completion_entries = 8192;

// The ring's bookkeeping of one watch, kept apart from the fd_watch so that a poll still in
// flight after the watch was forgotten completes into something that exists. user_data of a
// poll is (the slot's index + 1) << 1 (see the header).
struct poll_slot {
  fd_watch* watch = nullptr;  // null: forgotten (its poll may still be in flight)
  std::uint32_t index = 0;
  unsigned polled = 0;      // the mask of the poll in flight
  bool in_flight = false;   // a poll of this slot is in the kernel
  bool cancelling = false;  // ... and its cancellation has been submitted
  bool queued = false;      // in the driver's queue of slots to submit for
};

std::uint64_t poll_data(std::uint32_t index) noexcept { return (std::uint64_t{index} + 1) << 1; }

std::uint64_t operation_data(ring_completion& done) noexcept {
  return reinterpret_cast<std::uintptr_t>(&done) | 1u;
}

class uring_driver final : public embedding_driver, public ring_io {
 public:
  const char* name() const noexcept override { return uring_driver_name; }

  void submit_recv(int fd, void* data, std::size_t size, ring_completion& done) override {
    io_uring_sqe* sqe = next_entry();
    io_uring_prep_recv(sqe, fd, data, size, 0);
    io_uring_sqe_set_data64(sqe, operation_data(done));
    ++native_busy_;
  }

  void submit_send(int fd, const void* data, std::size_t size, ring_completion& done) override {
    io_uring_sqe* sqe = next_entry();
    io_uring_prep_send(sqe, fd, data, size, MSG_NOSIGNAL);
    io_uring_sqe_set_data64(sqe, operation_data(done));
    ++native_busy_;
  }

  void cancel(ring_completion& done) override {
    io_uring_sqe* sqe = next_entry();
    io_uring_prep_cancel64(sqe, operation_data(done), 0);
    io_uring_sqe_set_data64(sqe, 0);
  }

  uring_driver() {
    io_uring_params params{};
    params.flags = IORING_SETUP_CQSIZE | IORING_SETUP_R_DISABLED | IORING_SETUP_SINGLE_ISSUER |
                   IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_SUBMIT_ALL;
    params.cq_entries = completion_entries;
    int status = io_uring_queue_init_params(submission_entries, &uring_, &params);
    if (status == -EINVAL) {
      // Before 6.1: no single issuer, no deferred task work.
      params = io_uring_params{};
      params.flags = IORING_SETUP_CQSIZE | IORING_SETUP_R_DISABLED;
      params.cq_entries = completion_entries;
      status = io_uring_queue_init_params(submission_entries, &uring_, &params);
    }
    if (status < 0) {
      throw std::runtime_error(
          std::string("weft: driver 'uring' cannot set up an io_uring (io_uring_queue_init: ") +
          std::strerror(-status) +
          "); the kernel may lack io_uring or forbid it (kernel.io_uring_disabled, a seccomp "
          "filter); choose another driver");
    }
    if ((params.features & IORING_FEAT_EXT_ARG) == 0) {
      io_uring_queue_exit(&uring_);
      throw std::runtime_error(
          "weft: driver 'uring' needs Linux 5.11 or later (IORING_FEAT_EXT_ARG: one enter that "
          "submits and waits with a timeout); choose another driver");
    }
    try {
      start_embedding();
    } catch (...) {
      io_uring_queue_exit(&uring_);
      throw;
    }
    ring_ = this;
  }
  ~uring_driver() override { close_if_open(); }

 private:
  int native_watch(fd_watch& watch) override {
    if (!watch.watched) {
      poll_slot& slot = new_slot();
      try {
        watches_.add(watch);
      } catch (...) {
        free_slot(slot);
        throw;
      }
      slot.watch = &watch;
      watch.slot = &slot;
      watch.watched = true;
    }
    watch.armed = watch.events;
    if (watch.events != 0) {
      queue(*static_cast<poll_slot*>(watch.slot));  // submit_queued decides what it needs
    }
    return 0;
  }

  void native_unwatch(fd_watch& watch) noexcept override {
    if (!watch.watched) {
      return;
    }
    auto& slot = *static_cast<poll_slot*>(watch.slot);
    watches_.remove(watch);
    watch.watched = false;
    watch.armed = 0;
    watch.slot = nullptr;
    slot.watch = nullptr;
    if (slot.in_flight || slot.queued) {
      queue(slot);  // the next submission cancels its poll, or frees it
    } else {
      free_slot(slot);
    }
  }

  void native_wait(timer_clock::time_point until) override {
    if (!enabled_) {
      // io_uring_enable_rings is declared by Debian 12's liburing 2.3 but not exported.
      int status = io_uring_register(uring_.ring_fd, IORING_REGISTER_ENABLE_RINGS, nullptr, 0);
      if (status < 0) {
        throw std::runtime_error(std::string("weft: driver 'uring' cannot enable its ring: ") +
                                 std::strerror(-status));
      }
      enabled_ = true;
      // Each enter then skips the lookup of the ring's file (Linux 5.18; optional).
      io_uring_register_ring_fd(&uring_);
    }
    submit_queued();
    int status = 0;
    if (until == timer_clock::time_point::min()) {
      status = io_uring_submit_and_get_events(&uring_);
    } else if (until == timer_clock::time_point::max()) {
      status = io_uring_submit_and_wait(&uring_, 1);
    } else {
      auto wait = wait_until(until, timer_clock::now(), std::chrono::nanoseconds(INT64_MAX));
      __kernel_timespec span{};
      span.tv_sec = static_cast<long long>(wait.count() / 1'000'000'000);
      span.tv_nsec = static_cast<long long>(wait.count() % 1'000'000'000);
      io_uring_cqe* first = nullptr;
      status = io_uring_submit_and_wait_timeout(&uring_, &first, 1, &span, nullptr);
    }
    if (status < 0 && status != -EINTR && status != -ETIME && status != -EAGAIN &&
        status != -EBUSY) {
      throw std::runtime_error(std::string("weft: driver 'uring': io_uring_enter failed: ") +
                               std::strerror(-status));
    }
    reap();
  }

  // Every completion the ring holds, in order. Callbacks run from here may watch and unwatch
  // (that only queues) and submit ring operations, which enter the ring only when its
  // submission queue is full (next_entry; completions it cannot take wait in stashed_).
  void reap() {
    if (!stashed_.empty()) {
      std::vector<stashed_completion> taken;
      taken.swap(stashed_);
      for (std::size_t at = 0; at < taken.size(); ++at) {
        try {
          dispatch(taken[at].data, taken[at].result);
        } catch (...) {
          stashed_.assign(taken.begin() + static_cast<std::ptrdiff_t>(at) + 1, taken.end());
          throw;
        }
      }
    }
    // Taken one at a time with the head advanced before the callback, so that a callback that
    // throws leaves no completion to be read twice.
    io_uring_cqe* cqe = nullptr;
    while (io_uring_peek_cqe(&uring_, &cqe) == 0 && cqe != nullptr) {
      const std::uint64_t data = cqe->user_data;
      const int result = cqe->res;
      io_uring_cqe_seen(&uring_, cqe);
      if (data != 0) {
        dispatch(data, result);
      }
    }
  }

  void dispatch(std::uint64_t data, int result) {
    if ((data & 1u) != 0) {
      --native_busy_;
      reinterpret_cast<ring_completion*>(static_cast<std::uintptr_t>(data & ~std::uint64_t{1}))
          ->ring_completed(result);
      return;
    }
    completed(*slots_[(data >> 1) - 1], result);
  }

  void completed(poll_slot& slot, int result) {
    slot.in_flight = false;
    slot.cancelling = false;
    fd_watch* watch = slot.watch;
    if (watch == nullptr) {
      if (!slot.queued) {
        free_slot(slot);
      }
      return;
    }
    if (result == -ECANCELED) {
      if (watch->events != 0) {
        queue(slot);  // cancelled to poll for more: armed again with what it wants now
      }
      return;
    }
    if (result < 0) {
      // The fd cannot be polled (closed: EBADF): stopped, as POLLNVAL on the poll driver.
      report_ready(*watch, fd_watch::readable | fd_watch::writable, true);
      return;
    }
    // The mask drops an interest dropped while the poll was in flight.
    const poll_outcome outcome = outcome_of(static_cast<unsigned>(result), watch->armed);
    if (!outcome.stopped && watch->events != 0) {
      queue(slot);  // level-triggered: polled again at the next enter (see the header)
    }
    if (outcome.events != 0) {
      report_ready(*watch, outcome.events, outcome.stopped);
    }
  }

  // Writes what each queued slot needs into the submission queue: its poll, its cancellation,
  // or nothing (forgotten and no longer in flight: freed).
  void submit_queued() {
    for (std::size_t at = 0; at < queue_.size(); ++at) {
      poll_slot& slot = *slots_[queue_[at]];
      slot.queued = false;
      if (slot.watch == nullptr) {
        if (!slot.in_flight) {
          free_slot(slot);
        } else if (!slot.cancelling) {
          cancel(slot);
        }
        continue;
      }
      const unsigned wanted = mask_of(slot.watch->events);
      if (slot.in_flight) {
        if ((wanted & ~slot.polled) != 0 && !slot.cancelling) {
          cancel(slot);  // completes with -ECANCELED; armed again then
        }
        continue;
      }
      if (wanted == 0) {
        continue;
      }
      io_uring_sqe* sqe = next_entry();
      io_uring_prep_poll_add(sqe, slot.watch->fd, wanted);
      io_uring_sqe_set_data64(sqe, poll_data(slot.index));
      slot.in_flight = true;
      slot.polled = wanted;
    }
    queue_.clear();
  }

  void cancel(poll_slot& slot) {
    io_uring_sqe* sqe = next_entry();
    io_uring_prep_poll_remove(sqe, poll_data(slot.index));
    io_uring_sqe_set_data64(sqe, 0);
    slot.cancelling = true;
  }

  // A free submission entry; a full queue is submitted first to make room.
  io_uring_sqe* next_entry() {
    io_uring_sqe* sqe = io_uring_get_sqe(&uring_);
    while (sqe == nullptr) {
      int status = io_uring_submit(&uring_);
      if (status < 0 && status != -EINTR && status != -EAGAIN && status != -EBUSY) {
        throw std::runtime_error(std::string("weft: driver 'uring': io_uring_submit failed: ") +
                                 std::strerror(-status));
      }
      if (status < 0) {
        stash();  // the completion queue is full (EBUSY): make room
      }
      sqe = io_uring_get_sqe(&uring_);
    }
    return sqe;
  }

  // Moves every completion out of the ring, to be run by the next reap(): submit_queued, which
  // is iterating the queue, must not run callbacks (they queue).
  void stash() {
    io_uring_cqe* cqe = nullptr;
    while (io_uring_peek_cqe(&uring_, &cqe) == 0 && cqe != nullptr) {
      if (cqe->user_data != 0) {
        stashed_.push_back({cqe->user_data, cqe->res});
      }
      io_uring_cqe_seen(&uring_, cqe);
    }
  }

  static unsigned mask_of(int events) noexcept {
    return ((events & fd_watch::readable) != 0 ? POLLIN : 0u) |
           ((events & fd_watch::writable) != 0 ? POLLOUT : 0u);
  }

  void queue(poll_slot& slot) {
    if (!slot.queued) {
      queue_.push_back(slot.index);  // reserved by new_slot: never allocates
      slot.queued = true;
    }
  }

  poll_slot& new_slot() {
    // The queue holds each slot at most once: room for all of them makes queue() noexcept.
    queue_.reserve(slots_.size() + 1);
    if (!free_.empty()) {
      poll_slot& slot = *slots_[free_.back()];
      free_.pop_back();
      return slot;
    }
    free_.reserve(slots_.size() + 1);
    auto made = std::make_unique<poll_slot>();
    made->index = static_cast<std::uint32_t>(slots_.size());
    slots_.push_back(std::move(made));
    return *slots_.back();
  }

  void free_slot(poll_slot& slot) noexcept {
    slot.watch = nullptr;
    slot.polled = 0;
    slot.in_flight = false;
    slot.cancelling = false;
    slot.queued = false;
    free_.push_back(slot.index);  // reserved by new_slot
  }

  std::string native_release_all() noexcept override { return release_all(watches_); }

  // Closing with ring operations still in flight (their owners outlived the run: a scheduler
  // torn down by an exception): each is cancelled and its completion delivered, so that no
  // owner waits forever and the kernel writes into no memory after the ring is gone.
  void finish_operations() noexcept {
    ring_ = nullptr;
    if (native_busy_ == 0 || !enabled_) {
      return;
    }
    try {
      stash();
      io_uring_sqe* sqe = next_entry();
      io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY);
      io_uring_sqe_set_data64(sqe, 0);
      for (int round = 0; native_busy_ > 0 && round < 1000; ++round) {
        const int status = io_uring_submit_and_wait(&uring_, 1);
        if (status < 0 && status != -EINTR && status != -EAGAIN && status != -EBUSY) {
          break;
        }
        reap();
      }
    } catch (...) {
      // A callback that threw, or a ring that refused: what is left is cancelled by the exit.
    }
  }

  void native_close() noexcept override {
    finish_operations();
    io_uring_queue_exit(&uring_);  // cancels what is still in flight
    slots_.clear();
    free_.clear();
    queue_.clear();
    stashed_.clear();
  }

  struct stashed_completion {
    std::uint64_t data;
    int result;
  };

  io_uring uring_{};
  bool enabled_ = false;
  std::vector<stashed_completion> stashed_;
  watch_list watches_;
  std::vector<std::unique_ptr<poll_slot>> slots_;
  std::vector<std::uint32_t> free_;   // indices of unused slots
  std::vector<std::uint32_t> queue_;  // indices of slots to submit for at the next enter
};

}  // namespace

std::unique_ptr<reactor_driver> make_uring_driver() { return std::make_unique<uring_driver>(); }

}  // namespace weft::detail

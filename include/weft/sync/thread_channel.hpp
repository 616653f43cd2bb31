// weft::thread_channel<T>: a channel between threads: coroutines of different schedulers
// (weft::spawn_thread) and plain threads that run no scheduler at all.
//
//   weft::thread_channel<int> results(64);
//   std::thread worker([results]() mutable { results.send(compute()); results.close("done"); });
//   for (int result : results) { ... }  // in a coroutine: only this coroutine waits
//
// Same contract as weft::channel<T> (channel.hpp): capacity 0 is a rendezvous, N is bounded,
// unbounded() never blocks the sender; FIFO hand-off among waiters from every thread; optional
// weft::timeout (nothing consumed); close(reason) idempotent with the first reason winning,
// buffered values drain, senders blocked at the close get channel_closed_error and their values
// are not delivered; a cancelled coroutine receiver passes its value on; a coroutine sender whose
// value was taken before its cancellation completes its send (the cancel is raised at its next
// suspension point).
//
// What blocks: in a coroutine, send/recv suspend only that coroutine; its scheduler keeps running
// the others and the waiter is woken through a weft::trigger of its own scheduler. On a thread
// with no running scheduler they block the thread (on a condition variable). On a scheduler's
// thread, call the blocking ones only from a coroutine: from a microtask or a reactor callback
// use try_send/try_recv (a blocking call there would stall every coroutine of the scheduler).
//
// Threads and ownership: every member may be called from any thread. thread_channel<T> is a
// handle with shared (atomically counted) ownership: copy it into each thread that uses it; the
// channel lives while any handle, or any caller blocked on it, does.
//
// Deadlocks: a coroutine waiting here keeps its scheduler's run() alive (another thread may send
// at any time), so deadlock detection does not report such a wait; close the channel to end it.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <iterator>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>

#include "weft/error.hpp"
#include "weft/reactor/trigger.hpp"
#include "weft/sched/detail/coroutine.hpp"
#include "weft/sched/timeout.hpp"
#include "weft/sync/channel.hpp"

namespace weft {

namespace detail {

class thread_waiter_list;

// One caller blocked on a thread_channel, living on its own stack. Every field but the wake-up
// objects is read and written only under the channel's mutex.
//
// Why no wakeup is lost and nobody is woken into freed memory: a waiter is linked, and later
// completed (outcome set, then woken) or unlinked, only under the channel's mutex; a completer
// calls the wake-up (trigger::notify or condition_variable::notify_one) before it releases the
// mutex. The waiter decides it is done only by reading outcome under that mutex, so a wake-up
// that comes before it sleeps is kept (a trigger keeps a notification; a condition variable
// wait checks outcome first), and once it has seen the outcome or unlinked itself no other
// thread touches it again, so it may return and destroy its trigger (and its scheduler may end).
// The mutex also orders the value: the completer moves it into the waiter's slot (or out of a
// sender's) before unlocking, and the waiter reads it after locking.
class thread_channel_waiter : public list_node {
 public:
  using describe_function = void (*)(const void* owner, std::string& out);

  // Sets up the wake-up for the calling context: a trigger of this coroutine's scheduler, or a
  // condition variable for a plain thread. std::logic_error on a scheduler's thread with no
  // current coroutine. Called without the mutex (making a trigger touches the event loop).
  thread_channel_waiter(void* slot, const char* operation, describe_function describe,
                        const void* owner);
  thread_channel_waiter(const thread_channel_waiter&) = delete;
  thread_channel_waiter& operator=(const thread_channel_waiter&) = delete;
  ~thread_channel_waiter();

  void* slot;
  std::uint8_t outcome = 0;  // channel_outcome; 0 while waiting
  // A cancellation raised after the outcome was set: the caller settles the outcome first (a
  // receiver passes its value on) and then rethrows it, or defers it (a sender whose value was
  // taken).
  std::exception_ptr interrupted;

  // Ends the wait (the completer has unlinked it): sets the outcome and wakes the waiter.
  // Called under the channel's mutex.
  void complete(std::uint8_t how) noexcept;

  // Waits, the lock held on entry and on return, until complete() ran. Throws timeout_error or
  // cancelled_error when they came first, after unlinking the waiter. If they came after the
  // outcome was set, the outcome wins: a late timeout is ignored, a late cancel is stored in
  // interrupted.
  void park(std::unique_lock<std::mutex>& lock, const timeout& limit);

 private:
  friend class thread_waiter_list;
  [[noreturn]] void throw_timed_out(const timeout& limit);

  thread_waiter_list* list_ = nullptr;
  const char* operation_;
  describe_function describe_;
  const void* owner_;
  std::optional<trigger> coroutine_wake_;
  std::condition_variable thread_wake_;
};

// The blocked receivers or senders of a thread_channel, oldest first. Guarded by its mutex.
class thread_waiter_list {
 public:
  bool empty() const noexcept { return size_ == 0; }
  std::size_t size() const noexcept { return size_; }
  thread_channel_waiter* front() const noexcept {
    return static_cast<thread_channel_waiter*>(list_.front());
  }
  void push_back(thread_channel_waiter& waiter) noexcept {
    waiter.list_ = this;
    list_.push_back(waiter);
    ++size_;
  }
  thread_channel_waiter* pop_front() noexcept {
    auto* waiter = static_cast<thread_channel_waiter*>(list_.pop_front());
    if (waiter != nullptr) {
      --size_;
    }
    return waiter;
  }
  void remove(thread_channel_waiter& waiter) noexcept {
    intrusive_list::remove(waiter);
    --size_;
  }
  // Completes every waiter with how (close).
  void complete_all(std::uint8_t how) noexcept {
    while (thread_channel_waiter* waiter = pop_front()) {
      waiter->complete(how);
    }
  }

 private:
  intrusive_list list_;
  std::size_t size_ = 0;
};

// Rethrows a cancellation stored in interrupted as something defer_cancellation can take.
void defer_interrupted_cancellation(const std::exception_ptr& interrupted);

template <class T>
class thread_channel_state : public std::enable_shared_from_this<thread_channel_state<T>> {
 public:
  explicit thread_channel_state(std::size_t capacity) : capacity_(capacity) {
    constexpr std::size_t reserve_limit = 1024;
    buffer_.reserve(capacity_ < reserve_limit ? capacity_ : reserve_limit);
  }

  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return buffer_.size();
  }
  std::size_t capacity() const noexcept { return capacity_; }
  bool closed() const {
    std::lock_guard lock(mutex_);
    return closed_;
  }

  void send(T&& value, const timeout& limit) {
    {
      std::lock_guard lock(mutex_);
      if (offer_locked(value)) {
        return;
      }
    }
    std::shared_ptr<thread_channel_state> keep_alive = this->shared_from_this();
    thread_channel_waiter me(&value, "send", &describe_senders, this);
    std::unique_lock lock(mutex_);
    if (offer_locked(value)) {  // things changed while the waiter was being set up
      return;
    }
    senders_.push_back(me);
    me.park(lock, limit);
    if (me.interrupted) {
      if (me.outcome == channel_delivered) {
        defer_interrupted_cancellation(me.interrupted);
        return;
      }
      std::rethrow_exception(me.interrupted);
    }
    if (me.outcome == channel_was_closed) {
      std::string reason = close_reason_;
      lock.unlock();
      throw_channel_closed(name(), reason, closed_during::blocked_send);
    }
  }

  bool offer(T& value) {
    std::lock_guard lock(mutex_);
    return offer_locked(value);
  }

  std::optional<T> receive(const timeout& limit) {
    {
      std::lock_guard lock(mutex_);
      if (std::optional<T> value = poll_locked()) {
        return value;
      }
      if (closed_) {
        return std::nullopt;
      }
    }
    std::shared_ptr<thread_channel_state> keep_alive = this->shared_from_this();
    std::optional<T> slot;
    thread_channel_waiter me(&slot, "recv", &describe_receivers, this);
    std::unique_lock lock(mutex_);
    if (std::optional<T> value = poll_locked()) {
      return value;
    }
    if (closed_) {
      return std::nullopt;
    }
    receivers_.push_back(me);
    me.park(lock, limit);
    if (me.interrupted) {
      if (me.outcome == channel_delivered) {
        pass_on_locked(std::move(*slot));
      }
      std::rethrow_exception(me.interrupted);
    }
    if (me.outcome == channel_was_closed) {
      return std::nullopt;
    }
    return slot;
  }

  // try_recv: a value without waiting; nullopt if none, and closed_and_drained tells why.
  std::optional<T> poll(bool& closed_and_drained) {
    std::lock_guard lock(mutex_);
    std::optional<T> value = poll_locked();
    closed_and_drained = !value && closed_;
    return value;
  }

  [[noreturn]] void throw_closed_on_recv() const {
    std::string reason;
    {
      std::lock_guard lock(mutex_);
      reason = close_reason_;
    }
    throw_channel_closed(name(), reason, closed_during::recv);
  }

  void close(std::string reason) {
    std::lock_guard lock(mutex_);
    if (closed_) {
      return;
    }
    closed_ = true;
    close_reason_ = std::move(reason);
    receivers_.complete_all(channel_was_closed);
    senders_.complete_all(channel_was_closed);
  }

  std::string name() const { return channel_name("thread_channel", typeid(T), this); }

 private:
  bool offer_locked(T& value) {
    if (closed_) {
      std::string reason = close_reason_;
      throw_channel_closed(name(), reason, closed_during::send);
    }
    if (thread_channel_waiter* receiver = receivers_.pop_front()) {
      static_cast<std::optional<T>*>(receiver->slot)->emplace(std::move(value));
      receiver->complete(channel_delivered);
      return true;
    }
    if (senders_.empty() && buffer_.size() < capacity_) {
      buffer_.push_back(std::move(value));
      return true;
    }
    return false;
  }

  std::optional<T> poll_locked() {
    if (!buffer_.empty()) {
      std::optional<T> value(buffer_.pop_front());
      // The pop made room without shrinking the ring, so these pushes cannot allocate.
      while (buffer_.size() < capacity_ && !senders_.empty()) {
        thread_channel_waiter* sender = senders_.pop_front();
        buffer_.push_back(std::move(*static_cast<T*>(sender->slot)));
        sender->complete(channel_delivered);
      }
      return value;
    }
    if (thread_channel_waiter* sender = senders_.pop_front()) {
      std::optional<T> value(std::move(*static_cast<T*>(sender->slot)));
      sender->complete(channel_delivered);
      return value;
    }
    return std::nullopt;
  }

  // See channel_state::pass_on: to the next receiver, or back to the front of the buffer.
  void pass_on_locked(T&& value) {
    if (thread_channel_waiter* receiver = receivers_.pop_front()) {
      static_cast<std::optional<T>*>(receiver->slot)->emplace(std::move(value));
      receiver->complete(channel_delivered);
      return;
    }
    buffer_.push_front(std::move(value));
  }

  // Called by a waiter's timeout, with the mutex held.
  static void describe_receivers(const void* owner, std::string& out) {
    const auto& self = *static_cast<const thread_channel_state*>(owner);
    describe_channel({"thread_channel", typeid(T), owner, "recv", self.capacity_,
                      self.buffer_.size(), self.senders_.size(), "senders", self.closed_},
                     out);
  }
  static void describe_senders(const void* owner, std::string& out) {
    const auto& self = *static_cast<const thread_channel_state*>(owner);
    describe_channel({"thread_channel", typeid(T), owner, "send", self.capacity_,
                      self.buffer_.size(), self.receivers_.size(), "receivers", self.closed_},
                     out);
  }

  mutable std::mutex mutex_;
  value_ring<T> buffer_;
  const std::size_t capacity_;
  bool closed_ = false;
  std::string close_reason_;
  thread_waiter_list receivers_;
  thread_waiter_list senders_;
};

}  // namespace detail

template <class T>
class thread_channel {
  static_assert(std::is_nothrow_move_constructible_v<T>,
                "weft::thread_channel<T> needs a T whose move constructor is noexcept: values "
                "move during hand-offs that cannot be undone halfway (wrap T in std::unique_ptr)");

 public:
  using value_type = T;  // T
  // Capacity() of an unbounded channel.
  static constexpr std::size_t unlimited = detail::unlimited_capacity;

  // capacity 0: rendezvous; N: at most N buffered values.
  explicit thread_channel(std::size_t capacity)
      : state_(std::make_shared<detail::thread_channel_state<T>>(capacity)) {}
  // A channel whose send never blocks.
  static thread_channel unbounded() { return thread_channel(unlimited); }
  // Copies share the channel. Moving copies too, so that a handle is never empty.
  thread_channel(const thread_channel&) = default;
  thread_channel(thread_channel&& other) noexcept : state_(other.state_) {}
  thread_channel& operator=(const thread_channel&) = default;
  thread_channel& operator=(thread_channel&& other) noexcept {
    state_ = other.state_;
    return *this;
  }

  // As channel<T>::send: on timeout, cancellation or close the value is not moved from.
  void send(T&& value, const timeout& limit = timeout::never()) {
    state_->send(std::move(value), limit);
  }
  void send(const T& value,
            const timeout& limit = timeout::never()) requires std::is_copy_constructible_v<T> {
    T copy(value);
    state_->send(std::move(copy), limit);
  }
  // Never blocks: false when the value could not be buffered or handed over now.
  bool try_send(T&& value) { return state_->offer(value); }
  bool try_send(const T& value) requires std::is_copy_constructible_v<T> {
    T copy(value);
    return state_->offer(copy);
  }

  // As channel<T>::recv, from a coroutine or a plain thread.
  T recv(const timeout& limit = timeout::never()) {
    std::optional<T> value = state_->receive(limit);
    if (!value) {
      state_->throw_closed_on_recv();
    }
    return std::move(*value);
  }
  // Never blocks: a value if one is ready, nullopt otherwise.
  std::optional<T> try_recv() {
    bool closed_and_drained = false;
    std::optional<T> value = state_->poll(closed_and_drained);
    if (closed_and_drained) {
      state_->throw_closed_on_recv();
    }
    return value;
  }

  // As channel<T>::close: values buffered before are still received.
  void close(std::string reason = "closed") { state_->close(std::move(reason)); }

  // Snapshots: another thread may change them right after they are read.
  std::size_t size() const { return state_->size(); }
  // capacity(): the buffer's size; closed(): whether close() was called.
  std::size_t capacity() const noexcept { return state_->capacity(); }
  bool closed() const { return state_->closed(); }

  friend bool operator==(const thread_channel& left, const thread_channel& right) noexcept {
    return left.state_ == right.state_;
  }

  // for (T value : ch): receives until closed and drained.
  using iterator = detail::receiving_iterator<T, detail::thread_channel_state<T>>;
  // begin() and end(): for (T value : ch) receives until closed and drained.
  iterator begin() { return iterator(state_.get()); }
  std::default_sentinel_t end() const noexcept { return {}; }

 private:
  std::shared_ptr<detail::thread_channel_state<T>> state_;
};

}  // namespace weft

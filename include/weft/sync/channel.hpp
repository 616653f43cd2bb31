// weft::channel<T>: Go-style channels between the coroutines of one scheduler.
//
//   weft::channel<int> jobs(16);                       // bounded: 16 buffered values
//   weft::channel<int> handshake(0);                   // rendezvous: no buffer at all
//   auto log = weft::channel<std::string>::unbounded(); // send never blocks
//   jobs.send(7);  int job = jobs.recv();  for (int job : jobs) { ... }  jobs.close("done");
//
// What blocks: send() suspends the calling coroutine while the buffer is full (with capacity 0:
// until a receiver takes the value, so the receiver has it before send returns); recv()
// suspends while nothing is buffered and no sender waits. Both take an optional weft::timeout
// (timeout_error; nothing is consumed: a timed-out send keeps its value, a timed-out recv took
// none) and are cancellation points. try_send/try_recv never block and may be called from
// anywhere on the channel's thread (a microtask, a reactor callback).
//
// Order: waiters are served strictly FIFO with hand-off (docs/architecture.md). A send that finds a
// waiting receiver puts the value straight into that receiver's hands; a recv that frees buffer
// space moves the oldest blocked sender's value into the buffer and releases that sender. Nobody
// overtakes a queued sender or receiver, so values arrive in the order the sends were made.
//
// Close: close(reason) is idempotent; the first reason wins. Values buffered before the close are
// still received; then recv throws channel_closed_error carrying that reason (and a range-for
// ends). send after close throws channel_closed_error at once; senders blocked at the close are
// woken with it and their values are NOT delivered (the message says so).
//
// Owned by a scope: channel<T>(capacity, {.owner = &scope}) ties the channel to a weft::scope.
// When the scope closes (cancel(), a failure, join_or_cancel's limit, its destruction, or the
// closing of an ancestor) the channel is closed with the scope's close_reason() ("scope
// cancelled", "scope 'x' destroyed", ...), exactly as by close(reason): every blocked receiver
// and sender outside the scope wakes with channel_closed_error carrying that reason (the scope's
// own coroutines are cancelled by the same close and see cancelled_error, as at any wait), and
// values buffered before stay receivable. A channel tied to a scope that is already closed starts
// closed. Channels of other scopes, the parent's included, are not touched. Either may be
// destroyed first: a scope that goes first leaves the channel closed and untied (its handles stay
// valid), a channel that goes first unties itself from the scope.
//
// Cancellation: a receiver that was handed a value and is cancelled before it runs passes the
// value on (to the next waiting receiver, or back to the front of the buffer): nothing is lost or
// duplicated. A sender whose value was already taken when it is cancelled has completed its send:
// send returns normally (the value was delivered; retrying would duplicate it) and the
// cancellation is raised at the coroutine's next suspension point instead.
//
// Deadlock: a recv (or send) that nothing can ever satisfy is found by the scheduler's deadlock
// detection: the wait throws cancelled_error with reason "deadlock" (like every other weft wait;
// it is not turned into channel_closed_error, so a consumer loop that ends at close cannot
// mistake a deadlock for the end of the stream) and run() throws deadlock_error, whose report
// names the channel: "channel<int> 0x5581 recv: capacity 0, 0 buffered, 0 senders waiting".
//
// Ownership and threads: channel<T> is a cheap handle with shared ownership (like a Go channel
// value): copies refer to the same channel, which lives while any handle (or a coroutine blocked
// on it) does. A channel belongs to one scheduler's thread: every call, and every copy of a
// handle, happens there. Between threads use weft::thread_channel (thread_channel.hpp).
//
// T must be move-constructible without throwing: values move during hand-offs that cannot be
// undone halfway (wrap other types in std::unique_ptr).
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <typeinfo>
#include <utility>

#include "weft/error.hpp"
#include "weft/sched/scheduler.hpp"
#include "weft/sched/timeout.hpp"
#include "weft/sync/detail/scope_link.hpp"
#include "weft/sync/detail/waiter_queue.hpp"

namespace weft {

class scope;

// Options of a channel.
struct channel_options {
  // The scope that closes the channel when it closes (see the header comment); null: none.
  weft::scope* owner = nullptr;
};

namespace detail {

// A growable ring of T: O(1) at both ends (the front for values a cancelled receiver gives back).
// Capacity is a power of two so that wrapping is a mask.
template <class T>
class value_ring {
 public:
  value_ring() noexcept = default;
  value_ring(const value_ring&) = delete;
  value_ring& operator=(const value_ring&) = delete;
  ~value_ring() {
    while (size_ != 0) {
      pop_front();
    }
    std::allocator<T>().deallocate(slots_, mask_ + 1);
  }

  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  // Room for at least count values without allocating again.
  void reserve(std::size_t count) {
    if (count > (slots_ == nullptr ? 0 : mask_ + 1)) {
      regrow(count);
    }
  }

  // Growing happens before the value is touched: if it throws, value is left as it was.
  void push_back(T&& value) {
    make_room();
    std::construct_at(slots_ + ((head_ + size_) & mask_), std::move(value));
    ++size_;
  }
  void push_front(T&& value) {
    make_room();
    head_ = (head_ - 1) & mask_;
    std::construct_at(slots_ + head_, std::move(value));
    ++size_;
  }
  T pop_front() noexcept {
    T* slot = slots_ + head_;
    T value(std::move(*slot));
    std::destroy_at(slot);
    head_ = (head_ + 1) & mask_;
    --size_;
    return value;
  }

 private:
  void make_room() {
    if (slots_ == nullptr || size_ == mask_ + 1) {
      regrow(size_ + 1);
    }
  }
  __attribute__((noinline)) void regrow(std::size_t at_least) {
    std::size_t capacity = 8;
    while (capacity < at_least) {
      capacity *= 2;
    }
    T* fresh = std::allocator<T>().allocate(capacity);
    for (std::size_t index = 0; index < size_; ++index) {
      T* old = slots_ + ((head_ + index) & mask_);
      std::construct_at(fresh + index, std::move(*old));
      std::destroy_at(old);
    }
    if (slots_ != nullptr) {
      std::allocator<T>().deallocate(slots_, mask_ + 1);
    }
    slots_ = fresh;
    mask_ = capacity - 1;
    head_ = 0;
  }

  T* slots_ = nullptr;
  std::size_t mask_ = 0;  // ring capacity - 1 once allocated
  std::size_t head_ = 0;
  std::size_t size_ = 0;
};

// for (T value : ch) over a channel or thread_channel state: receives until the channel is closed
// and drained (receive returns nullopt). A move-only T: for (auto& value : ch)
// consume(std::move(value)). The state outlives the loop: the range-for holds the handle.
template <class T, class State>
class receiving_iterator {
 public:
  using value_type = T;
  using difference_type = std::ptrdiff_t;
  receiving_iterator() = default;
  explicit receiving_iterator(State* state) : state_(state) { ++*this; }
  T& operator*() noexcept { return *current_; }
  T* operator->() noexcept { return &*current_; }
  receiving_iterator& operator++() {
    current_ = state_->receive(timeout::never());
    return *this;
  }
  void operator++(int) { ++*this; }
  friend bool operator==(const receiving_iterator& it, std::default_sentinel_t) noexcept {
    return !it.current_;
  }

 private:
  State* state_ = nullptr;
  std::optional<T> current_;
};

// How a channel waiter's wait ended (queued_waiter::outcome).
enum channel_outcome : std::uint8_t {
  channel_delivered = 1,  // receiver: a value is in its slot; sender: its value was taken
  channel_was_closed = 2,
};

inline constexpr std::size_t unlimited_capacity = std::numeric_limits<std::size_t>::max();

// What a deadlock report or a timeout message says about one side of a channel.
struct channel_view {
  const char* kind;  // "channel", "thread_channel"
  const std::type_info& value_type;
  const void* address;
  const char* operation;  // "recv", "send"
  std::size_t capacity;
  std::size_t buffered;
  std::size_t other_side_waiting;
  const char* other_side;  // "senders", "receivers"
  bool closed;
};
// "channel<int> 0x55d0 recv: capacity 0, 0 buffered, 0 senders waiting"
void describe_channel(const channel_view& view, std::string& out);
// "channel<int> 0x55d0"
std::string channel_name(const char* kind, const std::type_info& value_type, const void* address);

enum class closed_during { send, blocked_send, recv };
// Throws channel_closed_error(reason) with a message naming the channel and whether the value
// was delivered.
[[noreturn]] void throw_channel_closed(const std::string& channel, const std::string& reason,
                                       closed_during when);

// A sender's value was taken just before its cancellation was raised: the send completed, so the
// cancellation is put back to be raised at the next suspension point.
void defer_cancellation(const cancelled_error& cancelled);

// A single-scheduler channel must not be waited on from two threads (they would race on it).
// Called when a waiter's thread is not owner: records the first waiter's thread, throws
// std::logic_error for another one (best effort: catches the misuse at a wait from the wrong
// thread).
void claim_thread(std::thread::id& owner, const std::string& channel);

template <class T>
class channel_state {
 public:
  explicit channel_state(std::size_t capacity) : capacity_(capacity) {
    // A small bounded buffer is allocated once; large or unbounded ones grow on demand.
    constexpr std::size_t reserve_limit = 1024;
    buffer_.reserve(capacity_ < reserve_limit ? capacity_ : reserve_limit);
  }

  // Handles and blocked coroutines hold references. Not atomic: a channel, its handles and
  // its waiters all live on one scheduler's thread (thread_channel is the cross-thread one), and
  // an atomic count would cost a locked instruction on both sides of every blocking hand-off.
  void add_ref() noexcept { ++refs_; }
  void release() noexcept {
    if (--refs_ == 0) {
      delete this;
    }
  }

  std::size_t size() const noexcept { return buffer_.size(); }
  std::size_t capacity() const noexcept { return capacity_; }
  bool closed() const noexcept { return closed_; }

  // Ties the channel to owner's lifetime (channel_options::owner).
  void tie_to(weft::scope& owner) { owner_link_.attach(owner); }

  // The common cases, inline in the caller: room in the buffer and nobody queued on either side
  // (a receiver waits only while the buffer is empty, a sender only while it is full).
  bool push_if_room(T& value) {
    if (closed_ || !receivers_.empty() || !senders_.empty() || buffer_.size() >= capacity_) {
      return false;
    }
    buffer_.push_back(std::move(value));
    return true;
  }
  bool can_pop_without_hand_off() const noexcept { return !buffer_.empty() && senders_.empty(); }
  T pop_buffered() noexcept { return buffer_.pop_front(); }

  // Inline, wait included, like receive(): a sender whose value was taken resumes straight in
  // the caller.
  __attribute__((always_inline)) void send(T&& value, const timeout& limit) {
    if (send_now(value)) {
      return;
    }
    reference keep_alive(*this);  // every handle may go while this coroutine waits
    queued_waiter me(senders_, &value);
    try {
      senders_.wait(me, limit);
    } catch (const cancelled_error& cancelled) {
      if (me.granted() && me.outcome == channel_delivered) {
        defer_cancellation(cancelled);
        return;
      }
      throw;
    }
    if (me.outcome == channel_was_closed) [[unlikely]] {
      throw_channel_closed(name(), close_reason_, closed_during::blocked_send);
    }
  }
  // offer(), and when the caller must wait, a check that it waits on the channel's thread.
  __attribute__((noinline)) bool send_now(T& value) {
    if (offer(value)) {
      return true;
    }
    check_waiting_thread();
    return false;
  }

  // True when value was accepted (handed to a receiver or buffered): value is then moved from.
  // False when send would block: value is untouched. Throws once closed.
  bool offer(T& value) {
    if (closed_) {
      throw_channel_closed(name(), close_reason_, closed_during::send);
    }
    if (queued_waiter* receiver = receivers_.front()) {
      static_cast<std::optional<T>*>(receiver->slot)->emplace(std::move(value));
      receivers_.grant_front(channel_delivered);
      return true;
    }
    if (senders_.empty() && buffer_.size() < capacity_) {
      buffer_.push_back(std::move(value));
      return true;
    }
    return false;
  }

  // The next value, or nullopt once closed and drained.
  // Inline, wait included: the waiter and its slot live in the caller's frame and the
  // out-of-line part ends in the switch, so a receiver handed a value resumes straight in the
  // caller (see mutex::lock).
  __attribute__((always_inline)) std::optional<T> receive(const timeout& limit) {
    std::optional<T> slot;
    if (receive_now(slot)) {
      return slot;
    }
    reference keep_alive(*this);
    queued_waiter me(receivers_, &slot);
    receivers_.wait(me, limit, [this, &slot](queued_waiter& leaving) {
      if (leaving.outcome == channel_delivered) {
        pass_on(std::move(*slot));
      }
    });
    return slot;  // empty when close() woke us
  }
  // receive() without waiting: true when slot now holds a value, or when the channel is closed
  // and drained (slot stays empty); false when the caller must wait.
  __attribute__((noinline)) bool receive_now(std::optional<T>& slot) {
    if (std::optional<T> value = poll()) {
      slot.emplace(std::move(*value));
      return true;
    }
    if (closed_) {
      return true;
    }
    check_waiting_thread();
    return false;
  }

  // A value if one can be had without waiting (buffered, or from a blocked sender).
  std::optional<T> poll() {
    if (!buffer_.empty()) {
      std::optional<T> value(buffer_.pop_front());
      // The pop left room (the ring held one more a moment ago, so this cannot allocate): the
      // oldest blocked senders' values move in and those senders are released.
      while (buffer_.size() < capacity_ && !senders_.empty()) {
        buffer_.push_back(std::move(*static_cast<T*>(senders_.front()->slot)));
        senders_.grant_front(channel_delivered);
      }
      return value;
    }
    if (queued_waiter* sender = senders_.front()) {
      std::optional<T> value(std::move(*static_cast<T*>(sender->slot)));
      senders_.grant_front(channel_delivered);
      return value;
    }
    return std::nullopt;
  }

  [[noreturn]] void throw_closed_on_recv() const {
    throw_channel_closed(name(), close_reason_, closed_during::recv);
  }

  void close(std::string reason) {
    if (closed_) {
      return;
    }
    closed_ = true;
    close_reason_ = std::move(reason);
    // Receivers only queue while nothing is buffered, so each of them would wait forever.
    receivers_.grant_all(channel_was_closed);
    senders_.grant_all(channel_was_closed);
  }

  std::string name() const { return channel_name("channel", typeid(T), this); }

 private:
  class reference {
   public:
    explicit reference(channel_state& state) noexcept : state_(state) { state_.add_ref(); }
    reference(const reference&) = delete;
    reference& operator=(const reference&) = delete;
    ~reference() { state_.release(); }

   private:
    channel_state& state_;
  };

  // Before a wait: the first waiter claims the channel for its thread; a wait from another
  // thread is std::logic_error.
  void check_waiting_thread() {
    if (thread_ != std::this_thread::get_id()) {
      claim_thread(thread_, name());
    }
  }

  // A value handed to a receiver that was cancelled before it ran: it goes to the next waiting
  // receiver, or back to the front of the buffer (it was sent before anything buffered now). The
  // buffer may then hold one more than its capacity; sends wait until it is back below.
  void pass_on(T&& value) {
    if (queued_waiter* receiver = receivers_.front()) {
      static_cast<std::optional<T>*>(receiver->slot)->emplace(std::move(value));
      receivers_.grant_front(channel_delivered);
      return;
    }
    buffer_.push_front(std::move(value));
  }

  static void describe_side(const void* owner, const char* operation, std::string& out) {
    const auto& self = *static_cast<const channel_state*>(owner);
    const bool receiving = operation[0] == 'r';
    describe_channel({"channel", typeid(T), owner, operation, self.capacity_, self.buffer_.size(),
                      receiving ? self.senders_.size() : self.receivers_.size(),
                      receiving ? "senders" : "receivers", self.closed_},
                     out);
  }

  static void closed_by_scope(void* self, const std::string& reason) noexcept {
    static_cast<channel_state*>(self)->close(reason);
  }

  value_ring<T> buffer_;
  std::size_t refs_ = 1;
  std::size_t capacity_;
  bool closed_ = false;
  std::string close_reason_;
  std::thread::id thread_{};
  waiter_queue receivers_{
      this, [](const void* owner, std::string& out) { describe_side(owner, "recv", out); }};
  waiter_queue senders_{
      this, [](const void* owner, std::string& out) { describe_side(owner, "send", out); }};
  // Last: unties from the owning scope before anything else of the channel goes.
  scope_link owner_link_{&channel_state::closed_by_scope, this};
};

}  // namespace detail

template <class T>
class channel {
  static_assert(std::is_nothrow_move_constructible_v<T>,
                "weft::channel<T> needs a T whose move constructor is noexcept: values move "
                "during hand-offs that cannot be undone halfway (wrap T in std::unique_ptr)");

 public:
  using value_type = T;  // T
  // capacity() of an unbounded channel.
  static constexpr std::size_t unlimited = detail::unlimited_capacity;

  // capacity 0: rendezvous; N: at most N buffered values.
  explicit channel(std::size_t capacity) : state_(new detail::channel_state<T>(capacity)) {}
  // With options.owner: tied to that scope (std::logic_error from a thread other than the one
  // running the scope's coroutines).
  channel(std::size_t capacity, channel_options options) : channel(capacity) {
    if (options.owner != nullptr) {
      state_->tie_to(*options.owner);  // on a throw the destructor releases the state
    }
  }
  // A channel whose send never blocks (the buffer grows as needed).
  static channel unbounded(channel_options options = {}) { return channel(unlimited, options); }
  // Copies share the channel. Moving copies too, so that a handle is never empty.
  channel(const channel& other) noexcept : state_(other.state_) { state_->add_ref(); }
  channel(channel&& other) noexcept : channel(other) {}
  channel& operator=(const channel& other) noexcept {
    other.state_->add_ref();  // first: other may be this very handle
    state_->release();
    state_ = other.state_;
    return *this;
  }
  channel& operator=(channel&& other) noexcept { return *this = other; }
  ~channel() { state_->release(); }

  // Suspends while the channel is full (capacity 0: until a receiver has the value). On
  // timeout_error, cancelled_error or channel_closed_error the value has not been moved from;
  // the caller still owns it.
  __attribute__((always_inline)) void send(T&& value, const timeout& limit = timeout::never()) {
    if (!state_->push_if_room(value)) [[unlikely]] {
      state_->send(std::move(value), limit);
    }
  }
  __attribute__((always_inline)) void send(
      const T& value,
      const timeout& limit = timeout::never()) requires std::is_copy_constructible_v<T> {
    T copy(value);
    send(std::move(copy), limit);
  }
  // Never blocks: true when the value was handed over or buffered (value is moved from), false
  // when send would have to wait (value untouched). channel_closed_error once closed.
  bool try_send(T&& value) { return state_->offer(value); }
  bool try_send(const T& value) requires std::is_copy_constructible_v<T> {
    T copy(value);
    return state_->offer(copy);
  }

  // Suspends until a value is available. Once closed and drained: channel_closed_error with the
  // first close reason.
  __attribute__((always_inline)) T recv(const timeout& limit = timeout::never()) {
    if (state_->can_pop_without_hand_off()) [[likely]] {
      return state_->pop_buffered();
    }
    std::optional<T> value = state_->receive(limit);
    if (!value) {
      state_->throw_closed_on_recv();
    }
    return std::move(*value);
  }
  // Never blocks: a value if one is buffered or a sender waits, nullopt otherwise.
  // channel_closed_error once closed and drained.
  std::optional<T> try_recv() {
    std::optional<T> value = state_->poll();
    if (!value && state_->closed()) {
      state_->throw_closed_on_recv();
    }
    return value;
  }

  // Idempotent; the first reason wins. Wakes every blocked receiver (channel_closed_error) and
  // every blocked sender (channel_closed_error, value not delivered); buffered values stay
  // receivable.
  void close(std::string reason = "closed") { state_->close(std::move(reason)); }

  // Buffered values (not counting blocked senders' values).
  std::size_t size() const noexcept { return state_->size(); }
  // capacity(): the buffer's size (unlimited for unbounded); closed(): whether close() was called.
  std::size_t capacity() const noexcept { return state_->capacity(); }
  bool closed() const noexcept { return state_->closed(); }

  // Handles to the same channel compare equal.
  friend bool operator==(const channel& left, const channel& right) noexcept {
    return left.state_ == right.state_;
  }

  // for (T value : ch) receives until the channel is closed and drained.
  using iterator = detail::receiving_iterator<T, detail::channel_state<T>>;
  // begin() and end(): for (T value : ch) receives until the channel is closed and drained.
  iterator begin() { return iterator(state_); }
  std::default_sentinel_t end() const noexcept { return {}; }

 private:
  detail::channel_state<T>* state_;  // never null; one reference per handle
};

}  // namespace weft

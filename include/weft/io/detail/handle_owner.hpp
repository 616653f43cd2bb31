// weft::detail::handle_owner: how an I/O object holds the heap block behind its libuv handle.
// Internal: users never name it; it is here because the public classes hold one.
//
// weft::stream (and so tcp::stream, pipe, tty), tcp::listener, pipe::listener and udp::socket
// each own a block (stream_state, listener_state, udp_state, defined in src/io/) that libuv
// also points at until the handle's close callback; src/io/stream_handle.hpp states that
// two-owner rule. handle_owner is the object's side of it, written once: move-only; destroying
// it, or assigning over it, closes the handle and lets go of the block, and whichever of the two
// owners lets go last frees it. Setup code holds a new block in one too, so that a setup that
// throws closes what it had initialised; release() then hands the block to the object.
//
// The blocks are incomplete types here (public headers must not see libuv). The one call that
// needs a block's type in every file that destroys an owner, closing and letting go, is an
// overload per block, defined beside the block. The members that look inside a block (is_open,
// close) are instantiated only where they are called, in src/io/, where the blocks are complete.
//
// Thread: the thread of the scheduler that made the block. An owner destroyed after that
// scheduler's run() has ended leaks the block on purpose: the loop is gone, and closing would
// touch freed memory (see handle_state::close_and_release_owner).
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>

namespace weft::detail {

struct stream_state;
struct listener_state;
struct udp_state;

// Closes the block's handle (if not closing already) and lets go of the block: the
// handle_state::close_and_release_owner of that block.
void close_and_release_owner(stream_state* state) noexcept;
void close_and_release_owner(listener_state* state) noexcept;
void close_and_release_owner(udp_state* state) noexcept;

template <class State>
class handle_owner {
 public:
  handle_owner() noexcept = default;
  explicit handle_owner(State* state) noexcept : state_(state) {}
  handle_owner(handle_owner&& other) noexcept : state_(std::exchange(other.state_, nullptr)) {}
  handle_owner& operator=(handle_owner&& other) noexcept {
    if (this != &other) {
      reset(std::exchange(other.state_, nullptr));
    }
    return *this;
  }
  handle_owner(const handle_owner&) = delete;
  handle_owner& operator=(const handle_owner&) = delete;
  ~handle_owner() { reset(); }

  // Closes and lets go of the block held so far (if any), then holds state.
  void reset(State* state = nullptr) noexcept {
    State* previous = std::exchange(state_, state);
    if (previous != nullptr) {
      close_and_release_owner(previous);
    }
  }
  // Gives the block up without closing it, to the object that owns it from now on.
  State* release() noexcept { return std::exchange(state_, nullptr); }

  State* get() const noexcept { return state_; }
  State* operator->() const noexcept { return state_; }
  State& operator*() const noexcept { return *state_; }
  bool operator==(std::nullptr_t) const noexcept { return state_ == nullptr; }

  // A block is held and its handle is not closing.
  bool is_open() const noexcept { return state_ != nullptr && !state_->closing(); }
  // Starts closing the handle and keeps the block (a waiting coroutine still looks at it).
  // Idempotent; nothing when empty.
  void close() noexcept {
    if (state_ != nullptr) {
      state_->close();
    }
  }
  // The block, or std::logic_error naming the call and the object when there is none:
  // "weft: accept on an empty tcp::listener (default-made or moved from)".
  State& get_or_throw(const char* operation, const char* object) const {
    if (state_ == nullptr) {
      throw std::logic_error(std::string("weft: ") + operation + " on an empty " + object +
                             " (default-made or moved from)");
    }
    return *state_;
  }

 private:
  State* state_ = nullptr;
};

}  // namespace weft::detail

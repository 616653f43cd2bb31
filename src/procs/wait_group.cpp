// weft::procs::wait_group (see weft/procs/wait_group.hpp for the model and the rules).
#include "weft/procs/wait_group.hpp"

#include <limits>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>

#include "procs/engine.hpp"
#include "weft/procs/runtime.hpp"

namespace weft::procs {

namespace detail {

void wait_group_zero(engine& owner, pid waiter, std::uint64_t tag) noexcept {
  try {
    owner.complete_yield(waiter, tag, {}, nullptr);
  } catch (...) {
    // No memory for the event (the waiter's inbox could not grow). The waiter must not wait
    // forever for it: it is ended as terminate() would (its outcome cancelled_error). It may
    // have finished meanwhile, which is fine too: terminate then throws (unknown_process_error,
    // or bad_alloc building its message), and there is nobody left to tell.
    try {
      owner.terminate(waiter);
    } catch (...) {  // NOLINT(bugprone-empty-catch): see above
    }
  }
}

void wait_group_free(wait_group_block* block) noexcept { delete block; }

}  // namespace detail

namespace {

// 2 per unit, and 1 for the group: how many units one word can count.
constexpr std::uint64_t max_units = (std::numeric_limits<std::uint64_t>::max() - 1) / 2;

}  // namespace

wait_group::unit& wait_group::unit::operator=(unit&& other) noexcept {
  if (this != &other) {
    done();
    block_ = std::exchange(other.block_, nullptr);
  }
  return *this;
}

wait_group::units::units(units&& other) noexcept
    : block_(std::exchange(other.block_, nullptr)), left_(std::exchange(other.left_, 0)) {}

wait_group::units& wait_group::units::operator=(units&& other) noexcept {
  if (this != &other) {
    release();
    block_ = std::exchange(other.block_, nullptr);
    left_ = std::exchange(other.left_, 0);
  }
  return *this;
}

wait_group::unit wait_group::units::take() {
  if (left_ == 0) {
    throw std::out_of_range(
        "weft::procs::wait_group::units::take: every unit of this batch was already taken "
        "(add(count) counts exactly count units)");
  }
  --left_;
  return unit(block_);
}

void wait_group::units::release() noexcept {
  if (left_ != 0) {
    detail::wait_group_release(block_, left_);
    left_ = 0;
  }
  block_ = nullptr;
}

wait_group::wait_group(const context& waiter, std::uint64_t tag) {
  if (waiter.self() == no_pid) {
    throw std::logic_error(
        "weft::procs::wait_group: the context names no process (a context is bound when its "
        "process starts; use the one init() receives)");
  }
  block_ = make_block(waiter.owner(), waiter.self(), tag);
}

wait_group::wait_group(runtime& owner, pid waiter, std::uint64_t tag) {
  if (waiter == no_pid) {
    throw std::invalid_argument(
        "weft::procs::wait_group: the waiter is no_pid (name the process to wake)");
  }
  block_ = make_block(owner, waiter, tag);
}

detail::wait_group_block* wait_group::make_block(runtime& owner, pid waiter, std::uint64_t tag) {
  auto* block = new detail::wait_group_block;
  block->owner = owner.engine_;
  block->waiter = waiter;
  block->tag = tag;
  return block;
}

wait_group& wait_group::operator=(wait_group&& other) noexcept {
  if (this != &other) {
    wait_group gone(std::move(*this));
    block_ = std::exchange(other.block_, nullptr);
  }
  return *this;
}

wait_group::~wait_group() {
  if (block_ == nullptr) {
    return;
  }
  // acq_rel, as a unit's decrement: if this takes the word to 0, every unit's last access to
  // the block happens-before the free; otherwise the last unit frees it.
  if (block_->word.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    detail::wait_group_free(block_);
  }
}

detail::wait_group_block* wait_group::checked_block(const char* operation) const {
  if (block_ == nullptr) {
    throw std::logic_error(std::string("weft::procs::wait_group::") + operation +
                           " on a moved-from group");
  }
  return block_;
}

wait_group::unit wait_group::add() {
  detail::wait_group_block* block = checked_block("add");
  // Relaxed: the count itself is one atomic, so the add and every decrement are ordered by
  // it; what the unit's holder needs to see of the block (its constant fields) reaches it
  // with the unit, through whatever hands the unit over (a spawn, a send).
  block->word.fetch_add(2, std::memory_order_relaxed);
  return unit(block);
}

wait_group::units wait_group::add(std::size_t count) {
  detail::wait_group_block* block = checked_block("add");
  if (count == 0) {
    return units();
  }
  std::uint64_t held = block->word.load(std::memory_order_relaxed) / 2;
  if (count > max_units - held) {
    throw std::length_error("weft::procs::wait_group::add: " + std::to_string(count) +
                            " more units would overflow the count (" + std::to_string(held) +
                            " outstanding)");
  }
  block->word.fetch_add(2 * static_cast<std::uint64_t>(count), std::memory_order_relaxed);
  return units(block, count);
}

std::size_t wait_group::count() const noexcept {
  return block_ == nullptr
             ? 0
             : static_cast<std::size_t>(block_->word.load(std::memory_order_acquire) / 2);
}

pid wait_group::waiter() const noexcept { return block_ == nullptr ? no_pid : block_->waiter; }

std::uint64_t wait_group::tag() const noexcept { return block_ == nullptr ? 0 : block_->tag; }

}  // namespace weft::procs

// spare_list: a bounded LIFO of spare objects kept by one thread (the input buffers of a
// thread's connections, a worker's callback-style messages, a worker's HTTP request spaces).
// The most recently given back is taken first, so that with a thousand connections each
// request lands in the storage the previous one just used, still warm in the cache, and the
// storage is grown once rather than once per connection. One thread only: no synchronisation.
#pragma once

#include <cstddef>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

namespace weft::net::detail {

template <class T, std::size_t Max = 64>
class spare_list {
 public:
  spare_list() { spare_.reserve(Max); }
  spare_list(const spare_list&) = delete;
  spare_list& operator=(const spare_list&) = delete;

  // The most recently given back, or nullopt when none is spare.
  std::optional<T> take() noexcept {
    if (spare_.empty()) {
      return std::nullopt;
    }
    std::optional<T> item(std::move(spare_.back()));
    spare_.pop_back();
    return item;
  }
  // Whether give() would keep one more.
  bool has_room() const noexcept { return spare_.size() < Max; }
  // Keeps `item` while fewer than Max are spare; beyond that it is dropped (freed) and give
  // returns false. Never allocates: the list's capacity is reserved when it is made.
  bool give(T&& item) noexcept {
    if (!has_room()) {
      return false;
    }
    spare_.push_back(std::move(item));
    return true;
  }
  std::size_t size() const noexcept { return spare_.size(); }

 private:
  static_assert(std::is_nothrow_move_constructible_v<T>, "a spare is moved, never copied");
  std::vector<T> spare_;
};

}  // namespace weft::net::detail

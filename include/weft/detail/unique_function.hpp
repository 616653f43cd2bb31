// A move-only, type-erased callable with a small inline buffer (std::function needs copyable
// targets; std::move_only_function is C++23). Callables up to inline_size bytes that are
// nothrow-movable and no more aligned than a pointer live inline, so the common lambda with a
// pointer or two never allocates.
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

namespace weft::detail {

template <class Signature>
class unique_function;

template <class R, class... Args>
class unique_function<R(Args...)> {
  static constexpr std::size_t inline_size = 3 * sizeof(void*);

  struct operations {
    R (*invoke)(void* storage, Args&&... args);
    void (*move)(void* from, void* to) noexcept;  // move-constructs into to, destroys from
    void (*destroy)(void* storage) noexcept;
  };

  // Pointer alignment rather than max_align_t's 16: a lambda capturing pointers and integers
  // needs no more, and the object shrinks from 48 to 32 bytes (half a cache line; it is a part
  // of every timer slot and microtask). A callable over-aligned beyond that goes to the heap.
  template <class F>
  static constexpr bool stored_inline =
      sizeof(F) <= inline_size &&
      alignof(F) <= alignof(void*) && std::is_nothrow_move_constructible_v<F>;

  template <class F>
  static F* target(void* storage) noexcept {
    if constexpr (stored_inline<F>) {
      return std::launder(reinterpret_cast<F*>(storage));
    } else {
      return *reinterpret_cast<F**>(storage);
    }
  }

  template <class F>
  static constexpr operations operations_for{
      [](void* storage, Args&&... args) -> R {
        return (*target<F>(storage))(std::forward<Args>(args)...);
      },
      [](void* from, void* to) noexcept {
        if constexpr (stored_inline<F>) {
          ::new (to) F(std::move(*target<F>(from)));
          target<F>(from)->~F();
        } else {
          *reinterpret_cast<F**>(to) = target<F>(from);
        }
      },
      [](void* storage) noexcept {
        if constexpr (stored_inline<F>) {
          target<F>(storage)->~F();
        } else {
          delete target<F>(storage);
        }
      },
  };

 public:
  unique_function() noexcept = default;
  unique_function(std::nullptr_t) noexcept {}

  template <class F, class D = std::decay_t<F>,
            class = std::enable_if_t<!std::is_same_v<D, unique_function> &&
                                     std::is_invocable_r_v<R, D&, Args...>>>
  unique_function(F&& function) {  // NOLINT(google-explicit-constructor): like std::function
    if constexpr (stored_inline<D>) {
      ::new (static_cast<void*>(storage_)) D(std::forward<F>(function));
    } else {
      *reinterpret_cast<D**>(storage_) = new D(std::forward<F>(function));
    }
    operations_ = &operations_for<D>;
  }

  unique_function(unique_function&& other) noexcept : operations_(other.operations_) {
    if (operations_ != nullptr) {
      operations_->move(other.storage_, storage_);
      other.operations_ = nullptr;
    }
  }

  unique_function& operator=(unique_function&& other) noexcept {
    if (this != &other) {
      reset();
      if (other.operations_ != nullptr) {
        other.operations_->move(other.storage_, storage_);
        operations_ = std::exchange(other.operations_, nullptr);
      }
    }
    return *this;
  }

  unique_function(const unique_function&) = delete;
  unique_function& operator=(const unique_function&) = delete;

  ~unique_function() { reset(); }

  void reset() noexcept {
    if (operations_ != nullptr) {
      std::exchange(operations_, nullptr)->destroy(storage_);
    }
  }

  explicit operator bool() const noexcept { return operations_ != nullptr; }

  R operator()(Args... args) { return operations_->invoke(storage_, std::forward<Args>(args)...); }

 private:
  const operations* operations_ = nullptr;
  alignas(void*) unsigned char storage_[inline_size];
};

}  // namespace weft::detail

namespace weft {
// A move-only std::function (std::move_only_function is C++23), so that a callback may own a
// move-only capture: what add_microtask and timer::start take.
template <class Signature>
using unique_function = detail::unique_function<Signature>;
}  // namespace weft

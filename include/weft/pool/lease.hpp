// weft::lease<T>: one resource borrowed from a weft::pool<T>, returned when the lease ends.
//
// Contract:
//   - Move-only. Going out of scope returns the resource (release()); release() and discard()
//     end it early. Any of them on an empty lease (already released or discarded, moved from,
//     default-made) is std::logic_error: that is a resource returned twice.
//   - release(): back to the pool, which hands it to the oldest waiter at once (or keeps it idle),
//     unless the pool's before_release rejects it (then it is destroyed and a waiter may create a
//     fresh one) or the pool was closed meanwhile (then it is destroyed).
//   - discard(): the resource is broken; it is destroyed instead of returned, and its slot goes
//     to the oldest waiter. discard(error) also reports error to the pool's circuit breaker as a
//     failure of the backend; discard() without one does not.
//   - Neither suspends unless the pool's before_release or destructor does; neither throws
//     weft errors (a destructor that throws is reported by the pool's close()).
//   - A lease may outlive its pool object: the resource is then destroyed when it is released.
//   - Use it on the thread of the scheduler its pool belongs to.
#pragma once

#include <cstdint>
#include <exception>
#include <stdexcept>
#include <utility>

#include "weft/pool/detail/pool_core.hpp"

namespace weft {

template <class T>
class pool;

namespace detail {
[[noreturn]] void throw_empty_lease(const char* operation);
}

template <class T>
class lease {
 public:
  lease() noexcept = default;
  lease(lease&& other) noexcept
      : core_(std::exchange(other.core_, nullptr)),
        resource_(std::exchange(other.resource_, nullptr)),
        probe_(std::exchange(other.probe_, 0)) {}
  lease& operator=(lease&& other) noexcept {
    if (this != &other) {
      end_as_release();
      core_ = std::exchange(other.core_, nullptr);
      resource_ = std::exchange(other.resource_, nullptr);
      probe_ = std::exchange(other.probe_, 0);
    }
    return *this;
  }
  lease(const lease&) = delete;
  lease& operator=(const lease&) = delete;
  ~lease() { end_as_release(); }

  // False once released, discarded or moved from.
  bool valid() const noexcept { return resource_ != nullptr; }
  explicit operator bool() const noexcept { return valid(); }  // valid()

  // The leased resource (std::logic_error once released, discarded or moved from); operator* and
  // operator-> reach it too.
  T& get() const {
    if (resource_ == nullptr) {
      detail::throw_empty_lease("get");
    }
    return *resource_;
  }
  T& operator*() const { return get(); }
  T* operator->() const { return &get(); }

  // Returns the resource to the pool now, as the destructor would.
  void release() {
    if (resource_ == nullptr) {
      detail::throw_empty_lease("release");
    }
    end_as_release();
  }
  // Destroys the resource instead of returning it (it is broken); error, when given, is the failure
  // the circuit breaker records.
  void discard(std::exception_ptr error = nullptr) {
    if (resource_ == nullptr) {
      detail::throw_empty_lease("discard");
    }
    detail::pool_core* core = std::exchange(core_, nullptr);
    void* resource = std::exchange(resource_, nullptr);
    core->discard(resource, std::exchange(probe_, 0), std::move(error));
    core->drop_ref();
  }

 private:
  friend class pool<T>;
  // Adopts one reference to core.
  lease(detail::pool_core* core, T* resource, std::uint64_t probe) noexcept
      : core_(core), resource_(resource), probe_(probe) {}
  detail::pool_core* core() const noexcept { return core_; }

  void end_as_release() noexcept {
    if (resource_ != nullptr) {
      detail::pool_core* core = std::exchange(core_, nullptr);
      core->release(std::exchange(resource_, nullptr), std::exchange(probe_, 0));
      core->drop_ref();
    }
  }

  detail::pool_core* core_ = nullptr;
  T* resource_ = nullptr;
  std::uint64_t probe_ = 0;  // the breaker's probe id when this lease is its half-open probe
};

}  // namespace weft

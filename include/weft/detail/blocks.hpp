// weft's small-block allocator: for the objects made and dropped once per spawn (coroutine
// control blocks, scope members, procs processes and their outcomes), which malloc serves
// badly in bursts (glibc's per-thread cache holds 7 blocks per size; beyond that a free takes
// the slow path). Blocks up to max_block_size come from per-thread, per-size-class free lists;
// full batches of freed blocks move through a process-wide depot, so a producer thread that
// allocates and a consumer thread that frees (a spawner and the worker that runs what it
// spawned) keep recycling the same memory instead of one growing a cache and the other calling
// malloc. Larger blocks go to operator new. Under ASan every block goes straight to operator
// new/delete, so a use after free is still caught.
//
// Thread-safety: both functions may be called from any thread; a block may be freed on another
// thread than the one that allocated it. `size` must be the same at both calls.
#pragma once

#include <cstddef>

namespace weft::detail {

inline constexpr std::size_t max_block_size = 1024;

void* allocate_block(std::size_t size);
void deallocate_block(void* block, std::size_t size) noexcept;

// A standard allocator over allocate_block, for allocate_shared and node containers.
template <class T>
struct block_allocator {
  using value_type = T;
  static_assert(alignof(T) <= alignof(std::max_align_t), "block_allocator: over-aligned type");

  block_allocator() noexcept = default;
  template <class U>
  block_allocator(const block_allocator<U>&) noexcept {}

  T* allocate(std::size_t count) { return static_cast<T*>(allocate_block(count * sizeof(T))); }
  void deallocate(T* block, std::size_t count) noexcept {
    deallocate_block(block, count * sizeof(T));
  }
  template <class U>
  bool operator==(const block_allocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace weft::detail

// Per-thread size-class free lists for coroutine control blocks.
//
// Spawning must not pay malloc/free: a block freed by a finished coroutine is kept on its
// thread's free list for its size class and handed to the next spawn of a similar size. Blocks
// freed on a thread other than the one that allocated them simply join that thread's cache (the
// memory is ordinary operator-new memory), so nothing breaks if a handle dies elsewhere. Each
// thread keeps at most max_cached blocks per class; the rest go back to operator delete, and a
// thread's cache is released when the thread exits.
#include <cstddef>
#include <new>

#include "weft/sched/coroutine.hpp"

namespace weft::detail {
namespace {

constexpr std::size_t granule = 64;
constexpr std::size_t class_count = 16;  // blocks up to 1 KiB are cached
constexpr std::size_t max_cached = 4096;

struct free_block {
  free_block* next;
};

// Trivially destructible and constant-initialized, so the hot path reads it with no TLS
// initialization check; the blocks are given back at thread exit by block_cache_release,
// registered the first time a thread allocates fresh memory.
struct block_cache {
  free_block* heads[class_count];
  std::size_t counts[class_count];
};

constinit thread_local block_cache cache{};

struct block_cache_release {
  ~block_cache_release() {
    for (std::size_t index = 0; index < class_count; ++index) {
      while (cache.heads[index] != nullptr) {
        free_block* block = cache.heads[index];
        cache.heads[index] = block->next;
        ::operator delete(block);
      }
      cache.counts[index] = 0;
    }
  }
};

[[maybe_unused]] void register_release_at_thread_exit() {
  thread_local block_cache_release release;
  (void)release;
}

[[maybe_unused]] std::size_t class_of(std::size_t size) noexcept {
  return (size + granule - 1) / granule - 1;
}

}  // namespace

#if defined(WEFT_SANITIZE_ADDRESS)
// Under ASan every block goes straight to operator new/delete so use-after-free is caught.
void* allocate_block(std::size_t size) { return ::operator new(size); }
void deallocate_block(void* memory, std::size_t) noexcept { ::operator delete(memory); }
#else
void* allocate_block(std::size_t size) {
  std::size_t index = class_of(size);
  if (index < class_count) {
    if (free_block* block = cache.heads[index]) {
      cache.heads[index] = block->next;
      --cache.counts[index];
      return block;
    }
    register_release_at_thread_exit();
    return ::operator new((index + 1) * granule);
  }
  return ::operator new(size);
}

void deallocate_block(void* memory, std::size_t size) noexcept {
  std::size_t index = class_of(size);
  if (index < class_count && cache.counts[index] < max_cached) {
    auto* block = static_cast<free_block*>(memory);
    block->next = cache.heads[index];
    cache.heads[index] = block;
    ++cache.counts[index];
    return;
  }
  ::operator delete(memory);
}
#endif

}  // namespace weft::detail

// The small-block allocator (weft/detail/blocks.hpp): per-thread size-class free lists in
// front of a process-wide depot of full batches.
//
// Each thread keeps, per size class, a `loaded` list (frees push, allocations pop; at most
// `batch` blocks) and one `spare` batch of exactly `batch` blocks. The fast paths touch only
// `loaded`. When a free finds `loaded` full, `loaded` becomes the spare (the old spare, if any,
// goes to the depot); when an allocation finds it empty, the spare (or a batch from the depot,
// or else fresh memory) becomes `loaded`. Keeping a spare means a thread oscillating around a
// batch boundary does not hit the depot on every call (Bonwick's magazines, the design behind
// Solaris' and Linux's slab caches). Everything is O(1): batches move as linked chains.
//
// Memory orderings: a block moves between threads only through the depot, whose mutex gives
// the happens-before (the giver's unlock releases the `next` links it wrote, the taker's lock
// acquires them). A block freed on another thread than the one that allocated it is ordinary
// operator-new memory: it joins the freeing thread's lists. That the object's last use
// happens-before its free is the caller's duty, as for ::operator delete.
//
// Size classes are 16 bytes apart (a 24-byte process object takes 32 bytes, not 64: with
// 100k processes in flight, their footprint is what a spawn pays in cache misses).
//
// Memory held: up to 2 x batch blocks per class per thread, plus up to depot_bytes per class
// in the depot (the high-water mark of what a program freed in bursts; beyond it batches go
// back to operator delete). A thread's lists go to the depot (its spare) and back to operator
// delete (the partial `loaded`) when it exits.
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <new>

#include "weft/detail/blocks.hpp"

namespace weft::detail {
namespace {

constexpr std::size_t granule = 16;
constexpr std::size_t class_count = max_block_size / granule;  // 64: 16 B ... 1 KiB
constexpr std::uint32_t batch = 64;
constexpr std::size_t depot_bytes = std::size_t{8} << 20;

struct free_block {
  free_block* next;        // the next block of this list or chain
  free_block* next_chain;  // in the depot, on a chain's first block: the next chain
};
static_assert(sizeof(free_block) <= granule);

[[maybe_unused]] std::size_t class_of(std::size_t size) noexcept {
  return (size + granule - 1) / granule - 1;
}
[[maybe_unused]] std::size_t block_size_of(std::size_t index) noexcept {
  return (index + 1) * granule;
}

void delete_list(free_block* head) noexcept {
  while (head != nullptr) {
    free_block* next = head->next;
    ::operator delete(head);
    head = next;
  }
}

// Full batches of one class, shared by every thread. Leaked on purpose (constructed on first
// use, never destroyed): threads may still free blocks while static destructors run.
struct depot {
  struct shelf {
    std::mutex lock;
    free_block* chains = nullptr;  // linked through next_chain
    std::size_t count = 0;
  };
  shelf shelves[class_count];

  static depot& instance() {
    static depot* const shared = new depot;
    return *shared;
  }

  // A batch of exactly `batch` blocks, or nullptr.
  free_block* take(std::size_t index) noexcept {
    shelf& here = shelves[index];
    std::lock_guard<std::mutex> guard(here.lock);
    free_block* chain = here.chains;
    if (chain != nullptr) {
      here.chains = chain->next_chain;
      --here.count;
    }
    return chain;
  }

  void give(std::size_t index, free_block* chain) noexcept {
    shelf& here = shelves[index];
    {
      std::lock_guard<std::mutex> guard(here.lock);
      if (here.count * batch * block_size_of(index) < depot_bytes) {
        chain->next_chain = here.chains;
        here.chains = chain;
        ++here.count;
        return;
      }
    }
    delete_list(chain);
  }
};

struct thread_class {
  free_block* loaded;
  free_block* spare;  // exactly `batch` blocks, or nullptr
  std::uint32_t loaded_count;
};

// Trivially destructible and constant-initialized, so the fast paths read it with no TLS
// initialization check; thread_release (registered on the first slow path a thread takes)
// hands the lists back when the thread exits.
struct thread_cache {
  thread_class classes[class_count];
};

constinit thread_local thread_cache cache{};

struct thread_release {
  ~thread_release() {
    for (std::size_t index = 0; index < class_count; ++index) {
      thread_class& mine = cache.classes[index];
      if (mine.spare != nullptr) {
        depot::instance().give(index, mine.spare);
      }
      delete_list(mine.loaded);
      mine = thread_class{};
    }
  }
};

[[maybe_unused]] void register_release_at_thread_exit() {
  thread_local thread_release release;
  (void)release;
}

// The slow paths stay out of line: inlined, they made the fast paths save and restore five
// registers on every call.
[[maybe_unused, gnu::noinline]] void* allocate_slow(std::size_t index) {
  register_release_at_thread_exit();
  thread_class& mine = cache.classes[index];
  free_block* refill = mine.spare;
  if (refill != nullptr) {
    mine.spare = nullptr;
  } else {
    refill = depot::instance().take(index);
  }
  if (refill == nullptr) {
    return ::operator new(block_size_of(index));
  }
  mine.loaded = refill->next;
  mine.loaded_count = batch - 1;
  return refill;
}

[[maybe_unused, gnu::noinline]] void deallocate_slow(std::size_t index,
                                                     free_block* block) noexcept {
  register_release_at_thread_exit();
  thread_class& mine = cache.classes[index];
  if (mine.spare != nullptr) {
    depot::instance().give(index, mine.spare);
  }
  mine.spare = mine.loaded;  // full: exactly `batch` blocks
  block->next = nullptr;
  mine.loaded = block;
  mine.loaded_count = 1;
}

}  // namespace

#if defined(WEFT_SANITIZE_ADDRESS)
void* allocate_block(std::size_t size) { return ::operator new(size); }
void deallocate_block(void* memory, std::size_t) noexcept { ::operator delete(memory); }
#else
void* allocate_block(std::size_t size) {
  std::size_t index = class_of(size);
  if (index >= class_count) {
    return ::operator new(size);
  }
  thread_class& mine = cache.classes[index];
  if (free_block* block = mine.loaded) {
    mine.loaded = block->next;
    --mine.loaded_count;
    // The next block's line is needed by the next allocation (its link is read first, then the
    // caller writes it), and it is often in another core's cache: a batch that came from the
    // depot was freed by another thread. Asking for it now overlaps that miss with this
    // allocation's use instead of stalling the next one on it.
    __builtin_prefetch(mine.loaded, 1);
    return block;
  }
  return allocate_slow(index);
}

void deallocate_block(void* memory, std::size_t size) noexcept {
  std::size_t index = class_of(size);
  if (index >= class_count) {
    ::operator delete(memory);
    return;
  }
  thread_class& mine = cache.classes[index];
  auto* block = static_cast<free_block*>(memory);
  if (mine.loaded_count < batch) {
    block->next = mine.loaded;
    mine.loaded = block;
    ++mine.loaded_count;
    return;
  }
  deallocate_slow(index, block);
}
#endif

}  // namespace weft::detail

// Coroutine stacks: what a user can configure, and the descriptor the scheduler passes around.
//
// A stack is an anonymous private mapping, reserved with MAP_NORESERVE and committed lazily by
// the kernel page by page, so a 256 KiB stack whose coroutine only ever touched 3 KiB costs one
// resident page. Stacks are pooled per scheduler so spawning does not pay mmap/munmap.
//
// Guard pages and vm.max_map_count: a guard page is a PROT_NONE page below the stack; a stack
// overflow hits it and is reported by name instead of corrupting a neighbour. But the kernel
// cannot merge a guard mapping with the stack above it, so every guarded stack costs two
// mappings, and Linux caps a process at vm.max_map_count (65530 by default) mappings: guarding
// every stack would stop a process near 32k coroutines. weft therefore rations guard pages
// (guard_policy::budget, the default): the first guard_budget stacks are guarded, and stacks
// beyond the budget are carved from large unguarded slabs (one mapping for many stacks), which
// keeps a million coroutines possible. Coroutines that need protection whatever the count can
// ask for guard_policy::always (and fail loudly with a clear error when mappings run out).
#pragma once

#include <cstddef>

namespace weft {

// Whether the stacks of coroutines get a guard page (see above).
enum class guard_policy {
  budget,  // guard stacks while the process-wide guard budget lasts, then use unguarded slabs
  always,  // every stack gets a guard page; allocation fails with std::system_error past the limit
  never,   // no guard pages at all (smallest footprint, no overflow detection)
};

// How a scheduler's coroutine stacks are made (run_options::stack).
struct stack_options {
  // Usable bytes per stack (rounded up to whole pages). Virtual: pages are committed on touch.
  std::size_t size = 256 * 1024;
  guard_policy guards = guard_policy::budget;  // guard pages or not (see guard_policy)
  // Guarded stacks allowed in the whole process under guard_policy::budget; 0 means a quarter of
  // vm.max_map_count (half of the mappings it allows), leaving the rest for malloc, libraries
  // and unguarded slabs.
  std::size_t guard_budget = 0;
  // Free stacks a scheduler pre-allocates at start and never trims below.
  std::size_t pool_floor = 16;
  // Free stacks a scheduler keeps for reuse; stacks released beyond this are returned to the
  // kernel (guarded ones unmapped, slab ones decommitted with MADV_DONTNEED).
  std::size_t pool_cap = 4096;
  // The most stacks the scheduler holds for coroutines at once (those running or waiting; not
  // the free ones pooled), 0 for no limit. Past it a coroutine cannot start: spawn() with
  // spawn_options::stack_at_spawn throws, and a lazily spawned coroutine ends unstarted with
  // the std::system_error (resource_unavailable_try_again) when its turn comes. It bounds the
  // memory coroutines can take (each stack's touched pages, 4-8 KiB for a typical coroutine,
  // and its size in address space) before the kernel's limits do it less gracefully: the
  // address space (ulimit -v), vm.max_map_count, the OOM killer.
  std::size_t max_stacks = 0;
};

namespace detail {

// One stack. base is the lowest usable address (just above the guard page when guarded); the
// stack grows down from base + size.
struct stack {
  void* base = nullptr;
  std::size_t size = 0;
  bool guarded = false;
  unsigned valgrind_id = 0;    // VALGRIND_STACK_REGISTER id, when running under valgrind
  void* tsan_fiber = nullptr;  // the TSan fiber that executes on this stack (tsan builds)

  void* top() const noexcept { return static_cast<char*>(base) + size; }
  explicit operator bool() const noexcept { return base != nullptr; }
};

}  // namespace detail
}  // namespace weft

#include "context/stack_pool.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <fstream>
#include <string>
#include <system_error>

#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define WEFT_HAVE_VALGRIND 1
#endif

#if defined(WEFT_SANITIZE_THREAD)
#include <sanitizer/tsan_interface.h>
#endif
#if defined(WEFT_SANITIZE_ADDRESS)
#include <sanitizer/asan_interface.h>
#endif

namespace weft::detail {
namespace {

// Unmaps stack memory. Under ASan its shadow is cleared first: a coroutine's frames abandoned
// mid-call leave their redzones poisoned, ASan's munmap keeps the poison, and the kernel hands
// the addresses to the next mapping. The CI run of b45f8ff (suites sharing a process) hit it: an
// io_uring submission ring mapped there, and writing an SQE was a "stack-buffer-underflow".
void unmap_stack_memory(void* start, std::size_t bytes) noexcept {
#if defined(WEFT_SANITIZE_ADDRESS)
  ASAN_UNPOISON_MEMORY_REGION(start, bytes);
#endif
  ::munmap(start, bytes);
}

// Guarded stacks alive in the whole process (all schedulers), against the budget.
std::atomic<std::size_t> guarded_in_process{0};

std::size_t read_max_map_count() {
  std::ifstream file("/proc/sys/vm/max_map_count");
  std::size_t count = 0;
  if (!(file >> count) || count == 0) {
    count = 65530;  // the kernel default
  }
  return count;
}

std::size_t default_guard_budget() {
  static const std::size_t budget = read_max_map_count() / 4;
  return budget;
}

constexpr std::size_t slab_bytes = 16u << 20;  // unguarded stacks are carved 16 MiB at a time

[[noreturn]] void throw_mapping_error(const char* what, std::size_t bytes) {
  int code = errno;
  std::string message = std::string("weft: cannot ") + what + " " + std::to_string(bytes) +
                        " bytes for coroutine stacks";
  if (code == ENOMEM) {
    message +=
        " (out of memory, of address space or of mappings: ulimit -v limits the address space, "
        "vm.max_map_count the mappings per process; use guard_policy::budget, a smaller stack "
        "size, or stack_options::max_stacks to refuse coroutines before the kernel does)";
  }
  throw std::system_error(code, std::generic_category(), message);
}

void* map_anonymous(std::size_t bytes) {
  void* memory = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (memory == MAP_FAILED) {
    throw_mapping_error("map", bytes);
  }
  // A transparent huge page would commit 2 MiB for a stack that touched one page.
  ::madvise(memory, bytes, MADV_NOHUGEPAGE);
  return memory;
}

}  // namespace

std::size_t stack_pool::page_size() noexcept {
  static const std::size_t size = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

stack_pool::stack_pool(const stack_options& options)
    : size_((std::max<std::size_t>(options.size, 4 * page_size()) + page_size() - 1) / page_size() *
            page_size()),
      guards_(options.guards),
      guard_budget_(options.guard_budget != 0 ? options.guard_budget : default_guard_budget()),
      cap_(std::max({options.pool_cap, options.pool_floor, std::size_t{1}})),
      floor_(options.max_stacks != 0 ? std::min(options.pool_floor, options.max_stacks)
                                     : options.pool_floor),
      limit_(options.max_stacks) {
  for (std::size_t index = 0; index < floor_; ++index) {
    release(acquire());
  }
}

stack_pool::~stack_pool() {
  for (stack& pooled_stack : warm_) {
    if (pooled_stack.guarded) {
      unmap(pooled_stack);
    } else {
      deregister_for_tools(pooled_stack);
    }
  }
  for (stack& pooled_stack : cold_) {
    deregister_for_tools(pooled_stack);
  }
  warm_.clear();
  cold_.clear();
  if (outstanding_ == 0) {
    for (const slab& each : slabs_) {
      unmap_stack_memory(each.base, each.bytes);
    }
  }
  // With stacks still outstanding (a coroutine that never ended) the slabs stay mapped rather
  // than pulling memory from under it.
}

void stack_pool::refuse_past_limit() const {
  if (limit_ != 0 && outstanding_ + reserved_ >= limit_) {
    throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again),
                            "weft: no stack for a new coroutine: stack_options::max_stacks (" +
                                std::to_string(limit_) + ") are in use");
  }
}

stack stack_pool::acquire() {
  refuse_past_limit();
  if (warm_.size() > reserved_) {
    stack reused = warm_.back();
    warm_.pop_back();
    ++outstanding_;
    return reused;
  }
  if (!cold_.empty()) {
    stack reused = cold_.back();
    cold_.pop_back();
    ++outstanding_;
    return reused;
  }
  stack fresh = map_new();
  ++outstanding_;
  return fresh;
}

void stack_pool::reserve_slow() {
  refuse_past_limit();
  if (warm_.size() == reserved_) {
    // No free stack beyond those promised: one more joins the warm ones (a cold one's pages
    // come back on touch, as when acquire() takes it).
    if (!cold_.empty()) {
      warm_.push_back(cold_.back());
      cold_.pop_back();
    } else {
      stack fresh = map_new();
      try {
        warm_.push_back(fresh);
      } catch (...) {
        forget(fresh);
        throw;
      }
    }
  }
  ++reserved_;
}

stack stack_pool::map_new() {
  bool guard = guards_ == guard_policy::always ||
               (guards_ == guard_policy::budget &&
                guarded_in_process.fetch_add(1, std::memory_order_relaxed) < guard_budget_);
  if (guards_ == guard_policy::budget && !guard) {
    guarded_in_process.fetch_sub(1, std::memory_order_relaxed);
  } else if (guards_ == guard_policy::always) {
    guarded_in_process.fetch_add(1, std::memory_order_relaxed);
  }
  stack fresh;
  if (guard) {
    try {
      fresh = map_guarded();
    } catch (...) {
      guarded_in_process.fetch_sub(1, std::memory_order_relaxed);
      throw;
    }
  } else {
    fresh = carve_unguarded();
  }
  register_for_tools(fresh);
  ++allocated_;
  return fresh;
}

// A stack map_new() made that nobody will hold (no memory to pool it): a guarded one is
// unmapped; a slab one stays carved, unused, since a slab is unmapped only whole.
void stack_pool::forget(stack& unused) noexcept {
  if (unused.guarded) {
    unmap(unused);
  } else {
    deregister_for_tools(unused);
  }
}

stack stack_pool::map_guarded() {
  std::size_t page = page_size();
  char* memory = static_cast<char*>(map_anonymous(size_ + page));
  if (::mprotect(memory, page, PROT_NONE) != 0) {
    ::munmap(memory, size_ + page);
    throw_mapping_error("protect the guard page of", size_ + page);
  }
  ++guarded_;
  return stack{memory + page, size_, true};
}

stack stack_pool::carve_unguarded() {
  if (slab_cursor_ == slab_end_) {
    std::size_t bytes = std::max(slab_bytes / size_, std::size_t{1}) * size_;
    slab_cursor_ = static_cast<char*>(map_anonymous(bytes));
    slab_end_ = slab_cursor_ + bytes;
    slabs_.push_back(slab{slab_cursor_, bytes});
  }
  stack carved{slab_cursor_, size_, false};
  slab_cursor_ += size_;
  return carved;
}

void stack_pool::release(stack released) noexcept {
  --outstanding_;
  try {
    warm_.push_back(released);
  } catch (...) {
    // No memory for the pool's bookkeeping (a deque block, under ulimit -v or a cgroup's
    // limit): the stack's memory stays mapped, unused, rather than the process ending here.
    // The caller may still be running on it, so it cannot be unmapped now.
    return;
  }
  if (warm_.size() > cap_ + reserved_) {
    trim_oldest();
  }
}

// Gives back a batch of the oldest warm stacks (up to trim_batch, leaving at least the floor,
// so the pool then holds between cap - trim_batch and cap): never the one just released, which
// the caller may still be executing on (it is the newest, and at least one stack always stays),
// and the coldest in cache terms. Trimming in batches lets neighbouring slab stacks be decommitted
// with one madvise: a burst of coroutines carved from the same slabs tends to end in the same
// order, so after a million-coroutine burst this costs about one syscall per slab instead of one
// per stack.
void stack_pool::trim_oldest() noexcept {
  // The free stacks promised to coroutines made with stack_at_spawn stay (reserve()).
  std::size_t keep =
      std::max({floor_, cap_ > trim_batch ? cap_ - trim_batch : 0, reserved_, std::size_t{1}});
  std::size_t batch = warm_.size() - std::min(keep, warm_.size() - 1);
  std::vector<stack> guarded_stacks;
  std::vector<stack> slab_stacks;
  try {
    guarded_stacks.reserve(batch);
    slab_stacks.reserve(batch);
    cold_.reserve(cold_.size() + batch);
  } catch (...) {
    return;  // no memory to sort them by: the pool stays over its cap until the next release
  }
  for (std::size_t count = 0; count < batch; ++count) {
    (warm_.front().guarded ? guarded_stacks : slab_stacks).push_back(warm_.front());
    warm_.pop_front();
  }
  std::size_t page = page_size();
  // Guarded stacks are unmapped with their guard page. mmap hands out neighbouring addresses,
  // so stacks mapped one after another usually sit back to back and go in one munmap.
  for_each_run(
      guarded_stacks, page,
      [](void* start, std::size_t bytes) { unmap_stack_memory(start, bytes); },
      [this](stack& victim) {
        deregister_for_tools(victim);
        guarded_in_process.fetch_sub(1, std::memory_order_relaxed);
        --guarded_;
      });
  // Slab stacks cannot be unmapped one by one without splitting the slab's mapping (which would
  // cost the mappings the slabs exist to save), so their memory is decommitted instead.
  for_each_run(
      slab_stacks, 0,
      [](void* start, std::size_t bytes) { ::madvise(start, bytes, MADV_DONTNEED); },
      [](stack&) {});
  cold_.insert(cold_.end(), slab_stacks.begin(), slab_stacks.end());
}

template <class Release, class Each>
void stack_pool::for_each_run(std::vector<stack>& stacks, std::size_t guard, Release release,
                              Each each) {
  std::sort(stacks.begin(), stacks.end(),
            [](const stack& a, const stack& b) { return a.base < b.base; });
  for (std::size_t first = 0; first < stacks.size();) {
    std::size_t last = first;
    while (last + 1 < stacks.size() &&
           static_cast<char*>(stacks[last + 1].base) - guard == stacks[last].top()) {
      ++last;
    }
    char* start = static_cast<char*>(stacks[first].base) - guard;
    release(start, static_cast<std::size_t>(static_cast<char*>(stacks[last].top()) - start));
    for (std::size_t index = first; index <= last; ++index) {
      each(stacks[index]);
    }
    first = last + 1;
  }
}

void stack_pool::unmap(stack& victim) noexcept {
  deregister_for_tools(victim);
  std::size_t page = page_size();
  unmap_stack_memory(static_cast<char*>(victim.base) - page, victim.size + page);
  guarded_in_process.fetch_sub(1, std::memory_order_relaxed);
  --guarded_;
  victim = stack{};
}

void stack_pool::register_for_tools(stack& fresh) noexcept {
#if defined(WEFT_HAVE_VALGRIND)
  fresh.valgrind_id = VALGRIND_STACK_REGISTER(fresh.base, fresh.top());
#endif
#if defined(WEFT_SANITIZE_THREAD)
  fresh.tsan_fiber = __tsan_create_fiber(0);
#endif
  (void)fresh;
}

void stack_pool::deregister_for_tools(stack& old) noexcept {
#if defined(WEFT_HAVE_VALGRIND)
  VALGRIND_STACK_DEREGISTER(old.valgrind_id);
#endif
#if defined(WEFT_SANITIZE_THREAD)
  if (old.tsan_fiber != nullptr) {
    __tsan_destroy_fiber(old.tsan_fiber);
    old.tsan_fiber = nullptr;
  }
#endif
  (void)old;
}

}  // namespace weft::detail

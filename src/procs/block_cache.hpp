// An allocator that keeps freed blocks of one size in a per-thread list, for the objects made
// and dropped once per process (the outcome shared by its handles). glibc's tcache holds only
// 7 blocks per size, so with thousands of processes finishing in a burst most frees took the
// slow path; here up to `cached_blocks` wait on each thread for the next allocation.
//
// Thread-safety: each thread has its own list, so no synchronisation. A block freed on another
// thread than the one that allocated it simply joins that thread's list (blocks are plain
// memory of one size). A thread's list is released when the thread ends.
#pragma once

#include <cstddef>
#include <new>

namespace weft::procs::detail {

template <std::size_t Size, std::size_t Alignment>
class block_list {
 public:
  static constexpr std::size_t cached_blocks = 4096;

  ~block_list() {
    while (head_ != nullptr) {
      node* next = head_->next;
      ::operator delete(static_cast<void*>(head_), std::align_val_t(Alignment));
      head_ = next;
    }
  }

  void* take() {
    if (head_ != nullptr) {
      node* block = head_;
      head_ = block->next;
      --count_;
      return block;
    }
    return ::operator new(Size, std::align_val_t(Alignment));
  }

  void give(void* block) noexcept {
    if (count_ == cached_blocks) {
      ::operator delete(block, std::align_val_t(Alignment));
      return;
    }
    head_ = new (block) node{head_};
    ++count_;
  }

  static block_list& of_this_thread() noexcept {
    thread_local block_list list;
    return list;
  }

 private:
  struct node {
    node* next;
  };
  static_assert(Size >= sizeof(node) && Alignment >= alignof(node));
  node* head_ = nullptr;
  std::size_t count_ = 0;
};

template <class T>
struct block_cache_allocator {
  using value_type = T;

  block_cache_allocator() noexcept = default;
  template <class U>
  block_cache_allocator(const block_cache_allocator<U>&) noexcept {}

  T* allocate(std::size_t count) {
    if (count != 1) {
      return static_cast<T*>(::operator new(count * sizeof(T), std::align_val_t(alignof(T))));
    }
    return static_cast<T*>(list().take());
  }
  void deallocate(T* block, std::size_t count) noexcept {
    if (count != 1) {
      ::operator delete(static_cast<void*>(block), std::align_val_t(alignof(T)));
      return;
    }
    list().give(block);
  }

  template <class U>
  bool operator==(const block_cache_allocator<U>&) const noexcept {
    return true;
  }

 private:
  static constexpr std::size_t block_size = sizeof(T) < sizeof(void*) ? sizeof(void*) : sizeof(T);
  static constexpr std::size_t block_alignment =
      alignof(T) < alignof(void*) ? alignof(void*) : alignof(T);
  static auto& list() noexcept { return block_list<block_size, block_alignment>::of_this_thread(); }
};

}  // namespace weft::procs::detail

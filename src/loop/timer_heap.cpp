#include "loop/timer_heap.hpp"

#include <cstdlib>
#include <new>

namespace weft::loop::detail {

void timer_heap::grow() {
  std::size_t capacity = capacity_ == 0 ? 64 : capacity_ * 2;
  void* grown = std::realloc(nodes_, capacity * sizeof(timer_node));
  if (grown == nullptr) {
    throw std::bad_alloc();
  }
  nodes_ = static_cast<timer_node*>(grown);
  capacity_ = capacity;
}

void timer_heap::push(const timer_node& node) {
  if (size_ == capacity_) {
    grow();
  }
  // Move the hole up rather than swapping: one store per level.
  std::size_t index = size_++;
  while (index > 0) {
    std::size_t parent = (index - 1) / arity;
    if (!earlier(node, nodes_[parent])) {
      break;
    }
    nodes_[index] = nodes_[parent];
    index = parent;
  }
  nodes_[index] = node;
}

void timer_heap::pop() noexcept {
  timer_node last = nodes_[--size_];
  const std::size_t count = size_;
  if (count == 0) {
    return;
  }
  // Floyd's bottom-up pop: walk the hole from the root down to a leaf along the earliest
  // children without comparing them with the last node, then sift that node up from there. The
  // last node of a heap is usually late, so it belongs near the leaves: this does about half
  // the comparisons of a plain sift-down, which is what a pop of a large heap costs.
  std::size_t hole = 0;
  for (;;) {
    std::size_t first = hole * arity + 1;
    if (first >= count) {
      break;
    }
    std::size_t last_child = first + arity < count ? first + arity : count;
    std::size_t best = first;
    for (std::size_t child = first + 1; child < last_child; ++child) {
      if (earlier(nodes_[child], nodes_[best])) {
        best = child;
      }
    }
    nodes_[hole] = nodes_[best];
    hole = best;
  }
  while (hole > 0) {
    std::size_t parent = (hole - 1) / arity;
    if (!earlier(last, nodes_[parent])) {
      break;
    }
    nodes_[hole] = nodes_[parent];
    hole = parent;
  }
  nodes_[hole] = last;
}

void timer_heap::sift_down(std::size_t index) noexcept {
  const timer_node node = nodes_[index];
  const std::size_t count = size_;
  for (;;) {
    std::size_t first = index * arity + 1;
    if (first >= count) {
      break;
    }
    std::size_t last = first + arity < count ? first + arity : count;
    std::size_t best = first;
    for (std::size_t child = first + 1; child < last; ++child) {
      if (earlier(nodes_[child], nodes_[best])) {
        best = child;
      }
    }
    if (!earlier(nodes_[best], node)) {
      break;
    }
    nodes_[index] = nodes_[best];
    index = best;
  }
  nodes_[index] = node;
}

void timer_heap::heapify() noexcept {
  if (size_ < 2) {
    return;
  }
  for (std::size_t index = (size_ - 2) / arity + 1; index-- > 0;) {
    sift_down(index);
  }
}

}  // namespace weft::loop::detail

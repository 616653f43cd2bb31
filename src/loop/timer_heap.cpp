#include "loop/timer_heap.hpp"

#include <cstdlib>
#include <cstring>
#include <new>

namespace weft::loop::detail {

timer_heap::~timer_heap() {
  std::free(nodes_);
  for (run& r : runs_) {
    std::free(r.nodes);
  }
}

void timer_heap::push(const timer_node& node, std::int64_t interval) {
  std::size_t index = run_index(interval);
  run& r = runs_[index];
  if (r.count == 0) {
    if (heap_size_ == capacity_) {
      grow();  // first, so that a failure leaves no run without its representative
    }
    append(r, node);
    r.interval = interval;
    heap_push(stand_in(index));
  } else if (r.interval == interval && !earlier(node, r.back())) {
    append(r, node);  // the run's representative keeps its front's key
  } else {
    heap_push(node);  // another interval's run, or out of its order
  }
  ++size_;
}

void timer_heap::pop() noexcept {
  --size_;
  if (nodes_[0].slot >= run_flag) {
    std::size_t index = nodes_[0].slot - run_flag;
    run& r = runs_[index];
    r.head = (r.head + 1) & (r.capacity - 1);
    if (--r.count > 0) {
      // The representative takes the next front's key, later than the last: down it goes.
      nodes_[0] = stand_in(index);
      sift_down(0);
      return;
    }
    release(r);
  }
  heap_pop();
}

void timer_heap::clear() noexcept {
  heap_size_ = 0;
  size_ = 0;
  for (run& r : runs_) {
    r.count = 0;
    release(r);
  }
}

void timer_heap::append(run& r, const timer_node& node) {
  if (r.count == r.capacity) {
    std::size_t capacity = r.capacity == 0 ? 16 : r.capacity * 2;
    auto* grown = static_cast<timer_node*>(std::malloc(capacity * sizeof(timer_node)));
    if (grown == nullptr) {
      throw std::bad_alloc();
    }
    // Unwrap the ring into the new buffer: the part from head to the end, then the start.
    std::size_t tail = r.capacity - r.head;
    if (r.count > 0) {
      std::memcpy(grown, r.nodes + r.head, tail * sizeof(timer_node));
      std::memcpy(grown + tail, r.nodes, r.head * sizeof(timer_node));
    }
    std::free(r.nodes);
    r.nodes = grown;
    r.capacity = capacity;
    r.head = 0;
  }
  r.nodes[(r.head + r.count) & (r.capacity - 1)] = node;
  ++r.count;
}

void timer_heap::release(run& r) noexcept {
  r.head = 0;
  if (r.capacity > kept_capacity) {
    std::free(r.nodes);
    r.nodes = nullptr;
    r.capacity = 0;
  }
}

void timer_heap::grow() {
  std::size_t capacity = capacity_ == 0 ? 64 : capacity_ * 2;
  void* grown = std::realloc(nodes_, capacity * sizeof(timer_node));
  if (grown == nullptr) {
    throw std::bad_alloc();
  }
  nodes_ = static_cast<timer_node*>(grown);
  capacity_ = capacity;
}

void timer_heap::heap_push(const timer_node& node) {
  if (heap_size_ == capacity_) {
    grow();
  }
  // Move the hole up rather than swapping: one store per level.
  std::size_t index = heap_size_++;
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

void timer_heap::heap_pop() noexcept {
  timer_node last = nodes_[--heap_size_];
  const std::size_t count = heap_size_;
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
  const std::size_t count = heap_size_;
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
  if (heap_size_ < 2) {
    return;
  }
  for (std::size_t index = (heap_size_ - 2) / arity + 1; index-- > 0;) {
    sift_down(index);
  }
}

}  // namespace weft::loop::detail

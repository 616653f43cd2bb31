#include "reactor/timer_queue.hpp"

namespace weft::detail {

void timer_queue::push(timer_entry& entry) {
  entry.sequence = next_sequence_++;
  heap_.push_back(&entry);
  entry.heap_index = heap_.size() - 1;
  sift_up(entry.heap_index);
  if (!entry.background) {
    ++foreground_;
  }
}

void timer_queue::remove(timer_entry& entry) noexcept {
  if (!entry.queued()) {
    return;
  }
  std::size_t index = entry.heap_index;
  entry.heap_index = timer_entry::not_queued;
  if (!entry.background) {
    --foreground_;
  }
  timer_entry* last = heap_.back();
  heap_.pop_back();
  if (last == &entry) {
    return;
  }
  place(index, last);
  if (index > 0 && earlier(last, heap_[(index - 1) / 2])) {
    sift_up(index);
  } else {
    sift_down(index);
  }
}

std::size_t timer_queue::fire_due(timer_clock::time_point now) {
  std::uint64_t horizon = next_sequence_;
  std::size_t fired = 0;
  while (!heap_.empty()) {
    timer_entry* entry = heap_.front();
    if (entry->deadline > now || entry->sequence >= horizon) {
      break;
    }
    remove(*entry);
    ++fired;
    entry->fire(*entry);
  }
  return fired;
}

void timer_queue::sift_up(std::size_t index) noexcept {
  timer_entry* entry = heap_[index];
  while (index > 0) {
    std::size_t parent = (index - 1) / 2;
    if (!earlier(entry, heap_[parent])) {
      break;
    }
    place(index, heap_[parent]);
    index = parent;
  }
  place(index, entry);
}

void timer_queue::sift_down(std::size_t index) noexcept {
  timer_entry* entry = heap_[index];
  std::size_t count = heap_.size();
  for (;;) {
    std::size_t child = 2 * index + 1;
    if (child >= count) {
      break;
    }
    if (child + 1 < count && earlier(heap_[child + 1], heap_[child])) {
      ++child;
    }
    if (!earlier(heap_[child], entry)) {
      break;
    }
    place(index, heap_[child]);
    index = child;
  }
  place(index, entry);
}

}  // namespace weft::detail

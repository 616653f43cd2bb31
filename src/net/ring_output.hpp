// A connection's sends through the driver's ring (src/reactor/ring.hpp), on the uring driver:
// what flush_now() would write with send(2) is handed to the ring instead, and goes to the
// kernel with the scheduler's next io_uring_enter, the one that also waits for the next
// request. One send is in flight at a time, so bytes leave in the order they were queued.
//
// The connection's out_ keeps taking what is queued while a send is in flight; the completion
// continues with the rest of a short send, or swaps out_ in whole (no copy), from the driver's
// poll (connection::ring_sent). Until the kernel has taken them, the bytes in the ring are
// still queued (queued(), the send buffer's limit, its high-water mark, wait_sent()). A
// destroy() cancels the send: what the socket took at once goes, as after a send(2), and so
// does what the socket then takes at once of the queue behind it; the rest is dropped.
//
// From the connection's thread only.
#pragma once

#include <memory>
#include <string>

#include "reactor/ring.hpp"
#include "weft/net/connection.hpp"
#include "weft/sync/event.hpp"

namespace weft::net::detail {

struct ring_output final : weft::detail::ring_completion {
  ring_output(connection& owner_, weft::detail::ring_io& ring_) noexcept
      : owner(owner_), ring(ring_) {}

  void ring_completed(int result) noexcept override;

  // Forgets what was sent; a buffer grown past keep bytes gives its memory back.
  void reset(std::size_t keep) noexcept {
    head = 0;
    if (bytes.capacity() > keep) {
      std::string().swap(bytes);
    } else {
      bytes.clear();
    }
  }
  std::size_t left() const noexcept { return bytes.size() - head; }

  connection& owner;
  weft::detail::ring_io& ring;
  std::string bytes;  // [head, size): not yet confirmed sent
  std::size_t head = 0;
  // The connection, while a send is in flight: a net::connect connection may be dropped with
  // bytes in the ring, whose memory the kernel still reads.
  std::shared_ptr<connection> keep;
  event idle;  // set when a send completes (the flusher waits on it)
  // destroy()ed with a send in flight: the queue behind it, written once it completes with
  // what the socket takes at once (connection::drop_output, ring_sent).
  std::string after;
};

}  // namespace weft::net::detail

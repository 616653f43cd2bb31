// connection::park: an idle connection without a coroutine (see connection.hpp).
//
// Parked, the connection is watched by a callback subscription of its fd and, when its wait is
// bounded, a lazy timer (park_state.hpp); it holds a reference to itself, and reader_waiting_
// stays set, so that no close releases the socket under the subscription. Anything that would
// wake a waiting reader wakes it instead: the fd's readiness (or the driver giving up on it),
// the deadline, interrupt_reader() (close, destroy, the server's stop). Waking spawns the
// coroutine that calls the handler again (resume_parked, src/net/workers.cpp); that coroutine
// leaves the park first (unsubscribes, drops the self-reference) and only then may the socket
// be released. The subscription's callback runs inside the driver's poll, where subscribing and
// switching are not allowed: it only spawns, which queues the coroutine.
#include <chrono>
#include <stdexcept>
#include <string>

#include "net/park_state.hpp"
#include "net/worker_state.hpp"
#include "sched/scheduler_core.hpp"
#include "weft/net/connection.hpp"
#include "weft/sched/scheduler.hpp"

namespace weft::net {

namespace {
using steady = std::chrono::steady_clock;

void on_park_ready(weft::detail::fd_subscription& subscription, int /*events*/) {
  detail::connection_access::park_ready(*static_cast<detail::park_state&>(subscription).owner);
}

void on_park_deadline(weft::detail::timer_entry& fired) {
  auto& timer = static_cast<detail::park_state::deadline_timer&>(fired);
  detail::park_state& park = *timer.park;
  if (!park.parked || park.waking || park.until == steady::time_point::max()) {
    return;  // the wait it was queued for is over: out of the heap until a park needs it
  }
  if (steady::now() >= park.until) {
    detail::connection_access::park_ready(*park.owner);
    return;
  }
  timer.deadline = park.until;  // queued for an earlier park: on to this one's deadline
  park.core->driver().add_timer(timer);
}
}  // namespace

void connection::park(const timeout& limit, std::uint64_t carry) {
  auto refuse = [&](const char* why) {
    throw std::logic_error("weft::net::connection::park: connection " + std::to_string(id_) + " (" +
                           peer_address_ + ") " + why);
  };
  if (weft::detail::cancel_token_of(limit) != nullptr) {
    throw std::invalid_argument(
        "weft::net::connection::park: the limit carries a cancel token, which nothing would "
        "watch while the connection is parked");
  }
  if (worker_ == nullptr || worker_->server == nullptr || serving_ == nullptr ||
      weft::detail::running_coroutine(*scheduler_) != serving_) {
    refuse(
        "is not being served by this coroutine as a tcp_server handler; only the server's "
        "handler can park its connection");
  }
  if (reader_active_) {
    refuse("is being received from; park between reads");
  }
  if (buffered() > 0) {
    refuse(("has " + std::to_string(buffered()) +
            " bytes of input not consumed; park only with nothing buffered")
               .c_str());
  }
  if (paused_) {
    refuse("has receiving paused (pause_recv); resume it before parking");
  }
  park_requested_ = true;
  carried_ = carry;
  park_cap_ = limit.bounded();
  park_until_ = limit.bounded() ? limit.deadline() : steady::time_point::max();
}

bool connection::enter_park(std::shared_ptr<connection>& self) {
  if (state_ != state::open || stopping_ || paused_ || buffered() > 0 || reader_active_ ||
      finished_ || peer_ended_) {
    return false;
  }
  weft::detail::scheduler_core* core = weft::detail::current_core();
  if (park_ == nullptr) {
    auto made = std::make_unique<detail::park_state>();
    made->owner = this;
    made->core = core;
    made->fd = fd_;
    made->events = weft::detail::fd_subscription::readable;
    made->ready = &on_park_ready;
    made->timer.park = made.get();
    made->timer.fire = &on_park_deadline;
    made->timer.background = true;  // the subscription keeps the loop alive while parked
    park_ = std::move(made);
  }
  detail::park_state& park = *park_;
  if (weft::detail::subscribe_fd(*core, park) < 0) {
    return false;
  }
  release_idle_input();
  steady::time_point until = timeouts_deadline();
  if (park_cap_ && park_until_ < until) {
    until = park_until_;
  }
  park.until = until;
  if (until != steady::time_point::max()) {
    auto& timer = park.timer;
    if (timer.queued() && timer.deadline > until) {
      core->driver().remove_timer(timer);
    }
    if (!timer.queued()) {
      timer.deadline = until;
      core->driver().add_timer(timer);
    }
  }
  park.parked = true;
  park.waking = false;
  park.self = std::move(self);
  reader_waiting_ = true;  // no release under the subscription (try_release)
  reader_ = nullptr;
  serving_ = nullptr;
  return true;
}

std::shared_ptr<connection> connection::leave_park() noexcept {
  detail::park_state& park = *park_;
  weft::detail::unsubscribe_fd(*park.core, park);
  park.parked = false;
  park.waking = false;
  reader_waiting_ = false;
  read_first_ = true;  // woken by input (or to find its end): read before waiting
  std::shared_ptr<connection> self = std::move(park.self);
  try_release();  // closed while parked: the socket goes now that nothing watches it
  return self;
}

void connection::park_ready() noexcept {
  if (park_ == nullptr || !park_->parked || park_->waking) {
    return;
  }
  park_->waking = true;
  try {
    detail::resume_parked(*worker_, park_->self);
  } catch (const std::exception& failure) {
    // Out of memory for a coroutine: the fd stays watched (level-triggered) and the next poll
    // (or the next interrupt) tries again.
    park_->waking = false;
    log(std::string("could not start the coroutine that resumes the parked connection: ") +
        failure.what());
  }
}

void connection::drop_park() noexcept {
  // Only on the connection's thread while its scheduler runs (the release does it there; a
  // connection is released before its worker's scheduler ends).
  if (park_ == nullptr || park_->core != weft::detail::current_core()) {
    return;
  }
  if (park_->timer.queued()) {
    park_->core->driver().remove_timer(park_->timer);
  }
  weft::detail::unsubscribe_fd(*park_->core, *park_);
}

}  // namespace weft::net
